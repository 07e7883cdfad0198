"""Static part of the two-access checks: which element offsets two accesses share, and whether the threads
touching a shared offset are the same thread or two different ones. Exact, with numpy over all slots."""

from __future__ import annotations

import numpy as np

# The stage copies of an mbarrier ring (mbarrier_arrays.py) repeat one op's slots: answers are kept by the
# slots' contents, the bytes of keys and offset tables counted and everything dropped past _SEEN_MAX (a
# long-lived process verifies many kernels). A key built for a hit counts too: an earlier drop at worst.
_SEEN: dict = {}
_SEEN_MAX = 64 << 20
_seen_bytes = [0]


def _key(*parts):
    out, size = [], 0
    for p in parts:
        if isinstance(p, np.ndarray):
            b = p.tobytes()
            size += len(b)
            out.append((p.dtype.str, p.shape, b))
        else:
            out.append(p)
    if _seen_bytes[0] > _SEEN_MAX:
        _SEEN.clear()
        _seen_bytes[0] = 0
    _seen_bytes[0] += size
    return tuple(out)


def _per_offset(acc, n):
    key = _key("per", n, acc.off, acc.thr)
    hit = _SEEN.get(key)
    if hit is None:
        hit = _SEEN[key] = _per_offset_of(acc, n)
        _seen_bytes[0] += hit[0].nbytes + hit[1].nbytes
    return hit


def _per_offset_of(acc, n):
    lo = np.full(n, -1, dtype=np.int64)
    hi = np.full(n, -1, dtype=np.int64)
    off = acc.off
    ok = (off >= 0) & (off < n)
    off, thr = off[ok], acc.thr[ok].astype(np.int64)
    order = np.lexsort((thr, off))
    off, thr = off[order], thr[order]
    if off.size:
        first = np.r_[True, off[1:] != off[:-1]]
        last = np.r_[off[1:] != off[:-1], True]
        lo[off[first]] = thr[first]
        hi[off[last]] = thr[last]
    return lo, hi


def cross_thread(a, b):
    """(offset, thread of a, thread of b) with two different threads touching one offset, or None."""
    n = a.alloc.stage_elems
    alo, ahi = _per_offset(a, n)
    blo, bhi = _per_offset(b, n)
    both = (alo >= 0) & (blo >= 0)
    single = (alo == ahi) & (blo == bhi) & (alo == blo)
    bad = np.nonzero(both & ~single)[0]
    if bad.size == 0:
        return None
    o = int(bad[0])
    ta = int(alo[o])
    tb = int(blo[o]) if blo[o] != ta else int(bhi[o])
    if tb == ta:
        ta = int(ahi[o])
    return o, ta, tb


def same_thread(a, b):
    """(offset, thread) where one thread touches one offset in both accesses, or None."""
    n = a.alloc.stage_elems
    key = _key("same", n, a.off, a.thr, b.off, b.thr)
    if key not in _SEEN:
        _SEEN[key] = _same_thread(a, b, n)
    return _SEEN[key]


def _same_thread(a, b, n):
    ka = a.off.astype(np.int64) * 4096 + a.thr.astype(np.int64)
    kb = b.off.astype(np.int64) * 4096 + b.thr.astype(np.int64)
    common = np.intersect1d(ka, kb)
    common = common[(common // 4096) < n]
    if common.size == 0:
        return None
    return int(common[0] // 4096), int(common[0] % 4096)


def self_conflict(a):
    """(offset, t1, t2): two threads of one access instance write one offset (replicated writers)."""
    lo, hi = _per_offset(a, a.alloc.stage_elems)
    bad = np.nonzero((lo >= 0) & (lo != hi))[0]
    if bad.size == 0:
        return None
    o = int(bad[0])
    return o, int(lo[o]), int(hi[o])


def slot_of(acc, offset, thread):
    """(value index, coords) of the slot of `acc` where `thread` touches `offset`."""
    hit = np.nonzero((acc.off == offset) & (acc.thr == thread))[0]
    if hit.size == 0:
        return None, None
    i = int(hit[0])
    return int(acc.val[i]), tuple(int(c[i]) for c in acc.coords)
