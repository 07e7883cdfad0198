"""Cycles of mbarrier waits through three and more roles (tilepy_verify/checks/deadlock.py, issue 17 item 2):
a producer, a consumer and relay roles pass a token round a ring; the producer waiting on the ring's last
mbarrier for one phase too late closes a cycle through every role. The finding names each role, mbarrier,
phase, iteration and line of the ring, the interpreter deadlocks on the same kernel, and the fixed twins
verify clean and run. A seeded family (every ring length 3..8, every role that may hold the late
wait, every round count) checks that the verifier reports exactly the kernels the interpreter deadlocks on."""

import itertools
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilepy as tp
import tilepy_verify as tv
from tilepy.errors import InterpreterError
from tilepy.interpreter import run_ir

SRC = open(__file__).read().splitlines()


@tp.kernel(threads=96, target="sm_90a")
def ring3(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, 32], BUG: tp.constexpr = "none"):
    a = tp.shared((32,), tp.f32)
    full = tp.mbarrier(1)     # A -> B: a holds tile j
    empty = tp.mbarrier(1)    # B -> A: a may be refilled
    mid = tp.mbarrier(1)      # B -> C: tile j is consumed
    free = tp.mbarrier(1)     # C -> A: round j is retired
    rounds = X.shape[0] // 32
    if tp.warp_id() == 0:                                           # A: producer
        for j in range(rounds):
            if j > 0:
                tp.mbarrier_wait(empty, j - 1)                      # A: B released a
                if BUG == "late_free":
                    tp.mbarrier_wait(free, j)                       # A: one phase too late
                else:
                    tp.mbarrier_wait(free, j - 1)                   # A: C retired the round before
            tp.copy_bulk(X[j * 32:(j + 1) * 32], a, full)
            tp.mbarrier_arrive(full)                                # A arrives on full
    elif tp.warp_id() == 1:                                         # B: consumer
        acc = tp.zeros((32,), tp.f32)
        for j in range(rounds):
            tp.mbarrier_wait(full, j)                               # B: tile j landed
            acc += tp.load(a)
            tp.mbarrier_arrive(empty)
            tp.mbarrier_arrive(mid)                                 # B arrives on mid
        tp.store(Y[0:32], acc)
    else:                                                           # C: retires rounds
        for j in range(rounds):
            tp.mbarrier_wait(mid, j)                                # C: round j consumed
            tp.mbarrier_arrive(free)                                # C arrives on free


def line(marker):
    return next(i + 1 for i, t in enumerate(SRC) if marker in t and "line(" not in t)


def deadlocks(kir, tiles, threads_out=32):
    x = np.arange(32 * tiles, dtype=np.float32)
    y = np.zeros(threads_out, np.float32)
    try:
        run_ir(kir, (1,), [x, y])
    except InterpreterError as exc:
        if "deadlock" in str(exc):
            return True
        raise
    return False


def test_three_role_cycle_names_every_role_barrier_phase_and_line():
    report = tv.verify(ring3, BUG="late_free")
    found = [f for f in report.errors if f.check == "deadlock"]
    assert found, str(report)
    f = found[0]
    cex = f.counterexample
    assert f.span.line == line("# A: one phase too late")
    assert len(cex["roles"]) == 3 and set(cex["roles"]) == {"threads 0..31", "threads 32..63", "threads 64..95"}
    assert cex["barrier"] == "free" and cex["phase"] >= 1
    assert "through 3 roles" in f.message and "cycle" in cex["detail"]
    waits = [line("# C: round j consumed"), line("# B: tile j landed")]
    assert [int(s.split("line ")[1].split(",")[0]) for s in cex["chain"]] == waits, cex["chain"]
    assert f.other_span.line == waits[0]
    text = str(f)
    for marker in ("# C arrives on free", "# B arrives on mid", "# A arrives on full"):
        assert f"line {line(marker)}" in text, (marker, text)
    j = cex["iteration"]["j"]
    # the phases of the ring: A waits for round j of free, C for round j of mid, B for round j of full
    assert cex["phase"] == j and cex["other_phase"] == j
    assert deadlocks(ring3.ir(BUG="late_free"), tiles=j + 1)


def test_two_role_search_alone_misses_the_ring(monkeypatch):
    """The ring is found by the longer-cycle search: limited to two roles, no finding (what issue 17 saw)."""
    import tilepy_verify.checks.deadlock as dl

    monkeypatch.setattr(dl, "MAX_ROLES", 2)
    ring3._cache.clear()
    try:
        assert not [f for f in tv.verify(ring3, BUG="late_free").errors if f.check == "deadlock"]
    finally:
        ring3._cache.clear()


def test_three_role_ring_twin_is_clean_and_runs():
    report = tv.verify(ring3)
    assert report.ok and not report.findings, str(report)
    assert not deadlocks(ring3.ir(), tiles=4)


# ------------------------------------------------------------------------------------------ a seeded family


