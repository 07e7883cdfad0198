"""Soundness and precision, cross-checked against the interpreter with Hypothesis.

Generated kernels (pipeline rings with varied stage counts, wait counts, barrier placement, stage offsets,
prologue depth, commits and swizzles; shared staging with varied barriers, layouts and role writers) run on the
interpreter with recording. Every race, hazard, out-of-bounds access or divergent barrier the run shows must be
among the verifier's errors; kernels correct by construction must verify without errors; and every error the
verifier reports must be replayable: the interpreter run shows a violation of that kind.

Tagged kernels (elementwise kernels staged through registers, shared memory, async copies, role stores and
cp.async rings, with index offsets, transposed tags, layouts, swizzles, broadcasts and reductions; MMA kernels
with register/shared/async operands, fragment layouts, warp grids, offsets and contraction-index predicates)
run with tests/verify/dynamic_tags.py (DynamicTagTracker), which computes the actual tag of every element and
evaluates every tp.assert_tag on it: every assertion failure it observes must be a tag_assertion finding,
correct-by-construction kernels get none, and every tag_assertion counterexample replays (the tracker sees
that assertion fail at that block, element, contraction index and iteration)."""

from __future__ import annotations

import functools
import os

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tilepy_verify as tv

from . import gen, oracle

# Examples are derandomized (the same every run, so CI is reproducible); VERIFY_RANDOM=1 draws fresh ones, as
# a local search for new counterexamples should.
SETTINGS = settings(max_examples=int(os.environ.get("VERIFY_EXAMPLES", 40)), deadline=None,
                    suppress_health_check=list(HealthCheck), derandomize=not os.environ.get("VERIFY_RANDOM"))
RNG = np.random.default_rng(1)

# what the interpreter shows -> the verifier checks that must report it
EXPECT = {"race": {"race", "pipeline_hazard"}, "pipeline_hazard": {"pipeline_hazard", "race"},
          "out_of_bounds": {"out_of_bounds"}, "barrier_divergence": {"barrier_divergence"},
          "deadlock": {"deadlock"}, "poison": {"pipeline_hazard", "race", "out_of_bounds"}}


def observe(kir, args, evidence=False):
    obs = oracle.run(kir, (1,), args)
    kinds = obs.kinds()
    if evidence and obs.unretired:
        kinds.add("unretired")
    if np.isnan(args[-1]).any():
        kinds.add("poison")  # shared memory read before anything landed in it
    if obs.error is not None and not kinds:
        raise AssertionError(obs.error)
    return kinds


def assert_sound(report, kinds):
    reported = {f.check for f in report.errors}
    for k in kinds:
        assert EXPECT[k] & reported, f"interpreter shows {k}, verifier reports {sorted(reported)}\n{report}"


def assert_replayable(report, kinds, rerun=None):
    """Every error the verifier reports shows up when the interpreter runs with the counterexample's sizes
    (or, for a copy the interpreter never lands, as that copy still in flight when the block ends)."""
    for f in report.errors:
        if f.check == "tag_assertion":
            continue
        dims = f.counterexample.get("dims") or {}
        if rerun is not None and dims:
            kinds = rerun(dims)
        if kinds & {"out_of_bounds", "barrier_divergence", "deadlock"} and f.check not in kinds:
            continue  # the run stopped at that fatal error before reaching this one
        seen = {"race": {"race", "pipeline_hazard"},
                "pipeline_hazard": {"pipeline_hazard", "race", "poison", "unretired"},
                "out_of_bounds": {"out_of_bounds"}, "barrier_divergence": {"barrier_divergence"},
                "deadlock": {"deadlock"}}[f.check]
        assert seen & kinds, f"verifier reports {f.check} the run does not show ({sorted(kinds)}):\n{f}"


