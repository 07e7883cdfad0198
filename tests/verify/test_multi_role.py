"""mbarriers that several roles arrive on (issue 17 item 2; tilepy_verify/sync.py `multi_role_shares`,
checks/deadlock.py `_several_roles`): a producer refills a stage after BOTH consumer roles released it
(count 2, FA3's two consumer warpgroups). The per-phase structure (each role one arrival per phase, no role a
phase ahead) is proven only where it holds; a wait then orders after each role's arrivals; a shortfall of the
arrivals summed over the roles is a deadlock naming the roles, the mbarrier, the phase and the lines.

A family of variants is run on the interpreter: whatever it shows (a deadlock, a hazard) the verifier reports
(sound), and the variants that are correct verify clean (precise)."""

import itertools

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv
from tilepy_verify.domain import analyze
from tilepy_verify.mbarrier_arrays import expand
from tilepy_verify.sync import multi_role_shares

from . import oracle

SRC = open(__file__).read().splitlines()


@tp.kernel(threads=96, target="sm_90a")
def pair(X: tp.Tensor[tp.f32, "R", 32], Y: tp.Tensor[tp.f32, "R", 32], COUNT: tp.constexpr = 2,
         A: tp.constexpr = "after", B: tp.constexpr = "after"):
    """Consumer roles a (rows 0..7 of a tile) and b (rows 8..15) release each stage; A, B: where each
    releases: after its read, before it, never, all but the last tile, or (A only) without waiting for the
    stage at all ("ahead": it may complete phases the other role has not reached)."""
    buf = tp.shared((16, 32), tp.f32, stages=2)
    full = tp.mbarrier(1, stages=2)
    empty = tp.mbarrier(COUNT, stages=2)
    n = X.shape[0] // 16
    if tp.warp_id() == 0:                                               # pair: producer
        for k in range(n):
            if k >= 2:
                tp.mbarrier_wait(empty[k % 2], k // 2 - 1)                  # pair: producer waits for release
            tp.copy_bulk(X[k * 16:(k + 1) * 16, 0:32], buf[k % 2], full[k % 2])
            tp.mbarrier_arrive(full[k % 2])
        for s in range(2):
            tp.mbarrier_wait(empty[s % 2], (n - s + 1) // 2 - 1)            # pair: drain
    elif tp.warp_id() == 1:                                             # pair: consumer a
        for k in range(n):
            if A == "ahead":
                tp.mbarrier_arrive(empty[k % 2])                            # pair: a releases without waiting
            else:
                tp.mbarrier_wait(full[k % 2], k // 2)
            if A == "before":
                tp.mbarrier_arrive(empty[k % 2])                            # pair: a releases before reading
            x = tp.load(buf[k % 2][0:8, 0:32], layout=tp.blocked((8, 32), 32, 4))
            tp.store(Y[k * 16:k * 16 + 8, 0:32], x)
            if A == "after":
                tp.mbarrier_arrive(empty[k % 2])                            # pair: a releases after reading
            if A == "notlast":
                if k < n - 1:
                    tp.mbarrier_arrive(empty[k % 2])                        # pair: a skips the last release
    else:                                                               # pair: consumer b
        for k in range(n):
            tp.mbarrier_wait(full[k % 2], k // 2)
            if B == "before":
                tp.mbarrier_arrive(empty[k % 2])                            # pair: b releases before reading
            x = tp.load(buf[k % 2][8:16, 0:32], layout=tp.blocked((8, 32), 32, 4))
            tp.store(Y[k * 16 + 8:k * 16 + 16, 0:32], x)
            if B == "after":
                tp.mbarrier_arrive(empty[k % 2])                            # pair: b releases after reading
            if B == "notlast":
                if k < n - 1:
                    tp.mbarrier_arrive(empty[k % 2])                        # pair: b skips the last release


def _line(marker):
    return next(i + 1 for i, t in enumerate(SRC) if marker in t)


def _observe(kir, tiles):
    x = np.random.default_rng(5).standard_normal((16 * tiles, 32)).astype(np.float32)
    y = np.full_like(x, np.nan)
    obs = oracle.run(kir, (1,), [x, y])
    wrong = obs.error is None and not np.array_equal(y, x)
    return obs, wrong


def test_shares_proven_for_the_correct_pair():
    A = analyze(expand(pair.ir(), []))
    assert multi_role_shares(A) == {"mbar:empty[0]": 1, "mbar:empty[1]": 1}
    assert tv.verify(pair).ok, str(tv.verify(pair))


@pytest.mark.parametrize("count, a", [(3, "after"), (2, "ahead"), (1, "after")])
def test_shares_not_proven(count, a):
    """A count that is not a multiple of the roles, a role that does not wait before releasing: no
    structure (the mbarrier then orders nothing, which is sound)."""
    A = analyze(expand(pair.ir(COUNT=count, A=a), []))
    assert multi_role_shares(A) == {}


def test_wrong_count_is_a_deadlock_naming_roles_phase_and_lines():
    report = tv.verify(pair, COUNT=3, checks=["deadlock"])
    f = next(f for f in report.errors if f.check == "deadlock")
    cex = f.counterexample
    assert cex["barrier"] in ("empty[0]", "empty[1]") and isinstance(cex["phase"], int) and cex["phase"] >= 0
    assert len(cex["roles"]) == 3  # the waiting producer and the two consumer roles
    assert f.span.line in (_line("producer waits for release"), _line("pair: drain"))
    assert "count 3" in cex["detail"] and "arrived on by 2 roles" in cex["detail"]
    obs, _ = _observe(pair.ir(COUNT=3), 6)
    assert obs.deadlock


def test_skipped_last_release_is_a_deadlock_at_the_drain():
    report = tv.verify(pair, B="notlast", checks=["deadlock"])
    f = next(f for f in report.errors if f.check == "deadlock")
    assert f.span.line == _line("pair: drain")
    assert f.other_span.line == _line("pair: b skips the last release")
    obs, _ = _observe(pair.ir(B="notlast"), 5)
    assert obs.deadlock


VARIANTS = [dict(COUNT=c, A=a, B=b) for c, a, b in itertools.product(
    (1, 2, 3), ("after", "before", "never", "notlast", "ahead"), ("after", "before", "never", "notlast"))]


@pytest.mark.parametrize("v", VARIANTS, ids=[f"{v['COUNT']}-{v['A']}-{v['B']}" for v in VARIANTS])
def test_variants_sound_against_the_interpreter(v):
    """Whatever the interpreter shows on 5 or 6 tiles, the verifier reports: a deadlock, a hazard (race or
    pipeline hazard), a wrong result (a refill overwrote a stage before its read)."""
    kir = pair.ir(**v)
    report = tv.verify_ir(kir)
    found = {f.check for f in report.errors}
    for tiles in (5, 6):
        obs, wrong = _observe(kir, tiles)
        if obs.deadlock:
            assert "deadlock" in found, f"{v}: the interpreter deadlocks on {tiles} tiles\n{report}"
        if obs.race or obs.pipeline_hazard or wrong:
            assert found & {"pipeline_hazard", "race"}, f"{v}: the interpreter shows a hazard\n{report}"
    if v == dict(COUNT=2, A="after", B="after"):
        assert report.ok, str(report)
