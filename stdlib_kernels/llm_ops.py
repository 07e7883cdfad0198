"""Fused LLM ops, each one memory-bound kernel (bf16 tensors, f32 arithmetic; f32 variants by retyping):

* `silu_and_mul`: y = silu(x[:, :d]) * x[:, d:] (the gated MLP's activation), x read as (M, 2, d);
* `fused_add_rmsnorm`: residual = x + residual (in the residual's dtype, both written); y = rmsnorm(residual) * w;
* `layer_norm`: y = (x - mean) / sqrt(var + eps) * w + b (biased variance, as torch);
* `merge_attn_states_lse`: merge two partial attention outputs over disjoint key sets with their log-sum-exps
  (split-KV decode): o = (e^{l_p} o_p + e^{l_s} o_s) / (e^{l_p} + e^{l_s}), l = log(e^{l_p} + e^{l_s});
* `rotary_neox` / `rotary_gptj`: rotary embedding of q and k in place, cos/sin cache indexed by positions; the
  neox style rotates the halves (x[:r/2], x[r/2:r]), the GPT-J style the interleaved pairs (x[2i], x[2i+1]).

Row ops put one row per block (the whole row in one register tile, 16-byte vectors), the style of
`rmsnorm.py`/`softmax.py`. Each kernel states its data flow as tag assertions (`tilepy-verify` proves them):
which input elements meet in every output element. Tag tuples follow the expression tree: a binary op is
(left, right), a unary op (arg,), a reduction stands for every element it reduced, a scalar is None.
"""

import numpy as np

import tilepy as tp


def _threads(c):
    return c["THREADS"]


# ---------------------------------------------------------------- silu_and_mul


@tp.kernel(threads=_threads)
def silu_and_mul(X: tp.Tensor[tp.bf16, "M", 2, "D"], Y: tp.Tensor[tp.bf16, "M", "D"], BLOCK: tp.constexpr = 2048,
                 THREADS: tp.constexpr = 256):
    c0 = tp.block_id(0) * BLOCK
    row = tp.block_id(1)
    tp.tag(X, lambda i, h, j: ("x", i, h, j))
    gate = tp.load(X[row, 0, c0:c0 + BLOCK]).to(tp.f32)
    up = tp.load(X[row, 1, c0:c0 + BLOCK]).to(tp.f32)
    y = tp.silu(gate) * up
    # y[j] = silu(x[i, 0, j]) * x[i, 1, j]: the gate half and the up half of the same row and column
    tp.assert_tag(y, lambda t: (t[0][0][1] == t[1][1] and t[0][0][3] == t[1][3] and t[0][0][2] == 0
                                and t[1][2] == 1), message="gate and up of the same row and column")
    tp.store(Y[row, c0:c0 + BLOCK], y)


# ---------------------------------------------------------------- fused_add_rmsnorm


