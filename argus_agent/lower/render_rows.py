"""Kernels along whole rows: scans (cumsum / cumprod, reverse and exclusive, along rows or a strided axis;
long rows as segments after a per-segment sum) and RowFused kernels (a row's reductions and its pointwise
output in registers: softmax, norms).
"""

from __future__ import annotations

from . import tags as lower_tags
from . import values as vals
from .core import Buffer, Reduction, RowFused, Scan
from .emit import _FINAL, _init_literal, _is_tile, _literal, _tp
from .index import Var
from .render_tiled import _out_view, _tiled_kernel, _uses, block_start, finish, hoist, loop_or_once, tile_emitter
from .sizes import SCAN_CHUNK, SCAN_SEGMENT, TARGET_BLOCKS, TILE_ELEMS, cdiv, next_pow2, threads_for
from .values import walk

_SCAN_FN = {"sum": ("tp.cumsum", "tp.sum", "+", 0), "prod": ("tp.cumprod", "tp.prod", "*", 1)}


def render_scan(k: Scan, kname: str, buffers: dict) -> tuple[list, list]:
    """A scan along rows (I == 1) or along a strided axis (columns): chunks of the scanned axis in order
    (reverse: from the end), each a tile scan plus the carry of the chunks before it."""
    row = k.I == 1
    scan_fn, red_fn, op, neutral = _SCAN_FN[k.kind]
    names = {v.args[0]: v.args[0] for v in walk([k.value]) if v.op in ("load", "gather")}
    names[k.out.name] = k.out.name
    segs, extra_parts, extra_temps = 1, [], []
    if row:
        # chunks along the row (the carry makes the chunks one scan), rows stacked to a TILE_ELEMS tile; long
        # rows split into segments scanned by their own blocks, after a first kernel sums each segment (the
        # two-pass block scan)
        bn = min(next_pow2(k.N), SCAN_CHUNK)
        bm = min(next_pow2(k.O), max(1, TILE_ELEMS // bn))
        if k.N >= 2 * SCAN_SEGMENT and cdiv(k.O, bm) < TARGET_BLOCKS:
            segs = cdiv(k.N, SCAN_SEGMENT)
            part = Buffer(f"{k.out.name}_seg", (segs, k.O), k.value.dtype, "temp")   # as split partials
            buffers = dict(buffers, **{part.name: part})
            red = Reduction(k.out, k.kind, k.value, k.O, k.N, k.what, {}, mode="row")
            b1 = min(next_pow2(k.O), max(1, TILE_ELEMS // SCAN_SEGMENT))
            src1, args1, grid1 = _tiled_kernel(red, kname + "_segments", buffers, b1, SCAN_SEGMENT, segs,
                                               SCAN_SEGMENT, part)
            extra_parts, extra_temps = [(src1, kname + "_segments", args1, grid1)], [part]
        sizes = {"m": k.O, "r": k.N}
    else:
        bm = min(next_pow2(k.I), 128)
        bn = min(next_pow2(k.N), max(1, 2048 // bm))
        sizes = {"o": k.O, "i": k.I, "r": k.N}
    em = tile_emitter(names, buffers, row, sizes, "BN")
    pre_lines = hoist(em, [k.value])
    val = em.value(k.value)
    loop_lines = em.lines
    dtype = k.value.dtype
    acc_t = _tp(dtype)
    tile = "(BM, BN)" if row else "(BN, BI)"
    v_text = val if _is_tile(k.value) else f"tp.full({tile}, {val}, {acc_t})"
    nk = cdiv(k.N, bn) if segs == 1 else SCAN_SEGMENT // bn
    axis = 1 if row else 0
    rx = "[None, :]" if row else "[:, None]"
    seg0 = "s * L + " if segs > 1 else ""
    inner = [f"r0 = {seg0}{'(NK - 1 - k)' if k.reverse else 'k'} * BN", f"r = (r0 + tp.arange(BN)){rx}"] + loop_lines
    lit = _literal(neutral, dtype)
    ragged = k.N % bn or (segs > 1 and segs * SCAN_SEGMENT != k.N)
    inner.append(f"v = tp.where(r < N, {v_text}, {lit})" if ragged else f"v = {v_text}")
    flags = (", reverse=True" if k.reverse else "") + (", exclusive=True" if k.exclusive else "")
    inner.append(f"c = {scan_fn}(v, axis={axis}{flags}) {op} carry")
    if row:
        name, ov = _out_view(em, k.out, (k.O, k.N))
        inner.append(f"tp.store({name}[m0:m0 + BM, r0:r0 + BN], c)")
    else:
        name, ov = _out_view(em, k.out, (k.O, k.N, k.I))
        inner.append(f"tp.store({name}[o, r0:r0 + BN, i0:i0 + BI], c)")
    inner.append(f"carry = carry {op} {red_fn}(v, axis={axis}, keepdims=True)")
    body = block_start(row, 1, pre_lines + inner)
    body += pre_lines
    body.append(f"carry = tp.full({'(BM, 1)' if row else '(1, BI)'}, {lit}, {acc_t})")
    if segs > 1:
        em.names[extra_temps[0].name] = extra_temps[0].name
        pname, pov = _out_view(em, extra_temps[0], (segs, k.O))
        em.params.append(pov)
        body.append("s = tp.block_id(1)")
        body.append("for q in range(s + 1, S):" if k.reverse else "for q in range(s):")
        body.append(f"    carry = carry {op} tp.load({pname}[q, m0:m0 + BM])[:, None]")
    once = nk == 1 and segs == 1
    body += loop_or_once(inner, "NK", once)
    if once and _is_tile(k.value):
        # one chunk, no loop-carried carry: each stored element is the scan of its prefix (j' <= j; j' < j
        # exclusive; reversed: j' >= j, j' > j; a ragged tile's masked tail lies past the row's end)
        def bound(rt, ps, j=None):
            j = ps[1]
            if k.reverse:
                return f"{j} {'<' if k.exclusive else '<='} {rt} and {rt} < {bn}"
            return f"0 <= {rt} and {rt} {'<' if k.exclusive else '<='} {j}"

        claim = lower_tags.reduction_store_assertion(
            k.value, name, ("m", None) if row else ("o", None, "i"), bound,
            lambda s: ((None, s, None) if ragged else s, None))
        if claim:
            body.insert(0, claim)
    elif _is_tile(k.value):
        # chunks with a carry: each stored element is the scan of its prefix within its chunk, and the carry
        # the fold of exactly the chunks before it (after it, reversed), each read once at its own iteration;
        # segments: the carry starts as the fold of the segment sums before the block's segment
        claim = lower_tags.scan_store_assertion(
            k.value, name, row, bn, nk, bool(ragged), k.reverse, k.exclusive,
            (SCAN_SEGMENT, segs, k.O, extra_temps[0].name) if segs > 1 else None)
        if claim:
            body.insert(0, claim)
    if row:
        consts = {"N": k.N, "NK": nk, "BM": bm, "BN": bn}
        if segs > 1:
            consts.update(S=segs, L=SCAN_SEGMENT)
        grid = f"lambda m: (tp.cdiv({k.O}, m['BM']), {segs})"
    else:
        consts = {"N": k.N, "NK": nk, "NI": cdiv(k.I, bm), "BI": bm, "BN": bn}
        grid = f"lambda m: (tp.cdiv({k.I}, m['BI']) * {k.O},)"
    src, args = finish(em, body, [ov], buffers, kname, consts, threads_for(bm * bn), k.what)
    return extra_parts + [(src, kname, args, grid)], extra_temps


def render_row_fused(k: RowFused, kname: str, buffers: dict) -> tuple[list, list]:
    """Whole rows in registers: each stage reduces the row tile (earlier stages' results are registers),
    then the output is stored per element (or per row): one read of the rows, one write."""
    M, R = k.M, k.R
    br = next_pow2(R)
    bm = max(1, min(next_pow2(M), 2048 // br))
    names = {v.args[0]: v.args[0] for v in walk([st.value for st in k.stages] + [k.value])
             if v.op in ("load", "gather")}
    names.update({b.name: b.name for b in [k.out] + [st.out for st in k.stages]})
    em = tile_emitter(names, buffers, True, {"m": M, "r": R})
    stores = []
    outs = []
    m_var = Var("m", M)
    for j, st in enumerate(k.stages):
        val = em.value(st.value)
        dtype = st.value.dtype
        v_text = val if _is_tile(st.value) else f"tp.full((BM, BR), {val}, {_tp(dtype)})"
        if R != br:
            v_text = f"tp.where(r < R, {v_text}, {_init_literal(st.kind, dtype)})"
        name = f"s{j}"
        em.lines.append(f"{name} = {_FINAL[st.kind] or 'tp.prod'}({v_text}, axis=1, keepdims=True)")
        store_dt = st.out.dtype
        if vals.compute_dtype(store_dt) != store_dt:      # read back from a half buffer: round as stored
            em.lines.append(f"{name} = {name}.to({_tp(store_dt)}).to({_tp(dtype)})")
        em.done[vals.load(st.out.name, m_var, store_dt)] = name
        if st.out.name in k.keep:
            vname, ov = _out_view(em, st.out, (M, 1))
            stores.append(f"tp.store({vname}[m0:m0 + BM, 0:1], {name})")
            outs.append(ov)
    val = em.value(k.value)
    tile = "(BM, 1)" if k.per_row else "(BM, BR)"
    v_text = val if _is_tile(k.value) else f"tp.full({tile}, {val}, {_tp(k.value.dtype)})"
    if k.per_row:
        vname, ov = _out_view(em, k.out, (M, 1))
        stores.append(f"tp.store({vname}[m0:m0 + BM, 0:1], {v_text})")
    else:
        vname, ov = _out_view(em, k.out, (M, R))
        stores.append(f"tp.store({vname}[m0:m0 + BM, 0:BR], {v_text})")
    outs.append(ov)
    lines = em.lines + stores
    if _is_tile(k.value) and all(_is_tile(st.value) for st in k.stages):
        # what each stored element is computed from: the value at its (m, r), each stage read as its reduction
        stages = {st.out.name: (st.value, (lambda s: (None, s, None)) if R != br else (lambda s: s), m_var)
                  for st in k.stages}
        claim = lower_tags.row_fused_store_assertion(
            k.value, stages, vname, ("m", None) if k.per_row else ("m", "r"), br)
        if claim:
            lines.insert(0, claim)
    body = ["m0 = tp.block_id(0) * BM", "r0 = 0"]
    if _uses(lines, "m"):
        body.append("m = (m0 + tp.arange(BM))[:, None]")
    if _uses(lines, "r"):
        body.append("r = tp.arange(BR)[None, :]")
    body += lines
    consts = {"M": M, "R": R, "BM": bm, "BR": br}
    # 16 elements of the block's rows per thread, 128 to 512 threads. benchmarks/row_kernels.py (H100,
    # results/row_kernels-threads-*.json) timed 128 / 256 / 512 / 1024 threads on softmax, log_softmax, LayerNorm and
    # RMSNorm rows of 512 to 16384 elements in bf16 and f32: 16 per thread was within 5% of the best block size in
    # every case; the 32 per thread before cost bf16 rows of 4096 18-25% (LayerNorm 68 -> 57 us, RMSNorm 61 -> 52);
    # 1024 threads was the slowest everywhere (one block per SM at 60 registers)
    threads = max(128, min(512, next_pow2(bm * br // 16)))
    src, args = finish(em, body, outs, buffers, kname, consts, threads, k.what)
    return [(src, kname, args, f"lambda m: (tp.cdiv({M}, m['BM']),)")], []


