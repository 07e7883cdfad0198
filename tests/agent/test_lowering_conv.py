"""Convolutions and fp32 GEMMs lowered for sm_90a (implicit-GEMM convolution, fused epilogues), run on the CPU
interpreter against torch in float64: every conv form, TF32 where PyTorch's flag allows it and fp32 accuracy
where it does not, and pointwise chains that become the GEMM's or convolution's store."""


import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from argus_agent.lower.templates import ConvTemplate, Fp32GemmTemplate, fuse_epilogues

from .lowered import assert_close, run_lowered


@pytest.fixture
def tf32(request):
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = request.param
    yield request.param
    torch.backends.cudnn.allow_tf32 = old


def _run(model, inputs, tmp_path, name):
    return run_lowered(model, inputs, tmp_path, name, "sm_90a", prefix="lowered_conv")


_close = assert_close


class ConvChain(nn.Module):
    """conv -> relu -> + per-channel bias -> * 2 -> clamp: one kernel with the conv."""

    def __init__(self, conv):
        super().__init__()
        self.conv = conv
        co = conv.out_channels
        self.bias = nn.Parameter(torch.randn(co, *([1] * (conv.weight.dim() - 2))) * 0.1)

    def forward(self, x):
        return torch.clamp(torch.relu(self.conv(x)) + self.bias, max=1.5) * 2.0


CONVS = [
    ("conv1d_dilated", lambda: nn.Conv1d(8, 16, 5, padding=4, dilation=2), (2, 8, 60)),
    ("conv2d_strided_grouped", lambda: nn.Conv2d(8, 32, 3, stride=2, padding=1, groups=2), (2, 8, 22, 20)),
    ("conv2d_asym", lambda: nn.Conv2d(12, 16, (3, 2), padding=(1, 0), bias=False), (1, 12, 16, 15)),
    ("conv3d", lambda: nn.Conv3d(4, 16, 3, padding=1), (1, 4, 6, 8, 8)),
    ("convT1d", lambda: nn.ConvTranspose1d(16, 8, 4, stride=2, padding=1), (2, 16, 30)),
    ("convT2d_grouped_dilated", lambda: nn.ConvTranspose2d(8, 16, 3, stride=2, padding=2, dilation=2, groups=2,
                                                           output_padding=1), (1, 8, 9, 10)),
    ("convT3d", lambda: nn.ConvTranspose3d(8, 16, (2, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1)), (1, 8, 3, 5, 5)),
]


@pytest.mark.parametrize("tf32", [False], indirect=True)
@pytest.mark.parametrize("name,make,xs", CONVS, ids=[c[0] for c in CONVS])
def test_conv_forms_with_fused_epilogue_fp32(name, make, xs, tf32, tmp_path):
    torch.manual_seed(0)
    model = ConvChain(make())
    x = torch.randn(xs)
    prog, src, out, ref = _run(model, [x], tmp_path, name)
    convs = [k for k in prog.kernels if isinstance(k, ConvTemplate)]
    assert len(convs) == 1 and convs[0].split, "an fp32 convolution on the 3xTF32 implicit GEMM"
    kernels, _ = fuse_epilogues(prog.kernels, prog.buffers, prog.outputs)
    assert [k for k in kernels if isinstance(k, ConvTemplate)][0].epilogue is not None
    assert len(kernels) == len(prog.kernels) - 1, "the pointwise chain runs in the convolution's store"
    assert "im2col" not in src and "conv_igemm_e" in src
    _close(out, ref, 1e-4)


TMA_CONVS = [
    ("conv2d_3x3", lambda: nn.Conv2d(16, 24, 3, padding=1), (2, 16, 6, 9)),
    ("conv2d_1x1", lambda: nn.Conv2d(20, 40, 1), (2, 20, 5, 7)),
    ("conv2d_hstride_dil_nobias", lambda: nn.Conv2d(16, 8, (3, 2), stride=(2, 1), padding=(2, 1), dilation=2,
                                                    bias=False), (1, 16, 11, 10)),
    ("conv3d", lambda: nn.Conv3d(16, 8, 3, padding=1), (1, 16, 4, 5, 6)),
    ("conv2d_grouped", lambda: nn.Conv2d(64, 16, 3, padding=1, groups=2), (1, 64, 5, 6)),
    ("conv2d_wstride_dilated", lambda: nn.Conv2d(16, 8, 3, stride=2, padding=2, dilation=2), (1, 16, 13, 14)),
]


