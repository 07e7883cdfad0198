"""Sort each row of a matrix (torch.sort along the last dim, stable): a bitonic network per row, one block per row.

Each element becomes one int64 key: its value's 32 bits mapped to a signed integer of the same order (float
bits: negative floats have all bits but the sign flipped, NaNs collapse to one NaN above +inf, -0.0 to +0.0;
descending: the bitwise complement), shifted up L bits, with the element's position (< 2^L) in the low L bits.
Keys are distinct and ordered like (value, position), so sorting the keys is the stable sort
torch.sort(stable=True) gives, NaN largest; positions past the row's end get the largest keys and sort last.
Keys span at most 2^(31+L) <= 2^44 in magnitude, so the sum of two never overflows.

The rows padded to NP = 2^L elements are held as an (RB, 2, 2, ..., 2) register tile (RB rows a block; axis
a >= 1 is bit L-a of the position), laid out so that position bits 0..VB-1 are each thread's values and the
higher bits its thread id. A compare-exchange of the elements whose positions differ in bit j is then one sum
over that axis (in-thread for j < VB, a warp shuffle for the next 5 bits, shared memory across warps above that)
less the element's own key, which is the partner's key, then a min or max by the element's side: the tile keeps
one shape, so the L(L+1)/2 stages are one unrolled loop over the same variable. The indices are the keys' low L
bits; the values are gathered from the row at those indices (their bits as they were: -0.0 and NaN payloads
stay). Rows of at most SORT_MAX = 8192 elements (the keys live in registers). PICK >= 0 stores only that
position of each sorted row (median, kthvalue); with NAN_FIRST a row holding a NaN gives its first
NaN instead (torch.median propagates NaN).

The kernel reads and writes 32-bit patterns (`X`, `V`): a float32 row is passed as its int32 view
(`x.view(torch.int32)`, FLOAT=True), an int32 row as it is (FLOAT=False). Wider or narrower types are cast to
one of these first by the caller.
"""

import numpy as np

import tilepy as tp

SORT_MAX = 8192   # longest row: 8 int64 keys per thread at 1024 threads


def bits(L):
    return (2,) * L


def bitonic_layout(L, VB, THREADS, RB=1):
    """(RB,) + (2,)*L tile over THREADS threads: position bit p (tile axis L-p) is value bit p below VB, thread
    bit p - VB above; the row (axis 0) is the thread bits above those; threads past RB * 2^(L-VB) replicate (a
    short row on a whole warp)."""
    TB = L - VB
    spare = THREADS // (RB << TB)
    tshape = bits(TB) + (RB, spare)
    vshape = bits(VB) if VB else (1,)
    strides = [((0,) * TB + (1, 0), (0,) * len(vshape))]
    for a in range(1, L + 1):
        p = L - a
        ts = tuple(1 if p - VB == i else 0 for i in range(TB)) + (0, 0)
        vs = tuple(1 if p == i else 0 for i in range(VB)) if VB else (0,)
        strides.append((ts, vs))
    return tp.TVLayout((RB,) + bits(L), tshape, vshape, tuple(strides), "bitonic")


def row_layout(L, VB, THREADS, RB=1):
    """The same slots as bitonic_layout over the (RB, 2^L) rows: thread t holds positions (t % 2^(L-VB)) * 2^VB
    ... of row t // 2^(L-VB)."""
    return tp.blocked((RB, 1 << L), THREADS, 1 << VB)


def shape_of(n):
    """(L, VB, THREADS, RB) for rows of n elements: 2^L >= n, 8 values a thread (at 1024 threads 8 int64 keys
    and their positions fit the 64 registers a thread has; 16 spill), RB rows a block (blocks of at least 256
    threads for short rows)."""
    L = max(1, (max(n, 2) - 1).bit_length())
    if n > SORT_MAX:
        raise ValueError(f"rows of {n} elements: the bitonic sort takes at most {SORT_MAX}")
    VB = min(L, 3)
    TB = L - VB
    RB = max(1, 256 >> TB)
    return L, VB, max(32, RB << TB), RB


