"""Issue 17 item 4: what of a ring over mbarrier arrays is decided on the kernel as written, not on its
STAGES loop-body copies (mbarrier_arrays.expand): the reachability of a tag assertion (one query per source
line instead of one witness over STAGES renamed copies). A line reached in one stage's iterations only (k == 0:
copy 0) is reached, so its proof means something; a line no iteration reaches is still an error; the tag proof
itself still runs on the copies (a wrong tag in the one reached copy is still a failure). The reference for
reachability is plain arithmetic over the loop's iterations k in [0, n) for some n >= 0."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilepy as tp
import tilepy_verify as tv


@tp.kernel(threads=160, target="sm_90a")
def ring(X: tp.Tensor[tp.f32, "R", 64], Y: tp.Tensor[tp.f32, "R", 64], BR: tp.constexpr = 32,
         STAGES: tp.constexpr = 3, LO: tp.constexpr = 0, HI: tp.constexpr = 1 << 30, MOD: tp.constexpr = 1,
         REM: tp.constexpr = 0, OFF: tp.constexpr = 0, BUG: tp.constexpr = "none", SOFF: tp.constexpr = 0,
         SMOD: tp.constexpr = 0):
    """A warp-specialized ring (tests/verify/seeded_corpus2.py's ws_pipe) whose consumer asserts the rows' tags
    only in iterations LO <= k < HI with k % MOD == REM; OFF != 0 asserts a wrong row. BUG="stage" reads stage
    k % (STAGES + 1) of STAGES (out of bounds once per STAGES + 1 tiles), "barrier" puts a block barrier in the
    consumer role, "index" reads stage (k + SOFF) % SMOD."""
    tp.tag(X, lambda r, c: ("X", r, c))
    buf = tp.shared((BR, 64), tp.f32, stages=STAGES)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    n = X.shape[0] // BR
    if tp.warp_id() == 0:
        for k in range(n):
            if k >= STAGES:
                tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)
            tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[k % STAGES], full[k % STAGES])
            tp.mbarrier_arrive(full[k % STAGES])
    else:
        for k in range(n):
            tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            if BUG == "stage":
                x = tp.load(buf[k % (STAGES + 1)], layout=tp.blocked((BR, 64), 128, 4))
            elif BUG == "index":
                x = tp.load(buf[(k + SOFF) % SMOD], layout=tp.blocked((BR, 64), 128, 4))
            else:
                x = tp.load(buf[k % STAGES], layout=tp.blocked((BR, 64), 128, 4))
            if BUG == "barrier":
                tp.barrier()
            if k >= LO and k < HI and k % MOD == REM:
                tp.assert_tag(x, lambda t, r: t[1] == r + OFF, at=((k * BR + tp.arange(BR))[:, None],))
            tp.store(Y[k * BR:(k + 1) * BR, 0:64], x * 2.0)
            tp.mbarrier_arrive(empty[k % STAGES])


def _tag_errors(**kw):
    report = tv.verify(ring, **kw)
    assert not [f for f in report.errors if f.check != "tag_assertion"], str(report)
    return [f for f in report.errors if f.check == "tag_assertion"]


def _unreached(found):
    return [f for f in found if "ever reaches" in f.message]


def test_line_reached_in_one_stage_only_is_reached_and_proved():
    assert _tag_errors(HI=1) == []                   # k == 0: only copy 0 reaches it (a false alarm before)
    assert _tag_errors(MOD=3, REM=1, STAGES=3) == []  # every third k: copy 1 only


def test_wrong_tag_in_the_one_reached_copy_still_fails():
    found = _tag_errors(HI=1, OFF=1)
    assert found and not _unreached(found) and "fails for element" in found[0].message, found


def test_line_no_iteration_reaches_is_an_error():
    found = _tag_errors(LO=5, HI=5)
    assert found and _unreached(found), found
    found = _tag_errors(MOD=3, REM=3)                 # k % 3 == 3: never
    assert found and _unreached(found), found


def test_same_answer_as_the_copies_where_each_copy_is_reached(monkeypatch):
    """Without the as-written context (every copy asked, the former path) a line every copy reaches is
    reached too, and an unreachable one an error: the two paths agree where the copies' answer is exact."""
    monkeypatch.setattr(tv.Context, "as_written", lambda self: None)
    assert _tag_errors() == []
    assert _unreached(_tag_errors(LO=5, HI=5))


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(stages=st.integers(2, 4), lo=st.integers(-2, 6), hi=st.integers(-1, 7), mod=st.integers(1, 4),
       rem=st.integers(-1, 4))
def test_reachability_matches_arithmetic(stages, lo, hi, mod, rem):
    """The line is reported unreached exactly when no k >= 0 has lo <= k < hi and k % mod == rem (Python's %,
    as the kernel's on k >= 0): some n > k reaches it otherwise."""
    reached = any(lo <= k < hi and k % mod == rem for k in range(0, max(hi, 0) + mod + 1))
    found = _tag_errors(STAGES=stages, LO=lo, HI=hi, MOD=mod, REM=rem)
    assert bool(_unreached(found)) == (not reached), (found, stages, lo, hi, mod, rem)
    if reached:
        assert found == [], found


PER_STAGE = ["out_of_bounds", "bank_conflict", "mma_layout", "barrier_divergence"]


def _lines(report):
    return sorted((f.check, f.severity, f.span.line) for f in report.findings if f.check in PER_STAGE)


def _ring_cases():
    """(kernel, constexprs) of every kernel of the seeded corpora with mbarrier arrays (each bug and its twin)
    and of `ring`'s seeded per-stage bugs."""
    from tests.verify import seeded_corpus2
    from tilepy_verify.mbarrier_arrays import expand

    seen = set()
    for kernel, bug, _checks, _shows in seeded_corpus2.CORPUS:
        kir = kernel.ir(None, BUG=bug)
        if expand(kir) is kir:
            continue
        for b in (bug, "none"):
            if (kernel.name, b) not in seen:
                seen.add((kernel.name, b))
                yield kernel, {"BUG": b}
    for bug in ("stage", "barrier"):
        yield ring, {"BUG": bug}


def test_per_stage_checks_as_written_find_what_the_copies_find(monkeypatch):
    cases = list(_ring_cases())
    assert len(cases) >= 20
    written = [_lines(tv.verify(k, checks=PER_STAGE, **cx)) for k, cx in cases]
    monkeypatch.setattr(tv, "AS_WRITTEN", ("global_race",))   # the former path: these checks on the copies
    copies = [_lines(tv.verify(k, checks=PER_STAGE, **cx)) for k, cx in cases]
    assert written == copies, [(k.name, cx, w, c) for (k, cx), w, c in zip(cases, written, copies) if w != c]
    found = dict(zip((cx["BUG"] for k, cx in cases if k is ring), (w for (k, _), w in zip(cases, written)
                                                                    if k is ring)))
    assert [c for c, sev, _ in found["stage"] if sev == "error"] == ["out_of_bounds"], found
    assert [c for c, sev, _ in found["barrier"] if sev == "error"] == ["barrier_divergence"], found


def test_out_of_bounds_stage_as_written_names_the_loop_index():
    f = [f for f in tv.verify(ring, checks=["out_of_bounds"], BUG="stage").errors]
    assert len(f) == 1 and f[0].counterexample["stage"] == 3, f     # k % 4 == 3 for STAGES = 3
    assert f[0].counterexample["iteration"]["k"] % 4 == 3, f[0].counterexample


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(stages=st.integers(2, 4), soff=st.integers(-3, 5), extra=st.integers(-1, 2))
def test_stage_index_bounds_as_written_match_arithmetic_and_copies(monkeypatch, stages, soff, extra):
    """Stage (k + soff) % (stages + extra) of `stages` is out of bounds exactly when some k >= 0 gives a
    value outside 0..stages-1 (Python's %: never negative for a positive modulus); as written and on the
    copies alike."""
    smod = stages + extra
    bad = any(not 0 <= (k + soff) % smod < stages for k in range(2 * smod + 8))
    kw = dict(STAGES=stages, BUG="index", SOFF=soff, SMOD=smod)
    written = [f.check for f in tv.verify(ring, checks=["out_of_bounds"], **kw).errors]
    with monkeypatch.context() as m:
        m.setattr(tv, "AS_WRITTEN", ("global_race",))
        copies = [f.check for f in tv.verify(ring, checks=["out_of_bounds"], **kw).errors]
    assert written == copies == (["out_of_bounds"] if bad else []), (written, copies, kw)


def test_collector_threshold_raised_during_a_run_and_restored(monkeypatch):
    """verify_ir raises CPython's young-generation threshold while it runs (its memos keep millions of terms
    alive) and gives the caller's thresholds back afterwards, also after a run that raised."""
    import gc

    from tilepy_verify import checks

    monkeypatch.setattr(tv, "_CACHE", {})   # a report cached by an earlier test of this worker would run no check
    seen = []
    real = checks.ALL["bank_conflict"]
    monkeypatch.setitem(checks.ALL, "bank_conflict", lambda ctx: seen.append(gc.get_threshold()) or real(ctx))
    before = gc.get_threshold()
    try:
        gc.set_threshold(900, 11, 12)
        assert _tag_errors(HI=1) == []
        assert seen and seen[-1][0] >= tv.GC_GEN0 and seen[-1][1:] == (11, 12), seen
        assert gc.get_threshold() == (900, 11, 12)
        monkeypatch.setitem(checks.ALL, "bank_conflict", lambda ctx: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            tv.verify(ring, LO=1)
        assert gc.get_threshold() == (900, 11, 12)
    finally:
        gc.set_threshold(*before)
