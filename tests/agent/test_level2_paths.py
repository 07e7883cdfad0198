"""The kernel paths the lowering picks for level-2 chains that used to run 100-1000x slower than eager PyTorch
(issue 12): a long reduction whose prologue reads a per-channel parameter is a row reduction split into
partials (not a gathering reduction with a handful of blocks, each looping over a million elements), a
gathering reduction with few outputs over a long range is split into partials on GPU targets, and transposed
convolutions take the implicit GEMM. Lowered for sm_90a, run on the CPU interpreter against torch in
float64."""

import math

import pytest
import torch
import torch.nn as nn

from argus_agent.lower import lower_model
from argus_agent.lower.core import Reduction, RowFused
from argus_agent.lower.templates import ConvTemplate

from .lowered import assert_close, run_lowered


@pytest.fixture
def fp32_convs():
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False     # 3xTF32: the comparison can be at fp32 accuracy
    yield
    torch.backends.cudnn.allow_tf32 = old


def _run(model, inputs, tmp_path, name, target="sm_90a"):
    return run_lowered(model, inputs, tmp_path, name, target, prefix="lowered_l2")


_close = assert_close


def _reductions(prog):
    return [k for k in prog.kernels if isinstance(k, (Reduction, RowFused))]


def _mode(k):
    return "row" if isinstance(k, RowFused) else k.mode


class BiasClampMean(nn.Module):
    """level2/003 without the convolution: + a (C, 1, 1, 1) parameter, clamp, mean over the spatial dims."""

    def __init__(self, c):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(c, 1, 1, 1) * 0.5)

    def forward(self, x):
        return torch.clamp(x + self.bias, min=-1.0, max=1.0).mean(dim=(2, 3, 4))


def test_per_channel_prologue_keeps_the_row_reduction_and_splits_it(tmp_path):
    """The per-channel bias read (m % C) is not a window of the rows, but it does not move along the reduced
    index: it is read once per row before the loop, and the reduction stays a row reduction. 2 outputs of
    32768 elements: split into partials so that enough blocks run (formerly: one gathering kernel, 1 block)."""
    torch.manual_seed(0)
    model = BiasClampMean(2)
    x = torch.randn(1, 2, 32, 32, 32)
    prog, src, out, ref = _run(model, [x], tmp_path, "bias_clamp_mean")
    (red, *rest) = _reductions(prog)
    assert not rest and red.mode == "row" and (red.M, red.R) == (2, 32 * 32 * 32)
    assert "_combine" in src, "few outputs over a long row: split partials and a combine kernel"
    _close(out, ref, 1e-5)


def test_per_row_gather_in_a_column_reduction(tmp_path):
    """A column reduction (the reduced dim strided, the kept dims contiguous) whose prologue reads a
    parameter per output channel stays a column reduction."""
    torch.manual_seed(1)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.randn(6, 1) + 2.0)

        def forward(self, x):       # (N, K, C, L): sum over K of x * scale[c]
            return (x * self.scale).sum(dim=1)

    x = torch.randn(3, 50, 6, 40)
    prog, src, out, ref = _run(M(), [x], tmp_path, "col_scale", target="cpu")
    (red,) = _reductions(prog)
    assert red.mode == "col"
    _close(out, ref, 1e-5)


def test_transposed_conv_bias_clamp_mean_level2_003_shape(tmp_path, fp32_convs):
    """level2/003's chain at a reduced size: the transposed convolution on the implicit GEMM (the weight's
    permuted copy is the only other kernel before it), the bias/clamp/mean as one row reduction."""
    torch.manual_seed(2)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.ConvTranspose3d(4, 4, 3, stride=2, padding=1)
            self.bias = nn.Parameter(torch.randn(4, 1, 1, 1) * 0.1)

        def forward(self, x):
            x = self.conv(x) + self.bias
            return torch.clamp(x, min=-1.0, max=1.0).mean(dim=(2, 3, 4))

    x = torch.randn(2, 4, 5, 6, 7)
    prog, src, out, ref = _run(M(), [x], tmp_path, "convt3d_mean")
    convs = [k for k in prog.kernels if isinstance(k, ConvTemplate)]
    assert len(convs) == 1 and convs[0].geometry["TRANSPOSED"]
    (red,) = _reductions(prog)
    assert _mode(red) == "row" and red.R == 9 * 11 * 13
    _close(out, ref, 1e-4)


def test_transposed_conv_batchnorm_global_pool_level2_057_shape(tmp_path, fp32_convs):
    """level2/057's chain at a reduced size: conv-transpose, scale, eval BatchNorm (per-channel statistics
    and affine read in the prologue), global average pool: one row reduction, not a gathering one."""
    torch.manual_seed(3)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.ConvTranspose3d(4, 4, 3, stride=2)
            self.bn = nn.BatchNorm3d(4)
            self.gap = nn.AdaptiveAvgPool3d(1)
            with torch.no_grad():
                self.bn.running_mean.uniform_(-0.5, 0.5)
                self.bn.running_var.uniform_(0.5, 2.0)

        def forward(self, x):
            return self.gap(self.bn(self.conv(x) * 0.5))

    model = M().eval()
    x = torch.randn(1, 4, 4, 5, 6)
    prog, src, out, ref = _run(model, [x], tmp_path, "convt3d_bn_gap")
    assert [k for k in prog.kernels if isinstance(k, ConvTemplate)]
    reds = _reductions(prog)
    assert reds and all(_mode(k) == "row" for k in reds), [(_mode(k), k.M, k.R) for k in reds]
    _close(out, ref, 1e-4)


