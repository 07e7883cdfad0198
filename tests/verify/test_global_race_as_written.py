"""global_race on the kernel as written agrees with global_race on the per-stage copies mbarrier_arrays.expand
makes (tilepy_verify/__init__.py `_as_written`): a warp-specialized ring over mbarrier arrays of
STAGES stages copies each block's contiguous run of tiles (`first = block * per`, per = cdiv(tiles, grid):
a product of unknowns) through shared memory into Y. Correct, both forms prove it race-free; with BUG="row"
(every block stores its k-th tile at row tile k) both report the race on Y, on the same store, naming two
blocks. Both forms are run on the interpreter too: the correct kernel copies X, the bug's blocks overwrite one
another's rows."""

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv
from tilepy_verify import Context
from tilepy_verify.checks import global_race
from tilepy_verify.domain import analyze
from tilepy_verify.mbarrier_arrays import expand
from tilepy_verify.vc import Solver_


@tp.kernel(threads=96, target="sm_90a")
def ring_copy(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], B: tp.constexpr = 64,
              STAGES: tp.constexpr = 2, BUG: tp.constexpr = "none"):
    buf = tp.shared((B,), tp.f32, stages=STAGES)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    tiles = tp.cdiv(X.shape[0], B)
    per = tp.cdiv(tiles, tp.num_blocks(0))
    first = tp.block_id(0) * per
    n = tp.minimum(per, tiles - first)
    if tp.warp_id() == 0:
        for k in range(n):
            tp.mbarrier_wait(empty[k % STAGES], k // STAGES)
            tp.copy_bulk(X[(first + k) * B:(first + k + 1) * B], buf[k % STAGES], full[k % STAGES])
            tp.mbarrier_arrive(full[k % STAGES])
    else:
        for r in tp.static_range(STAGES):
            tp.mbarrier_arrive(empty[r])
        for k in range(n):
            tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            x = tp.load(buf[k % STAGES], layout=tp.blocked((B,), 64, 1))
            tp.mbarrier_arrive(empty[k % STAGES])
            t = k if BUG == "row" else first + k
            tp.store(Y[t * B:(t + 1) * B], x)


def _unrolled(kir):
    """global_race's findings on the expanded form only (what verify asked before the as-written form)."""
    analysis = analyze(expand(kir, []))
    solver = Solver_()
    solver.facts.update(analysis.trip_facts)
    try:
        return global_race.check(Context(analysis, solver))
    finally:
        solver.close()


def _key(findings):
    return {(f.check, f.span.line, f.message.split("'")[1]) for f in findings}


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("bug", ["none", "row"])
def test_as_written_agrees_with_the_unrolled_form(stages, bug):
    kir = ring_copy.ir(None, STAGES=stages, BUG=bug)
    written = tv.verify_ir(kir, ["global_race"]).findings
    assert _key(written) == _key(_unrolled(kir)), ([f.message for f in written])
    if bug == "none":
        assert written == []
    else:
        assert written and all(f.counterexample["block"] != f.counterexample["other_block"] for f in written)
        assert {f.message.split("'")[1] for f in written} == {"Y"}


@pytest.mark.parametrize("bug", ["none", "row"])
def test_ring_copy_on_the_interpreter(bug):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(64 * 11).astype(np.float32)
    y = np.full_like(x, np.nan)
    ring_copy[(3,)](x, y, STAGES=3, BUG=bug)
    if bug == "none":
        np.testing.assert_array_equal(y, x)
    else:
        assert np.isnan(y).any()        # the rows past every block's run are never written