@pytest.mark.parametrize("tf32", [False, True], indirect=True)
@pytest.mark.parametrize("name,make,xs", TMA_CONVS, ids=[c[0] for c in TMA_CONVS])
def test_unit_stride_conv_runs_conv_tma_with_fused_epilogue(name, make, xs, tf32, tmp_path, monkeypatch):
    """Direct convolutions with >= 16 channels per group (1x1 included) run conv_tma: the input copied
    channels-last (to_ndhwc; with a W stride, to_ndhwc_phased), the GEMM's A tiles bulk copies of it, the
    pointwise chain in its store; 3xTF32 at fp32 accuracy, one TF32 pass where cuDNN's flag allows it."""
    from argus_agent.lower import ops_nn

    monkeypatch.setattr(ops_nn, "CONV_TMA_WSTRIDE", True)     # the default; ARGUS_CONV_TMA_WSTRIDE=0 turns it off
    torch.manual_seed(7)
    model = ConvChain(make())
    prog, src, out, ref = _run(model, [torch.randn(xs)], tmp_path, f"tma_{name}_{tf32}")
    convs = [k for k in prog.kernels if isinstance(k, ConvTemplate)]
    assert [(k.kernel, k.split) for k in convs] == [("conv_tma", not tf32)]
    kernels, _ = fuse_epilogues(prog.kernels, prog.buffers, prog.outputs)
    assert [k for k in kernels if isinstance(k, ConvTemplate)][0].epilogue is not None
    assert "launch(to_ndhwc" in src and "conv_tma_e" in src and "conv_igemm" not in src
    assert ("launch(to_ndhwc_phased" in src) == ("wstride" in name)
    _close(out, ref, 1e-2 if tf32 else 1e-4)
    if tf32:
        assert (out.double() - ref).abs().max() > 1e-6
    # the build gate compiles each kernel at its defaults: the copy's are the ones it is launched with
    from stdlib_kernels import conv_tma

    cname, cx, _ = conv_tma.copy_call(convs[0].geometry, convs[0].split)
    for k, v in cx.items():
        assert f"{k}: tp.constexpr = {v!r}" in src.split(f"def {cname}(")[1].split("):")[0], (cname, k)


TMA_PHASES = [
    ("convT2d_k4s2", lambda: nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1), (1, 16, 9, 10)),
    ("convT3d_k3s2_outpad", lambda: nn.ConvTranspose3d(16, 16, 3, stride=2, padding=1, output_padding=1),
     (1, 16, 4, 6, 6)),
    ("convT2d_s3_asym", lambda: nn.ConvTranspose2d(32, 16, (3, 5), stride=(2, 3), padding=(0, 2)), (1, 32, 8, 12)),
]


@pytest.mark.parametrize("tf32", [False, True], indirect=True)
@pytest.mark.parametrize("name,make,xs", TMA_PHASES, ids=[c[0] for c in TMA_PHASES])
def test_transposed_phases_share_one_channels_last_copy(name, make, xs, tf32, tmp_path, monkeypatch):
    """The output phases of a strided transposed convolution (direct unit-stride convolutions of one input,
    each with its own padding) run conv_tma on one channels-last copy padded by the largest phase padding:
    one to_ndhwc launch, every phase reading it at its own offset; their weights one buffer, split once."""
    from argus_agent.lower import ops_nn

    monkeypatch.setattr(ops_nn, "CONV_TMA_PHASES", True)      # the default; ARGUS_CONV_TMA_PHASES=0 turns it off
    torch.manual_seed(8)
    model = ConvChain(make())
    prog, src, out, ref = _run(model, [torch.randn(xs)], tmp_path, f"tma_phases_{name}_{tf32}")
    convs = [k for k in prog.kernels if isinstance(k, ConvTemplate)]
    assert len(convs) > 1 and all(k.kernel == "conv_tma" and k.split == (not tf32) for k in convs)
    if name == "convT2d_k4s2":      # phase paddings 1 and 0 per dim: offsets 0 and 1 into the copy
        assert len({k.geometry["OFF"] for k in convs}) > 1
    assert src.count("launch(to_ndhwc") == 1
    # every phase's B in one weight buffer: one reordering kernel and one TF32 split for all phases
    assert [k.w_phase for k in convs] == list(range(len(convs))) and len({k.w.name for k in convs}) == 1
    assert src.count("launch(split_tf32,") == 1 and src.count("b_conv_wphase") == 0
    _close(out, ref, 1e-2 if tf32 else 1e-4)


