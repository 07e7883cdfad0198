"""Reductions that carry more than one value per lane: argmax/argmin (the extreme and its first index) and
Welford's (count, mean, sum of squared deviations), each in one read, as tiles (`render_tiled`'s plumbing),
split into partials and a combine kernel when the outputs alone give too few blocks.
"""

from __future__ import annotations

import dataclasses

import torch

from . import tags as lower_tags
from . import values as vals
from .core import Buffer, Reduction
from .emit import _is_tile, _tp
from .render_tiled import (
    _partial_layout,
    _split_plan,
    block_start,
    chunk_index,
    finish,
    hoist,
    reduction_consts,
    reduction_sizes,
    store_result,
    tile_emitter,
)
from .sizes import cdiv, threads_for
from .values import walk


def render_arg_reduction(k: Reduction, kname: str, buffers: dict) -> tuple[list, list]:
    """argmax/argmin along a strided axis in one pass: each tile lane keeps its extreme value and the first
    index holding it (a NaN is the extreme, as in torch); the lanes then agree on the smallest index of the
    extreme. Too few outputs for the GPU: S partial (value, index) pairs, combined by a second kernel."""

    bi, br, S, C = _split_plan(k)
    if S == 1:
        return [_arg_kernel(k, kname, buffers, bi, br, 1, C, None, (k.out2, k.out))], []
    shape, idx = _partial_layout(k, S)
    pv = Buffer(f"{k.out2.name}_part", shape, k.value.dtype, "temp")
    pi = Buffer(f"{k.out.name}_part", shape, torch.int64, "temp")
    buffers = dict(buffers, **{pv.name: pv, pi.name: pi})
    first = _arg_kernel(k, kname, buffers, bi, br, S, C, None, (pv, pi))
    second = dataclasses.replace(k, value=vals.load(pv.name, idx, pv.dtype), R=S, extra={"no_split": True})
    b2, r2, _, c2 = _split_plan(second)
    combine = _arg_kernel(second, kname + "_combine", buffers, b2, r2, 1, c2, vals.load(pi.name, idx, torch.int64),
                          (k.out2, k.out))
    return [first, combine], [pv, pi]


def _arg_kernel(k, kname, buffers, bi, br, S, C, index_v, targets):
    names = {}
    for v in walk([k.value] + ([index_v] if index_v is not None else [])):
        if v.op in ("load", "gather"):
            names[v.args[0]] = v.args[0]
    for b in targets:
        names[b.name] = b.name
    em = tile_emitter(names, buffers, False, reduction_sizes(k, False))
    pre_lines = hoist(em, [k.value])
    val = em.value(k.value)
    # indices fold as i32 (the reduced range is < 2^31): half the registers of i64 lanes; stored as i64
    ind = f"({em.value(index_v)}).to(tp.i32)" if index_v is not None else "r.to(tp.i32)"
    loop_lines = em.lines
    cmp = ">" if k.kind == "argmax" else "<"
    dt = _tp(k.value.dtype)
    init = 'float("-inf")' if k.kind == "argmax" else 'float("inf")'
    inner = chunk_index(False, S) + loop_lines
    inner.append(f"v = {val}")
    # the first valid element of a lane is always taken; after it a strictly better one, or the first NaN
    take = f"(v {cmp} accv) | ((v != v) & (accv == accv)) | (acci < 0)"
    if S * C != k.R:
        take = f"({take}) & (r < R)"
    inner += [f"take = {take}", "accv = tp.where(take, v, accv)", f"acci = tp.where(take, {ind}, acci)"]
    body = block_start(False, S, pre_lines + inner)
    body += pre_lines
    starts = [f"accv = tp.full((BR, BI), {init}, {dt})", "acci = tp.full((BR, BI), -1, tp.i32)"]
    body += starts + ["for k in range(tp.cdiv(C, BR)):"]
    body += ["    " + line for line in inner]
    post = ["isnan = tp.max((accv != accv).to(tp.i32), axis=0, keepdims=True)",
            f"best = tp.{'max' if k.kind == 'argmax' else 'min'}(accv, axis=0, keepdims=True)",
            "hit = tp.where(isnan != 0, accv != accv, accv == best) & (acci >= 0)",
            "res_i = tp.min(tp.where(hit, acci, 2147483647), axis=0)",
            f"res_v = tp.where(tp.max((accv != accv).to(tp.i32), axis=0) != 0, float(\"nan\"), "
            f"tp.{'max' if k.kind == 'argmax' else 'min'}(accv, axis=0))"]
    body += post
    outs = []
    # the value and the index lanes fold the same chunks of the same output's range, each iteration comparing
    # the lowering's value at (o, r', i) (the combine: partial r' of the value, and of the index it keeps): the
    # stored value, and the index lanes where the loop ends (the index's store reads every lane's comparisons
    # through isnan / best / hit: 2^8 tag alternatives, seconds of proof, for what these two already state)
    claims = []
    lanes = lower_tags.template_store_assertion(
        em, pre_lines + starts, inner, [], "acci", "acci", ("o", "s", "i") if S > 1 else ("o", "i"), cdiv(C, br), br,
        "s" if S > 1 else None, at=("o", "s", "(i0 + tp.arange(BI))[None, :]") if S > 1 else
        ("o", "(i0 + tp.arange(BI))[None, :]"))
    if lanes:
        body.insert(len(body) - len(post), lanes)
    for buf, text in zip(targets, ("res_v", "res_i")):
        line, ov = store_result(em, buf, k, False, text if text == "res_v" else "res_i.to(tp.i64)", S)
        body.append(line)
        outs.append(ov)
        if text == "res_v":
            claims.append(lower_tags.template_store_assertion(
                em, pre_lines + starts, inner, post, text, line[len("tp.store("):line.index("[")],
                ("o", "s", "i") if S > 1 else ("o", "i"), cdiv(C, br), br, "s" if S > 1 else None))
    body = [c for c in claims if c] + body
    consts, grid = reduction_consts(k, False, bi, br, C, S)
    src, args = finish(em, body, outs, buffers, kname, consts, threads_for(bi * br), k.what)
    return src, kname, args, grid