def _row_threads(c):
    """THREADS, or (0) 8 values a thread: 512 threads for a row of 4096, between 128 and 1024 (H100, rows of
    4096 bf16: 128 / 256 / 512 threads gave 84.0 / 91.7 / 96.1% of copy for fused_add_rmsnorm and 58.9 / 73.6 /
    85.6% for layer_norm: the fewer registers a row takes, the more rows an SM keeps in flight)."""
    return c["THREADS"] or min(1024, max(128, c["BLOCK_N"] // 8))


def _row_min_blocks(c):
    """MIN_BLOCKS, or (-1) as many blocks per SM as make 2048 threads where a thread holds at most 8 values of a
    row of at least 1024 (one row a block): the register budget of full occupancy, 32 a thread, which ptxas
    otherwise overshoots by 2-4 registers (layer_norm EVEN 34, fused_add_rmsnorm 36 at 512 threads: 3 blocks per
    SM, not 4); NVRTC 13.0 fits both in 32 without spilling. (Shorter rows and the f32 variants would spill.)"""
    if c["MIN_BLOCKS"] >= 0:
        return c["MIN_BLOCKS"]
    t = _row_threads(c)
    return 2048 // t if 1024 <= c["BLOCK_N"] <= 8 * t and c.get("ROWS", 1) == 1 else 0


def _warp_rows(n, threads):
    """The row tile (n,) of `_row` seen as (warps, n / warps): row w is warp w's 8 * 32 values, every thread and
    value slot holding the element it holds in `_row(n, threads)` (so `tp.reshape` moves no data), and a sum
    along axis 1 stays inside each warp (shuffles). Only for n == 8 * threads (one vector a thread)."""
    return tp.blocked((threads // 32, n // (threads // 32)), threads, vec=8)


def _lanes(threads):
    """A (warps,) tile of per-warp partial sums in every warp: lane l holds warp l % warps's (the other lanes and
    warps replicate), so a sum along axis 0 is a few shuffles. `tp.convert_layout` into it is one shared store a
    warp, a barrier and one shared load a thread; the renderer's own cross-warp step reads all the warps'
    partials in every thread (16 loads and adds at 512 threads)."""
    w = threads // 32
    return tp.TVLayout((w,), (w, 32 // w, w), (1,), (((1, 0, 0), (0,)),), "lanes")


def _row(n, threads):
    """The layout of every row tile: 8 contiguous elements per thread (16 bytes of bf16), so bf16 and f32 tiles,
    the index tile and the weights all agree and elementwise ops stay in registers."""
    return tp.blocked((n,), threads, vec=8)


@tp.kernel(threads=_row_threads, min_blocks=_row_min_blocks)
def fused_add_rmsnorm(X: tp.Tensor[tp.bf16, "M", "N"], RES: tp.Tensor[tp.bf16, "M", "N"], W: tp.Tensor[tp.bf16, "N"],
                      Y: tp.Tensor[tp.bf16, "M", "N"], RES_OUT: tp.Tensor[tp.bf16, "M", "N"], eps: tp.f32,
                      BLOCK_N: tp.constexpr = 4096, THREADS: tp.constexpr = 0, MIN_BLOCKS: tp.constexpr = -1,
                      WARP_SUMS: tp.constexpr = False):
    row = tp.block_id(0)
    tp.tag(X, lambda i, j: ("x", i, j))
    tp.tag(RES, lambda i, j: ("r", i, j))
    tp.tag(W, lambda j: ("w", j))
    lay = _row(BLOCK_N, tp.num_threads())
    r = tp.load(X[row, 0:BLOCK_N], layout=lay) + tp.load(RES[row, 0:BLOCK_N], layout=lay)   # in their dtype
    tp.store(RES_OUT[row, 0:BLOCK_N], r)
    rf = r.to(tp.f32)                                                 # columns past N are 0: add nothing
    if WARP_SUMS and BLOCK_N == 8 * tp.num_threads():   # per-warp sums, then across the warps (see `_lanes`)
        ws = tp.sum(tp.reshape(rf * rf, (tp.num_threads() // 32, BLOCK_N * 32 // tp.num_threads()),
                               layout=_warp_rows(BLOCK_N, tp.num_threads())), axis=1)
        ms = tp.sum(tp.convert_layout(ws, _lanes(tp.num_threads())), axis=0, keepdims=True) / X.shape[1]
    else:
        ms = tp.sum(rf * rf, axis=0, keepdims=True) / X.shape[1]
    y = rf * tp.rsqrt(ms + eps) * tp.load(W[0:BLOCK_N], layout=lay).to(tp.f32)
    # tag of y[j]: ((r_j, rsqrt((sum_k r_k r_k) / n + eps)), w_j), r_j = (x[i, j], res[i, j])
    tp.assert_tag(y, lambda t: (t[0][0][0][1] == t[0][0][1][1] and t[0][0][0][2] == t[0][0][1][2]
                                and t[0][0][0][2] == t[1][1]), message="x, residual and w of the same column")
    tp.assert_tag(y, lambda t: (t[0][1][0][0][0][0][0][1] == t[0][0][0][1]
                                and t[0][1][0][0][0][1][1][1] == t[0][0][0][1]),
                  message="the mean square reads this row only")
    tp.store(Y[row, 0:BLOCK_N], y)


# ---------------------------------------------------------------- layer_norm


@tp.kernel(threads=_row_threads, min_blocks=_row_min_blocks)
def layer_norm(X: tp.Tensor[tp.bf16, "M", "N"], W: tp.Tensor[tp.bf16, "N"], B: tp.Tensor[tp.bf16, "N"],
               Y: tp.Tensor[tp.bf16, "M", "N"], eps: tp.f32, BLOCK_N: tp.constexpr = 4096,
               THREADS: tp.constexpr = 0, ONE_PASS: tp.constexpr = False, ROWS: tp.constexpr = 1,
               EVEN: tp.constexpr = False, MIN_BLOCKS: tp.constexpr = -1, WARP_SUMS: tp.constexpr = False):
    """ONE_PASS: the variance as E[x^2] - mean^2 (both sums in one pass; relative error about 2^-24 (mean / std)^2,
    below bf16's rounding while |mean| < ~100 std); otherwise the centred two-pass form. (w and b are loaded
    after the reductions: loaded with x they cost 22 more registers a thread, 2 blocks of 512 per SM, not 4.)
    ROWS: rows ROWS * block .. of one block, one after the other, the next row's x loaded before this row's
    reductions (its loads stay in flight through the two block reductions, the w / b loads and the store; rows
    past M read nothing and store nothing: the view's bounds).
    EVEN: the row is exactly BLOCK_N long (the launch checks), so the centred values need no mask (x past the row
    would be 0 and x - mean not): no index tile, compare or select per element.
    WARP_SUMS (where a thread holds one 8-wide vector of the row; with ONE_PASS too): each block sum as per-warp sums
    (shuffles) and one exchange of the warps' partials (`_lanes`) instead of the renderer's cross-warp step;
    `launch_layer_norm`'s default (H100, 32768 x 4096: 88.6-89.0% of copy against 85.3-86.2% without; ONE_PASS
    with it 89.2-90.0%, not the default: its variance loses (mean / std)^2 x 2^-24)."""
    row0 = tp.block_id(0) * ROWS
    n = X.shape[1]
    WARPS = tp.num_threads() // 32
    SPLIT_SUMS = WARP_SUMS and BLOCK_N == 8 * tp.num_threads()
    tp.tag(X, lambda i, j: ("x", i, j))
    tp.tag(W, lambda j: ("w", j))
    tp.tag(B, lambda j: ("b", j))
    lay = _row(BLOCK_N, tp.num_threads())
    xn = tp.load(X[row0, 0:BLOCK_N], layout=lay)
    for r in tp.static_range(ROWS):
        row = row0 + r
        x = xn.to(tp.f32)
        if r + 1 < ROWS:
            xn = tp.load(X[row + 1, 0:BLOCK_N], layout=lay)
        if SPLIT_SUMS:   # per-warp sums, then across the warps in shuffles (see `_lanes`)
            ws = tp.sum(tp.reshape(x, (WARPS, BLOCK_N // WARPS), layout=_warp_rows(BLOCK_N, tp.num_threads())), axis=1)
            mean = tp.sum(tp.convert_layout(ws, _lanes(tp.num_threads())), axis=0, keepdims=True) / n
        else:
            mean = tp.sum(x, axis=0, keepdims=True) / n
        if EVEN:
            d = x - mean                                                            # no column past the row
        else:
            d = tp.where(tp.arange(BLOCK_N, layout=lay) < n, x - mean, 0.0)          # centred; 0 past the row
        if ONE_PASS and SPLIT_SUMS:     # both sums per warp first: the second does not wait on the first's exchange
            wq = tp.sum(tp.reshape(x * x, (WARPS, BLOCK_N // WARPS), layout=_warp_rows(BLOCK_N, tp.num_threads())),
                        axis=1)
            var = tp.maximum(tp.sum(tp.convert_layout(wq, _lanes(tp.num_threads())), axis=0, keepdims=True) / n
                             - mean * mean, 0.0)
        elif ONE_PASS:
            var = tp.maximum(tp.sum(x * x, axis=0, keepdims=True) / n - mean * mean, 0.0)
        else:
            if SPLIT_SUMS:
                wv = tp.sum(tp.reshape(d * d, (WARPS, BLOCK_N // WARPS), layout=_warp_rows(BLOCK_N, tp.num_threads())),
                            axis=1)
                var = tp.sum(tp.convert_layout(wv, _lanes(tp.num_threads())), axis=0, keepdims=True) / n
            else:
                var = tp.sum(d * d, axis=0, keepdims=True) / n
        y = d * tp.rsqrt(var + eps) * tp.load(W[0:BLOCK_N], layout=lay).to(tp.f32) \
            + tp.load(B[0:BLOCK_N], layout=lay).to(tp.f32)
        # tag of y[j]: (((d_j, rsqrt(...)), w_j), b_j) with d_j = (mask, (x[i, j], mean)), or (x[i, j], mean) when
        # EVEN: x, w, b of one column
        if EVEN:
            tp.assert_tag(y, lambda t: t[0][0][0][0][2] == t[0][1][1] and t[1][1] == t[0][1][1],
                          message="x, w and b of the same column")
            if ONE_PASS:
                tp.assert_tag(y, lambda t: (t[0][0][0][1][0][1] == t[0][0][0][0][1]
                                            and t[0][0][1][0][0][0][0][0][0][1] == t[0][0][0][0][1]),
                              message="the mean and the mean square read this row only")
            else:
                tp.assert_tag(y, lambda t: (t[0][0][0][1][0][1] == t[0][0][0][0][1]
                                            and t[0][0][1][0][0][0][0][0][1] == t[0][0][0][0][1]),
                              message="the mean and the variance read this row only")
        else:
            tp.assert_tag(y, lambda t: t[0][0][0][1][0][2] == t[0][1][1] and t[1][1] == t[0][1][1],
                          message="x, w and b of the same column")
            if ONE_PASS:   # the variance's tag: max(sum(x x) / n - mean mean, 0) + eps
                tp.assert_tag(y, lambda t: (t[0][0][0][1][1][0][1] == t[0][0][0][1][0][1]
                                            and t[0][0][1][0][0][0][0][0][0][1] == t[0][0][0][1][0][1]),
                              message="the mean and the mean square read this row only")
            else:
                tp.assert_tag(y, lambda t: (t[0][0][0][1][1][0][1] == t[0][0][0][1][0][1]
                                            and t[0][0][1][0][0][0][0][1][0][1] == t[0][0][0][1][0][1]),
                              message="the mean and the variance read this row only")
        tp.store(Y[row, 0:BLOCK_N], y)


def _ring_min_blocks(c):
    return c["MIN_BLOCKS"] or None


@tp.kernel(threads=_row_threads, min_blocks=_ring_min_blocks)
def layer_norm_ring(X: tp.Tensor[tp.bf16, "M", "N"], W: tp.Tensor[tp.bf16, "N"], B: tp.Tensor[tp.bf16, "N"],
                    Y: tp.Tensor[tp.bf16, "M", "N"], eps: tp.f32, BLOCK_N: tp.constexpr = 4096,
                    THREADS: tp.constexpr = 0, STAGES: tp.constexpr = 3, MIN_BLOCKS: tp.constexpr = 2):
    """`layer_norm` (EVEN, WARP_SUMS, the centred two-pass variance) on a grid of a few blocks per
    multiprocessor, block b normalizing rows b, b + G, b + 2G, ... (G = the grid), each row brought into shared
    memory by a bulk tensor copy (TMA) STAGES - 1 rows ahead through a ring of STAGES row buffers: the rows in
    flight wait in shared memory, not in registers, so an SM keeps (STAGES - 1) x blocks x 8 KB of x loading
    while its threads reduce and store (one block a row holds at most 16 bytes a thread in flight: 32 KB an SM
    at 2048 threads). empty[s] hands a buffer back to the copy once the block has read it.
    Rows of exactly BLOCK_N = 8 x THREADS elements (the launch checks). w and b are loaded once, before the
    rows. MIN_BLOCKS: the register bound (2 blocks of 512 threads an SM: 56 registers, no spills; at 4 the loop's
    state spills)."""
    g = tp.num_blocks(0)
    b = tp.block_id(0)
    n = X.shape[1]
    WARPS = tp.num_threads() // 32
    rows = tp.cdiv(X.shape[0] - b, g)                 # this block's rows: b + i * g for i < rows
    tp.tag(X, lambda i, j: ("x", i, j))
    tp.tag(W, lambda j: ("w", j))
    tp.tag(B, lambda j: ("b", j))
    lay = _row(BLOCK_N, tp.num_threads())
    w16 = tp.load(W[0:BLOCK_N], layout=lay)
    b16 = tp.load(B[0:BLOCK_N], layout=lay)
    x_s = tp.shared((BLOCK_N,), tp.bf16, stages=STAGES)
    full = tp.mbarrier(1, stages=STAGES)              # full[s]: the row copied into buffer s has landed
    empty = tp.mbarrier(1, stages=STAGES)             # empty[s]: the block has read buffer s
    for s in tp.static_range(STAGES - 1):             # the first STAGES - 1 rows
        if s < rows:
            tp.copy_bulk(X[b + s * g, 0:BLOCK_N], x_s[s], full[s])
            tp.mbarrier_arrive(full[s])
    for i in range(rows):
        row = b + i * g
        if i + STAGES - 1 < rows:                     # row i + STAGES - 1 into the buffer row i - 1 read
            if i >= 1:
                tp.mbarrier_wait(empty[(i + STAGES - 1) % STAGES], (i - 1) // STAGES)
            tp.copy_bulk(X[row + (STAGES - 1) * g, 0:BLOCK_N], x_s[(i + STAGES - 1) % STAGES],
                         full[(i + STAGES - 1) % STAGES])
            tp.mbarrier_arrive(full[(i + STAGES - 1) % STAGES])
        tp.mbarrier_wait(full[i % STAGES], i // STAGES)
        x = tp.load(x_s[i % STAGES], layout=lay).to(tp.f32)
        tp.mbarrier_arrive(empty[i % STAGES])         # (the block's threads arrive as one)
        tp.assert_tag(x, lambda t, r: t[1] == r, at=(row,), message="the buffer holds this block's row i")
        ws = tp.sum(tp.reshape(x, (WARPS, BLOCK_N // WARPS), layout=_warp_rows(BLOCK_N, tp.num_threads())), axis=1)
        mean = tp.sum(tp.convert_layout(ws, _lanes(tp.num_threads())), axis=0, keepdims=True) / n
        d = x - mean
        wv = tp.sum(tp.reshape(d * d, (WARPS, BLOCK_N // WARPS), layout=_warp_rows(BLOCK_N, tp.num_threads())),
                    axis=1)
        var = tp.sum(tp.convert_layout(wv, _lanes(tp.num_threads())), axis=0, keepdims=True) / n
        y = d * tp.rsqrt(var + eps) * w16.to(tp.f32) + b16.to(tp.f32)
        tp.assert_tag(y, lambda t: t[0][0][0][0][2] == t[0][1][1] and t[1][1] == t[0][1][1],
                      message="x, w and b of the same column")
        tp.assert_tag(y, lambda t: (t[0][0][0][1][0][1] == t[0][0][0][0][1]
                                    and t[0][0][1][0][0][0][0][0][1] == t[0][0][0][0][1]),
                      message="the mean and the variance read this row only")
        tp.store(Y[row, 0:BLOCK_N], y)


# ---------------------------------------------------------------- merge_attn_states_lse


@tp.kernel(threads=_threads)
def merge_attn_states_lse(PO: tp.Tensor[tp.bf16, "R", "D"], PL: tp.Tensor[tp.f32, "R"],
                          SO: tp.Tensor[tp.bf16, "R", "D"], SL: tp.Tensor[tp.f32, "R"],
                          O: tp.Tensor[tp.bf16, "R", "D"], OL: tp.Tensor[tp.f32, "R"],
                          BR: tp.constexpr = 16, BD: tp.constexpr = 128, THREADS: tp.constexpr = 128):
    """Rows are (token, head) pairs. l = -inf marks an empty partial (weight 0); a row whose two partials are
    both empty is 0 with l = -inf. The lse tiles are loaded in the layout of the rows each thread holds of the
    output tile, so the weights broadcast in registers."""
    r0 = tp.block_id(0) * BR
    tp.tag(PO, lambda r, c: ("po", r, c))
    tp.tag(SO, lambda r, c: ("so", r, c))
    tp.tag(PL, lambda r: ("pl", r))
    tp.tag(SL, lambda r: ("sl", r))
    tile = tp.blocked((BR, BD), THREADS, vec=8)
    rows = _rows_of(tile)
    # the partial outputs first: the weights' exp waits on the lse loads, and an instruction stream issued in
    # order would hold the output loads behind it (two DRAM round trips a block instead of one)
    po = tp.load(PO[r0:r0 + BR, 0:BD], layout=tile)
    so = tp.load(SO[r0:r0 + BR, 0:BD], layout=tile)
    pl = tp.load(PL[r0:r0 + BR], layout=rows)[:, None]
    sl = tp.load(SL[r0:r0 + BR], layout=rows)[:, None]
    m = tp.maximum(tp.maximum(pl, sl), -3.0e38)      # finite: two empty partials give exp(-inf) = 0 below
    tp.assert_tag(m, lambda t: t[0][0][1] == t[0][1][1], message="both log-sum-exps of one row")
    pe = tp.exp(pl - m)
    se = tp.exp(sl - m)
    tot = pe + se                                     # >= 1 unless both partials are empty (then 0)
    inv = 1.0 / tp.maximum(tot, 1.0)
    o = po.to(tp.f32) * (pe * inv) + so.to(tp.f32) * (se * inv)
    # tag of o[r, c]: ((po, (pe, inv)), (so, (se, inv))), pe = ((pl, m),): one row, one column, that row's weights
    tp.assert_tag(o, lambda t: (t[0][0][1] == t[1][0][1] and t[0][0][2] == t[1][0][2]),
                  message="both partial outputs at the same row and column")
    tp.assert_tag(o, lambda t: (t[0][1][0][0][0][1] == t[0][0][1] and t[1][1][0][0][0][1] == t[0][0][1]
                                and t[0][1][0][0][1][0][0][1] == t[0][0][1]),
                  message="the weights are this row's")
    tp.store(O[r0:r0 + BR, 0:BD], o)
    tp.store(OL[r0:r0 + BR], tp.sum(tp.log(tot) + m, axis=1))


def _rows_of(tv):
    """The (rows,) layout holding, in every thread, the rows that thread holds of the 2-D tile `tv`."""
    return tp.TVLayout(tv.tile[:1], tv.thread_shape, tv.value_shape, tv.strides[:1], "rows")


# ---------------------------------------------------------------- rotary embedding


def _pairs(bh, bhalf, threads=128):
    """Layout of a (bh, bhalf, 2) tile of interleaved pairs: each thread holds 4 whole pairs (16 bytes of
    bf16), consecutive threads the next pairs of a row; rows repeat over the values past the threads."""
    tpr = max(bhalf // 4, 1)                    # threads along one row of pairs
    per = min(4, bhalf)                         # pairs per thread
    tr = max(min(bh, threads // tpr), 1)        # rows covered by the threads at once
    spare = threads // (tpr * tr)
    reps = bh // tr
    return tp.TVLayout(
        (bh, bhalf, 2), (tpr, tr, spare), (2, per, reps),
        (((0, 1, 0), (0, 0, tr)), ((per, 0, 0), (0, 1, 0)), ((0, 0, 0), (1, 0, 0))), "pairs")


@tp.kernel(threads=_threads)
def rotary_neox(POS: tp.Tensor[tp.i64, "T"], Q: tp.Tensor[tp.bf16, "T", "HQ", "HD"],
                K: tp.Tensor[tp.bf16, "T", "HK", "HD"], CS: tp.Tensor[tp.f32, "P", "ROT"],
                QO: tp.Tensor[tp.bf16, "T", "HQ", "HD"], KO: tp.Tensor[tp.bf16, "T", "HK", "HD"],
                HALF: tp.constexpr = 64, BHALF: tp.constexpr = 64, BHQ: tp.constexpr = 32, BHK: tp.constexpr = 8,
                THREADS: tp.constexpr = 128, SPLIT: tp.constexpr = False, EARLY_K: tp.constexpr = False,
                KVEC: tp.constexpr = 8):
    """One token per block: all of its q heads, then all of its k heads; with SPLIT, grid (T, cdiv(HQ, BHQ) +
    cdiv(HK, BHK)): block (t, hb) rotates q heads hb * BHQ.. (hb < cdiv(HQ, BHQ)), else BHK k heads (more, smaller
    blocks in flight). CS[p] is (cos[0:HALF], sin[0:HALF]) for position p; columns from 2 * HALF up (partial
    rotary) are left as they are. QO/KO may be Q/K.
    The q loads come before the cos/sin gathers, which wait on the position's load: issued in order, the other
    way round the q loads would start only after the position arrived (two DRAM round trips before any math).
    Without SPLIT the block index along heads is the constant 0, so the q and k parts are straight-line code.
    EARLY_K (without SPLIT): k's loads are issued with q's, before q's math. KVEC: the k tiles' vector width; at
    8 a (BHK, BHALF) = (8, 64) tile fills only 64 of 128 threads and the rest hold copies (twice the k registers
    and math): KVEC 4 (128 threads) or 2 (256) spreads it over all threads (NVRTC: EARLY_K 96 -> 80 registers at
    128 threads, 256 threads with EARLY_K 64). Both slower on the H100 (2026-11-24: EARLY_K 70.3-70.4% of copy, KVEC
    70.9-76.0%, against 80.2-80.5% for the default one block a token of 128 threads)."""
    t = tp.block_id(0)
    hb = tp.block_id(1) if SPLIT else 0
    qb = tp.cdiv(Q.shape[1], BHQ) if SPLIT else 1      # blocks hb < qb rotate q heads, blocks hb >= kb0 k heads
    kb0 = qb if SPLIT else 0
    hq0 = hb * BHQ
    hk0 = (hb - kb0) * BHK
    tp.tag(Q, lambda i, h, j: ("q", i, h, j))
    tp.tag(K, lambda i, h, j: ("k", i, h, j))
    tp.tag(CS, lambda p, j: ("cs", p, j))
    lx = tp.blocked((BHQ, BHALF), THREADS, vec=8)
    lkx = tp.blocked((BHK, BHALF), THREADS, vec=KVEC)
    lc = _bcast(lx, (1, BHALF))                                        # cos/sin where each thread uses them
    j = tp.arange(BHALF)
    keep = (j < HALF)[None, :]
    p = tp.load(POS[t:t + 1])
    if hb < qb:
        x1 = tp.load(Q[t, hq0:hq0 + BHQ, 0:BHALF], layout=lx)
        x2 = tp.load(Q[t, hq0:hq0 + BHQ, HALF:HALF + BHALF], layout=lx)
        if EARLY_K:
            y1 = tp.load(K[t, hk0:hk0 + BHK, 0:BHALF], layout=lkx)
            y2 = tp.load(K[t, hk0:hk0 + BHK, HALF:HALF + BHALF], layout=lkx)
        cos = tp.load(CS[p[:, None], j[None, :]], mask=keep, layout=lc)
        sin = tp.load(CS[p[:, None], j[None, :] + HALF], mask=keep, layout=lc)
        o1 = x1.to(tp.f32) * cos - x2.to(tp.f32) * sin
        o2 = x2.to(tp.f32) * cos + x1.to(tp.f32) * sin
        # o1[h, j] = x[h, j] cos[j] - x[h, j + HALF] sin[j]: the pair is of one token and head (cos/sin are
        # gathered at a loaded position, which tags do not follow, so they stay out of the assertion)
        tp.assert_tag(x1 - x2, lambda t: (t[0][1] == t[1][1] and t[0][2] == t[1][2]
                                     and t[1][3] == t[0][3] + HALF), message="neox pairs, q")
        tp.store(QO[t, hq0:hq0 + BHQ, 0:BHALF], o1, mask=keep)
        tp.store(QO[t, hq0:hq0 + BHQ, HALF:HALF + BHALF], o2, mask=keep)
    if hb >= kb0:
        if not EARLY_K:
            y1 = tp.load(K[t, hk0:hk0 + BHK, 0:BHALF], layout=lkx)
            y2 = tp.load(K[t, hk0:hk0 + BHK, HALF:HALF + BHALF], layout=lkx)
        if SPLIT:                                                       # a k block has no cos / sin yet
            cos = tp.load(CS[p[:, None], j[None, :]], mask=keep, layout=lc)
            sin = tp.load(CS[p[:, None], j[None, :] + HALF], mask=keep, layout=lc)
        p1 = y1.to(tp.f32) * cos - y2.to(tp.f32) * sin
        tp.assert_tag(y1 - y2, lambda t: (t[0][1] == t[1][1] and t[0][2] == t[1][2]
                                     and t[1][3] == t[0][3] + HALF), message="neox pairs, k")
        tp.store(KO[t, hk0:hk0 + BHK, 0:BHALF], p1, mask=keep)
        tp.store(KO[t, hk0:hk0 + BHK, HALF:HALF + BHALF], y2.to(tp.f32) * cos + y1.to(tp.f32) * sin, mask=keep)


def _min_blocks(c):
    return c["MIN_BLOCKS"] or None


@tp.kernel(threads=_threads, min_blocks=_min_blocks)
def rotary_neox_stream(POS: tp.Tensor[tp.i64, "T"], Q: tp.Tensor[tp.bf16, "T", "HQ", "HD"],
                       K: tp.Tensor[tp.bf16, "T", "HK", "HD"], CS: tp.Tensor[tp.f32, "P", "ROT"],
                       QO: tp.Tensor[tp.bf16, "T", "HQ", "HD"], KO: tp.Tensor[tp.bf16, "T", "HK", "HD"],
                       HALF: tp.constexpr = 64, BHALF: tp.constexpr = 64, BHQ: tp.constexpr = 32,
                       BHK: tp.constexpr = 8, THREADS: tp.constexpr = 256, MIN_BLOCKS: tp.constexpr = 0,
                       PREFETCH: tp.constexpr = False):
    """`rotary_neox` on a grid smaller than the tokens: block b rotates tokens b, b + G, b + 2G, ... (G = the
    grid), all q and k heads of one token an iteration. The next token's position is loaded one iteration ahead,
    so every load of an iteration (q, k, and cos/sin gathered at the position already in registers) is issued
    before any of its arithmetic: one memory round trip a token, where one block a token waits for the position,
    then for cos/sin, then (k after q's stores) for k. Rows past the tokens read nothing and store nothing.
    PREFETCH: the next token's q and k are loaded one iteration ahead too (two tokens' data in flight a block;
    an iteration waits only for its cos/sin).
    Opt-in, measured slower (H100, 32768 tokens of 32 q + 8 k heads of 128: 50-69% of copy against 80.5% for one
    block a token; results/llm_ops-*-rotary-stream.json): the loop's hoisted addresses and bounds take 80-120
    registers, so an SM keeps 2-5 blocks (512-640 threads) where one block a token keeps 7 of 128; what limits
    these kernels is the loads an SM has in flight, not the position's round trip."""
    g = tp.num_blocks(0)
    tp.tag(Q, lambda i, h, j: ("q", i, h, j))
    tp.tag(K, lambda i, h, j: ("k", i, h, j))
    lx = tp.blocked((BHQ, BHALF), THREADS, vec=8)
    lkx = tp.blocked((BHK, BHALF), THREADS, vec=8)
    lc = _bcast(lx, (1, BHALF))                                        # cos/sin where each thread uses them
    j = tp.arange(BHALF)
    keep = (j < HALF)[None, :]
    b = tp.block_id(0)
    pn = tp.load(POS[b:b + 1])
    if PREFETCH:
        x1n = tp.load(Q[b, 0:BHQ, 0:BHALF], layout=lx)
        x2n = tp.load(Q[b, 0:BHQ, HALF:HALF + BHALF], layout=lx)
        y1n = tp.load(K[b, 0:BHK, 0:BHALF], layout=lkx)
        y2n = tp.load(K[b, 0:BHK, HALF:HALF + BHALF], layout=lkx)
    for t in range(b, Q.shape[0], g):
        p = pn
        if PREFETCH:
            x1 = x1n
            x2 = x2n
            y1 = y1n
            y2 = y2n
            x1n = tp.load(Q[t + g, 0:BHQ, 0:BHALF], layout=lx)
            x2n = tp.load(Q[t + g, 0:BHQ, HALF:HALF + BHALF], layout=lx)
            y1n = tp.load(K[t + g, 0:BHK, 0:BHALF], layout=lkx)
            y2n = tp.load(K[t + g, 0:BHK, HALF:HALF + BHALF], layout=lkx)
            # (the verifier summarizes a carried tile as a fold of every iteration's: the pairs are asserted as
            # loaded, the carry's hand-over is what the GPU tests check)
            tp.assert_tag(x1n - x2n, lambda t: (t[0][1] == t[1][1] and t[0][2] == t[1][2]
                                                and t[1][3] == t[0][3] + HALF), message="neox pairs, next q")
            tp.assert_tag(y1n - y2n, lambda t: (t[0][1] == t[1][1] and t[0][2] == t[1][2]
                                                and t[1][3] == t[0][3] + HALF), message="neox pairs, next k")
        else:
            x1 = tp.load(Q[t, 0:BHQ, 0:BHALF], layout=lx)
            x2 = tp.load(Q[t, 0:BHQ, HALF:HALF + BHALF], layout=lx)
            y1 = tp.load(K[t, 0:BHK, 0:BHALF], layout=lkx)
            y2 = tp.load(K[t, 0:BHK, HALF:HALF + BHALF], layout=lkx)
        cos = tp.load(CS[p[:, None], j[None, :]], mask=keep, layout=lc)
        sin = tp.load(CS[p[:, None], j[None, :] + HALF], mask=keep, layout=lc)
        pn = tp.load(POS[t + g:t + g + 1])                              # the next token's (past T: 0, unused)
        if not PREFETCH:
            tp.assert_tag(x1 - x2, lambda t: (t[0][1] == t[1][1] and t[0][2] == t[1][2]
                                              and t[1][3] == t[0][3] + HALF), message="neox pairs, q")
            tp.assert_tag(y1 - y2, lambda t: (t[0][1] == t[1][1] and t[0][2] == t[1][2]
                                              and t[1][3] == t[0][3] + HALF), message="neox pairs, k")
        tp.store(QO[t, 0:BHQ, 0:BHALF], x1.to(tp.f32) * cos - x2.to(tp.f32) * sin, mask=keep)
        tp.store(QO[t, 0:BHQ, HALF:HALF + BHALF], x2.to(tp.f32) * cos + x1.to(tp.f32) * sin, mask=keep)
        tp.store(KO[t, 0:BHK, 0:BHALF], y1.to(tp.f32) * cos - y2.to(tp.f32) * sin, mask=keep)
        tp.store(KO[t, 0:BHK, HALF:HALF + BHALF], y2.to(tp.f32) * cos + y1.to(tp.f32) * sin, mask=keep)


def _bcast(tv, shape):
    """`tv` (a layout of a tile of the same rank) with the axes where `shape` is 1 broadcast: every thread holds
    the elements of the axes kept that it holds of `tv`'s tile."""
    zero = (tuple(0 for _ in tv.thread_shape), tuple(0 for _ in tv.value_shape))
    return tp.TVLayout(tuple(shape), tv.thread_shape, tv.value_shape,
                       tuple(st if n > 1 else zero for n, st in zip(shape, tv.strides)), "broadcast")


def _as_pairs(tv):
    """The (rows, cols) layout `tv` (8-wide vectors along the columns) seen as a (rows, cols / 2, 2) tile of
    interleaved pairs: every thread and value slot holds the element of the same row-major index, so
    `tp.reshape(x, ..., layout=_as_pairs(tv))` moves no data."""
    (rts, rvs), (cts, cvs) = tv.strides
    n0 = tv.value_shape[0]
    if n0 % 2 or cvs[0] != 1 or rvs[0] != 0 or any(s % 2 for s in cts + cvs[1:]):
        raise ValueError(f"_as_pairs: {tv} does not hold whole pairs in its first value mode")
    zt, zv = tuple(0 for _ in cts), tuple(0 for _ in cvs[1:])
    return tp.TVLayout((tv.tile[0], tv.tile[1] // 2, 2), tv.thread_shape, (2, n0 // 2) + tv.value_shape[1:],
                       ((rts, (0, 0) + rvs[1:]), (tuple(s // 2 for s in cts), (0, 1) + tuple(s // 2 for s in cvs[1:])),
                        (zt, (1, 0) + zv)), "pairs")


def _cols_of(tv):
    """The (cols,) layout holding, in every thread, the columns that thread holds of the 2-D tile `tv`."""
    return tp.TVLayout(tv.tile[1:], tv.thread_shape, tv.value_shape, tv.strides[1:], "cols")


def _as_halves(tv):
    """The (rows, 2n) layout `tv` (8-wide vectors along the columns, the threads of a row first) seen as a
    (rows, 2, n) tile of halves: the threads along a row split into (threads of a half, 2), so every thread and
    value slot holds the element of the same row-major index (`tp.reshape(x, ..., layout=_as_halves(tv))` moves
    no data) and column j's partner j + n is held by the lane 8 / ... threads over: a sum along axis 1 is one
    shuffle."""
    (rts, rvs), (cts, cvs) = tv.strides
    tpr = tv.thread_shape[0]
    if cvs[0] != 1 or cts[0] != tv.value_shape[0] or any(cts[1:]) or tpr % 2 or tpr * tv.value_shape[0] != tv.tile[1]:
        raise ValueError(f"_as_halves: {tv} does not lay a row's columns over its first thread mode")
    half = tpr // 2
    zero_v = tuple(0 for _ in cvs)
    return tp.TVLayout((tv.tile[0], 2, tv.tile[1] // 2), (half, 2) + tv.thread_shape[1:], tv.value_shape,
                       (((0, 0) + rts[1:], rvs), ((0, 1) + tuple(0 for _ in cts[1:]), zero_v),
                        ((cts[0], 0) + cts[1:], cvs)), "halves")


@tp.kernel(threads=_threads)
def rotary_neox_rows(POS: tp.Tensor[tp.i64, "T"], Q: tp.Tensor[tp.bf16, "T", "HQ", "HD"],
                     K: tp.Tensor[tp.bf16, "T", "HK", "HD"], CS: tp.Tensor[tp.f32, "P", "ROT"],
                     QO: tp.Tensor[tp.bf16, "T", "HQ", "HD"], KO: tp.Tensor[tp.bf16, "T", "HK", "HD"],
                     HALF: tp.constexpr = 64, BHQ: tp.constexpr = 16, BHK: tp.constexpr = 8,
                     THREADS: tp.constexpr = 64, SPLIT: tp.constexpr = True):
    """neox rotary as `rotary_gptj` is laid out (for a power-of-two HALF): the rotated columns of each head loaded
    as one (heads, 2 * HALF) tile in 16-byte vectors, seen as (heads, 2, HALF) halves (`_as_halves`, no data
    moved); the partner of column j (j + HALF, or j - HALF) is (x_j + x_partner) - x_j, a sum along the halves
    (one shuffle; exact for bf16 data), and out = x cos + partner (-sin, +sin), cos / sin gathered at j % HALF.
    SPLIT: grid (T, q blocks + k blocks) of BHQ q heads or BHK k heads, as `rotary_gptj`."""
    t = tp.block_id(0)
    hb = tp.block_id(1) if SPLIT else 0
    qb = tp.cdiv(Q.shape[1], BHQ) if SPLIT else 1
    kb0 = qb if SPLIT else 0
    hq0 = hb * BHQ
    hk0 = (hb - kb0) * BHK
    tp.tag(Q, lambda i, h, j: ("q", i, h, j))
    tp.tag(K, lambda i, h, j: ("k", i, h, j))
    lq = tp.blocked((BHQ, 2 * HALF), THREADS, vec=8)
    lk = tp.blocked((BHK, 2 * HALF), THREADS, vec=8)
    c = tp.arange(2 * HALF, layout=_cols_of(lq))[None, :]                   # the columns each thread holds
    cj = tp.where(c < HALF, c, c - HALF)
    sign = tp.where(c < HALF, -1.0, 1.0)
    p = tp.load(POS[t:t + 1])
    if hb < qb:
        x = tp.load(Q[t, hq0:hq0 + BHQ, 0:2 * HALF], layout=lq).to(tp.f32)
        tp.assert_tag(x, lambda t, cc: t[3] == cc, at=(c,), message="column c of the head at tile column c, q")
        cos = tp.load(CS[p[:, None], cj], layout=_bcast(lq, (1, 2 * HALF)))
        sin = tp.load(CS[p[:, None], cj + HALF], layout=_bcast(lq, (1, 2 * HALF))) * sign
        x3 = tp.reshape(x, (BHQ, 2, HALF), layout=_as_halves(lq))
        xp = tp.reshape(tp.sum(x3, axis=1, keepdims=True) - x3, (BHQ, 2 * HALF), layout=lq)   # the partner
        # the partner is from the same token and head, HALF columns away (a reduction's tag stands for each
        # reduced element: both halves' columns j and j + HALF)
        tp.assert_tag(xp, lambda t: (t[0][1] == t[1][1] and t[0][2] == t[1][2] and t[0][3] % HALF == t[1][3] % HALF),
                      message="neox halves, q")
        tp.store(QO[t, hq0:hq0 + BHQ, 0:2 * HALF], x * cos + xp * sin)
    if hb >= kb0:
        y = tp.load(K[t, hk0:hk0 + BHK, 0:2 * HALF], layout=lk).to(tp.f32)
        tp.assert_tag(y, lambda t, cc: t[3] == cc, at=(c,), message="column c of the head at tile column c, k")
        kcos = tp.load(CS[p[:, None], cj], layout=_bcast(lk, (1, 2 * HALF)))
        ksin = tp.load(CS[p[:, None], cj + HALF], layout=_bcast(lk, (1, 2 * HALF))) * sign
        y3 = tp.reshape(y, (BHK, 2, HALF), layout=_as_halves(lk))
        yp = tp.reshape(tp.sum(y3, axis=1, keepdims=True) - y3, (BHK, 2 * HALF), layout=lk)
        tp.assert_tag(yp, lambda t: (t[0][1] == t[1][1] and t[0][2] == t[1][2] and t[0][3] % HALF == t[1][3] % HALF),
                      message="neox halves, k")
        tp.store(KO[t, hk0:hk0 + BHK, 0:2 * HALF], y * kcos + yp * ksin)


@tp.kernel(threads=_threads)
def rotary_gptj(POS: tp.Tensor[tp.i64, "T"], Q: tp.Tensor[tp.bf16, "T", "HQ", "HD"],
                K: tp.Tensor[tp.bf16, "T", "HK", "HD"], CS: tp.Tensor[tp.f32, "P", "ROT"],
                QO: tp.Tensor[tp.bf16, "T", "HQ", "HD"], KO: tp.Tensor[tp.bf16, "T", "HK", "HD"],
                HALF: tp.constexpr = 64, BHALF: tp.constexpr = 64, BHQ: tp.constexpr = 32, BHK: tp.constexpr = 8,
                THREADS: tp.constexpr = 128, SPLIT: tp.constexpr = False):
    """GPT-J style: pair i is (x[2i], x[2i + 1]), rotated by angle i. The heads are loaded as neox's are, (heads,
    2 * BHALF) tiles in 16-byte vectors, each thread holding whole pairs; seen as (heads, BHALF, 2) tiles (a
    reshape that moves no data: `_as_pairs`) a pair's partner is (x0 + x1) - x, in-thread (exact for bf16 data:
    the f32 sum of two bf16 values is exact), and out = x * cos + partner * (-sin, +sin), cos / sin gathered at
    column // 2. SPLIT: the heads over grid axis 1, as `rotary_neox`; the q loads come before the position's
    gathers, as there."""
    t = tp.block_id(0)
    hb = tp.block_id(1) if SPLIT else 0
    qb = tp.cdiv(Q.shape[1], BHQ) if SPLIT else 1
    kb0 = qb if SPLIT else 0
    hq0 = hb * BHQ
    hk0 = (hb - kb0) * BHK
    tp.tag(Q, lambda i, h, j: ("q", i, h, j))
    tp.tag(K, lambda i, h, j: ("k", i, h, j))
    lq = tp.blocked((BHQ, 2 * BHALF), THREADS, vec=8)
    lk = tp.blocked((BHK, 2 * BHALF), THREADS, vec=8)
    c = tp.arange(2 * BHALF, layout=_cols_of(lq))[None, :]                  # the columns each thread holds
    keep = c < 2 * HALF
    p = tp.load(POS[t:t + 1])
    if hb < qb:
        x = tp.load(Q[t, hq0:hq0 + BHQ, 0:2 * BHALF], layout=lq).to(tp.f32)
        cos = tp.load(CS[p[:, None], c // 2], mask=keep, layout=_bcast(lq, (1, 2 * BHALF)))
        sin = tp.load(CS[p[:, None], c // 2 + HALF], mask=keep, layout=_bcast(lq, (1, 2 * BHALF))) \
            * tp.where(c % 2 == 0, -1.0, 1.0)
        x3 = tp.reshape(x, (BHQ, BHALF, 2), layout=_as_pairs(lq))
        xp = tp.reshape(tp.sum(x3, axis=2, keepdims=True) - x3, (BHQ, 2 * BHALF), layout=lq)   # the partner
        # the partner is from the same token, head and pair (a reduction's tag stands for each reduced element)
        tp.assert_tag(xp, lambda t: (t[0][1] == t[1][1] and t[0][2] == t[1][2] and t[0][3] // 2 == t[1][3] // 2),
                      message="GPT-J pairs, q")
        tp.store(QO[t, hq0:hq0 + BHQ, 0:2 * BHALF], x * cos + xp * sin, mask=keep)
    if hb >= kb0:
        y = tp.load(K[t, hk0:hk0 + BHK, 0:2 * BHALF], layout=lk).to(tp.f32)
        kcos = tp.load(CS[p[:, None], c // 2], mask=keep, layout=_bcast(lk, (1, 2 * BHALF)))
        ksin = tp.load(CS[p[:, None], c // 2 + HALF], mask=keep, layout=_bcast(lk, (1, 2 * BHALF))) \
            * tp.where(c % 2 == 0, -1.0, 1.0)
        y3 = tp.reshape(y, (BHK, BHALF, 2), layout=_as_pairs(lk))
        yp = tp.reshape(tp.sum(y3, axis=2, keepdims=True) - y3, (BHK, 2 * BHALF), layout=lk)
        tp.assert_tag(yp, lambda t: (t[0][1] == t[1][1] and t[0][2] == t[1][2] and t[0][3] // 2 == t[1][3] // 2),
                      message="GPT-J pairs, k")
        tp.store(KO[t, hk0:hk0 + BHK, 0:2 * BHALF], y * kcos + yp * ksin, mask=keep)


@tp.kernel(threads=_threads, min_blocks=_min_blocks)
def rotary_gptj_stream(POS: tp.Tensor[tp.i64, "T"], Q: tp.Tensor[tp.bf16, "T", "HQ", "HD"],
                       K: tp.Tensor[tp.bf16, "T", "HK", "HD"], CS: tp.Tensor[tp.f32, "P", "ROT"],
                       QO: tp.Tensor[tp.bf16, "T", "HQ", "HD"], KO: tp.Tensor[tp.bf16, "T", "HK", "HD"],
                       HALF: tp.constexpr = 64, BHALF: tp.constexpr = 64, BHQ: tp.constexpr = 32,
                       BHK: tp.constexpr = 8, THREADS: tp.constexpr = 256, MIN_BLOCKS: tp.constexpr = 0):
    """`rotary_gptj` streamed as `rotary_neox_stream`: block b rotates tokens b, b + G, ... (G = the grid), the
    next token's position loaded one iteration ahead, so q, k and cos/sin of a token are in flight together.
    Opt-in, measured slower (61-81% of copy against 84.8% for the default blocks of 16 heads)."""
    g = tp.num_blocks(0)
    tp.tag(Q, lambda i, h, j: ("q", i, h, j))
    tp.tag(K, lambda i, h, j: ("k", i, h, j))
    lq = tp.blocked((BHQ, 2 * BHALF), THREADS, vec=8)
    lk = tp.blocked((BHK, 2 * BHALF), THREADS, vec=8)
    c = tp.arange(2 * BHALF, layout=_cols_of(lq))[None, :]                  # the columns each thread holds
    keep = c < 2 * HALF
    sign = tp.where(c % 2 == 0, -1.0, 1.0)
    pn = tp.load(POS[tp.block_id(0):tp.block_id(0) + 1])
    for t in range(tp.block_id(0), Q.shape[0], g):
        p = pn
        x = tp.load(Q[t, 0:BHQ, 0:2 * BHALF], layout=lq).to(tp.f32)
        y = tp.load(K[t, 0:BHK, 0:2 * BHALF], layout=lk).to(tp.f32)
        cos = tp.load(CS[p[:, None], c // 2], mask=keep, layout=_bcast(lq, (1, 2 * BHALF)))
        sin = tp.load(CS[p[:, None], c // 2 + HALF], mask=keep, layout=_bcast(lq, (1, 2 * BHALF))) * sign
        pn = tp.load(POS[t + g:t + g + 1])                              # the next token's (past T: 0, unused)
        x3 = tp.reshape(x, (BHQ, BHALF, 2), layout=_as_pairs(lq))
        xp = tp.reshape(tp.sum(x3, axis=2, keepdims=True) - x3, (BHQ, 2 * BHALF), layout=lq)   # the partner
        tp.assert_tag(xp, lambda t: (t[0][1] == t[1][1] and t[0][2] == t[1][2] and t[0][3] // 2 == t[1][3] // 2),
                      message="GPT-J pairs, q")
        tp.store(QO[t, 0:BHQ, 0:2 * BHALF], x * cos + xp * sin, mask=keep)
        y3 = tp.reshape(y, (BHK, BHALF, 2), layout=_as_pairs(lk))
        yp = tp.reshape(tp.sum(y3, axis=2, keepdims=True) - y3, (BHK, 2 * BHALF), layout=lk)
        tp.assert_tag(yp, lambda t: (t[0][1] == t[1][1] and t[0][2] == t[1][2] and t[0][3] // 2 == t[1][3] // 2),
                      message="GPT-J pairs, k")
        tp.store(KO[t, 0:BHK, 0:2 * BHALF], y * cos + yp * sin, mask=keep)


@tp.kernel(threads=_threads, min_blocks=_min_blocks)
def rotary_ring(POS: tp.Tensor[tp.i64, "T"], Q: tp.Tensor[tp.bf16, "T", "HQ", "HD"],
                K: tp.Tensor[tp.bf16, "T", "HK", "HD"], CS: tp.Tensor[tp.f32, "P", "ROT"],
                QO: tp.Tensor[tp.bf16, "T", "HQ", "HD"], KO: tp.Tensor[tp.bf16, "T", "HK", "HD"],
                HALF: tp.constexpr = 64, BHQ: tp.constexpr = 32, BHK: tp.constexpr = 8, THREADS: tp.constexpr = 256,
                STAGES: tp.constexpr = 3, NEOX: tp.constexpr = True, MIN_BLOCKS: tp.constexpr = 0,
                CS_SMEM: tp.constexpr = False):
    """Both rotary styles on a grid of a few blocks a multiprocessor, block b rotating tokens b, b + G, ... (G the
    grid): each token's rotated columns of all q and k heads ((BHQ, 2 * HALF) and (BHK, 2 * HALF) tiles) come
    into shared memory by bulk tensor copies STAGES - 1 tokens ahead (full / empty mbarrier rings), so the q / k
    loads are never on a token's critical path: only the position (loaded one token ahead) and the cos / sin
    gather at it. The rotation is `rotary_neox_rows`' (NEOX: the partner half by one shuffle; HALF a power of two
    >= 8) or `rotary_gptj`'s (pairs in-thread), from whole heads in 16-byte vectors; the outputs are stored from
    registers. Columns from 2 * HALF up are left as they are (not written).
    CS_SMEM (`launch_rotary_ring`'s default; H100: neox 94.0%, GPT-J 93.9% of copy against 89.8 / 86.4% without,
    one run): each token's cos / sin are gathered once, one element a thread, already in the
    columns' order (cos[j % HALF] or cos[j // 2] at tile column j, sin with its sign) into a (2, 2 * HALF)
    shared tile (handed over both ways by two mbarriers), and every thread reads its columns back as plain vectors:
    one gathered global load a thread a token instead of the 48 bounds-checked scalar gathers of cos / sin for
    q and k (the loop's SASS: fewer instructions, see docs/kernels.md).
    (`tp.store_bulk` of the rotated heads from two shared output tiles was measured level with CS_SMEM alone and
    left out: benchmarks/NOTES.md.)"""
    g = tp.num_blocks(0)
    b = tp.block_id(0)
    n = tp.cdiv(Q.shape[0] - b, g)                   # this block's tokens: b + i * g for i < n
    tp.tag(Q, lambda i, h, j: ("q", i, h, j))
    tp.tag(K, lambda i, h, j: ("k", i, h, j))
    lq = tp.blocked((BHQ, 2 * HALF), THREADS, vec=8)
    lk = tp.blocked((BHK, 2 * HALF), THREADS, vec=8)
    c = tp.arange(2 * HALF, layout=_cols_of(lq))[None, :]                   # the columns each thread holds
    if NEOX:
        cj = tp.where(c < HALF, c, c - HALF)
        sign = tp.where(c < HALF, -1.0, 1.0)
    else:
        cj = c // 2
        sign = tp.where(c % 2 == 0, -1.0, 1.0)
    q_s = tp.shared((BHQ, 2 * HALF), tp.bf16, stages=STAGES)
    k_s = tp.shared((BHK, 2 * HALF), tp.bf16, stages=STAGES)
    lcs = tp.blocked((2, 2 * HALF), THREADS)
    if CS_SMEM:
        cs_s = tp.shared((2, 2 * HALF), tp.f32)   # token i's cos (row 0) and signed sin (row 1)
        cs_full = tp.mbarrier(1)                  # phase i: token i's row is written
        cs_free = tp.mbarrier(1)                  # phase i: token i's row has been read
        rr = tp.arange(2, layout=_rows_of(lcs))[:, None]
        cc = tp.arange(2 * HALF, layout=_cols_of(lcs))[None, :]
        ccj = tp.where(cc < HALF, cc, cc - HALF) if NEOX else cc // 2
        csgn = tp.where(rr == 0, 1.0, tp.where(cc < HALF, -1.0, 1.0) if NEOX else tp.where(cc % 2 == 0, -1.0, 1.0))
    full = tp.mbarrier(1, stages=STAGES)              # full[s]: the token copied into buffer s has landed
    empty = tp.mbarrier(1, stages=STAGES)             # empty[s]: the block has read buffer s
    for s in tp.static_range(STAGES - 1):             # the first STAGES - 1 tokens
        if s < n:
            tp.copy_bulk(Q[b + s * g, 0:BHQ, 0:2 * HALF], q_s[s], full[s], fallback=False)
            tp.copy_bulk(K[b + s * g, 0:BHK, 0:2 * HALF], k_s[s], full[s], fallback=False)
            tp.mbarrier_arrive(full[s])
    pn = tp.load(POS[b:b + 1])
    for i in range(n):
        t = b + i * g
        p = pn
        if CS_SMEM:
            row = tp.load(CS[p[:, None], ccj + rr * HALF], layout=lcs) * csgn
            if i > 0:
                tp.mbarrier_wait(cs_free, i - 1)      # the previous token's readers are done
            tp.store(cs_s, row)
            tp.mbarrier_arrive(cs_full)
            tp.mbarrier_wait(cs_full, i)              # this token's row is written
            cos = tp.load(cs_s[0:1, 0:2 * HALF], layout=_bcast(lq, (1, 2 * HALF)))
            sin = tp.load(cs_s[1:2, 0:2 * HALF], layout=_bcast(lq, (1, 2 * HALF)))
            kcos = tp.load(cs_s[0:1, 0:2 * HALF], layout=_bcast(lk, (1, 2 * HALF)))
            ksin = tp.load(cs_s[1:2, 0:2 * HALF], layout=_bcast(lk, (1, 2 * HALF)))
            tp.mbarrier_arrive(cs_free)
        else:
            cos = tp.load(CS[p[:, None], cj], layout=_bcast(lq, (1, 2 * HALF)))
            sin = tp.load(CS[p[:, None], cj + HALF], layout=_bcast(lq, (1, 2 * HALF))) * sign
            kcos = tp.load(CS[p[:, None], cj], layout=_bcast(lk, (1, 2 * HALF)))
            ksin = tp.load(CS[p[:, None], cj + HALF], layout=_bcast(lk, (1, 2 * HALF))) * sign
        pn = tp.load(POS[t + g:t + g + 1])                              # the next token's (past T: 0, unused)
        if i + STAGES - 1 < n:                        # token i + STAGES - 1 into the buffer token i - 1 read
            if i > 0:
                tp.mbarrier_wait(empty[(i + STAGES - 1) % STAGES], (i - 1) // STAGES)
            tp.copy_bulk(Q[t + (STAGES - 1) * g, 0:BHQ, 0:2 * HALF], q_s[(i + STAGES - 1) % STAGES],
                         full[(i + STAGES - 1) % STAGES], fallback=False)
            tp.copy_bulk(K[t + (STAGES - 1) * g, 0:BHK, 0:2 * HALF], k_s[(i + STAGES - 1) % STAGES],
                         full[(i + STAGES - 1) % STAGES], fallback=False)
            tp.mbarrier_arrive(full[(i + STAGES - 1) % STAGES])
        tp.mbarrier_wait(full[i % STAGES], i // STAGES)
        x = tp.load(q_s[i % STAGES], layout=lq).to(tp.f32)
        y = tp.load(k_s[i % STAGES], layout=lk).to(tp.f32)
        tp.mbarrier_arrive(empty[i % STAGES])         # (the block's threads arrive as one)
        tp.assert_tag(x, lambda tg, r, cc: tg[1] == r and tg[3] == cc, at=(t, c),
                      message="buffer i holds this block's token i, column c at tile column c, q")
        tp.assert_tag(y, lambda tg, r, cc: tg[1] == r and tg[3] == cc, at=(t, c),
                      message="buffer i holds this block's token i, column c at tile column c, k")
        if NEOX:
            qh = tp.reshape(x, (BHQ, 2, HALF), layout=_as_halves(lq))
            qp = tp.reshape(tp.sum(qh, axis=1, keepdims=True) - qh, (BHQ, 2 * HALF), layout=lq)
            kh = tp.reshape(y, (BHK, 2, HALF), layout=_as_halves(lk))
            kp = tp.reshape(tp.sum(kh, axis=1, keepdims=True) - kh, (BHK, 2 * HALF), layout=lk)
            tp.assert_tag(qp, lambda tg: (tg[0][1] == tg[1][1] and tg[0][2] == tg[1][2]
                                          and tg[0][3] % HALF == tg[1][3] % HALF), message="neox halves, q")
            tp.assert_tag(kp, lambda tg: (tg[0][1] == tg[1][1] and tg[0][2] == tg[1][2]
                                          and tg[0][3] % HALF == tg[1][3] % HALF), message="neox halves, k")
        else:
            qh = tp.reshape(x, (BHQ, HALF, 2), layout=_as_pairs(lq))
            qp = tp.reshape(tp.sum(qh, axis=2, keepdims=True) - qh, (BHQ, 2 * HALF), layout=lq)
            kh = tp.reshape(y, (BHK, HALF, 2), layout=_as_pairs(lk))
            kp = tp.reshape(tp.sum(kh, axis=2, keepdims=True) - kh, (BHK, 2 * HALF), layout=lk)
            tp.assert_tag(qp, lambda tg: (tg[0][1] == tg[1][1] and tg[0][2] == tg[1][2]
                                          and tg[0][3] // 2 == tg[1][3] // 2), message="GPT-J pairs, q")
            tp.assert_tag(kp, lambda tg: (tg[0][1] == tg[1][1] and tg[0][2] == tg[1][2]
                                          and tg[0][3] // 2 == tg[1][3] // 2), message="GPT-J pairs, k")
        tp.store(QO[t, 0:BHQ, 0:2 * HALF], x * cos + qp * sin)
        tp.store(KO[t, 0:BHK, 0:2 * HALF], y * kcos + kp * ksin)


# ---------------------------------------------------------------- f32 variants, launch helpers, references


def _f32(kernel, skip=()):
    """The same kernel with every bf16 tensor parameter retyped to f32 (and no register bound per block: twice the
    bytes a thread loads, it would spill under the bf16 kernel's `min_blocks`)."""
    from tilepy.language import TensorSpec

    k = kernel.retyped(**{n: tp.Tensor[(tp.f32, *s.shape)] for n, s, _ in kernel.params
                          if isinstance(s, TensorSpec) and s.dtype == tp.bf16 and n not in skip})
    k.min_blocks = None
    return k


KERNELS = {
    "silu_and_mul": {tp.bf16: silu_and_mul, tp.f32: _f32(silu_and_mul)},
    "fused_add_rmsnorm": {tp.bf16: fused_add_rmsnorm, tp.f32: _f32(fused_add_rmsnorm)},
    "layer_norm": {tp.bf16: layer_norm, tp.f32: _f32(layer_norm)},
    "layer_norm_ring": {tp.bf16: layer_norm_ring},
    "merge_attn_states_lse": {tp.bf16: merge_attn_states_lse, tp.f32: _f32(merge_attn_states_lse)},
    "rotary_neox": {tp.bf16: rotary_neox, tp.f32: _f32(rotary_neox)},
    "rotary_gptj": {tp.bf16: rotary_gptj, tp.f32: _f32(rotary_gptj)},
    "rotary_neox_stream": {tp.bf16: rotary_neox_stream, tp.f32: _f32(rotary_neox_stream)},
    "rotary_gptj_stream": {tp.bf16: rotary_gptj_stream, tp.f32: _f32(rotary_gptj_stream)},
    "rotary_neox_rows": {tp.bf16: rotary_neox_rows, tp.f32: _f32(rotary_neox_rows)},
    "rotary_ring": {tp.bf16: rotary_ring},
}


def _dtype(x):
    from tilepy.dtypes import from_any

    d = from_any(x.dtype)
    if d not in (tp.bf16, tp.f32):
        raise TypeError(f"llm_ops take bf16 or f32 tensors, not {x.dtype}")
    return d


def _pow2(n, lo=16):
    return max(lo, 1 << (int(n) - 1).bit_length())


def _row_block(n):
    if n > 16384:
        raise ValueError(f"rows of {n} elements do not fit one block's registers (at most 16384): split the row")
    return _pow2(n)


def _rows(m):
    """Launch `m` rows (grid y is at most 65535): yields (first row, count)."""
    for r0 in range(0, int(m), 65535):
        yield r0, min(65535, int(m) - r0)


def launch_silu_and_mul(x, y, BLOCK=2048, THREADS=256, **kw):
    """y[m, :] = silu(x[m, :d]) * x[m, d:] for x of shape (M, 2d) and y (M, d)."""
    m, d = y.shape
    if tuple(x.shape) != (m, 2 * d):
        raise ValueError(f"silu_and_mul: x must be (M, 2d) = ({m}, {2 * d}) for y of shape {tuple(y.shape)}, "
                         f"got {tuple(x.shape)}")
    k = KERNELS["silu_and_mul"][_dtype(x)]
    block = min(BLOCK, _pow2(d, 128))
    x3 = x.reshape(m, 2, d)
    for r0, n in _rows(m):
        threads = max(32, min(THREADS, block // 8))           # 8 values a thread (H100: 99.4% of copy)
        k[(tp.cdiv(d, block), n)](x3[r0:r0 + n], y[r0:r0 + n], BLOCK=block, THREADS=threads, **kw)


def launch_fused_add_rmsnorm(x, residual, w, y, residual_out, eps=1e-6, **kw):
    """residual_out = x + residual; y = rmsnorm(residual_out) * w (y/residual_out may be x/residual)."""
    k = KERNELS["fused_add_rmsnorm"][_dtype(x)]
    return k[(x.shape[0],)](x, residual, w, y, residual_out, eps, BLOCK_N=_row_block(x.shape[1]), **kw)


def _ring_rows(x) -> bool:
    """Whether `layer_norm_ring` takes x's rows: bf16, a power of two 1024 .. 8192 elements."""
    n = int(x.shape[1])
    return _dtype(x) == tp.bf16 and not n & (n - 1) and 1024 <= n <= 8192


def launch_layer_norm(x, w, b, y, eps=1e-5, ROWS=1, RING=None, **kw):
    """y = layer_norm(x) * w + b over rows of x (M, N); ROWS: rows a block, one after the other (next row's x
    loaded ahead). EVEN (no mask on the centred values) is set when N is the block's power of two.
    RING (default: where `layer_norm_ring` takes the rows and no other constexpr is given): `launch_layer_norm_ring`
    (H100, 32768 x 4096 bf16: 94.6% of copy, 1.10x torch.compile; this kernel 89.0%)."""
    if RING is None:
        RING = ROWS == 1 and not kw and _ring_rows(x)
    if RING:
        if ROWS != 1 or kw:
            raise ValueError(f"layer_norm: RING=True takes no ROWS or constexprs ({sorted(kw)}): pass RING=False")
        return launch_layer_norm_ring(x, w, b, y, eps)
    k = KERNELS["layer_norm"][_dtype(x)]
    block = _row_block(x.shape[1])
    kw.setdefault("EVEN", block == x.shape[1])
    kw.setdefault("WARP_SUMS", True)      # (where a thread holds one 8-wide vector; H100: 88.6% of copy, 85.3% without)
    if kw["EVEN"] and block != x.shape[1]:
        raise ValueError(f"layer_norm: EVEN=True needs rows of a power of two >= 16 elements, not {x.shape[1]}")
    return k[(tp.cdiv(x.shape[0], ROWS),)](x, w, b, y, eps, BLOCK_N=block, ROWS=ROWS, **kw)


def launch_layer_norm_ring(x, w, b, y, eps=1e-5, blocks_per_sm=None, **kw):
    """`layer_norm_ring`: y = layer_norm(x) * w + b for bf16 rows of a power of two 1024 .. 8192 elements (a
    thread a 16-byte vector of the row), on a grid of `blocks_per_sm` blocks a multiprocessor (at most one a
    row), each streaming its rows through a ring of shared-memory buffers filled by bulk tensor copies.
    Defaults: 1024 threads an SM (blocks_per_sm = 8192 / N; 56 registers, no spills at every N), STAGES 4 (H100,
    32768 x 4096: 94.6% of copy; 3 stages 93.7%, 5 94.3%, 2 84.3%; one block an SM 67.2%)."""
    m, n = x.shape
    if not _ring_rows(x):
        raise ValueError(f"layer_norm_ring: bf16 rows of a power of two 1024 .. 8192 elements, not {x.dtype} rows "
                         f"of {n}: use launch_layer_norm")
    blocks_per_sm = blocks_per_sm or max(1, 8192 // n)
    kw.setdefault("MIN_BLOCKS", blocks_per_sm)
    kw.setdefault("STAGES", 4)
    grid = (max(1, min(int(m), int(blocks_per_sm) * _num_sms(x))),)
    return layer_norm_ring[grid](x, w, b, y, eps, BLOCK_N=n, **kw)


def launch_merge_attn_states_lse(po, pl, so, sl, o, ol, BR=None, **kw):
    """Partial outputs (T, H, D) with their log-sum-exps (T, H), f32; writes o (T, H, D) and ol (T, H)."""
    t, h, d = po.shape
    k = KERNELS["merge_attn_states_lse"][_dtype(po)]
    bd = _pow2(d, 8)
    br = BR or max(1, 1024 // bd)         # 8 rows of 128 (H100: 94.4% of copy; 16 rows 89.6%, 32 rows 84.4%)
    r = t * h
    return k[(tp.cdiv(r, br),)](po.reshape(r, d), pl.reshape(r), so.reshape(r, d), sl.reshape(r),
                                o.reshape(r, d), ol.reshape(r), BR=br, BD=bd, **kw)


def _num_sms(x):
    """The device's multiprocessor count (132 where it cannot be asked: numpy arrays on the interpreter)."""
    try:
        import torch

        if isinstance(x, torch.Tensor) and x.is_cuda:
            return torch.cuda.get_device_properties(x.device).multi_processor_count
    except ImportError:
        pass
    return 132


def _tma_ok(*tensors):
    """Whether every tensor is contiguous with a 16-byte aligned base (a tensor map describes it; numpy arrays
    on the interpreter: contiguous)."""
    for a in tensors:
        if hasattr(a, "data_ptr"):
            if not a.is_contiguous() or a.data_ptr() % 16:
                return False
        elif not a.flags.c_contiguous:
            return False
    return True


def _rotary_ring_refusal(q, k, cos_sin_cache, head_size, is_neox, q_out, k_out):
    """Why `rotary_ring` cannot take these tensors (None: it can)."""
    rot = int(cos_sin_cache.shape[1])
    half = rot // 2
    hq = q.shape[-1] // head_size if q.ndim == 2 else q.shape[1]
    hk = k.shape[-1] // head_size if k.ndim == 2 else k.shape[1]
    if _dtype(q) != tp.bf16 or _dtype(k) != tp.bf16:
        return "bf16 q and k"
    if rot % 2 or rot > head_size or half & (half - 1) or half < (8 if is_neox else 4) or head_size % 8:
        return f"a power-of-two rot_dim / 2 >= {8 if is_neox else 4} (got rot_dim {rot}) and head_size % 8 == 0"
    if not _tma_ok(q, k, q_out, k_out):
        return "contiguous q, k and outputs with 16-byte aligned bases (tensor maps)"
    if _pow2(hq, 1) > 256 or _pow2(hk, 1) > 256:
        return "at most 256 heads"
    return None


def launch_rotary_ring(positions, q, k, cos_sin_cache, head_size, is_neox=True, q_out=None, k_out=None,
                       blocks_per_sm=3, **kw):
    """`rotary_ring`: both styles on a grid of `blocks_per_sm` blocks a multiprocessor (at most one a token),
    each token's q and k heads brought into shared memory by bulk tensor copies STAGES - 1 tokens ahead. bf16,
    contiguous 16-byte aligned q / k (and outputs), a power-of-two rot_dim / 2 (>= 8 for neox, >= 4 for GPT-J)
    and head_size a multiple of 8; else a ValueError (use `launch_rotary`). Defaults: 3 blocks of 256 threads an
    SM, STAGES 3, CS_SMEM (H100, 32768 tokens of 32 q + 8 k heads of 128: neox 94.0%, GPT-J 93.9% of copy, 1.25x /
    1.94x torch.compile; without CS_SMEM 89.8 / 86.4%; 4 stages 93.4 / 94.1%, 4 blocks an SM 88.1 / 90.9%)."""
    t = q.shape[0]
    half = int(cos_sin_cache.shape[1]) // 2
    hq = q.shape[-1] // head_size if q.ndim == 2 else q.shape[1]
    hk = k.shape[-1] // head_size if k.ndim == 2 else k.shape[1]
    q_out = q if q_out is None else q_out
    k_out = k if k_out is None else k_out
    why = _rotary_ring_refusal(q, k, cos_sin_cache, head_size, is_neox, q_out, k_out)
    if why:
        raise ValueError(f"launch_rotary_ring needs {why}: use launch_rotary")
    kw.setdefault("THREADS", 256)
    kw.setdefault("MIN_BLOCKS", int(blocks_per_sm))
    kw.setdefault("CS_SMEM", True)
    rows = max(1, 32 // half)           # each ring stage a multiple of 128 bytes (a bulk copy's shared alignment)
    grid = (max(1, min(int(t), int(blocks_per_sm) * _num_sms(q))),)

    def shape(a, h):
        return a.reshape(t, h, head_size)

    return rotary_ring[grid](positions, shape(q, hq), shape(k, hk), cos_sin_cache, shape(q_out, hq),
                             shape(k_out, hk), HALF=half, BHQ=max(_pow2(hq, 1), rows), BHK=max(_pow2(hk, 1), rows),
                             NEOX=bool(is_neox), **kw)


def launch_rotary(positions, q, k, cos_sin_cache, head_size, is_neox=True, q_out=None, k_out=None,
                  heads_per_block=None, stream=None, ring=None, **kw):
    """Rotary embedding of q (T, HQ * head_size) and k (T, HK * head_size), in place unless q_out/k_out are
    given; cos_sin_cache (max_position, rot_dim) f32 holds cos then sin of the rot_dim / 2 angles.
    `heads_per_block`: blocks of that many q (or k) heads of one token (SPLIT) instead of one block a token (0:
    one block a token);
    default: one block a token for neox (H100: 80.2-80.5% of copy; blocks of 16 heads of 64 threads 79.2%, of 8
    heads 73.2-73.8%), blocks of 16 heads of 64 threads for GPT-J (84.8%; 8 heads 82.8%, 32 heads of 128 threads
    83.7%; one block a token 70.7%: its pair view holds twice the values, 103 registers).
    `stream` (blocks per multiprocessor): `rotary_*_stream` on a grid of that many blocks a multiprocessor (at most
    one a token), each looping over the tokens with the next position loaded ahead (all heads of a token a
    block, as one block a token); `heads_per_block` does not apply.
    `ring` (default: where `rotary_ring` takes the tensors and neither heads_per_block, stream nor a constexpr is
    given): `launch_rotary_ring` (H100: neox 94.0%, GPT-J 93.9% of copy with its CS_SMEM default; the blocks above
    measured 77.1 / 69.1% in an earlier run)."""
    if ring is None:
        outs = (q if q_out is None else q_out, k if k_out is None else k_out)
        ring = heads_per_block is None and not stream and not kw and _rotary_ring_refusal(
            q, k, cos_sin_cache, head_size, is_neox, *outs) is None
    if ring:
        if heads_per_block or stream or kw:
            raise ValueError("launch_rotary: ring=True takes no heads_per_block, stream or constexprs: pass ring=False")
        return launch_rotary_ring(positions, q, k, cos_sin_cache, head_size, is_neox, q_out, k_out)
    if stream:
        if heads_per_block:
            raise ValueError("launch_rotary: stream= walks all heads of a token a block; heads_per_block does not "
                             "apply (pass one of them)")
        heads_per_block, kw = 0, dict(kw)
        kw.setdefault("THREADS", 256)
    rows = kw.pop("HALVES", False)
    if rows:
        if not is_neox:
            raise ValueError("launch_rotary: HALVES is a neox layout (GPT-J pairs neighbours): drop it for GPT-J")
        if stream:
            raise ValueError("launch_rotary: HALVES and stream= are different kernels: pass one of them")
    if heads_per_block is None and not is_neox and "THREADS" not in kw:
        heads_per_block, kw = 16, dict(kw, THREADS=64)
    t = q.shape[0]
    rot = int(cos_sin_cache.shape[1])
    if rot % 2 or rot > head_size:
        raise ValueError(f"rotary: the cache's rot_dim {rot} must be even and at most head_size {head_size}")
    half = rot // 2
    hq, hk = q.shape[-1] // head_size if q.ndim == 2 else q.shape[1], k.shape[-1] // head_size if k.ndim == 2 \
        else k.shape[1]
    q_out = q if q_out is None else q_out
    k_out = k if k_out is None else k_out
    if rows and (half & (half - 1) or half < 8):
        rows = False                  # the row layout pairs column j with j + HALF for a power-of-two HALF >= 8
    style = ("rotary_neox" if is_neox else "rotary_gptj") + ("_stream" if stream else "") + ("_rows" if rows else "")
    kern = KERNELS[style][_dtype(q)]
    c = dict(HALF=half, BHALF=_pow2(half, 4), BHQ=_pow2(hq, 1), BHK=_pow2(hk, 1))
    if rows:
        del c["BHALF"]
        c["SPLIT"] = bool(heads_per_block)
    grid = (max(1, min(t, int(stream) * _num_sms(q))),) if stream else (t,)
    if heads_per_block:               # SPLIT: blocks of heads_per_block q or k heads, grid (T, q blocks + k blocks)
        c.update(BHQ=min(c["BHQ"], _pow2(heads_per_block, 1)), BHK=min(c["BHK"], _pow2(heads_per_block, 1)),
                 SPLIT=True)
        grid = (t, tp.cdiv(hq, c["BHQ"]) + tp.cdiv(hk, c["BHK"]))
    def shape(a, h):
        return a.reshape(t, h, head_size)

    return kern[grid](positions, shape(q, hq), shape(k, hk), cos_sin_cache, shape(q_out, hq), shape(k_out, hk),
                      **c, **kw)


def _f64(a):
    import torch

    if isinstance(a, torch.Tensor):
        return a.detach().cpu().double().numpy()
    return np.asarray(a, np.float64)


def ref_silu_and_mul(x):
    x = _f64(x)
    d = x.shape[1] // 2
    g = x[:, :d]
    return g / (1 + np.exp(-g)) * x[:, d:]


def ref_fused_add_rmsnorm(x, residual, w, eps=1e-6, round_residual=None):
    """(y, residual_out) in float64; `round_residual` (e.g. to bf16) models the residual's dtype."""
    r = _f64(x) + _f64(residual)
    if round_residual is not None:
        r = _f64(round_residual(r))
    return r / np.sqrt((r * r).mean(axis=1, keepdims=True) + eps) * _f64(w), r


def ref_layer_norm(x, w, b, eps=1e-5):
    x = _f64(x)
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * _f64(w) + _f64(b)


def ref_merge_attn_states_lse(po, pl, so, sl):
    po, pl, so, sl = _f64(po), _f64(pl), _f64(so), _f64(sl)
    m = np.maximum(np.maximum(pl, sl), -3e38)
    pe, se = np.exp(pl - m), np.exp(sl - m)
    tot = pe + se
    with np.errstate(divide="ignore"):
        lse = np.log(tot) + m
    inv = 1 / np.maximum(tot, 1.0)
    return po * (pe * inv)[..., None] + so * (se * inv)[..., None], lse


def ref_rotary(positions, q, k, cos_sin_cache, head_size, is_neox=True):
    """(q, k) rotated, float64, shaped as given."""
    pos = np.asarray(_f64(positions), np.int64)
    cs = _f64(cos_sin_cache)
    half = cs.shape[1] // 2
    cos, sin = cs[pos, :half][:, None, :], cs[pos, half:][:, None, :]

    def rot(a):
        a = _f64(a)
        t = a.shape[0]
        a = a.reshape(t, -1, head_size).copy()
        if is_neox:
            x1, x2 = a[..., :half].copy(), a[..., half:2 * half].copy()
            a[..., :half], a[..., half:2 * half] = x1 * cos - x2 * sin, x2 * cos + x1 * sin
        else:
            x1, x2 = a[..., 0:2 * half:2].copy(), a[..., 1:2 * half:2].copy()
            a[..., 0:2 * half:2], a[..., 1:2 * half:2] = x1 * cos - x2 * sin, x2 * cos + x1 * sin
        return a.reshape(t, -1)

    return rot(q), rot(k)
