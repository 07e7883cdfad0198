"""Shared-memory bank conflicts, per access op (a performance finding, never an error).

Each thread's slots are grouped into vector accesses (the widest power of two of consecutive values at
consecutive, aligned addresses, up to 16 bytes). A warp's vector access is served in phases of
banks * bank_bytes bytes (8 lanes for 16-byte accesses, 16 for 8-byte, all for 4 bytes or less); the
degree of a phase is the largest number of distinct 4-byte words that fall into one bank (lanes reading one
word share it). The stage base is taken as stage 0 (stage sizes are multiples of 128 bytes in practice).
Descriptor-based reads (wgmma) and bulk copies (TMA) are skipped: the hardware's access pattern is not per lane.
A register tile's unmasked store (`tp.store(shared, tile)`) of whole warps is judged in the order the GPU render
emits it: where its vector stores conflict in value order, each lane stores them in the per-lane order of
`tilepy.banks.bank_turn` (warps of 32 lanes), so only what is left after that order is reported."""

from __future__ import annotations

import numpy as np

from tilepy import ir
from tilepy.banks import bank_turn, turned
from tilepy.types import RegType

from ..report import Finding


def vector_width(table, eb) -> int:
    w = max(1, 16 // eb)
    V = table.shape[1]
    while w > 1:
        if V % w == 0:
            t = table.reshape(table.shape[0], V // w, w)
            present = t >= 0
            base = t[:, :, :1]
            contiguous = (t == base + np.arange(w)[None, None, :]) | ~present
            aligned = (base % w == 0) | ~present[:, :, :1]
            full = present.all(axis=2) | ~present.any(axis=2)
            if contiguous.all() and aligned.all() and full.all():
                return w
        w //= 2
    return 1


def rendered_order(acc, base, eb: int, nbytes: int, target):
    """base [thread, group] (element offset of each vector access, -1 absent) in the order the GPU render stores a
    register tile: per lane as `tilepy.banks.bank_turn` picks, for an unmasked `tp.store` of a register tile in
    vector stores (2 or more values each) by whole warps of 32 lanes (tilepy_hip.render.tiles `_bank_turn`'s
    conditions); otherwise (reads, copies, single-value, masked or partial stores) as it is."""
    op = acc.op
    ws = target.warp_size
    if (acc.kind != "write" or acc.partial or ws != 32 or nbytes <= eb or not isinstance(op, ir.Call)
            or op.op != "store"
            or len(op.args) < 2 or not isinstance(getattr(op.args[1], "type", None), RegType)):
        return base
    T, G = base.shape
    if T % ws:
        return base
    b = base.reshape(T // ws, ws, G)
    have = b >= 0
    full = have.all(axis=(1, 2))
    if not full.any() or (have.any(axis=(1, 2)) & ~full).any():    # a warp in part: the render keeps value order
        return base
    turn = bank_turn(b[full] * eb, nbytes, target.banks, target.bank_bytes)
    if turn is None:
        return base
    out = b.copy()
    out[full] = turned(b[full], *turn)
    return out.reshape(T, G)


def analyse(acc, num_threads, target):
    """(degree, warp, value, lanes, byte address, bank) of the worst phase of one access, or None."""
    eb = acc.eb
    V = int(acc.val.max()) + 1 if acc.val.size else 1
    # the threads from the last warp with an access on hold none (a copy's odd tile held by one thread)
    ws = target.warp_size
    if acc.thr.size:
        num_threads = min(num_threads, -(-(int(acc.thr.max()) + 1) // ws) * ws)
    table = np.full((num_threads, V), -1, dtype=np.int64)
    table[acc.thr, acc.val] = acc.off
    w = vector_width(table, eb)
    nbytes = w * eb
    words = max(1, nbytes // target.bank_bytes)
    lanes_per_phase = max(1, (target.banks * target.bank_bytes) // max(nbytes, target.bank_bytes))
    G = V // w
    base = table.reshape(num_threads, G, w)[:, :, 0]  # element offset of each vector access, -1 absent
    base = rendered_order(acc, base, eb, nbytes, target)
    t = np.arange(num_threads)
    warp, lane = t // ws, t % ws
    phase = lane // lanes_per_phase
    rows = []
    for i in range(words):
        word = (base * eb) // target.bank_bytes + i
        rows.append(word)
    word = np.stack(rows, axis=-1)  # [T, G, words]
    present = np.broadcast_to((base >= 0)[:, :, None], word.shape)
    W = np.broadcast_to(warp[:, None, None], word.shape)[present]
    P = np.broadcast_to(phase[:, None, None], word.shape)[present]
    Gi = np.broadcast_to(np.arange(G)[None, :, None], word.shape)[present]
    L = np.broadcast_to(lane[:, None, None], word.shape)[present]
    Wd = word[present]
    if Wd.size == 0:
        return None
    bank = Wd % target.banks
    # (warp, vector, phase, bank) and the word as one integer each, in mixed radix (all are >= 0, so the
    # order is the lexicographic one): 1-D uniques instead of row uniques, which sort a structured view
    cols = (W, Gi, P, bank)
    radix = [int(c.max()) + 1 for c in cols]
    grp_key = np.zeros(Wd.shape, dtype=np.int64)
    for c, r in zip(cols, radix):
        grp_key = grp_key * r + c
    nwd = int(Wd.max()) + 1
    pairs = np.unique(grp_key * nwd + Wd)  # distinct words per group
    grp, counts = np.unique(pairs // nwd, return_counts=True)
    worst = int(np.argmax(counts))
    degree = int(counts[worst])
    if degree <= 1:
        return None
    g = int(grp[worst])
    digits = []
    for r in reversed(radix):
        digits.append(g % r)
        g //= r
    wv, gv, pv, bv = reversed(digits)
    sel = (W == wv) & (Gi == gv) & (P == pv) & (bank == bv)
    lanes = sorted(set(int(x) for x in L[sel]))
    first = int(Wd[sel][0]) * target.bank_bytes
    return degree, wv, gv * w, lanes, first, bv


def check(ctx) -> list:
    out = []
    target = ctx.analysis.target
    for acc in ctx.analysis.accesses:
        if acc.descriptor or acc.thr.size == 0 or acc.bar is not None or acc.bulk_store:
            continue  # descriptors and bulk copies and stores (TMA) have no per-lane access pattern
        res = analyse(acc, ctx.analysis.num_threads, target)
        if res is None:
            continue
        degree, warp, value, lanes, address, bank = res
        verb = "read" if acc.kind == "read" else "write"
        cex = {"warp": warp, "lane": lanes[0], "thread": warp * target.warp_size + lanes[0], "value": value,
               "degree": degree, "lanes": lanes, "address": address, "bank": bank}
        out.append(Finding(
            "bank_conflict", "performance",
            f"{degree}-way bank conflict on the shared {verb} of '{ctx.name_of(acc.alloc)}': lanes "
            f"{', '.join(map(str, lanes[:8]))}{'...' if len(lanes) > 8 else ''} of warp {warp} hit bank {bank} "
            f"with different words (a swizzle or padding spreads them)", acc.span, cex, acc.alloc.span))
    return out