pipeline_params = st.fixed_dictionaries({
    "stages": st.integers(1, 3),
    "prologue": st.integers(0, 2),
    "wait_n": st.integers(0, 2),
    "barrier_after_wait": st.booleans(),
    "barrier_end": st.booleans(),
    "order": st.sampled_from(["wait_copy_read", "wait_copy_read", "copy_wait_read", "wait_read_copy"]),
    "nk_off": st.sampled_from([0, 0, -1, 1]),
    "read_off": st.sampled_from([0, 0, 0, 1]),
    "commit": st.sampled_from([True, True, True, False]),
    "modulo": st.sampled_from([True, True, True, False]),
    "add": st.sampled_from([0, 0, 0, 1]),
    "swizzle": st.sampled_from(list(gen.SWIZZLES)),
    "read_layout": st.sampled_from(["other", "same"]),
})


@SETTINGS
@given(p=pipeline_params, k_tiles=st.integers(1, 4))
def test_pipeline_family_sound_and_replayable(p, k_tiles):
    assume(p["prologue"] <= p["stages"])
    kern = gen.load(gen.pipeline_source(**p), "gen")
    kir = kern.ir(target="sm_80")
    report = tv.verify(kir)
    X = RNG.standard_normal((8, 16 * k_tiles)).astype(np.float32)
    kinds = observe(kir, [X, np.zeros_like(X)], evidence=True)
    assert_sound(report, kinds - {"unretired"})

    def rerun(dims):
        n = max(16, min(int(dims.get("N", 16 * k_tiles)), 4096))
        Xr = RNG.standard_normal((8, n)).astype(np.float32)
        return observe(kir, [Xr, np.zeros_like(Xr)], evidence=True)

    assert_replayable(report, kinds, rerun)


@SETTINGS
@given(stages=st.integers(2, 4), swizzle=st.sampled_from(list(gen.SWIZZLES)),
       layout=st.sampled_from(["other", "same"]), barrier_end=st.booleans(), k_tiles=st.integers(1, 5))
def test_correct_pipelines_verify_clean(stages, swizzle, layout, barrier_end, k_tiles):
    src = gen.pipeline_source(stages, stages - 1, stages - 2, True, barrier_end, "wait_copy_read", 0, 0, True, True, 0,
                              swizzle, layout)
    kir = gen.load(src, "gen").ir(target="sm_80")
    report = tv.verify(kir)
    assert report.ok, str(report)
    X = RNG.standard_normal((8, 16 * k_tiles)).astype(np.float32)
    assert not observe(kir, [X, np.zeros_like(X)])


@SETTINGS
@given(loops=st.integers(1, 3), barrier_mid=st.booleans(), barrier_end=st.booleans(), same_layout=st.booleans(),
       role_write=st.booleans(), diverge=st.booleans())
def test_staging_family_sound_and_precise(loops, barrier_mid, barrier_end, same_layout, role_write, diverge):
    src = gen.staging_source(loops, barrier_mid, barrier_end, same_layout, role_write, diverge and role_write)
    kir = gen.load(src, "gen").ir(target="sm_80")
    report = tv.verify(kir)
    X = RNG.standard_normal((16, 16 * loops)).astype(np.float32)
    kinds = observe(kir, [X, np.zeros_like(X)])
    assert_sound(report, kinds)
    assert_replayable(report, kinds)
    if barrier_mid and (barrier_end or loops == 1) and not (diverge and role_write):
        assert report.ok, str(report)


# ------------------------------------------------------------------------------------------ tags, dynamically
#
# Ground truth for tag assertions: tests/verify/dynamic_tags.py (DynamicTagTracker) runs alongside the interpreter
# and computes the actual tag of every element (through global and shared memory, async copies, elementwise
# ops, reductions and MMA fragment reinterpretation) and evaluates every tp.assert_tag on the concrete tags.


def run_tags(kir, grid, args):
    from .dynamic_tags import run

    return run(kir, grid, args)[1]


