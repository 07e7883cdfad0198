"""2-D max pooling (torch.nn.functional.max_pool2d) with a K x K window, stride S and padding P, over planes
(batch and channels flattened: X is (N * C, H, W)).

Each block computes a BH x BW tile of one output plane as the maximum of K * K strided windows of the input:
window (kh, kw) reads X[plane, oh * S - P + kh, ow * S - P + kw] for the tile's (oh, ow). Padding is just
elements outside the input, which read -inf.
"""

import numpy as np

import tilepy as tp


@tp.kernel(threads=128)
def max_pool2d(X: tp.Tensor[tp.f32, "P", "H", "W"], Y: tp.Tensor[tp.f32, "P", "OH", "OW"],
               K: tp.constexpr = 3, S: tp.constexpr = 2, PAD: tp.constexpr = 0, BH: tp.constexpr = 16,
               BW: tp.constexpr = 16):
    ow0 = tp.block_id(0) * BW
    oh0 = tp.block_id(1) * BH
    plane = tp.block_id(2)
    acc = tp.full((BH, BW), float("-inf"), tp.f32)
    for kh in tp.static_range(K):
        for kw in tp.static_range(K):
            h = oh0 * S - PAD + kh
            w = ow0 * S - PAD + kw
            x = tp.load(X[plane, h:h + BH * S:S, w:w + BW * S:S], other=float("-inf"))   # a strided window
            acc = tp.maximum(acc, x)
    tp.store(Y[plane, oh0:oh0 + BH, ow0:ow0 + BW], acc)


def out_size(n: int, k: int = 3, s: int = 2, pad: int = 0) -> int:
    return (n + 2 * pad - k) // s + 1


def launch(x, y, **kw):
    """x: (N, C, H, W) or (P, H, W), contiguous; y the matching output."""
    xs, ys = x.reshape(-1, *x.shape[-2:]), y.reshape(-1, *y.shape[-2:])
    grid = (tp.cdiv(ys.shape[2], kw.get("BW", 16)), tp.cdiv(ys.shape[1], kw.get("BH", 16)), ys.shape[0])
    return max_pool2d[grid](xs, ys, **kw)


def reference(x, k: int = 3, s: int = 2, pad: int = 0):
    import torch

    return torch.nn.functional.max_pool2d(torch.as_tensor(np.asarray(x, np.float64)), k, s, pad).numpy()


if __name__ == "__main__":
    x = np.random.default_rng(0).standard_normal((2, 3, 37, 29), dtype=np.float32)
    y = np.empty((2, 3, out_size(37), out_size(29)), np.float32)
    launch(x, y)
    print("max |err| =", float(np.abs(y - reference(x)).max()))
