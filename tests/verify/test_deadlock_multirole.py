"""Cycles of mbarrier waits that pass THROUGH an mbarrier several roles arrive on (issue 17 item 2;
tilepy_verify/checks/deadlock.py `_several_hop`): a hop of the search may now be a wait whose phase needs the
arrivals summed over several roles, each held back by a wait of the cycle (or missing).

`relay`: a producer p and two consumer roles a and b. `done` (count 2) is released by a and b, and p waits
on it before it hands out the next step; `go` (count 2) is arrived on by p and b, and a and b wait on it.
Consumer a waiting on `go` for one phase too late closes a cycle through both several-role mbarriers:
a waits on `go` for p, p waits on `done` for a. Before the multi-role hop, no wait of this cycle had a chain
of single-role hops, and the kernel verified clean while the interpreter deadlocked.

A family of variants (each role's wait shifted by -1, 0 or +1 phases, b arriving on `go` before or after its
wait) is run on the interpreter: the verifier reports a deadlock exactly on the variants the interpreter
deadlocks on (for some tile count)."""

import itertools

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv

from . import oracle

SRC = open(__file__).read().splitlines()


@tp.kernel(threads=96, target="sm_90a")
def relay(X: tp.Tensor[tp.f32, "R", 32], Y: tp.Tensor[tp.f32, "R", 32], PW: tp.constexpr = 0,
          AW: tp.constexpr = 0, BW: tp.constexpr = 0, B_FIRST: tp.constexpr = True):
    done = tp.mbarrier(2)   # arrived on by a and b: step k is consumed
    go = tp.mbarrier(2)     # arrived on by p and b: step k may start
    n = X.shape[0] // 8
    if tp.warp_id() == 0:                                               # relay: p
        for k in range(n):
            if k >= 1:
                tp.mbarrier_wait(done, k - 1 + PW)                      # relay: p waits for step k - 1
            tp.mbarrier_arrive(go)                                      # relay: p arrives on go
        tp.mbarrier_arrive(go)
    elif tp.warp_id() == 1:                                             # relay: a
        for k in range(n):
            tp.mbarrier_wait(go, k + AW)                                # relay: a waits for step k
            x = tp.load(X[k * 8:(k + 1) * 8, 0:32], layout=tp.blocked((8, 32), 32, 1))
            tp.store(Y[k * 8:(k + 1) * 8, 0:32], x)
            tp.mbarrier_arrive(done)                                    # relay: a arrives on done
    else:                                                               # relay: b
        for k in range(n):
            if B_FIRST:
                tp.mbarrier_arrive(go)
            tp.mbarrier_wait(go, k + BW)                                # relay: b waits for step k
            if not B_FIRST:
                tp.mbarrier_arrive(go)
            tp.mbarrier_arrive(done)                                    # relay: b arrives on done
        tp.mbarrier_arrive(go)


def _line(marker):
    return next(i + 1 for i, t in enumerate(SRC) if marker in t and "_line(" not in t)


def _deadlocks(kir, tiles) -> bool:
    x = np.random.default_rng(3).standard_normal((8 * tiles, 32)).astype(np.float32)
    y = np.full_like(x, np.nan)
    obs = oracle.run(kir, (1,), [x, y])
    if not obs.deadlock:
        assert obs.error is None, obs.error
        np.testing.assert_array_equal(y, x)
    return bool(obs.deadlock)


def test_correct_relay_is_clean_and_runs():
    report = tv.verify(relay)
    assert report.ok, str(report)
    assert not any(_deadlocks(relay.ir(), t) for t in (1, 2, 3, 4))