def assert_tags_sound(report, tracker, hazards=None):
    """Every assertion the run sees fail is reported as a tag_assertion finding at that assertion. The one
    exception is the verifier's documented division of labour: its tags are those of the most recent write,
    and `pipeline_hazard` proves separately that the write landed. So when the run reads data that had not
    landed or was being overwritten (`hazards()`: the interpreter's trace shows a race or pipeline hazard)
    and the verifier reports that hazard, the stale or uninitialized tags it produced need no tag finding."""
    reported = {(f.span.file, f.span.line) for f in report.by_check("tag_assertion")}
    missed = [v for v in tracker.violations if (v.span.file, v.span.line) not in reported]
    if missed and hazards is not None and {"race", "pipeline_hazard"} & {f.check for f in report.errors}:
        if {"race", "pipeline_hazard"} & hazards():
            return
        # the run itself shows the read met shared memory nothing had landed in (an async copy issued and read
        # before any wait, never retired before the block ends: the interpreter never lands it, so the trace
        # holds no write to race with, but the tags show UNINIT): the pipeline check's half, as above
        if all(_met_uninit(v) for v in missed) and "pipeline_hazard" in {f.check for f in report.errors}:
            return
    assert not missed, f"the run shows\n  {missed[0]}\nbut the verifier reports:\n{report}"


def _met_uninit(violation) -> bool:
    """Whether every failure of this assertion met an uninitialized shared element (UNINIT in its tags)."""
    from .dynamic_tags import UNINIT

    def has(tag) -> bool:
        if tag is UNINIT:
            return True
        if isinstance(tag, dict):
            return any(has(t) for t in tag.values())
        if isinstance(tag, (tuple, list, set, frozenset)):
            return any(has(t) for t in tag)
        return False

    return all(has(violation.tags[i]) for i in range(len(violation)))


def assert_tags_replay(report, rerun):
    """Every tag_assertion counterexample replays: the run (on a grid holding its block) sees that assertion
    fail at that block, element (and contraction index) and iteration."""
    for f in report.by_check("tag_assertion"):
        cex = f.counterexample
        tracker = rerun(cex["block"])
        assert tracker.failed(block=cex["block"], coords=cex["coords"], iteration=cex.get("iteration") or {},
                              span=f.span, k_index=cex.get("k_index")), (
            f"the verifier's counterexample does not replay:\n{f}\nthe run shows: "
            + "; ".join(str(v) for v in tracker.violations[:4]))


def assert_no_tag_finding(report):
    assert not report.by_check("tag_assertion"), str(report)


@SETTINGS
@given(x_off=st.integers(-2, 2), y_off=st.integers(-2, 2), block=st.sampled_from([64, 128, 256]),
       blocks=st.integers(1, 3))
def test_tag_family_sound_and_precise(x_off, y_off, block, blocks):
    kir = gen.load(gen.tags_source(x_off, y_off, block), "gen").ir(target="sm_80")
    report = tv.verify(kir)

    @functools.cache
    def launch(nb):
        n = block * nb
        return run_tags(kir, (nb,), [RNG.standard_normal(n).astype(np.float32) for _ in range(2)]
                        + [np.zeros(n, np.float32)])

    def rerun(b=(0, 0, 0)):
        return launch(max(blocks, b[0] + 1))

    tracker = rerun()
    assert_tags_sound(report, tracker)
    assert_tags_replay(report, rerun)
    if x_off == y_off:  # correct by construction: each sum pairs x[i] with y[i]
        assert report.ok and tracker.ok, str(report)
    else:
        assert not tracker.ok
        tags = report.by_check("tag_assertion")[0].counterexample["tags"]["x"]
        assert tags[0][1] != tags[1][1]


# -- elementwise family: staging paths, layouts, offsets, combinations, reductions, predicates

COMBINE = {  # expression, where x's and y's tags sit in z's tag
    "add": ("x + y", "t[0]", "t[1]"),
    "scale": ("x * 2.0 + y", "t[0][0]", "t[1]"),
    "exp": ("tp.exp(x) - y", "t[0][0]", "t[1]"),
    "where": ("tp.where(x > y, x, y)", "t[1]", "t[2]"),
    "bcast": ("x + tp.sum(y, axis=1)[:, None]", "t[0]", "t[1]"),  # y's tag: each element of its row
}
SHARED_LAYOUTS = {"row": "None", "col": "tp.Layout((16, 16), (1, 16))"}
F32_SWIZZLES = {"none": "None", "sw": "tp.Swizzle(2, 2, 4)"}