def test_wstride_and_phases_take_conv_tma_by_default_and_can_be_switched_off(tmp_path, monkeypatch):
    """A stride along W and the phases of a transposed convolution run conv_tma by default (timed on the H100:
    faster on level1/091, 097, 098, level2/003, 010); ARGUS_CONV_TMA_WSTRIDE=0 / ARGUS_CONV_TMA_PHASES=0 (the
    module's switches) keep them on conv_igemm."""
    from argus_agent.lower import lower_model, ops_nn

    convs = ((nn.Conv2d(16, 8, 3, stride=2, padding=2, dilation=2), (1, 16, 13, 14)),
             (nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1), (1, 16, 9, 10)))
    assert ops_nn.CONV_TMA_WSTRIDE and ops_nn.CONV_TMA_PHASES
    for conv, xs in convs:
        prog = lower_model(conv, [torch.randn(xs)], "sm_90a")
        assert {k.kernel for k in prog.kernels if isinstance(k, ConvTemplate)} == {"conv_tma"}
    monkeypatch.setattr(ops_nn, "CONV_TMA_WSTRIDE", False)
    monkeypatch.setattr(ops_nn, "CONV_TMA_PHASES", False)
    for conv, xs in convs:
        prog = lower_model(conv, [torch.randn(xs)], "sm_90a")
        assert {k.kernel for k in prog.kernels if isinstance(k, ConvTemplate)} == {"conv_igemm"}


PHASED = [
    ("convT1d", lambda: nn.ConvTranspose1d(16, 8, 4, stride=2, padding=1), (2, 16, 30)),
    ("convT2d_grouped_s3", lambda: nn.ConvTranspose2d(8, 12, (5, 3), stride=(3, 2), padding=(2, 1), groups=2,
                                                      output_padding=(1, 0)), (1, 8, 6, 7)),
    ("convT3d_k3s2", lambda: nn.ConvTranspose3d(16, 16, 3, stride=2, padding=1, output_padding=1), (1, 16, 3, 4, 3)),
]


@pytest.mark.parametrize("tf32", [False, True], indirect=True)
@pytest.mark.parametrize("name,make,xs", PHASED, ids=[c[0] for c in PHASED])
def test_strided_transposed_conv_runs_phased_with_fused_epilogue(name, make, xs, tf32, tmp_path, monkeypatch):
    """Without the IR phases (ops_nn.TRANSPOSED_PHASES off), a strided transposed convolution is one PHASED
    conv_igemm launch (grid z = groups x phases, a per-phase weight) whose store takes the pointwise chain."""
    from argus_agent.lower import ops_nn

    monkeypatch.setattr(ops_nn, "TRANSPOSED_PHASES", False)
    torch.manual_seed(5)
    model = ConvChain(make())
    prog, src, out, ref = _run(model, [torch.randn(xs)], tmp_path, f"phased_{name}_{tf32}")
    convs = [k for k in prog.kernels if isinstance(k, ConvTemplate)]
    assert len(convs) == 1 and convs[0].geometry["PHASED"] and convs[0].split == (not tf32)
    kernels, _ = fuse_epilogues(prog.kernels, prog.buffers, prog.outputs)
    assert [k for k in kernels if isinstance(k, ConvTemplate)][0].epilogue is not None
    assert "PHASED=True" in src and "conv_igemm_e" in src
    _close(out, ref, 1e-2 if tf32 else 1e-4)


