"""Embedding lookup (torch.nn.functional.embedding): Y[n, :] = W[ids[n], :], a gather through an index tile.

Each block gathers BN rows, BD columns at a time. An id outside [0, V) reads zeros, as any out-of-range index
of a gather does (torch raises instead; the lowering clamps or checks before calling).
"""

import numpy as np

import tilepy as tp


@tp.kernel(threads=128)
def embedding(W: tp.Tensor[tp.f32, "V", "D"], ids: tp.Tensor[tp.i64, "N"], Y: tp.Tensor[tp.f32, "N", "D"],
              BN: tp.constexpr = 16, BD: tp.constexpr = 64):
    n0 = tp.block_id(0) * BN
    rows = n0 + tp.arange(BN)
    idx = tp.load(ids[n0:n0 + BN])                              # BN token ids (rows past N: masked below)
    for d0 in range(0, W.shape[1], BD):
        cols = d0 + tp.arange(BD)
        x = tp.load(W[idx[:, None], cols[None, :]])             # the gather: row ids[n], columns d0..d0+BD
        tp.store(Y[rows[:, None], cols[None, :]], x)            # rows past N, columns past D: skipped


def launch(w, ids, y, **kw):
    return embedding[(tp.cdiv(ids.shape[0], 16),)](w, ids, y, **kw)


def reference(w, ids):
    return np.asarray(w, np.float64)[np.asarray(ids)]


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    w = rng.standard_normal((1000, 200), dtype=np.float32)
    ids = rng.integers(0, 1000, 333)
    y = np.empty((333, 200), np.float32)
    launch(w, ids, y)
    print("max |err| =", float(np.abs(y - reference(w, ids)).max()))