def elementwise_tag_source(p):
    """x (a 16x16 tile of X, through registers, shared memory, async copies, a role's store or an S-stage
    cp.async ring) combined with y (of Y) elementwise, asserted to pair x's and y's coordinates at an offset."""
    xr, xc, yr, yc = p["x_off"] + p["y_off"]
    R, C = (2, 1) if p["pred_transposed"] else (1, 2)  # where the predicate expects y's row and column
    dr, dc = p["pred_off"]
    expr, px, py = COMBINE[p["combine"]]
    S = p["stages"]
    ring = p["path"] == "ring"
    lines = [
        "import tilepy as tp",
        "",
        "@tp.kernel(threads=64)",
        "def gen(X: tp.Tensor[tp.f32, 'M', 'N'], Y: tp.Tensor[tp.f32, 'M', 'N'], Z: tp.Tensor[tp.f32, 'M', 'N']):",
        "    m0 = tp.block_id(0) * 16",
        f"    s = tp.shared((16, 16), tp.f32, layout={SHARED_LAYOUTS[p['smem_layout']]}, "
        f"swizzle={F32_SWIZZLES[p['swizzle']]}{f', stages={S}' if ring else ''})",
        "    tp.tag(X, lambda i, j: ('x', i, j))",
        "    tp.tag(Y, lambda i, j: ('y', j, i))" if p["y_transposed"] else "    tp.tag(Y, lambda i, j: ('y', i, j))",
    ]

    def xv(col):
        return f"X[m0 + {xr}:m0 + {xr} + 16, {col} + {xc}:{col} + {xc} + 16]"

    if ring:
        for q in range(S - 1):
            lines += [f"    tp.copy_async({xv(q * 16)}, s[{q}])", "    tp.commit_async()"]
    lines += [f"    for it in range({p['iters']}):", "        c0 = it * 16"]
    lx = f"tp.blocked((16, 16), 64, {p['vec']})"
    lines += {
        "reg": [f"        x = tp.load({xv('c0')}, layout={lx})"],
        "copy": [f"        tp.copy({xv('c0')}, s)", "        tp.barrier()", f"        x = tp.load(s, layout={lx})"],
        "async": [f"        tp.copy_async({xv('c0')}, s)", "        tp.commit_async()", "        tp.wait_async(0)",
                  "        tp.barrier()", f"        x = tp.load(s, layout={lx})"],
        "store": [f"        tp.store(s, tp.load({xv('c0')}))", "        tp.barrier()",
                  f"        x = tp.load(s, layout={lx})"],
        "role": ["        if tp.warp_id() == 0:",
                 f"            tp.store(s, tp.load({xv('c0')}, layout=tp.blocked((16, 16), 32, 4)))",
                 "        tp.barrier()", f"        x = tp.load(s, layout={lx})"],
        "ring": [f"        tp.wait_async({S - 2})", "        tp.barrier()", f"        nk = it + {S - 1}",
                 f"        tp.copy_async({xv('nk * 16')}, s[nk % {S}])", "        tp.commit_async()",
                 f"        x = tp.load(s[(it + {p['ring_read']}) % {S}], layout={lx})"],
    }[p["path"]]
    lines += [f"        y = tp.load(Y[m0 + {yr}:m0 + {yr} + 16, c0 + {yc}:c0 + {yc} + 16])",
              f"        z = {expr}"]
    pred = f"{px}[1] - {py}[{R}] == {dr}"
    if not p["rows_only"]:
        pred += f" and {px}[2] - {py}[{C}] == {dc}"
    if p["reduce"]:
        lines += ["        r = tp.sum(z, axis=1)", f"        tp.assert_tag(r, lambda t: {pred})"]
    else:
        lines.append(f"        tp.assert_tag(z, lambda t: {pred})")
    lines.append("        tp.store(Z[m0:m0 + 16, c0:c0 + 16], z)")
    if not ring:
        lines.append("        tp.barrier()")
    return "\n".join(lines) + "\n"


