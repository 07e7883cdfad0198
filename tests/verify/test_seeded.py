"""Seeded bugs: each buggy kernel is reported by the right check at the right line with a counterexample the
interpreter replays; each fixed twin verifies clean."""

from __future__ import annotations

import numpy as np
import pytest

import tilepy_verify as tv

from . import seeded_kernels as S
from .replay import observe

SRC = open(S.__file__).read().splitlines()


def line_of(marker: str, kernel: str | None = None) -> int:
    lo = 0
    if kernel is not None:
        lo = next(i for i, text in enumerate(SRC) if text.startswith(f"def {kernel}("))
    hits = [i + 1 for i, text in enumerate(SRC) if marker in text and i >= lo]
    assert hits, marker
    return hits[0]


# (kernel, BUG, check, marker of the line the finding points at, what the interpreter shows)
CASES = [
    # pipeline hazards
    ("pipe_gemm", "wait", "pipeline_hazard", "acc = tp.mma(a_s[k % STAGES], b_s[k % STAGES], acc)", "pipeline_hazard"),
    ("pipe_gemm", "nobarrier", "pipeline_hazard", "acc = tp.mma(a_s[k % STAGES], b_s[k % STAGES], acc)",
     "pipeline_hazard"),
    ("pipe_gemm", "stage", "pipeline_hazard", "refills the stage being read", "pipeline_hazard"),
    ("pipe_gemm", "commit", "pipeline_hazard", "acc = tp.mma(a_s[k % STAGES], b_s[k % STAGES], acc)", "poison"),
    # out of bounds
    ("pipe_gemm", "oob_alloc", "out_of_bounds", "a_s[nk % STAGES])\n", "out_of_bounds"),
    ("pipe_gemm", "oob_index", "out_of_bounds", "# no modulo", "out_of_bounds"),
    ("pipe_gemm", "oob_read", "out_of_bounds", "stage index off by one", "out_of_bounds"),
    # races
    ("stage_copy", "nobarrier", "race", "read by other threads than wrote", "race"),
    ("stage_copy", "loop_war", "race", "read by other threads than wrote", "race"),
    ("role_stage", "roles", "race", "warp 0 writes while the others read", "race"),
    ("role_stage", "two_writers", "race", "tp.store(s, tp.load(X[i0:i0 + 64]))\n", "race"),
    # barrier divergence
    ("diverge", "warp0", "barrier_divergence", "only warp 0 arrives", "barrier_divergence"),
    ("diverge", "else", "barrier_divergence", "only threads 64.. arrive", "barrier_divergence"),
    ("diverge", "lane_loop", "barrier_divergence", "one lane per warp", "barrier_divergence"),
    # MMA layouts
    ("reg_mma", "blocked", "mma_layout", "acc = tp.mma(a, b, acc)", "wrong_result"),
    ("reg_mma", "transposed", "mma_layout", "acc = tp.mma(a, b, acc)", "wrong_result"),
    ("reg_mma", "b_swap", "mma_layout", "acc = tp.mma(a, b, acc)", "wrong_result"),
    # tag assertions
    ("pipe_gemm", "tag_fn", "tag_assertion", "tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])", None),
    ("pipe_gemm", "tag_tile", "tag_assertion", "tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])",
     "wrong_result"),
    ("pipe_gemm", "tag_stage", "tag_assertion", "tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])",
     "wrong_result"),
    ("reg_mma", "transposed", "tag_assertion", "tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])",
     "wrong_result"),
    ("add_tags", "shift", "tag_assertion", "tp.assert_tag(z, lambda t: t[0][1] == t[1][1])", "wrong_result"),
    ("add_tags", "other_block", "tag_assertion", "tp.assert_tag(z, lambda t: t[0][1] == t[1][1])", "wrong_result"),
]

BANK_CASES = ["noswizzle", "wrongswizzle", "halfswizzle"]


def _line(marker, kernel):
    if marker.endswith("\n"):
        text = marker[:-1]
        hits = [i + 1 for i, t in enumerate(SRC) if t.rstrip().endswith(text)]
        return hits
    return [line_of(marker, kernel)]


@pytest.mark.parametrize("kernel, bug, check, marker, shows", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CASES])
def test_seeded_bug_is_reported_with_replayable_counterexample(kernel, bug, check, marker, shows):
    k = getattr(S, kernel)
    report = tv.verify(k, target="sm_80", BUG=bug)
    assert not report.ok
    found = [f for f in report.errors if f.check == check]
    assert found, str(report)
    lines = _line(marker, kernel)
    # the finding points at the buggy line, or names it as the other op involved (a hazard is reported at
    # the read, with the copy that races with it as the other op)
    f = next((f for f in found if f.span.line in lines), None) or next(
        (f for f in found if f.other_span is not None and f.other_span.line in lines), None)
    assert f is not None, (lines, [x.span.line for x in found], str(report))
    text = str(f)
    assert f"{f.span.file}:{f.span.line}" in text and "^" in text and "counterexample" in text
    assert f.to_dict()["check"] == check
    if shows is None:
        return
    kir = k.ir(target="sm_80", BUG=bug)
    obs, args = observe(kernel, kir, f.counterexample)
    cex = f.counterexample
    if shows in ("race", "pipeline_hazard", "out_of_bounds", "barrier_divergence"):
        assert shows in obs.kinds(), (obs.kinds(), obs.error, cex)
        if shows in ("race", "pipeline_hazard"):
            blocks = {v["block"] for v in getattr(obs, shows)}
            assert 0 in blocks or cex["block"][0] in blocks
        if shows == "pipeline_hazard" and cex.get("iteration"):
            its = {dict(v["iteration"]).get("k") for v in obs.pipeline_hazard}
            assert cex["iteration"]["k"] in its, (cex, sorted(x for x in its if x is not None))
        if shows == "race":
            threads = {t for v in obs.race for t in v["threads"]}
            assert cex["thread"] in threads or cex["other_thread"] in threads
    elif shows == "poison":
        out = args[-1]
        assert np.isnan(out).any() or obs.kinds()
    elif shows == "wrong_result":
        _assert_wrong_result(kernel, args)