def render_welford(k: Reduction, kname: str, buffers: dict) -> tuple[list, list]:
    """Mean and sum of squared deviations in one read: each tile lane folds its elements in (Welford, as
    Chan's pairwise update with weight 1), the lanes are combined with Chan's formula through tile sums; too
    few outputs for the GPU: S partial (count, mean, M2) triples and a combine kernel that folds them the same
    way."""

    bm, br, S, C = _split_plan(k)
    if S == 1:
        return [_welford_kernel(k, kname, buffers, bm, br, 1, C, None, (k.out, k.out2))], []
    shape, idx = _partial_layout(k, S)
    parts = [Buffer(f"{k.out.name}_{n}", shape, torch.float32, "temp") for n in ("cnt", "mean", "m2")]
    buffers = dict(buffers, **{b.name: b for b in parts})
    first = _welford_kernel(dataclasses.replace(k, epilogue=None), kname, buffers, bm, br, S, C, None,
                            tuple(parts))
    loads = tuple(vals.load(b.name, idx, b.dtype) for b in parts)
    second = dataclasses.replace(k, value=loads[1], R=S, extra={"no_split": True})
    b2, r2, _, c2 = _split_plan(second)
    combine = _welford_kernel(second, kname + "_combine", buffers, b2, r2, 1, c2, loads, (k.out, k.out2))
    return [first, combine], parts