class DepthwiseSeparable(nn.Module):
    def __init__(self, c, co, conv):
        super().__init__()
        self.dw = conv(c)
        two = self.dw.weight.dim() == 4
        self.bn = nn.BatchNorm2d(c) if two else nn.BatchNorm3d(c)
        self.pw = nn.Conv2d(c, co, 1) if two else nn.Conv3d(c, co, 1)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        return self.pw(F.relu6(self.bn(self.dw(x))))


DEPTHWISE = [
    ("dw3x3", lambda c: nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False), (2, 16, 13, 15)),
    ("dw5x5_s2_dil", lambda c: nn.Conv2d(c, c, 5, stride=2, padding=3, dilation=2, groups=c), (1, 16, 17, 14)),
    ("dw3d", lambda c: nn.Conv3d(c, c, 3, padding=1, groups=c), (1, 16, 4, 6, 5)),
    ("dwT_s2", lambda c: nn.ConvTranspose2d(c, c, 3, stride=2, padding=1, groups=c), (1, 16, 6, 7)),
]


@pytest.mark.parametrize("tf32", [False], indirect=True)
@pytest.mark.parametrize("name,make,xs", DEPTHWISE, ids=[c[0] for c in DEPTHWISE])
def test_depthwise_conv_is_a_direct_sum_fused_with_its_epilogue(name, make, xs, tf32, tmp_path):
    """A 2-D depthwise convolution (9 products per output, 25 dilated) on sm_90a is the stdlib depthwise kernel
    (DEPTHWISE_MIN_TAPS); a 3-D or transposed one (27, 9) is the written-out sum of its taps. No reduction kernel
    either way, and the BatchNorm + ReLU6 run in the kernel that fills the 1x1 convolution's input (the 1x1
    itself: the implicit GEMM, or at these sizes another written-out sum of 16 products). Where the 1x1 runs on
    conv_tma, that chain is computed in its channels-last copy (render_conv_copy.py): one kernel after the
    depthwise one (none for the written-out sum, which is computed in the copy too)."""
    from argus_agent.lower.core import Reduction

    torch.manual_seed(6)
    model = DepthwiseSeparable(xs[1], 32, make).eval()
    prog, src, out, ref = _run(model, [torch.randn(xs)], tmp_path, f"dw_{name}")
    assert not [k for k in prog.kernels if isinstance(k, Reduction)]
    kernels, _ = fuse_epilogues(prog.kernels, prog.buffers, prog.outputs)
    names = [type(k).__name__ for k in kernels]
    stencil = name in ("dw3x3", "dw5x5_s2_dil")
    assert names.count("DepthwiseTemplate") == (1 if stencil else 0), names
    rest = [n for n in names if n != "DepthwiseTemplate"]
    if any(getattr(k, "xcopy", None) is not None for k in kernels):    # (dw +) bn + relu6 in the 1x1's copy
        assert rest == ["ConvTemplate"], names
    else:
        assert len(rest) == 2, names   # (dw +) bn + relu6, then the 1x1 + its bias
    _close(out, ref, 1e-4)


@pytest.mark.parametrize("tf32", [True], indirect=True)
def test_conv_takes_tf32_where_pytorch_does(tf32, tmp_path):
    """torch.backends.cudnn.allow_tf32 (PyTorch's default): one TF32 pass, matched at 1e-2 (and not bit-equal
    to fp32)."""
    torch.manual_seed(1)
    model = ConvChain(nn.Conv2d(16, 32, 3, padding=1))
    x = torch.randn(2, 16, 12, 12)
    prog, src, out, ref = _run(model, [x], tmp_path, "tf32")
    assert [k.split for k in prog.kernels if isinstance(k, ConvTemplate)] == [False]
    assert "SPLIT=False" in src
    _close(out, ref, 1e-2)
    assert (out.double() - ref).abs().max() > 1e-6


