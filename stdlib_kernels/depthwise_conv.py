"""2-D depthwise convolution (torch.nn.functional.conv2d with groups = channels, one output channel per input
channel) with a KH x KW window, stride S, padding (PH, PW) and dilation D, over planes (batch and channels
flattened: X is (N * C, H, W), the weight (C, KH * KW)).

Each block computes a BH x BW tile of one output plane as the sum over the window's taps of a strided window of
the input times the tap's weight, a uniform scalar of the block's channel: tap (kh, kw) reads
X[plane, oh * S - PH + kh * D, ow * S - PW + kw * D] for the tile's (oh, ow); padding is elements outside the
input, which read 0. Neighbouring outputs read overlapping windows, so the taps after the first hit the cache.
The taps are summed in order (kh, then kw) in fp32, as cuDNN's and ATen's direct depthwise kernels do.
"""

import numpy as np

import tilepy as tp


@tp.kernel(threads=128)
def depthwise_conv2d(X: tp.Tensor[tp.f32, "P", "H", "W"], Wt: tp.Tensor[tp.f32, "C", "KK"],
                     Y: tp.Tensor[tp.f32, "P", "OH", "OW"], KH: tp.constexpr = 7, KW: tp.constexpr = 7,
                     S: tp.constexpr = 1, PH: tp.constexpr = 3, PW: tp.constexpr = 3, D: tp.constexpr = 1,
                     BH: tp.constexpr = 8, BW: tp.constexpr = 64):
    ow0 = tp.block_id(0) * BW
    oh0 = tp.block_id(1) * BH
    plane = tp.block_id(2)
    c = plane % Wt.shape[0]
    acc = tp.zeros((BH, BW), tp.f32)
    for kh in tp.static_range(KH):
        for kw in tp.static_range(KW):
            h = oh0 * S - PH + kh * D
            w = ow0 * S - PW + kw * D
            x = tp.load(X[plane, h:h + BH * S:S, w:w + BW * S:S], other=0.0)
            acc = acc + x * tp.load(Wt[c:c + 1, kh * KW + kw:kh * KW + kw + 1])   # (1, 1): the tap's weight
    tp.store(Y[plane, oh0:oh0 + BH, ow0:ow0 + BW], acc)


def _halo(k, d, s):
    """Rows (or columns) past the tile's own that its taps read in one stride phase, as a power of two (0: none)."""
    n = (k - 1) * d // s
    return 0 if n == 0 else 1 << (n - 1).bit_length()


