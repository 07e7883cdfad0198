"""Per-tile handshakes in a persistent ring (issue 17 item 4; G7's withdrawn TMA-store epilogue, benchmarks/NOTES.md):
`tests/verify/epilogue_kernels.py::ring` hands one shared tile c_s between the consumers (write the tile's
accumulator, arrive on `staged`) and the producer (wait for `staged`, store c_s, arrive on `c_free`) once per
output tile, after the tile's ring, against phases of the tile index. The tile and ring loops are one slot loop
before the analysis (mbarrier_arrays._flatten), so these arrivals are made under `if J % R == R - 1` (and
`if J // R > 0`): the arrival counters are floor terms of the slot (tilepy_verify/periodic.py). Before that the
correct kernel had 2 false races on c_s and 3 false deadlocks on both handshake mbarriers.

The correct kernel verifies clean; each seeded bug is reported on the line it breaks and is real on the
interpreter (a deadlock, or a race the trace oracle sees)."""

import numpy as np
import pytest

import tilepy_verify as tv
from stdlib_kernels import gemm_hopper
from tilepy.dtypes import round_bf16
from tilepy_verify import periodic
from tilepy_verify.events import Loop

from . import oracle
from .epilogue_kernels import ring


def _args(m=130, k=200, n=190, seed=0):
    rng = np.random.default_rng(seed + m + k + n)
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    return a, b, np.full((m, n), np.nan, np.float32)


@pytest.mark.parametrize("m, k, n, grid", [(130, 200, 190, 2), (64, 64, 64, 1), (200, 130, 64, 3)])
def test_correct_kernel_computes_the_product(m, k, n, grid):
    """3 x 3 output tiles over 2 blocks (several tiles per block: the handshake's phases 0, 1, ...), 4 k-tiles
    in 2 stages; one tile on one block; a ragged last k-tile."""
    a, b, c = _args(m, k, n)
    ring[(grid,)](a, b, c, target="sm_90a")
    ref = gemm_hopper.reference(a, b)
    assert np.abs(c - ref).max() <= 1e-5 * max(1.0, np.abs(ref).max())


def test_correct_kernel_verifies_clean_and_the_oracle_agrees():
    report = tv.verify(ring, target="sm_90a")
    assert report.ok, str(report)
    assert not [f for f in report.findings if f.check != "bank_conflict"], str(report)
    a, b, c = _args(128, 64, 64)   # two tiles on one block: c_s handed over twice
    obs = oracle.run(ring.ir("sm_90a"), (1,), [a, b, c])
    assert not obs.kinds(), (obs.race[:2], obs.error)
    assert np.abs(c - gemm_hopper.reference(a, b)).max() <= 1e-4


def test_wrong_staged_phase_deadlocks():
    a, b, c = _args(128, 64, 64)
    obs = oracle.run(ring.ir("sm_90a", BUG="staged_phase"), (1,), [a, b, c])
    assert obs.deadlock, obs.error
    report = tv.verify(ring, target="sm_90a", BUG="staged_phase")
    dl = [f for f in report.errors if f.check == "deadlock"]
    assert dl and "'staged'" in dl[0].message and "'c_free'" in dl[0].message, str(report)
    assert dl[0].counterexample, str(dl[0])