def _welford_kernel(k, kname, buffers, bm, br, S, C, partials, targets):
    row = k.mode == "row"
    roots = [k.value] if partials is None else list(partials)
    names = {v.args[0]: v.args[0] for v in walk(roots) if v.op in ("load", "gather")}
    names.update({b.name: b.name for b in targets})
    if k.epilogue is not None:
        names[k.epilogue[0].name] = k.epilogue[0].name
        names.update({v.args[0]: v.args[0] for v in walk([k.epilogue[1]]) if v.op in ("load", "gather")})
    em = tile_emitter(names, buffers, row, reduction_sizes(k, row))
    pre_lines = hoist(em, roots)
    texts = [em.value(v) for v in roots]
    loop_lines = em.lines
    tile = "(BM, BR)" if row else "(BR, BI)"
    A = 1 if row else 0
    masked = S * C != k.R
    inner = chunk_index(row, S) + loop_lines
    if partials is None:
        v = texts[0] if _is_tile(k.value) else f"tp.full({tile}, {texts[0]}, tp.f32)"
        if masked:
            inner += ["ok = r < R", "c = tp.where(ok, 1.0, 0.0)", f"x = tp.where(ok, {v}, mean)", "q = 0.0"]
        else:
            inner += ["c = 1.0", f"x = {v}", "q = 0.0"]
    else:
        c_t, m_t, q_t = texts
        if masked:
            inner += ["ok = r < R", f"c = tp.where(ok, {c_t}, 0.0)", f"x = tp.where(ok, {m_t}, mean)",
                      f"q = tp.where(ok, {q_t}, 0.0)"]
        else:
            inner += [f"c = {c_t}", f"x = {m_t}", f"q = {q_t}"]
    inner += ["n = cnt + c", "delta = x - mean", "w = c / tp.maximum(n, 1.0)", "mean = mean + delta * w",
              "m2 = m2 + q + delta * delta * cnt * w", "cnt = n"]
    body = block_start(row, S, pre_lines + inner)
    body += pre_lines
    starts = [f"cnt = tp.zeros({tile}, tp.f32)", f"mean = tp.zeros({tile}, tp.f32)", f"m2 = tp.zeros({tile}, tp.f32)"]
    body += starts + ["for k in range(tp.cdiv(C, BR)):"]
    body += ["    " + line for line in inner]
    n_post = len(body)
    body += [f"tot = tp.sum(cnt, axis={A}, keepdims=True)",
             f"mu = tp.sum(cnt * mean, axis={A}, keepdims=True) / tp.maximum(tot, 1.0)",
             "dm = mean - mu",
             f"res_n = tp.sum(cnt, axis={A})",
             f"res_mean = tp.sum(cnt * mean, axis={A}) / tp.maximum(res_n, 1.0)",
             f"res_m2 = tp.sum(m2 + cnt * dm * dm, axis={A})"]
    claims = []
    if partials is not None:
        # the combine's lanes fold partial (count, mean, M2) triples, each iteration's three of one partial r'
        # of the output: asserted where the loop ends (its stores read every lane's three through Chan's
        # combination: 2^10 tag alternatives, seconds of proof)
        at = ("(m0 + tp.arange(BM))[:, None]",) if row else ("o", "(i0 + tp.arange(BI))[None, :]")
        for name in ("cnt", "mean", "m2"):
            got = lower_tags.template_store_assertion(
                em, pre_lines + starts, inner, [], name, name, ("m",) if row else ("o", "i"), cdiv(C, br), br,
                at=at)
            if got:
                body.insert(n_post, got)

    def claim(line, text, coords):
        if partials is not None:
            return
        # the stored statistic folds exactly the block's chunks, each iteration's Welford update reading the
        # lowering's value at the output's index and an r' of its chunk (the combine: partial r')
        got = lower_tags.template_store_assertion(
            em, pre_lines + starts, inner, [x for x in body[n_post:] if not x.startswith("tp.store(")], text,
            line[len("tp.store("):line.index("[")], coords, cdiv(C, br), br, "s" if S > 1 else None)
        if got:
            claims.append(got)
    results = ("res_n", "res_mean", "res_m2") if len(targets) == 3 else ("res_mean", "res_m2")
    outs = []
    if len(targets) == 2 and k.epilogue is not None:
        # var/std's per-output step computed here: the results as (BM, 1) / (1, BI) tiles
        out_buf, value, key, store_res = k.epilogue
        body.append(f"q_k = tp.sum(m2 + cnt * dm * dm, axis={A}, keepdims=True)")
        em.done[vals.load(k.out.name, key, k.out.dtype)] = "mu"
        em.done[vals.load(k.out2.name, key, k.out2.dtype)] = "q_k"
        em.lines = []
        val = em.value(value)
        body += em.lines
        v_text = val if _is_tile(value) else f"tp.full({'(BM, 1)' if row else '(1, BI)'}, {val}, {_tp(value.dtype)})"
        line, ov = store_result(em, out_buf, k, row, v_text, keep=True)
        body.append(line)
        outs.append(ov)
        claim(line, v_text, ("m", None) if row else ("o", None, "i"))
        if not store_res:
            targets, results = (), ()
    for buf, text in zip(targets, results):
        line, ov = store_result(em, buf, k, row, text, S)
        body.append(line)
        outs.append(ov)
        if S > 1:
            claim(line, text, ("s", "m") if row else ("o", "s", "i"))
        else:
            claim(line, text, ("m",) if row else ("o", "i"))
    body = claims + body
    consts, grid = reduction_consts(k, row, bm, br, C, S)
    src, args = finish(em, body, outs, buffers, kname, consts, threads_for(bm * br), k.what)
    return src, kname, args, grid