def test_gathering_reduction_with_few_outputs_splits_on_gpu_targets(tmp_path):
    """A reduction whose loads are no window of any view (a transposed read over both reduced dims) with few
    outputs over a long range: on a GPU target, partials over S chunks (S divides R) then a row reduction
    over them, instead of a handful of blocks each gathering the whole range (this path raised
    AttributeError before: the split method was gone)."""
    torch.manual_seed(4)

    class M(nn.Module):
        def forward(self, x):
            return x.transpose(1, 2).reshape(4, -1).sum(dim=1)

    x = torch.randn(4, 300, 300)
    prog, src, out, ref = _run(M(), [x], tmp_path, "gather_split")
    reds = _reductions(prog)
    assert len(reds) == 2, [(k.mode, k.M, k.R) for k in reds]
    part, comb = reds
    # the chunks (s, c) of r = s * C + c: here a column reduction (c strided by 300, s contiguous)
    assert part.M * part.R == 4 * 90000 and part.M >= 4 * 2 and part.R >= 256
    assert comb.mode == "row" and (comb.M, comb.R) == (4, part.M // 4)
    _close(out, ref, 1e-9 * 90000 + 1e-6)
    # the CPU target keeps one kernel (the interpreter gains nothing from the split)
    prog_cpu = lower_model(M(), [x], "cpu")
    assert len(_reductions(prog_cpu)) == 1


def test_level2_corpus_paths_at_cpu_sizes():
    """level2/003 and 057 at their CPU sizes, lowered for sm_90a: their long per-channel reductions (a bias
    or BatchNorm in the prologue) are row reductions, none a gathering one."""
    from pathlib import Path

    from argus_agent.problem import load_problem

    root = Path(__file__).resolve().parents[2] / "tests" / "problems" / "level2"
    for stem in ("003", "057"):
        (path,) = root.glob(f"{stem}_*.py")
        problem = load_problem(path, cpu=True)
        prog = lower_model(problem.make_model(), list(problem.base_inputs), "sm_90a")
        # (at these sizes the convolution itself is too small for the implicit GEMM: a reduction)
        reds = [k for k in _reductions(prog) if not k.out.name.startswith("b_conv")]
        assert reds and all(_mode(k) == "row" for k in reds), (stem, [(_mode(k), k.M, k.R) for k in reds])


PHASED = [
    ("convT3d_k3s2p1", lambda: nn.ConvTranspose3d(16, 16, 3, stride=2, padding=1), (2, 16, 5, 5, 6), 8),
    ("convT2d_k4s2p1", lambda: nn.ConvTranspose2d(16, 32, 4, stride=2, padding=1), (2, 16, 9, 10), 4),
    ("convT2d_k3s2_outpad_grouped", lambda: nn.ConvTranspose2d(32, 32, 3, stride=2, padding=1, output_padding=1,
                                                               groups=2), (2, 32, 8, 9), 4),
    ("convT3d_s122_outpad", lambda: nn.ConvTranspose3d(16, 16, (2, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1),
                                                       output_padding=(0, 1, 0)), (1, 16, 3, 7, 8), 4),
]


@pytest.mark.parametrize("name,make,xs,phases", PHASED, ids=[c[0] for c in PHASED])
def test_strided_transposed_conv_as_direct_phases(name, make, xs, phases, tmp_path, fp32_convs, monkeypatch):
    """ops_nn.TRANSPOSED_PHASES (off by default until measured on the GPU): a strided transposed convolution
    is one direct implicit GEMM per output phase over the taps that meet whole input rows (none of the
    stride's zero taps multiplied), the output reading each element from its phase's result."""
    from argus_agent.lower import ops_nn

    monkeypatch.setattr(ops_nn, "TRANSPOSED_PHASES", True)
    torch.manual_seed(5)
    model = make()
    x = torch.randn(xs)
    prog, src, out, ref = _run(model, [x], tmp_path, name)
    convs = [k for k in prog.kernels if isinstance(k, ConvTemplate)]
    assert len(convs) == phases and not any(k.geometry.get("TRANSPOSED") for k in convs)
    assert all(k.geometry["ST"] == (1, 1, 1) for k in convs)
    # the GEMMs' reduction is the live taps only: sum over phases of K * pixels == the dense work / stride^d
    dense = x.shape[1] // model.groups * math.prod(model.kernel_size) * math.prod(out.shape[2:])
    # (conv_tma's phases share one weight buffer, K the largest phase's: each reduces over its own taps only)
    red = [math.prod(k.geometry["KS"]) * k.geometry["CIGP"] if k.kernel == "conv_tma" else k.K for k in convs]
    live = sum(r * math.prod(k.geometry["OS"]) for r, k in zip(red, convs)) // x.shape[0]
    assert live * math.prod(model.stride) <= dense * 1.5 and live < dense
    _close(out, ref, 1e-5)


def test_gathering_reduction_of_256_outputs_is_split():
    """With the phases, level2/057's global average pool reads eight phase buffers (masked loads at computed
    offsets: a gathering reduction); its 256 outputs of 139425 elements (32 blocks of the gathering kernel)
    are split into partials that fill the GPU, then a row reduction over them."""
    from argus_agent.lower import values as vals
    from argus_agent.lower.core import Context
    from argus_agent.lower.index import add, flatten, floordiv

    ctx = Context("sm_90a")
    xb = ctx.add_buffer("x", (256, 139425), torch.float32)

    def fn(oc, rc):
        j = floordiv(rc[0], 2)
        return vals.load(xb.name, flatten([oc[0], add(j, j)], (256, 139425)), torch.float32, (("div", rc[0], 2),))
    ctx.reduce("sum", (256,), (139425,), fn, torch.float32)
    part, comb = [k for k in ctx.kernels if isinstance(k, Reduction)]
    assert part.M >= 8192 and part.M * part.R == 256 * 139425 and comb.M == 256 and comb.mode == "row"
