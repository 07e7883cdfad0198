"""The implicit-GEMM convolution (stdlib_kernels/conv_igemm.py) and the fused GEMM/conv epilogues on a real GPU
against torch in float64: direct, transposed, grouped, 1-3D, both precisions (3xTF32 at fp32 accuracy, one
TF32 pass at TF32 accuracy), a lowered conv chain and a split-K matmul. Outputs are poisoned with NaN first.
Skips without a GPU."""

from __future__ import annotations

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

from stdlib_kernels import conv_igemm  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")

CASES = [
    ((4, 32, 40, 36), (64, 32, 3, 3), 1, 1, 1, 1, False, 0),
    ((2, 16, 33, 31), (48, 8, 3, 3), 2, 2, 2, 2, False, 0),
    ((2, 24, 500), (40, 24, 5), 1, 2, 1, 1, False, 0),
    ((1, 8, 9, 20, 20), (32, 8, 3, 3, 3), 1, 1, 1, 1, False, 0),
    ((2, 32, 17, 19), (32, 24, 3, 3), 2, 1, 1, 1, True, 1),
    ((2, 16, 12, 12), (16, 8, 3, 3), 1, 2, 2, 2, True, 0),
    ((1, 8, 5, 9, 9), (8, 16, 3, 3, 3), 2, 1, 1, 1, True, 0),
]


@pytest.mark.parametrize("split", [True, False])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{len(c[0]) - 2}d{'T' if c[6] else ''}_g{c[5]}")
def test_conv_igemm_on_gpu(case, split):
    xs, ws, stride, padding, dilation, groups, transposed, opad = case
    g = torch.Generator().manual_seed(sum(xs))
    x, w = torch.randn(xs, generator=g), torch.randn(ws, generator=g)
    ref = torch.as_tensor(conv_igemm.reference(x.numpy(), w.numpy(), stride, padding, dilation, groups,
                                               transposed, opad))
    y = torch.full(tuple(ref.shape), float("nan"), device=DEV)
    conv_igemm.launch(x.to(DEV), w.to(DEV), y, stride, padding, dilation, groups, transposed, split=split)
    torch.cuda.synchronize()
    out = y.cpu().double()
    assert not out.isnan().any()
    scale = ref.abs().max().item()
    err = (out - ref).abs().max().item() / scale
    assert err < (1e-5 if split else 3e-3), err


def test_lowered_conv_chain_and_split_k_on_gpu(tmp_path):
    import importlib.util
    import re

    from argus_agent.lower import lower_model, render_program

    class Chain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(32, 64, 3)
            self.bias = torch.nn.Parameter(torch.randn(64, 1, 1) * 0.1)

        def forward(self, x):
            return torch.relu(self.conv(x)) + self.bias

    class MM(torch.nn.Module):
        def forward(self, a, b):
            return torch.mm(a, b)

    for name, model, inputs, tol in (("chain", Chain(), [torch.randn(4, 32, 40, 40)], 1e-2),
                                     ("mm", MM(), [torch.randn(256, 65536), torch.randn(65536, 256)], None)):
        src = render_program(lower_model(model, inputs, "sm_90a"))
        p = tmp_path / f"{name}.py"
        p.write_text(src)
        spec = importlib.util.spec_from_file_location(f"gpu_lowered_{name}", p)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        with torch.no_grad():
            ref = model.double()(*[x.double() for x in inputs])
            out = mod.argus_forward(model.float().to(DEV), *[x.to(DEV) for x in inputs]).cpu().double()
        err = ((out - ref).abs() / (ref.abs() + 1)).max().item()
        if name == "mm":
            # fp32 accuracy means SGEMM's (issue 15 item 4): the split-TF32 product's error against float64 is
            # bounded by cuBLAS SGEMM's own (TF32 off) on the same inputs, in the same measure, not by a fixed
            # figure (at K = 65536 SGEMM's own elementwise error is ~1e-4 of the row scale)
            tf32 = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = False
            try:
                sg = torch.mm(*[x.to(DEV) for x in inputs]).cpu().double()
            finally:
                torch.backends.cuda.matmul.allow_tf32 = tf32
            sg_err = ((sg - ref).abs() / (ref.abs() + 1)).max().item()
            fro, sg_fro = ((out - ref).norm() / ref.norm()).item(), ((sg - ref).norm() / ref.norm()).item()
            assert fro <= sg_fro and err <= 2 * sg_err, (name, err, sg_err, fro, sg_fro)
        else:
            assert err < tol, (name, err)
        if name == "mm":    # 256 rows: swap-AB (the (K, N) operand read as it is), split-K as its kernel's default
            sig = src.split("def gemm_fp32_s", 1)[1].split('"""', 1)[0]
            assert int(re.search(r"KSPLIT: tp\.constexpr = (\d+)", sig).group(1)) > 1 and "reduce_sum" in src
        else:
            assert re.search(r"\bconv_(igemm|tma)_e\d", src)   # the epilogue fused into the conv's store


class _Separable(torch.nn.Module):
    """Depthwise 3x3 (a written-out tap sum) + BatchNorm + ReLU6, then a strided transposed convolution."""

    def __init__(self):
        super().__init__()
        self.dw = torch.nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.bn = torch.nn.BatchNorm2d(32)
        self.up = torch.nn.ConvTranspose2d(32, 48, 3, stride=2, padding=1, output_padding=1)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        return torch.tanh(self.up(torch.nn.functional.relu6(self.bn(self.dw(x))))) * 1.5


@pytest.mark.parametrize("phases", ["ir", "kernel"])
def test_lowered_depthwise_and_phased_transposed_on_gpu(phases, tmp_path, monkeypatch):
    """A lowered depthwise block and strided transposed convolution against float64 (fp32: 3xTF32): the
    transposed one as the IR's phase GEMMs or as one PHASED conv_igemm with the tanh/scale in its store."""
    import importlib.util

    from argus_agent.lower import lower_model, ops_nn, render_program

    monkeypatch.setattr(ops_nn, "TRANSPOSED_PHASES", phases == "ir")
    allow = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        torch.manual_seed(7)
        model = _Separable().eval()
        x = torch.randn(4, 32, 37, 41)
        src = render_program(lower_model(model, [x], "sm_90a"))
    finally:
        torch.backends.cudnn.allow_tf32 = allow
    assert ("PHASED=True" in src) == (phases == "kernel")
    p = tmp_path / f"sep_{phases}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(f"gpu_lowered_sep_{phases}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        ref = model.double()(x.double())
        out = mod.argus_forward(model.float().to(DEV), x.to(DEV)).cpu().double()
    assert not out.isnan().any()
    err = ((out - ref).abs() / (ref.abs() + 1)).max().item()
    assert err < 1e-4, err