@tp.kernel(threads=128)
def depthwise_conv2d_staged(X: tp.Tensor[tp.f32, "P", "H", "W"], Wt: tp.Tensor[tp.f32, "C", "KK"],
                            Y: tp.Tensor[tp.f32, "P", "OH", "OW"], KH: tp.constexpr = 7, KW: tp.constexpr = 7,
                            S: tp.constexpr = 1, PH: tp.constexpr = 3, PW: tp.constexpr = 3, D: tp.constexpr = 1,
                            BP: tp.constexpr = 2, BH: tp.constexpr = 16, BW: tp.constexpr = 16):
    """A (BP, BH, BW) tile of outputs of BP planes whose channels follow each other (BP divides C), the input
    they read staged in shared memory first: per stride phase (ph, pw) the rows h0 + ph + S i and columns
    w0 + pw + S j of the tile's window (its own BH x BW and a halo of HH rows / HW columns), so that every tap
    reads a unit-stride window of one phase, `s[phase, :, q:q + BH, r:r + BW]` with q = kh D // S. A tap's
    weight is one load per thread (the channel is the block's c0 plus the plane's index)."""
    ow0 = tp.block_id(0) * BW
    oh0 = tp.block_id(1) * BH
    p0 = tp.block_id(2) * BP
    HH = _halo(KH, D, S)
    HW = _halo(KW, D, S)
    s = tp.shared((S * S, BP, BH + HH, BW + HW), tp.f32)
    h0 = oh0 * S - PH
    w0 = ow0 * S - PW
    for ph in tp.static_range(S):
        for pw in tp.static_range(S):
            hs = h0 + ph
            ws = w0 + pw
            tp.store(s[ph * S + pw, :, 0:BH, 0:BW],
                     tp.load(X[p0:p0 + BP, hs:hs + BH * S:S, ws:ws + BW * S:S], other=0.0))
            if HW > 0:
                tp.store(s[ph * S + pw, :, 0:BH, BW:BW + HW],
                         tp.load(X[p0:p0 + BP, hs:hs + BH * S:S, ws + BW * S:ws + (BW + HW) * S:S], other=0.0))
            if HH > 0:
                tp.store(s[ph * S + pw, :, BH:BH + HH, 0:BW],
                         tp.load(X[p0:p0 + BP, hs + BH * S:hs + (BH + HH) * S:S, ws:ws + BW * S:S], other=0.0))
            if HH > 0 and HW > 0:
                tp.store(s[ph * S + pw, :, BH:BH + HH, BW:BW + HW],
                         tp.load(X[p0:p0 + BP, hs + BH * S:hs + (BH + HH) * S:S, ws + BW * S:ws + (BW + HW) * S:S],
                                 other=0.0))
    tp.barrier()
    c0 = p0 % Wt.shape[0]
    acc = tp.zeros((BP, BH, BW), tp.f32)
    for kh in tp.static_range(KH):
        for kw in tp.static_range(KW):
            q = s[(kh * D) % S * S + (kw * D) % S, :, (kh * D) // S:(kh * D) // S + BH,
                  (kw * D) // S:(kw * D) // S + BW]
            zero = tp.zeros((BP, BH, BW), tp.i32)
            wv = tp.load(Wt[c0 + tp.arange(BP)[:, None][:, :, None] + zero, zero + (kh * KW + kw)])
            acc = acc + tp.load(q) * wv
    tp.store(Y[p0:p0 + BP, oh0:oh0 + BH, ow0:ow0 + BW], acc)


def out_size(n: int, k: int, s: int = 1, pad: int = 0, d: int = 1) -> int:
    return (n + 2 * pad - d * (k - 1) - 1) // s + 1


def tile(oh: int, ow: int) -> dict:
    """BH x BW of at most 512 outputs (4 per thread), BW the output row rounded up to a power of two (at most 64),
    BH no taller than the plane's rows rounded up (a 14 x 14 plane: 16 x 16, not 32 x 16 half empty)."""
    bw = min(64, 1 << max(2, (ow - 1).bit_length()))
    return {"BH": min(512 // bw, 1 << max(0, (oh - 1).bit_length())), "BW": bw}


def staged_tile(channels: int, oh: int, ow: int, k: tuple, s: int, d: int) -> dict | None:
    """The staged kernel's (BP, BH, BW): the plane's tile as `tile` gives it, planes added (a power of two that
    divides the channel count) until the tile holds 512 outputs, one per value slot of the 128 threads; None
    where its shared memory (S^2 phases of the tile and its halo) passes 48 KB."""
    t = tile(oh, ow)
    bp = 1
    while bp * t["BH"] * t["BW"] < 512 and channels % (2 * bp) == 0:
        bp *= 2
    rows, cols = t["BH"] + _halo(k[0], d, s), t["BW"] + _halo(k[1], d, s)
    if s * s * bp * rows * cols * 4 > 48 * 1024:
        return None
    return {"BP": bp, **t}


def grid(planes: int, oh: int, ow: int, bh: int, bw: int, bp: int = 1) -> tuple:
    return (tp.cdiv(ow, bw), tp.cdiv(oh, bh), tp.cdiv(planes, bp))


def staged_pays(channels: int, oh: int, ow: int, k: tuple, s: int, d: int) -> bool:
    """Whether the policy runs the staged kernel: wherever its tile fits. H100, fp32, against the one-plane
    kernel (x torch's depthwise conv2d, benchmarks/results/depthwise-staged-*.json): 7x7 taps 1.00 -> 2.95 (56 x 56
    planes), 1.26 -> 3.48 (112 x 112), 0.57 -> 1.32 (14 x 14), stride 2 0.59 -> 1.21; 9x9 1.60 -> 5.37; 3x3
    0.65 -> 0.95 (14 x 14), 0.32 -> 0.70 (7 x 7), 1.42 -> 1.48 (112 x 112); only 3x3 stride 2 on 56 x 56 planes
    was slower (0.75 -> 0.70, one run)."""
    return staged_tile(channels, oh, ow, k, s, d) is not None


def plan(planes: int, channels: int, oh: int, ow: int, k: tuple, s: int, d: int, staged=None) -> tuple:
    """(kernel name, constexprs without the window's, grid) for `planes` output planes of oh x ow. `staged`:
    None for the policy (`staged_pays`), True / False to force a form (the staged one where its tile fits)."""
    use = staged_pays(channels, oh, ow, k, s, d) if staged is None else staged
    st = staged_tile(channels, oh, ow, k, s, d) if use else None
    if st is not None:
        return "depthwise_conv2d_staged", st, grid(planes, oh, ow, st["BH"], st["BW"], st["BP"])
    p = tile(oh, ow)
    return "depthwise_conv2d", p, grid(planes, oh, ow, p["BH"], p["BW"])


def launch(x, w, y, s: int = 1, pad=(0, 0), d: int = 1, staged=None, **kw):
    """x: (N, C, H, W) contiguous; w: (C, 1, KH, KW); y: (N, C, OH, OW). `staged`: None for the policy (`plan`),
    True for the kernel that stages its input in shared memory (`depthwise_conv2d_staged`, where its tile fits),
    False for the one-plane kernel."""
    kh, kwid = w.shape[-2:]
    xs, ys = x.reshape(-1, *x.shape[-2:]), y.reshape(-1, *y.shape[-2:])
    name, p, g = plan(ys.shape[0], w.shape[0], ys.shape[1], ys.shape[2], (kh, kwid), s, d, staged)
    kernel = depthwise_conv2d_staged if name == "depthwise_conv2d_staged" else depthwise_conv2d
    return kernel[g](xs, w.reshape(w.shape[0], -1), ys, KH=kh, KW=kwid, S=s, PH=pad[0], PW=pad[1], D=d,
                     **{**p, **kw})


def reference(x, w, s: int = 1, pad=(0, 0), d: int = 1):
    import torch

    x64, w64 = (torch.as_tensor(np.asarray(v, np.float64)) for v in (x, w))
    return torch.nn.functional.conv2d(x64, w64, None, s, tuple(pad), d, groups=w64.shape[0]).numpy()


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 19, 23), dtype=np.float32)
    w = rng.standard_normal((3, 1, 7, 7), dtype=np.float32)
    y = np.empty((2, 3, out_size(19, 7, 1, 3), out_size(23, 7, 1, 3)), np.float32)
    launch(x, w, y, 1, (3, 3))
    print("max |err| =", float(np.abs(y - reference(x, w, 1, (3, 3))).max()))