@pytest.mark.parametrize("tf32", [False], indirect=True)
def test_conv_result_used_twice_is_stored(tf32, tmp_path):
    """A convolution whose result feeds two consumers (an output and a reduction) keeps its buffer."""
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(8, 16, 3)

        def forward(self, x):
            y = self.conv(x)
            return y, torch.tanh(y).mean(dim=(2, 3))

    torch.manual_seed(2)
    model = Two()
    x = torch.randn(2, 8, 14, 14)
    prog, src, out, ref = _run(model, [x], tmp_path, "two")
    _close(out[0], ref[0], 1e-4)
    _close(out[1], ref[1], 1e-4)


class LinearChain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(96, 80)
        self.scale = nn.Parameter(torch.rand(80) + 0.5)

    def forward(self, x, r):
        return F.gelu(self.fc(x)) * self.scale + r


def test_fp32_gemm_epilogue_bias_activation_scale_residual(tmp_path):
    torch.manual_seed(3)
    model = LinearChain()
    x, r = torch.randn(300, 96), torch.randn(300, 80)     # more than SWAP_ROWS (swap-AB has no epilogue)
    prog, src, out, ref = _run(model, [x, r], tmp_path, "linear")
    kernels, _ = fuse_epilogues(prog.kernels, prog.buffers, prog.outputs)
    gemms = [k for k in kernels if isinstance(k, Fp32GemmTemplate)]
    assert len(gemms) == 1 and gemms[0].epilogue is not None
    assert "gemm_fp32_e" in src
    _close(out, ref, 1e-4)


def test_fp32_mm_with_long_k_splits_k(tmp_path):
    """Few output tiles over a long K (level1/077's shape class): split-K partial products and their sum."""
    from argus_agent.lower.ops_nn import fp32_tiling

    # stdlib gemm_fp32.launch_policy: one wave of 132 blocks (4 tiles x 33 shares), none where the tiles fill the GPU
    assert [fp32_tiling(1, *s)[0] for s in ((256, 256, 131072), (4096, 4096, 131072), (64, 64, 128))] == [33, 1, 1]

    class MM(nn.Module):
        def forward(self, a, b):
            return torch.mm(a, b) * 0.5

    torch.manual_seed(4)
    a, b = torch.randn(20, 8192), torch.randn(8192, 24)
    prog, src, out, ref = _run(MM(), [a, b], tmp_path, "splitk")
    gemms = [k for k in prog.kernels if isinstance(k, Fp32GemmTemplate)]
    ks = dict(gemms[0].swap).get("KSPLIT")       # 20 rows: swap-AB, its split as the kernel's default
    assert [g.ksplit for g in gemms] == [ks] and ks > 1 and f"KSPLIT: tp.constexpr = {ks}," in src
    assert "reduce_sum" in src
    _close(out, ref, 1e-4)