@tp.kernel(threads=lambda c: c["THREADS"])
def sort_rows(X: tp.Tensor[tp.i32, "R", "N"], V: tp.Tensor[tp.i32, "R", "M"], I: tp.Tensor[tp.i64, "R", "M"],
              L: tp.constexpr = 13, VB: tp.constexpr = 3, THREADS: tp.constexpr = 1024, RB: tp.constexpr = 1,
              FLOAT: tp.constexpr = True, DESC: tp.constexpr = False, PICK: tp.constexpr = -1,
              NAN_FIRST: tp.constexpr = False, WRITE_I: tp.constexpr = True):
    r0 = tp.block_id(0) * RB
    flat = row_layout(L, VB, THREADS, RB)
    tile = bitonic_layout(L, VB, THREADS, RB)
    pos = tp.arange(1 << L, layout=tp.blocked((1 << L,), THREADS, 1 << VB))[None, :] + tp.zeros((RB, 1), tp.i32)
    pos = tp.convert_layout(pos, flat)
    x = tp.load(X[r0:r0 + RB, 0:1 << L], layout=flat)
    if FLOAT:
        x = tp.where((x & 0x7FFFFFFF) > 0x7F800000, 0x7FC00000, x)     # every NaN: one NaN above +inf
        x = tp.where(x == -2147483648, 0, x)                             # -0.0 sorts as +0.0
        x = tp.where(x < 0, x ^ 0x7FFFFFFF, x)                           # negative floats: reversed order
    if DESC:
        x = ~x
    x = tp.where(pos < X.shape[1], x, 2147483647)                        # padding: after every element
    key = tp.reshape((x.to(tp.i64) << L) | pos.to(tp.i64), (RB,) + bits(L), layout=tile)   # same slots
    at = tp.reshape(pos, (RB,) + bits(L), layout=tile)
    for k in tp.static_range(1, L + 1):              # sorted runs of 2^k
        for t in tp.static_range(k):                 # partner: the position with bit k - 1 - t flipped
            other = tp.sum(key, axis=L + 1 - k + t, keepdims=True) - key    # the partner's key (no overflow)
            key = tp.where((((at >> k) ^ (at >> (k - 1 - t))) & 1) == 0,     # ascending where bit k is 0
                           tp.minimum(key, other), tp.maximum(key, other))
    rows = r0 + tp.arange(RB)
    if PICK < 0:
        idx = tp.reshape(key, (RB, 1 << L), layout=flat) & ((1 << L) - 1)
        if WRITE_I:                                  # (a sort whose indices nothing reads leaves I alone)
            tp.store(I[r0:r0 + RB, 0:1 << L], idx)
        tp.store(V[r0:r0 + RB, 0:1 << L], tp.load(X[(r0 + tp.arange(RB, layout=tp.blocked((RB,), THREADS)))
                                                    [:, None] + 0 * idx, idx], mask=pos < X.shape[1]))
    else:                                            # only position PICK of each row (median, kthvalue)
        keys = tp.reshape(key, (RB, 1 << L), layout=flat)
        one = tp.min(tp.where(pos == PICK, keys, 0x7FFFFFFFFFFFFFFF), axis=1, keepdims=True)
        if NAN_FIRST and FLOAT and not DESC:         # a row holding a NaN: its first NaN (torch.median)
            nan = tp.min(tp.where((keys >> L) == 0x7FC00000, keys, 0x7FFFFFFFFFFFFFFF), axis=1, keepdims=True)
            one = tp.where(nan != 0x7FFFFFFFFFFFFFFF, nan, one)
        one = one & ((1 << L) - 1)
        if WRITE_I:
            tp.store(I[r0:r0 + RB, 0:1], one)
        tp.store(V[r0:r0 + RB, 0:1], tp.load(X[rows[:, None] + 0 * one, one]))


def launch(x, values, indices, descending: bool = False, pick: int = -1, nan_first: bool = False, **kw):
    """Sort the rows of x (R, N) (float32 or int32; numpy or torch) into values (same dtype) and indices (int64),
    (R, N); with pick >= 0 only the element at that position of each sorted row, (R, 1) (nan_first: a row with
    a NaN gives its first NaN instead, as torch.median)."""
    n = int(x.shape[1])
    L, VB, threads, rb = shape_of(n)
    is_float = str(x.dtype) in ("float32", "torch.float32")
    as_i32 = (lambda a: a.view(np.int32)) if isinstance(x, np.ndarray) else (lambda a: a.view(dtype=_torch_i32()))
    return sort_rows[(tp.cdiv(int(x.shape[0]), rb),)](as_i32(x), as_i32(values), indices, L=L, VB=VB,
                                                       THREADS=threads, RB=rb, FLOAT=is_float,
                                                       DESC=bool(descending), PICK=pick,
                                                       NAN_FIRST=bool(nan_first), **kw)


def _torch_i32():
    import torch

    return torch.int32


def reference(x, descending: bool = False):
    """(values, indices) of a stable sort of each row, NaN largest (torch's order), in float64 / int64."""
    x = np.asarray(x)
    key = np.where(np.isnan(x), np.inf, x).astype(np.float64)
    nan = np.isnan(x)
    if descending:
        order = np.lexsort((np.arange(x.shape[1])[None, :].repeat(x.shape[0], 0), -key, ~nan), axis=1)
    else:
        order = np.lexsort((np.arange(x.shape[1])[None, :].repeat(x.shape[0], 0), key, nan), axis=1)
    return np.take_along_axis(x, order, 1), order


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 1000)).astype(np.float32)
    v, i = np.empty_like(x), np.empty(x.shape, np.int64)
    launch(x, v, i)
    rv, ri = reference(x)
    print("values equal:", np.array_equal(v, rv), " indices equal:", np.array_equal(i, ri))
