"""Cumulative sum of a long vector across blocks (torch.cumsum of a 1-D tensor), in two passes.

Pass 1 (`block_sums`): each block sums its BLOCK elements into `partial[b]`. Pass 2 (`block_scan`): each
block adds up the partial sums of the blocks before it (reading up to NB_MAX of them, a few at a time) and
adds that offset to the scan of its own elements (`tp.cumsum`). Two launches order the passes, so no block
waits for another (a single-pass decoupled look-back needs a spin loop, which kernels do not have).
"""

import numpy as np

import tilepy as tp


@tp.kernel(threads=128)
def block_sums(X: tp.Tensor[tp.f32, "N"], partial: tp.Tensor[tp.f32, "B"], BLOCK: tp.constexpr = 1024):
    b = tp.block_id(0)
    x = tp.load(X[b * BLOCK:(b + 1) * BLOCK])                         # past N: 0, adds nothing
    tp.store(partial[b:b + 1], tp.sum(x, axis=0, keepdims=True))


@tp.kernel(threads=128)
def block_scan(X: tp.Tensor[tp.f32, "N"], partial: tp.Tensor[tp.f32, "B"], Y: tp.Tensor[tp.f32, "N"],
               EXCLUSIVE: tp.constexpr = False, BLOCK: tp.constexpr = 1024, CHUNK: tp.constexpr = 512):
    b = tp.block_id(0)
    offset = tp.zeros((1,), tp.f32)
    for c0 in range(0, b, CHUNK):                                     # the blocks before this one
        p = tp.load(partial[c0:c0 + CHUNK], mask=c0 + tp.arange(CHUNK) < b)
        offset = offset + tp.sum(p, axis=0, keepdims=True)
    x = tp.load(X[b * BLOCK:(b + 1) * BLOCK])
    tp.store(Y[b * BLOCK:(b + 1) * BLOCK], tp.cumsum(x, axis=0, exclusive=EXCLUSIVE) + offset)


def launch(x, y, partial=None, exclusive: bool = False, block: int = 1024, **kw):
    """Both passes; `partial` (cdiv(n, block) floats of scratch) is allocated like `x` when not given."""
    nb = tp.cdiv(int(x.shape[0]), block)
    if partial is None:
        partial = x.new_empty(nb) if hasattr(x, "new_empty") else np.empty(nb, np.float32)
    block_sums[(nb,)](x, partial, BLOCK=block, **kw)
    return block_scan[(nb,)](x, partial, y, EXCLUSIVE=exclusive, BLOCK=block, **kw)


def reference(x, exclusive: bool = False):
    c = np.cumsum(np.asarray(x, np.float64))
    return c - np.asarray(x, np.float64) if exclusive else c


if __name__ == "__main__":
    x = np.random.default_rng(0).standard_normal(5000, dtype=np.float32)
    y = np.empty_like(x)
    launch(x, y)
    print("max |err| =", float(np.abs(y - reference(x)).max()))