OFF = st.sampled_from([0, 0, 0, 1, -1])
elementwise_params = st.fixed_dictionaries({
    "x_off": st.tuples(OFF, OFF), "y_off": st.tuples(OFF, OFF), "y_transposed": st.booleans(),
    "pred_transposed": st.booleans(), "pred_off": st.tuples(OFF, OFF), "rows_only": st.booleans(),
    "combine": st.sampled_from(list(COMBINE)), "path": st.sampled_from(["reg", "copy", "async", "store", "role",
                                                                          "ring", "ring"]),
    "stages": st.integers(2, 3), "ring_read": st.sampled_from([0, 0, 0, 1]), "vec": st.sampled_from([1, 2, 4]),
    "smem_layout": st.sampled_from(list(SHARED_LAYOUTS)), "swizzle": st.sampled_from(list(F32_SWIZZLES)),
    "iters": st.integers(1, 3), "reduce": st.booleans(), "fix": st.booleans(),
})


def _elementwise_correct(p) -> bool:
    (xr, xc), (yr, yc) = p["x_off"], p["y_off"]
    if p["path"] == "ring" and p["ring_read"]:
        return False
    rows_ok = p["y_transposed"] == p["pred_transposed"] and p["pred_off"][0] == xr - yr
    cols_ok = p["y_transposed"] == p["pred_transposed"] and p["pred_off"][1] == xc - yc and p["combine"] != "bcast"
    return rows_ok and (cols_ok or p["rows_only"])