def test_conv_kernels_carry_the_launch_constexprs_as_defaults(tmp_path, monkeypatch):
    """The candidate's conv_igemm kernels (plain and with a fused epilogue) have the constexprs they are
    launched with (conv_igemm.policy's tiles, the geometry, the pass) as their defaults: the agent's build gate
    compiles each kernel at its defaults, so it checks what runs. The program's result matches float64."""
    import importlib.util

    from argus_agent.lower import lower_model, render_program
    from argus_agent.runtime import launch as real_launch

    class TwoConvs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Conv2d(8, 16, 3)
            self.b = torch.nn.Conv2d(16, 32, 3, padding=1)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))      # a: fused epilogue (relu); b: the program's output

    from argus_agent.lower import ops_nn

    monkeypatch.setattr(ops_nn, "CONV_TMA", False)      # b would take conv_tma (see the test above)
    torch.manual_seed(0)
    model, x = TwoConvs(), torch.randn(2, 8, 10, 10)
    prog = lower_model(model, [x], "sm_90a", "fp32")
    p = tmp_path / "two_convs.py"
    p.write_text(render_program(prog))
    spec = importlib.util.spec_from_file_location("lowered_two_convs_defaults", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    calls = []

    def recording(kernel, grid, *args, **constexprs):
        calls.append((kernel.name, constexprs))
        return real_launch(kernel, grid, *args, **constexprs)
    mod.launch = recording
    with torch.no_grad():
        out = mod.argus_forward(model, x)
        ref = model.double()(x.double())
    convs = [(name, cx) for name, cx in calls if name.startswith("conv_igemm")]
    assert len(convs) == 2 and all(n.startswith("conv_igemm_e") for n, _ in convs)   # bias/relu fused
    for name, cx in convs:
        defaults = getattr(mod, name).resolve_constexprs({})
        assert {k: defaults[k] for k in cx} == cx, name
        assert cx["BM"] == 64 and cx["SPLIT"] is True          # the policy's tiles, fp32's 3xTF32
    # the plain kernel (the tuner's and the skills' starting point) carries the first convolution's
    plain = mod.conv_igemm.resolve_constexprs({})
    assert {k: plain[k] for k in convs[0][1]} == convs[0][1]
    assert torch.allclose(out.double(), ref, atol=1e-4, rtol=1e-4)


class PaddedConv(nn.Module):
    """A convolution whose input is an expression: a padding mode (torch decomposes it into gathers or slices),
    and optionally an activation before it."""

    def __init__(self, conv, act=False):
        super().__init__()
        self.conv, self.act = conv, act

    def forward(self, x):
        return self.conv(torch.relu(x) * 0.5 if self.act else x)


PADDED = [
    ("reflect2d", lambda: PaddedConv(nn.Conv2d(16, 24, 3, padding="same", padding_mode="reflect")), (2, 16, 7, 9)),
    ("circular2d", lambda: PaddedConv(nn.Conv2d(16, 8, 3, padding=1, padding_mode="circular")), (1, 16, 6, 5)),
    ("replicate2d_asym", lambda: PaddedConv(nn.Conv2d(32, 8, (3, 5), padding=(1, 2), padding_mode="replicate")),
     (1, 32, 5, 8)),
    ("reflect1d_dilated", lambda: PaddedConv(nn.Conv1d(16, 16, 3, padding=2, dilation=2, padding_mode="reflect")),
     (2, 16, 40)),
    ("circular3d", lambda: PaddedConv(nn.Conv3d(16, 8, 3, padding=1, padding_mode="circular")), (1, 16, 3, 4, 5)),
    ("relu_1x1", lambda: PaddedConv(nn.Conv2d(20, 8, 1), act=True), (2, 20, 16, 20)),
    ("relu_zero_pad", lambda: PaddedConv(nn.Conv2d(16, 8, 3, padding=1), act=True), (1, 16, 5, 6)),
]


@pytest.mark.parametrize("tf32", [False, True], indirect=True)
@pytest.mark.parametrize("name,make,xs", PADDED, ids=[c[0] for c in PADDED])
def test_an_input_expression_is_computed_in_the_channels_last_copy(name, make, xs, tf32, tmp_path, monkeypatch):
    """A conv_tma convolution whose input is an expression (reflect / circular / replicate padding, an
    activation) computes it in its channels-last copy (render_conv_copy.py): no kernel realizes the input,
    the copy is the generated kernel, not to_ndhwc; against float64 on the interpreter. With
    ARGUS_CONV_FUSED_COPY=0 (ops_nn.CONV_FUSED_COPY) the input is realized and copied by to_ndhwc."""
    from argus_agent.lower import ops_nn

    torch.manual_seed(11)
    model = make()
    x = torch.randn(xs)
    prog, src, out, ref = _run(model, [x], tmp_path, f"padded_{name}_{tf32}")
    convs = [k for k in prog.kernels if isinstance(k, ConvTemplate)]
    assert [(k.kernel, k.xcopy is not None) for k in convs] == [("conv_tma", True)]
    assert "_ndhwc, (" in src and "launch(to_ndhwc," not in src and "b_conv_in" not in src.split("def argus_forward")[1]
    _close(out, ref, 1e-2 if tf32 else 1e-4)
    monkeypatch.setattr(ops_nn, "CONV_FUSED_COPY", False)
    prog, src, out2, _ = _run(model, [x], tmp_path, f"padded_{name}_{tf32}_off")
    assert "launch(to_ndhwc," in src and all(k.xcopy is None for k in prog.kernels if isinstance(k, ConvTemplate))
    _close(out2, ref, 1e-2 if tf32 else 1e-4)


def test_an_input_reading_many_places_per_element_is_not_computed_in_the_copy(monkeypatch):
    """A depthwise convolution's written-out taps (nine reads of x per element; with the stdlib depthwise kernel
    held back) before a 1x1 convolution stay their own kernel, then to_ndhwc (in the copy's tiles they measured
    slower: level2/029 0.76x -> 0.60x eager on the H100); a padding's selects (one read per element) go into the
    copy, and so does the BatchNorm + ReLU6 of the stdlib depthwise kernel's output (one read per element)."""
    from argus_agent.lower import lower_model, ops_nn, render_program
    from argus_agent.lower.render_conv_copy import reads_per_element

    model = DepthwiseSeparable(32, 32, lambda c: nn.Conv2d(c, c, 3, padding=1, groups=c)).eval()
    prog = lower_model(model, [torch.randn(1, 32, 16, 16)], "sm_90a")
    convs = [k for k in prog.kernels if isinstance(k, ConvTemplate)]
    assert convs and all(k.xcopy is not None for k in convs)
    assert "launch(depthwise_conv2d" in render_program(prog)   # (either form: depthwise_conv.plan)
    monkeypatch.setattr(ops_nn, "DEPTHWISE_MIN_TAPS", 10**6)
    prog = lower_model(model, [torch.randn(1, 32, 16, 16)], "sm_90a")
    convs = [k for k in prog.kernels if isinstance(k, ConvTemplate)]
    assert convs and all(k.xcopy is None for k in convs)
    assert "launch(to_ndhwc," in render_program(prog)
    from argus_agent.lower import values as vals
    from argus_agent.lower.index import Var
    x = vals.load("b_x", Var("i", 10000), torch.float32)
    y = vals.load("b_x", Var("i", 10000) + 1, torch.float32)
    p = vals.load("b_p", Var("i", 10000), torch.float32)
    cond = vals.call("lt", vals.index_value(Var("i", 10000)), vals.const(5, torch.int64))
    sizes = {"b_x": 10000, "b_p": 64}
    assert reads_per_element(vals.call("where", cond, x, y), sizes) == 1
    assert reads_per_element(vals.call("add", vals.call("mul", x, p), y), sizes) == 2


class Projection(nn.Module):
    """A residual block's end, as ResNet's / ResNeXt's downsampling blocks: relu(bn(conv(x)) + bn(short(x))),
    `short` a strided 1x1 convolution without padding."""

    def __init__(self, ci, co, stride, nd=2):
        super().__init__()
        conv, bn = (nn.Conv2d, nn.BatchNorm2d) if nd == 2 else (nn.Conv3d, nn.BatchNorm3d)
        self.conv, self.bn = conv(ci, co, 3, stride=stride, padding=1, bias=False), bn(co)
        self.short, self.bn_s = conv(ci, co, 1, stride=stride, bias=False), bn(co)
        for b in (self.bn, self.bn_s):     # running statistics that are not the identity
            b.running_mean.uniform_(-0.5, 0.5)
            b.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)) + self.bn_s(self.short(x)))