@pytest.mark.parametrize("bug", ["free_early", "no_free_wait", "last_phase"])
def test_c_s_race_is_caught_and_real(bug):
    """The consumers overwrite c_s while the producer's store of the previous tile may read it (free_early,
    no_free_wait), or the producer stores the last tile before the consumers wrote it (last_phase)."""
    report = tv.verify(ring, target="sm_90a", BUG=bug)
    races = [f for f in report.errors if f.check == "race"]
    assert races and all("'c_s'" in f.message for f in races), str(report)
    assert not [f for f in report.errors if f.check != "race"], str(report)
    cex = races[0].counterexample
    assert {cex["thread"] // 128, cex["other_thread"] // 128} == {0, 1}, str(races[0])  # producer and consumers
    a, b, c = _args(128, 64, 64)
    obs = oracle.run(ring.ir("sm_90a", BUG=bug), (1,), [a, b, c])
    assert obs.race, "the trace oracle misses it"


@pytest.mark.parametrize("soff", [-1, 0, 1])
@pytest.mark.parametrize("foff", [-1, 0, 1])
def test_shifted_phases_verifier_agrees_with_the_oracle(soff, foff):
    """Every handshake phase shifted by a tile either way: the verifier reports a deadlock exactly where the
    interpreter deadlocks (three tiles on one block), and a race on c_s exactly where the trace oracle sees one."""
    a, b, c = _args(192, 64, 64)
    obs = oracle.run(ring.ir("sm_90a", SOFF=soff, FOFF=foff), (1,), [a, b, c])
    report = tv.verify(ring, target="sm_90a", SOFF=soff, FOFF=foff)
    errors = {f.check for f in report.errors}
    assert errors <= {"deadlock", "race"}, str(report)
    assert ("deadlock" in errors) == bool(obs.deadlock), (str(report), obs.error)
    if not obs.deadlock:
        assert ("race" in errors) == bool(obs.race), (str(report), obs.race[:2])
    assert (soff, foff) != (0, 0) or not errors


# ------------------------------------------------------------------------------------------------ the floor terms


def _loop(start=0, stop=None):
    from tilepy.symbolic import Var

    return Loop(0, "J", Var("J#0"), start, Var("stop") if stop is None else stop, 1, Var("trip#0"), None, None, None)


@pytest.mark.parametrize("r", [1, 2, 3, 5])
@pytest.mark.parametrize("form", ["last", "first", "shift", "second_tile", "bounded"])
def test_periodic_count_and_instances_against_counting(r, form):
    """periodic.Guard over a run-time period R = max(r, 1): the count of iterations in [lo, hi) where the guard
    holds, and the m-th such iteration (Guard.first), evaluated against plain counting."""
    from tilepy.symbolic import BinOp, Const, Var
    from tilepy_verify.vc import AND, cmp, evaluate_term

    lp = _loop()
    v = lp.var
    R = BinOp("max", Var("r"), Const(1))
    conds = {"last": cmp("==", v % R, R - 1), "first": cmp("==", v % R, 0),
             "shift": cmp("==", (v + 2) % R, R - 1),
             "second_tile": AND(cmp("==", v % R, R - 1), cmp(">", v // R, 0)),
             "bounded": AND(cmp("==", v % R, 0), cmp("<", v // R, 3), cmp(">=", v, 1))}
    cond = conds[form]
    g = periodic.guard(cond, lp, set())
    assert g is not None and g.period is not None
    env0 = {"r": r}

    def holds(x):
        return bool(evaluate_term(cond, {**env0, "J#0": x}))

    for lo in range(0, 3):
        for hi in range(0, 3 * max(r, 1) + 8):
            want = sum(holds(x) for x in range(lo, hi))
            assert evaluate_term(g.count(Var("lo"), Var("hi")), {**env0, "lo": lo, "hi": hi}) == want, (lo, hi)
    v0, stride = g.first(0)
    hits = [x for x in range(0, 12 * max(r, 1)) if holds(x)]
    for m, x in enumerate(hits[:8]):
        assert evaluate_term(v0 + stride * m, env0) == x, (m, x)


def test_non_periodic_guard_is_not_summed():
    from tilepy_verify.vc import cmp

    lp = _loop()
    assert periodic.guard(cmp("==", lp.var * lp.var, 1), lp, set()) is None
    assert not periodic.has_period(cmp(">=", lp.var, 2), lp, set())


@pytest.mark.parametrize("seed", range(6))
def test_div_period_is_floor_division(seed):
    """vc.div_period (what a substitution makes of x // R and x % R for R = max(y, c), c >= 1): the multiples of
    R taken out of x, constant remainders folded, floor taken into max / min; exact against Python's floor
    division for every value of the unknowns."""
    from tilepy.symbolic import BinOp, Const, Var
    from tilepy_verify.vc import div_period, evaluate_term

    rng = np.random.default_rng(seed)
    y, m, u = Var("y"), Var("m"), Var("u")
    c = int(rng.integers(1, 4))
    R = BinOp("max", y, Const(c))
    k0 = int(rng.integers(-c, c))
    forms = [R * 2 + k0, m * R + k0, R - 1 + m * R, u + m * R + R * 3, BinOp("max", m * R + k0, R),
             BinOp("min", u, m * R), u * 2 + k0]
    for x in forms:
        for op in ("//", "%"):
            t = div_period(op, x, R)
            for _ in range(40):
                env = {"y": int(rng.integers(-3, 9)), "m": int(rng.integers(-5, 9)), "u": int(rng.integers(-20, 30))}
                xv, rv = evaluate_term(x, env), evaluate_term(R, env)
                want = xv // rv if op == "//" else xv % rv
                assert evaluate_term(t, env) == want, (x, op, t, env)