@settings(SETTINGS, max_examples=int(os.environ.get("VERIFY_EXAMPLES", 40)) // 2)
@given(p=elementwise_params)
def test_elementwise_tags_sound_precise_and_replayable(p):
    if p["fix"]:  # half of the examples correct by construction
        (xr, xc), (yr, yc) = p["x_off"], p["y_off"]
        p = dict(p, pred_transposed=p["y_transposed"], pred_off=(xr - yr, xc - yc), ring_read=0,
                 rows_only=p["rows_only"] or p["combine"] == "bcast")
    kir = gen.load(elementwise_tag_source(p), "gen").ir(target="sm_80")
    report = tv.verify(kir)

    @functools.cache
    def launch(nb):
        shape = (16 * nb, 16 * p["iters"])
        args = [RNG.standard_normal(shape).astype(np.float32) for _ in range(2)] + [np.zeros(shape, np.float32)]
        return run_tags(kir, (nb,), args)

    def rerun(b=(0, 0, 0)):
        return launch(max(2, b[0] + 1))

    def hazards():
        shape = (32, 16 * p["iters"])
        return oracle.run(kir, (2,), [RNG.standard_normal(shape).astype(np.float32) for _ in range(2)]
                          + [np.zeros(shape, np.float32)]).kinds()

    tracker = rerun()
    assert_tags_sound(report, tracker, hazards)
    assert_tags_replay(report, rerun)
    if _elementwise_correct(p):
        assert tracker.ok, "\n".join(str(v) for v in tracker.violations[:3])
        assert_no_tag_finding(report)


# -- MMA family: operand sources (registers, shared, async), fragment layouts, offsets, tag orientation,
#    contraction-index predicates, warp grids

MMA_CONFIGS = [((1, 1), 16, 16, 16), ((2, 1), 32, 16, 16), ((1, 2), 16, 16, 16), ((1, 1), 16, 16, 32),
               ((1, 1), 16, 8, 16)]


def _reg_layouts(warps, which, shape):
    """Register layouts (source text) with the T and V of `which`'s fragment: the fragment itself first."""
    import tilepy as tp

    I16 = tp.nv.mma_m16n8k16_bf16
    exp = tp.mma_layout(I16, which, shape, warps)
    out = {"frag": f"tp.mma_layout(I16, '{which}', {shape}, {warps})"}
    for other in "abc":
        if other == which:
            continue
        try:
            L = tp.mma_layout(I16, other, shape, warps)
        except ValueError:
            continue
        if (L.num_threads, L.num_values) == (exp.num_threads, exp.num_values) and L.coords[0].tolist() != \
                exp.coords[0].tolist():
            out[f"frag_{other}"] = f"tp.mma_layout(I16, '{other}', {shape}, {warps})"
    v = exp.num_values
    out["blocked"] = f"tp.blocked({shape}, {exp.num_threads}, {v})"
    return out


def mma_tag_source(p):
    warps, BM, BN, BK = MMA_CONFIGS[p["config"]]
    T = 32 * warps[0] * warps[1]
    ar, ak = p["a_off"]
    bk, bc = p["b_off"]
    KB = 2 if p["pred_transposed"] else 1  # where the predicate expects b's contraction index
    pred = {"eq": f"a[2] - b[{KB}] == {p['d']}", "tile": f"a[2] // {BK} == b[{KB}] // {BK}",
            "rows": "a[1] >= 0 and b[0] == 'B'"}[p["pred"]]
    lines = [
        "import tilepy as tp",
        "",
        "I16 = tp.nv.mma_m16n8k16_bf16",
        "",
        f"@tp.kernel(threads={T})",
        "def gen(A: tp.Tensor[tp.bf16, 'M', 'K'], B: tp.Tensor[tp.bf16, 'K', 'N'], C: tp.Tensor[tp.f32, 'M', 'N']):",
        f"    m0 = tp.block_id(0) * {BM}",
        f"    n0 = tp.block_id(1) * {BN}",
        f"    a_s = tp.shared(({BM}, {BK}), tp.bf16, layout={_smem_layout(p['a_smem'], (BM, BK))})",
        f"    b_s = tp.shared(({BK}, {BN}), tp.bf16, layout={_smem_layout(p['b_smem'], (BK, BN))})",
        "    tp.tag(A, lambda i, k: ('A', i, k))",
        "    tp.tag(B, lambda k, j: ('B', j, k))" if p["b_transposed"] else "    tp.tag(B, lambda k, j: ('B', k, j))",
        f"    acc = tp.zeros(({BM}, {BN}), tp.f32, layout=tp.accumulator(I16, ({BM}, {BN}), {warps}))",
        f"    for kt in range({p['iters']}):",
    ]
    av = f"A[m0 + {ar}:m0 + {ar} + {BM}, kt * {BK} + {ak}:kt * {BK} + {ak} + {BK}]"
    bv = f"B[kt * {BK} + {bk}:kt * {BK} + {bk} + {BK}, n0 + {bc}:n0 + {bc} + {BN}]"
    la = _reg_layouts(warps, "a", (BM, BK))[p["a_layout"]] if p["a_layout"] in _reg_layouts(warps, "a", (BM, BK)) \
        else _reg_layouts(warps, "a", (BM, BK))["frag"]
    lb = _reg_layouts(warps, "b", (BK, BN))[p["b_layout"]] if p["b_layout"] in _reg_layouts(warps, "b", (BK, BN)) \
        else _reg_layouts(warps, "b", (BK, BN))["frag"]
    sync = False
    for name, view, smem, src, layout in (("a", av, "a_s", p["a_src"], la), ("b", bv, "b_s", p["b_src"], lb)):
        if src == "reg":
            lines.append(f"        {name} = tp.load({view}, layout={layout})")
        elif src == "async":
            lines += [f"        tp.copy_async({view}, {smem})", "        tp.commit_async()", "        tp.wait_async(0)"]
            sync = True
        else:
            lines.append(f"        tp.copy({view}, {smem})")
            sync = True
    if sync:
        lines.append("        tp.barrier()")
    for name, smem, src, layout in (("a", "a_s", p["a_src"], la), ("b", "b_s", p["b_src"], lb)):
        if src == "smem_reg":
            lines.append(f"        {name} = tp.load({smem}, layout={layout})")
        elif src in ("smem", "async"):
            lines.append(f"        {name} = {smem}")
    lines += ["        acc = tp.mma(a, b, acc)", f"        tp.assert_tag(tp.mma_operands(acc), lambda a, b: {pred})"]
    if sync:
        lines.append("        tp.barrier()")
    lines.append(f"    tp.store(C[m0:m0 + {BM}, n0:n0 + {BN}], acc)")
    return "\n".join(lines) + "\n"


def _smem_layout(kind, shape):
    return "None" if kind == "row" else f"tp.Layout({shape}, (1, {shape[0]}))"


mma_params = st.fixed_dictionaries({
    "config": st.integers(0, len(MMA_CONFIGS) - 1), "iters": st.integers(1, 2),
    "a_off": st.tuples(OFF, OFF), "b_off": st.tuples(OFF, OFF), "b_transposed": st.booleans(),
    "pred_transposed": st.booleans(),
    "pred": st.sampled_from(["eq", "eq", "tile", "rows"]), "d": OFF,
    "a_src": st.sampled_from(["reg", "reg", "smem", "smem_reg", "async"]),
    "b_src": st.sampled_from(["reg", "reg", "smem", "smem_reg", "async"]),
    "a_layout": st.sampled_from(["frag", "frag", "frag_b", "frag_c", "blocked"]),
    "b_layout": st.sampled_from(["frag", "frag", "frag_a", "frag_c", "blocked"]),
    "a_smem": st.sampled_from(["row", "col"]), "b_smem": st.sampled_from(["row", "col"]), "fix": st.booleans(),
})


def _mma_correct(p) -> bool:
    warps, BM, BN, BK = MMA_CONFIGS[p["config"]]
    la = p["a_layout"] if p["a_layout"] in _reg_layouts(warps, "a", (BM, BK)) else "frag"
    lb = p["b_layout"] if p["b_layout"] in _reg_layouts(warps, "b", (BK, BN)) else "frag"
    layouts_ok = (p["a_src"] in ("smem", "async") or la == "frag") and (p["b_src"] in ("smem", "async") or lb == "frag")
    (ar, ak), (bk, bc) = p["a_off"], p["b_off"]
    if p["pred"] == "rows":
        return ar >= 0  # whatever the instruction pairs, A's rows are m0 + ar + i
    oriented = p["b_transposed"] == p["pred_transposed"]
    return layouts_ok and oriented and (p["d"] == ak - bk if p["pred"] == "eq" else ak == bk == 0)


@settings(SETTINGS, max_examples=int(os.environ.get("VERIFY_EXAMPLES", 40)) // 2)
@given(p=mma_params)
def test_mma_tags_sound_precise_and_replayable(p):
    if p["fix"]:  # half of the examples correct by construction
        (ar, ak), (bk, bc) = p["a_off"], p["b_off"]
        p = dict(p, a_layout="frag", b_layout="frag", pred_transposed=p["b_transposed"], pred="eq", d=ak - bk)
    warps, BM, BN, BK = MMA_CONFIGS[p["config"]]
    kir = gen.load(mma_tag_source(p), "gen").ir(target="sm_80")
    report = tv.verify(kir)

    @functools.cache
    def launch(gx, gy):
        K = BK * p["iters"]
        args = [RNG.standard_normal((BM * gx, K)).astype(np.float32), RNG.standard_normal((K, BN * gy)).astype(
            np.float32), np.zeros((BM * gx, BN * gy), np.float32)]
        return run_tags(kir, (gx, gy), args)

    def rerun(b=(0, 0, 0)):
        return launch(max(2, b[0] + 1), max(1, b[1] + 1))

    tracker = rerun()
    assert_tags_sound(report, tracker)
    assert_tags_replay(report, rerun)
    if _mma_correct(p):
        assert tracker.ok, "\n".join(str(v) for v in tracker.violations[:3])
        assert_no_tag_finding(report)