PROJECTIONS = [
    ("s2", 2, (2, 32, 10, 14), 2),
    ("s21", (2, 1), (1, 32, 9, 12), 2),
    ("s3_3d", (1, 3, 3), (2, 16, 4, 12, 11), 3),
]


@pytest.mark.parametrize("tf32", [False, True], indirect=True)
@pytest.mark.parametrize("name,stride,xs,nd", PROJECTIONS, ids=[c[0] for c in PROJECTIONS])
def test_strided_1x1_runs_on_its_subsampled_input(name, stride, xs, nd, tf32, tmp_path, monkeypatch):
    """A strided 1x1 convolution without padding is the 1x1 convolution of its input's every S-th pixel: the
    subsampling computed in conv_tma's channels-last copy (no phased copy of the whole input), the GEMM a plain
    one over the image's pixels (geometry of a 1x1 convolution: one row of every output pixel), the other
    convolution's BN, the add and the relu in its staged epilogue, which reads that convolution's NCHW output;
    against float64 on the interpreter. ARGUS_CONV_SUBSAMPLE=0 (ops_nn.CONV_SUBSAMPLE) keeps the strided form."""
    from argus_agent.lower import ops_nn

    torch.manual_seed(5)
    model = Projection(xs[1], 24, stride, nd).eval()
    x = torch.randn(xs)
    prog, src, out, ref = _run(model, [x], tmp_path, f"proj_{name}_{tf32}")
    convs = [k for k in prog.kernels if isinstance(k, ConvTemplate)]
    assert [k.kernel for k in convs] == ["conv_tma", "conv_tma"]
    short = [k for k in convs if k.geometry["KS"] == (1, 1, 1)]
    assert len(short) == 1 and short[0].xcopy is not None
    osz = tuple(ref.shape[2:])
    assert short[0].geometry["ST"] == (1, 1, 1) and short[0].geometry["OS"][2] == math.prod(osz)
    kernels, _ = fuse_epilogues(prog.kernels, prog.buffers, prog.outputs)
    assert [k.epilogue is not None for k in kernels if isinstance(k, ConvTemplate)] == [False, True]
    fused = src.split("def conv_tma_e")[1].split("@tp.kernel")[0]
    assert "# EPILOGUE STAGED" not in fused and "STAGED: tp.constexpr = 1" in fused and "layout=LE)" in fused
    wstride = (stride if isinstance(stride, int) else stride[-1]) > 1
    assert src.count("launch(to_ndhwc_phased") == wstride, "only the 3x3 convolution's copy is phased"
    _close(out, ref, 1e-2 if tf32 else 1e-4)
    monkeypatch.setattr(ops_nn, "CONV_SUBSAMPLE", False)
    prog, src, out2, _ = _run(model, [x], tmp_path, f"proj_{name}_{tf32}_off")
    convs = [k for k in prog.kernels if isinstance(k, ConvTemplate)]
    assert all(k.xcopy is None for k in convs) and all(k.geometry["ST"] != (1, 1, 1) for k in convs)
    _close(out2, ref, 1e-2 if tf32 else 1e-4)