def ring_source(n_roles: int, late: int, shift: int, shifts=None, after=()) -> str:
    """A ring of `n_roles` roles (one warp each): role 0 copies tile j and arrives on t0; role r waits on
    t{r-1} for phase j and arrives on t{r}; role 0 waits on the last one (t{n-1}) for phase j - 1 before
    refilling (and on `empty` from role 1, which reads the tile). `late` is the role whose wait is shifted by
    `shift` phases (or `shifts`: one shift per role); a role r > 0 in `after` arrives before it waits."""
    n = n_roles
    sh = list(shifts) if shifts is not None else [shift if r == late else 0 for r in range(n)]
    bars = "\n".join(f"    t{r} = tp.mbarrier(1)" for r in range(n))
    body = [
        "    if tp.warp_id() == 0:",
        "        for j in range(rounds):",
        "            if j > 0:",
        "                tp.mbarrier_wait(empty, j - 1)",
        f"                tp.mbarrier_wait(t{n - 1}, j - 1 + {sh[0]})",
        "            tp.copy_bulk(X[j * 32:(j + 1) * 32], a, t0)",
        "            tp.mbarrier_arrive(t0)",
    ]
    for r in range(1, n):
        head = f"    elif tp.warp_id() == {r}:" if r < n - 1 else "    else:"
        body += [head]
        if r == 1:
            body += ["        acc = tp.zeros((32,), tp.f32)"]
        wait = [f"            tp.mbarrier_wait(t{r - 1}, j + {sh[r]})"]
        if r == 1:
            wait += ["            acc += tp.load(a)", "            tp.mbarrier_arrive(empty)"]
        arrive = [f"            tp.mbarrier_arrive(t{r})"]
        body += ["        for j in range(rounds):"] + (arrive + wait if r in after and r > 1 else wait + arrive)
        if r == 1:
            body += ["        tp.store(Y[0:32], acc)"]
    return textwrap.dedent(f'''
import tilepy as tp


@tp.kernel(threads={32 * n}, target="sm_90a")
def ring(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, 32]):
    a = tp.shared((32,), tp.f32)
    empty = tp.mbarrier(1)
{bars}
    rounds = X.shape[0] // 32
''') + "\n".join(body) + "\n"


def _load(src, tmp_path, name):
    import importlib.util

    p = tmp_path / f"{name}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ring


@pytest.mark.parametrize("n_roles", range(3, 9))
def test_seeded_rings_reported_iff_the_interpreter_deadlocks(n_roles, tmp_path):
    """Every ring of n roles with one wait shifted by one phase (late: a deadlock the interpreter finds on
    two rounds; early by one phase: the wait returns at once, no deadlock) and the correct ring: the
    verifier reports a deadlock exactly where the interpreter deadlocks, and a deadlock through the whole
    ring names every role."""
    for late, shift in itertools.product(range(n_roles), (0, 1)):
        if shift == 0 and late:
            continue
        k = _load(ring_source(n_roles, late, shift), tmp_path, f"ring{n_roles}_{late}_{shift}")
        report = tv.verify(k)
        dl = [f for f in report.errors if f.check == "deadlock"]
        real = deadlocks(k.ir(), tiles=3)
        assert bool(dl) == real, (n_roles, late, shift, str(report))
        if shift == 0:
            assert not report.findings, str(report)
        if dl and late == 0:
            (f,) = dl
            assert len(f.counterexample["roles"]) == n_roles, str(f)
            assert len(f.counterexample["chain"]) == n_roles - 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(2, 5), st.data())
def test_random_rings_deadlock_iff_the_interpreter_does(tmp_path_factory, n_roles, data):
    """Hypothesis: rings of 2..5 roles, every wait shifted by -1, 0 or +1 phases (a late wait deadlocks
    unless an early wait further along the ring lets it through), relay roles that arrive before they wait.
    A reported deadlock replays on the interpreter at the counterexample's iteration; a clean ring runs
    without deadlock on 1..4 rounds."""
    shifts = data.draw(st.lists(st.sampled_from([-1, 0, 1]), min_size=n_roles, max_size=n_roles), "shifts")
    after = data.draw(st.sets(st.integers(2, n_roles - 1)) if n_roles > 2 else st.just(set()), "arrive first")
    k = _load(ring_source(n_roles, 0, 0, shifts, after), tmp_path_factory.mktemp("ring"), "ring")
    dl = [f for f in tv.verify(k).errors if f.check == "deadlock"]
    if dl:
        its = [f.counterexample.get("iteration") or {} for f in dl]
        tiles = max([it.get("j", 0) for it in its] + [0]) + 2
        assert deadlocks(k.ir(), tiles=tiles), (shifts, after, [str(f) for f in dl])
        for f in dl:
            assert len(f.counterexample["roles"]) >= 1 and f.span.line
    else:
        assert not any(deadlocks(k.ir(), tiles=t) for t in range(1, 5)), (shifts, after)
