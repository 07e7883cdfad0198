"""The fusion rule that stores a shared, dear value once (program._shared_stored): a value that reaches two or
more kernels and reads more than SHARED_READS elements of large buffers per element is realized into a buffer
instead of being recomputed in each kernel; a cheap one, or one that reaches a single kernel, is not. Checked on
the lowered kernels and against float64 on the interpreter."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .lowered import assert_close, run_lowered


class SqueezeExcite(nn.Module):
    """A depthwise 5x5 convolution (25 taps per element) read by its mean and by the gated product."""

    def __init__(self, c: int, k: int = 5):
        super().__init__()
        self.dw = nn.Conv2d(c, c, k, padding=k // 2, groups=c, bias=False)
        self.fc = nn.Conv2d(c, c, 1)

    def forward(self, x):
        y = F.silu(self.dw(x))
        return y * torch.sigmoid(self.fc(y.mean((2, 3), keepdim=True)))


class OneConsumer(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 5, padding=2, groups=c, bias=False)

    def forward(self, x):
        return F.silu(self.dw(x)) * 2.0


class CheapShared(nn.Module):
    def forward(self, x):
        y = torch.relu(x) + 1.0
        return y * y.mean((2, 3), keepdim=True)


def _shared(prog):
    return [b for b in prog.buffers if b.name.startswith("b_shared")]


def test_a_dear_value_read_by_two_kernels_is_stored_once(tmp_path):
    torch.manual_seed(0)
    model = SqueezeExcite(16).eval()
    x = torch.randn(1, 16, 64, 64)
    prog, _, out, ref = run_lowered(model, [x], tmp_path, "se_shared", target="cpu")
    assert len(_shared(prog)) == 1 and _shared(prog)[0].shape == (1, 16, 64, 64)
    assert_close(out, ref, 1e-5)


def test_a_value_read_by_one_kernel_or_cheap_is_composed_as_before(tmp_path):
    torch.manual_seed(1)
    x = torch.randn(1, 16, 64, 64)
    for name, model in (("one", OneConsumer(16).eval()), ("cheap", CheapShared())):
        prog, _, out, ref = run_lowered(model, [x], tmp_path, f"not_shared_{name}", target="cpu")
        assert not _shared(prog), name
        assert_close(out, ref, 1e-5)


class DepthwiseNorm(nn.Module):
    """ConvNeXt's front: a 7x7 depthwise convolution (49 taps), channels-last LayerNorm."""

    def __init__(self, c: int, k: int = 7):
        super().__init__()
        self.dw = nn.Conv2d(c, c, k, padding=k // 2, groups=c)
        self.norm = nn.LayerNorm(c)

    def forward(self, x):
        return self.norm(self.dw(x).permute(0, 2, 3, 1))


def test_a_7x7_depthwise_is_written_out_and_stored_once_for_its_layer_norm(tmp_path):
    """49 taps: the taps written out in a pointwise kernel (DEPTHWISE_TAPS), not a reduction; the LayerNorm reads
    it in its statistics and its normalization (a sink that counts twice), so it is stored once; the channels-last
    view the LayerNorm reads (a stride of H * W along its rows) is stored once too (STRIDED_READS)."""
    torch.manual_seed(2)
    model = DepthwiseNorm(16).eval()
    x = torch.randn(2, 16, 48, 50)       # past SHARED_BIG elements: not a small value
    prog, _, out, ref = run_lowered(model, [x], tmp_path, "dw7_norm", target="cpu")
    assert [b.shape for b in _shared(prog)] == [(2, 16, 48, 50), (2, 48, 50, 16)]
    names = [getattr(k, "name", type(k).__name__) for k in prog.kernels]
    assert not any("reduce_sum" in n for n in names), names      # no reduction computes the convolution
    assert_close(out, ref, 1e-5)


def test_on_sm90a_a_7x7_depthwise_runs_the_stdlib_stencil(tmp_path):
    """On a GPU target the 49-tap depthwise convolution is stdlib_kernels/depthwise_conv.py's kernel (bias and the
    norm after it pointwise); run here on the interpreter against float64, with a stride-2 dilated 7x7 with
    unequal padding too."""
    torch.manual_seed(3)
    model = DepthwiseNorm(16).eval()
    x = torch.randn(2, 16, 48, 50)
    prog, src, out, ref = run_lowered(model, [x], tmp_path, "dw7_sm90", target="sm_90a")
    assert [type(k).__name__ for k in prog.kernels].count("DepthwiseTemplate") == 1
    assert "launch(depthwise_conv2d" in src and "KH=7, KW=7, S=1, PH=3, PW=3, D=1" in src
    assert_close(out, ref, 1e-5)

    class Strided(nn.Module):
        def __init__(self):
            super().__init__()
            self.dw = nn.Conv2d(8, 8, (7, 7), stride=2, padding=(3, 2), dilation=2, groups=8, bias=True)

        def forward(self, x):
            return torch.relu(self.dw(x))

    model = Strided().eval()
    x = torch.randn(3, 8, 29, 33)
    prog, src, out, ref = run_lowered(model, [x], tmp_path, "dw5_s2_sm90", target="sm_90a")
    assert "KH=7, KW=7, S=2, PH=3, PW=2, D=2" in src
    assert out.shape == ref.shape
    assert_close(out, ref, 1e-5)


def test_the_depthwise_kernel_takes_at_most_a_grids_z_of_planes():
    """Planes (batch x channels) are the kernel's grid z, at most 65535: more take the written-out sum."""
    from argus_agent.lower.ops_depthwise import GRID_Z_MAX, depthwise_ok

    class Shape:
        def __init__(self, *shape, dtype=torch.float32):
            self.shape, self.dtype = shape, dtype
            self.numel = 1
            for n in shape:
                self.numel *= n

    w = Shape(384, 1, 7, 7)
    ok = [depthwise_ok("sm_90a", Shape(n, 384, 8, 8), w, False, 384, (1, 1), (1, 1), 9) for n in (170, 171)]
    assert 170 * 384 <= GRID_Z_MAX < 171 * 384 and ok == [True, False]
    assert not depthwise_ok("cpu", Shape(2, 384, 8, 8), w, False, 384, (1, 1), (1, 1), 9)


class TransposedTwice(nn.Module):
    """ViT's patch embedding read transposed ((N, C, P) -> (N, P, C): a stride of P floats along the innermost
    coordinate) by a LayerNorm's statistics and by the residual sum."""

    def __init__(self, c: int):
        super().__init__()
        self.norm = nn.LayerNorm(c)

    def forward(self, x):
        t = x.flatten(2).transpose(1, 2) + 1.0
        return t + self.norm(t)


class ContiguousTwice(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.norm = nn.LayerNorm(c)

    def forward(self, x):
        t = x.flatten(2) + 1.0
        return t + self.norm(t)


def test_a_transposed_read_reaching_two_kernels_is_stored_once(tmp_path):
    """One strided read counts as STRIDED_READS reads: the transposed value is stored once, coalesced; the same
    value read in order (a stride of one) is still composed into each kernel."""
    torch.manual_seed(2)
    x = torch.randn(2, 64, 16, 32)
    prog, _, out, ref = run_lowered(TransposedTwice(64).eval(), [x], tmp_path, "transposed_shared", target="cpu")
    assert [b.shape for b in _shared(prog)] == [(2, 512, 64)]
    assert_close(out, ref, 1e-5)
    y = torch.randn(2, 512, 8, 8)
    prog, _, out, ref = run_lowered(ContiguousTwice(64).eval(), [y], tmp_path, "in_order", target="cpu")
    assert not _shared(prog)
    assert_close(out, ref, 1e-5)