MERGED = [
    ("g8x8_s2", lambda: nn.Conv2d(64, 64, 3, stride=2, padding=1, groups=8, bias=False), (2, 64, 11, 13), 2),
    ("g4x8_cout16", lambda: nn.Conv2d(32, 64, 3, padding=1, groups=4), (1, 32, 6, 9), 1),
    ("g8x4_3d", lambda: nn.Conv3d(32, 32, 3, padding=1, groups=8), (1, 32, 3, 5, 6), 1),
]


@pytest.mark.parametrize("tf32", [False, True], indirect=True)
@pytest.mark.parametrize("name,make,xs,groups", MERGED, ids=[c[0] for c in MERGED])
def test_narrow_groups_merge_into_conv_tma_groups(name, make, xs, groups, tf32, tmp_path, monkeypatch):
    """ARGUS_CONV_MERGE_GROUPS=1 (ops_nn.CONV_MERGE_GROUPS): a grouped convolution with 4-16 channels per group
    runs on conv_tma as a convolution of merged groups of 32 channels with a block-diagonal weight (zeros
    between the merged groups): the same result as the grouped convolution (float64 on the interpreter);
    off (the default), it stays on conv_igemm."""
    from argus_agent.lower import ops_nn

    torch.manual_seed(13)
    model = ConvChain(make())
    x = torch.randn(xs)
    prog, src, out, ref = _run(model, [x], tmp_path, f"groups_{name}_{tf32}_off")
    assert [k.kernel for k in prog.kernels if isinstance(k, ConvTemplate)] == ["conv_igemm"]
    monkeypatch.setattr(ops_nn, "CONV_MERGE_GROUPS", True)
    prog, src, out, ref = _run(model, [x], tmp_path, f"groups_{name}_{tf32}")
    convs = [k for k in prog.kernels if isinstance(k, ConvTemplate)]
    assert [(k.kernel, k.groups) for k in convs] == [("conv_tma", groups)]
    _close(out, ref, 1e-2 if tf32 else 1e-4)
