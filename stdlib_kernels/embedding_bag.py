"""EmbeddingBag over bags of one size (a 2-D index input): Y[b, :] = combine over j < S of W[ids[b, j], :].

MODE 0 sums the rows, 1 averages them, 2 takes their elementwise max. A block reduces one bag over a BD-wide
column window: BJ of the bag's indices at a time, each a row gather of BD contiguous elements (on the GPU
16-byte vector loads where the row and its columns are aligned), accumulated in a (BJ, BD) tile and combined
over the BJ axis at the end. Negative indices wrap once (index + V), as the lowering's gathers do; an index
outside [0, V) after that reads the neutral value (torch raises instead).
"""

import numpy as np

import tilepy as tp


@tp.kernel(threads=128)
def embedding_bag(W: tp.Tensor[tp.f32, "V", "D"], ids: tp.Tensor[tp.i64, "B", "S"], Y: tp.Tensor[tp.f32, "B", "D"],
                  MODE: tp.constexpr = 0, BJ: tp.constexpr = 8, BD: tp.constexpr = 512):
    b = tp.block_id(0)
    d0 = tp.block_id(1) * BD
    cols = (d0 + tp.arange(BD))[None, :]
    n = ids.shape[1]
    if MODE == 2:
        acc = tp.full((BJ, BD), float("-inf"), tp.f32)
    else:
        acc = tp.full((BJ, BD), 0.0, tp.f32)
    for j0 in range(0, n, BJ):
        j = (j0 + tp.arange(BJ))[:, None]
        i = tp.load(ids[b + 0 * j, j])                               # (BJ, 1): the bag's next BJ indices
        i = tp.where(i < 0, i + W.shape[0], i)
        if MODE == 2:
            x = tp.load(W[i, cols], mask=j < n, other=float("-inf"))  # (BJ, BD): BJ rows of the table
            acc = tp.maximum(acc, x)
        else:
            x = tp.load(W[i, cols], mask=j < n)
            acc = acc + x
    if MODE == 2:
        res = tp.max(acc, axis=0)
    else:
        res = tp.sum(acc, axis=0)
    if MODE == 1:
        res = res / n
    tp.store(Y[b, d0:d0 + BD], res)


def grid(nbags: int, dim: int, BD: int = 512):
    return (nbags, tp.cdiv(dim, BD))


def launch(w, ids, y, MODE=0, BJ=8, BD=512):
    return embedding_bag[grid(ids.shape[0], w.shape[1], BD)](w, ids, y, MODE=MODE, BJ=BJ, BD=BD)


def reference(w, ids, mode=0):
    rows = np.asarray(w, np.float64)[np.asarray(ids)]
    return rows.sum(1) if mode == 0 else rows.mean(1) if mode == 1 else rows.max(1)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    w = rng.standard_normal((100, 70), dtype=np.float32)
    ids = rng.integers(0, 100, (9, 13))
    for mode in range(3):
        y = np.zeros((9, 70), np.float32)
        launch(w, ids, y, MODE=mode, BD=64)
        print(mode, "max |err| =", float(np.abs(y - reference(w, ids, mode)).max()))