def _assert_wrong_result(kernel, args):
    if kernel in ("pipe_gemm", "reg_mma"):
        A, B, C = args
        if kernel == "reg_mma":
            ref = A[:16, :16].astype(np.float64) @ B[:16, :16]
            got = C[:16, :16]
        else:
            ref, got = A.astype(np.float64) @ B, C
        assert not np.allclose(got, ref), "the kernel computed the right product"
    else:
        X, Y, Z = args
        assert not np.allclose(Z, X + Y)


FIXED = [("pipe_gemm", {}), ("pipe_gemm", {"STAGES": 3}), ("pipe_gemm", {"STAGES": 4, "BK": 32}),
         ("stage_copy", {}), ("role_stage", {}), ("diverge", {}), ("columns", {}), ("reg_mma", {}), ("add_tags", {})]


@pytest.mark.parametrize("kernel, params", FIXED, ids=[f"{k}-{p}" for k, p in FIXED])
def test_fixed_twin_is_clean(kernel, params):
    report = tv.verify(getattr(S, kernel), target="sm_80", BUG="none", **params)
    assert report.ok, str(report)
    if kernel == "columns":
        assert not report.performance, str(report)


@pytest.mark.parametrize("bug", BANK_CASES)
def test_bank_conflicts_are_performance_findings(bug):
    report = tv.verify(S.columns, target="sm_80", BUG=bug)
    assert report.ok  # performance findings do not fail
    f = report.by_check("bank_conflict")
    assert f and f[0].severity == "performance"
    cex = f[0].counterexample
    assert cex["degree"] >= 2 and len(cex["lanes"]) >= 2
    assert f[0].span.line == line_of("y = tp.load(s, layout=col)")
    # the lanes named really collide: same bank, different words
    acc = [a for a in _analysis(bug).accesses if a.span.line == f[0].span.line][0]
    words = {}
    for lane in cex["lanes"]:
        t = cex["warp"] * 32 + lane
        sel = (acc.thr == t) & (acc.val == cex["value"])
        w = int(acc.off[sel][0]) * acc.eb // 4
        words.setdefault(w % 32, set()).add(w)
    assert max(len(v) for v in words.values()) >= 2


def _analysis(bug):
    from tilepy_verify.domain import analyze

    return analyze(S.columns.ir(target="sm_80", BUG=bug))


def test_stdlib_gemm_without_swizzle_has_bank_conflicts():
    from stdlib_kernels import gemm

    p = dict(gemm.PRESETS["sm_80"], SWIZZLE_A=__import__("tilepy").Swizzle(0, 3, 3),
             SWIZZLE_B=__import__("tilepy").Swizzle(0, 3, 3))
    report = tv.verify(gemm.gemm, target="sm_80", **p)
    assert report.ok and report.by_check("bank_conflict")


def test_wgmma_swizzle_mode_is_checked():
    import tilepy as tp
    from stdlib_kernels import gemm

    bad = dict(gemm.PRESETS["sm_90a"], BK=32)  # 64-byte rows under the 128-byte swizzle
    report = tv.verify(gemm.gemm, target="sm_90a", **bad)
    assert [f.check for f in report.errors] == ["mma_layout"], str(report)
    good = dict(bad, SWIZZLE_A=tp.Swizzle(2, 3, 3))
    assert tv.verify(gemm.gemm, target="sm_90a", **good).ok
    weird = dict(gemm.PRESETS["sm_90a"], SWIZZLE_B=tp.Swizzle(3, 2, 3))
    assert not tv.verify(gemm.gemm, target="sm_90a", **weird).ok


def test_counterexample_names_the_divergent_threads():
    report = tv.verify(S.diverge, target="sm_80", BUG="warp0")
    cex = report.errors[0].counterexample
    assert cex["warp"] == 0 and cex["other_thread"] >= 32


def test_tag_counterexample_shows_both_tags():
    report = tv.verify(S.pipe_gemm, target="sm_80", BUG="tag_tile")
    f = report.by_check("tag_assertion")[0]
    a, b = f.counterexample["tags"]["a"], f.counterexample["tags"]["b"]
    assert a[0] == "A" and b[0] == "B" and a[2] != b[1]
    assert "iteration" in f.counterexample and "lane" in f.counterexample
    assert f.other_span is not None
