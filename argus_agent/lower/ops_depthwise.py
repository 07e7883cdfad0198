"""Depthwise 2-D convolutions (groups = in = out channels) of at least ops_nn.DEPTHWISE_MIN_TAPS taps on a GPU
target: `stdlib_kernels/depthwise_conv.py` (its `plan` picks the kernel): one block per (BH x BW) tile of an
output plane, the taps read as strided windows of the plane and the tap's weight a uniform scalar of the block's
channel, or, for small planes and strided convolutions, a (BP, BH, BW) tile of several planes with its input
staged in shared memory per stride phase.

Written out as a pointwise sum of its taps over the flat output index (ops_nn._direct_sum), ConvNeXt's 7x7
depthwise convolution of 16 x 96 x 56 x 56 took 401 us on the H100 (each tap's mask and channel recomputed from
the flat index, the weight a per-element gather) and as a reduction 887 us, against cuDNN's 164 us (level3/019,
2026-11-24). The bias and what follows stay pointwise kernels reading the result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .core import Buffer, buffer_tensor

GRID_Z_MAX = 65535     # CUDA's (and HIP's) largest grid z


@dataclass
class DepthwiseTemplate:
    """out (N, C, OH, OW) f32 = the depthwise convolution of x (N, C, H, W) with w (C, 1, KH, KW), no bias."""

    out: Buffer
    x: Buffer
    w: Buffer
    planes: int
    hw: tuple
    ohw: tuple
    window: tuple         # (KH, KW)
    stride: int
    pad: tuple            # (PH, PW)
    dilation: int
    what: str = ""

    @property
    def K(self) -> int:   # the longest sum it runs (for tolerances)
        return self.window[0] * self.window[1]


def depthwise_ok(target: str, x, w, transposed: bool, groups: int, stride, dilation, min_taps: int) -> bool:
    """Whether a convolution takes the stdlib depthwise kernel: a GPU target, fp32, 2-D, one input and one output
    channel per group, the same stride and dilation along both axes, at least `min_taps` taps, and at most
    GRID_Z_MAX planes (batch x channels; more take the written-out sum)."""
    return (target != "cpu" and not transposed and len(x.shape) == 4 and x.dtype == w.dtype == torch.float32
            and groups == x.shape[1] == w.shape[0] and w.shape[1] == 1 and len(set(stride)) == 1
            and len(set(dilation)) == 1 and math.prod(w.shape[2:]) >= min_taps
            and max(x.numel, math.prod(w.shape)) < 2**31
            and x.shape[0] * x.shape[1] <= GRID_Z_MAX)       # planes are the grid's z: at most 65535 of them


def depthwise(ctx, x, w, shape, stride, padding, dilation):
    """The convolution as a DepthwiseTemplate; its result as a buffer tensor (the caller adds the bias)."""
    xb = ctx.contiguous(x, "dw_in").buffer
    wb = ctx.contiguous(w, "dw_w").buffer
    out = ctx.add_buffer("dw", shape, torch.float32)
    N, C = x.shape[:2]
    ctx.kernels.append(DepthwiseTemplate(out, xb, wb, N * C, tuple(x.shape[2:]), tuple(shape[2:]),
                                         tuple(w.shape[2:]), stride[0], tuple(padding), dilation[0], ctx.note))
    return buffer_tensor(out)


def render_depthwise(t: DepthwiseTemplate) -> list[str]:
    from stdlib_kernels.depthwise_conv import plan

    kh, kw = t.window
    name, p, g = plan(t.planes, t.w.shape[0], t.ohw[0], t.ohw[1], t.window, t.stride, t.dilation)
    tile = ", ".join(f"{k}={v}" for k, v in p.items())
    return [f"launch({name}, {g}, {t.x.name}.view({t.planes}, {t.hw[0]}, {t.hw[1]}), "
            f"{t.w.name}.view({t.w.shape[0]}, {kh * kw}), {t.out.name}.view({t.planes}, {t.ohw[0]}, {t.ohw[1]}), "
            f"KH={kh}, KW={kw}, S={t.stride}, PH={t.pad[0]}, PW={t.pad[1]}, D={t.dilation}, {tile})"]