def test_late_wait_closes_a_cycle_through_two_several_role_mbarriers():
    kir = relay.ir(AW=1)
    assert _deadlocks(kir, 3)
    report = tv.verify_ir(kir, checks=["deadlock"])
    found = [f for f in report.errors if f.check == "deadlock"]
    assert found, str(report)
    # a's wait on go: p's arrivals are held back by p's wait on done, which needs a past its wait
    f = next(f for f in found if f.span.line == _line("relay: a waits for step k"))
    cex = f.counterexample
    assert cex["barrier"] == "go" and cex["phase"] >= 1
    assert set(cex["roles"]) == {"threads 0..31", "threads 32..63", "threads 64..95"}
    detail = cex["detail"]
    assert "threads 0..31" in detail and f"line {_line('relay: p arrives on go')}" in detail
    assert f"wait at line {_line('relay: p waits for step k - 1')} on 'done'" in detail
    assert f"past line {_line('relay: a waits for step k')}" in detail
    # p's wait on done: a's arrivals come after a's wait on go (several roles: the hop this test is about)
    f = next(f for f in found if f.span.line == _line("relay: p waits for step k - 1"))
    assert f.counterexample["barrier"] == "done"
    assert f"wait at line {_line('relay: a waits for step k')} on 'go'" in f.counterexample["detail"]


def test_the_hop_is_searched_from_a_single_role_wait():
    """A cycle whose starting wait is on a single-role mbarrier and whose middle hop is the several-role
    `done`: the chain names every role, both mbarriers, phases and lines."""
    kir = single.ir(BUG=True)
    assert _deadlocks_single(kir)
    report = tv.verify_ir(kir, checks=["deadlock"])
    f = next((f for f in report.errors if f.span.line == _line("single: c waits for p")), None)
    assert f is not None, str(report)
    cex = f.counterexample
    assert cex["barrier"] == "tok" and cex["other_barrier"] == "done"
    assert set(cex["roles"]) >= {"threads 0..31", "threads 32..63"}
    (hop,) = cex["chain"]
    assert f"line {_line('single: p waits for both')}" in hop and "'done'" in hop and "at most" in hop
    assert "cycle of mbarrier waits" in f.message
    assert tv.verify(single).ok


@tp.kernel(threads=96, target="sm_90a")
def single(X: tp.Tensor[tp.f32, "R", 32], Y: tp.Tensor[tp.f32, "R", 32], BUG: tp.constexpr = False):
    """p hands a token to a and b over `tok` (count 1, p only) after both released the step before on
    `done` (count 2). BUG: a releases step k only after it waited for step k + 1's token."""
    done = tp.mbarrier(2)
    tok = tp.mbarrier(1)
    n = X.shape[0] // 8
    if tp.warp_id() == 0:
        for k in range(n):
            if k >= 1:
                tp.mbarrier_wait(done, k - 1)                           # single: p waits for both
            tp.mbarrier_arrive(tok)
    elif tp.warp_id() == 1:
        for k in range(n):
            tp.mbarrier_wait(tok, k)
            x = tp.load(X[k * 8:(k + 1) * 8, 0:32], layout=tp.blocked((8, 32), 32, 1))
            tp.store(Y[k * 8:(k + 1) * 8, 0:32], x)
            if BUG:
                if k + 1 < n:
                    tp.mbarrier_wait(tok, k + 1)                        # single: c waits for p
            tp.mbarrier_arrive(done)
    else:
        for k in range(n):
            tp.mbarrier_wait(tok, k)
            tp.mbarrier_arrive(done)


def _deadlocks_single(kir):
    return any(_deadlocks(kir, t) for t in (2, 3, 4))


VARIANTS = [dict(PW=p, AW=a, BW=b, B_FIRST=f)
            for p, a, b, f in itertools.product((-1, 0, 1), (-1, 0, 1), (-1, 0, 1), (True, False))]


@pytest.mark.parametrize("v", VARIANTS, ids=[f"p{v['PW']}a{v['AW']}b{v['BW']}{'f' if v['B_FIRST'] else 'l'}"
                                             for v in VARIANTS])
def test_variants_agree_with_the_interpreter(v):
    """The verifier reports a deadlock exactly on the variants that deadlock on the interpreter for 1..4
    steps (an early wait deadlocks nothing; a late one may be let through by a role that arrives first)."""
    kir = relay.ir(**v)
    report = tv.verify_ir(kir, checks=["deadlock"])
    found = any(f.check == "deadlock" for f in report.errors)
    real = any(_deadlocks(kir, t) for t in (1, 2, 3, 4))
    assert found == real, f"{v}: interpreter deadlocks={real}\n{report}"
