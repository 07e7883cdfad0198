"""A persistent grid with a grouped (L2-swizzled) tile scheduler (issue 15 item 1): each block walks tiles
`t = block, block + grid, ...` and maps t to (pid_m, pid_n) group by group, with `t // (GROUP_M * n_n)` (a
run-time divisor) and `gm = tp.minimum(n_m - first_m, GROUP_M)` (the ragged last group). The verifier
models both exactly (floor division by a run-time value; a scalar min as a fresh value with its facts in
the path condition) and proves that no two blocks write one tile; the seeded bugs (`// GROUP_M` instead of
`// gm`: two tiles of the ragged last group collide; a stride of 1 instead of the grid: every block walks
every tile) are global races with a counterexample. The interpreter shows each: its trace has two blocks
writing one element exactly when the verifier reports, and the correct kernel computes the full copy."""

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv
from tilepy.interpreter import run_ir


@tp.kernel(threads=128)
def grouped_copy(A: tp.Tensor[tp.f32, "TM", "TN", 16, 16], C: tp.Tensor[tp.f32, "TM", "TN", 16, 16],
                 GROUP_M: tp.constexpr = 4, BUG: tp.constexpr = "none"):
    n_m = A.shape[0]
    n_n = A.shape[1]
    npg = GROUP_M * n_n                                  # tiles per group of GROUP_M tile rows
    step = 1 if BUG == "stride" else tp.num_blocks(0)
    for t in range(tp.block_id(0), n_m * n_n, step):
        group = t // npg
        first_m = group * GROUP_M
        gm = tp.minimum(n_m - first_m, GROUP_M)          # the last group may be ragged
        pid_m = first_m + (t % npg) % gm
        if BUG == "div":
            pid_n = (t % npg) // GROUP_M
        else:
            pid_n = (t % npg) // gm
        x = tp.load(A[pid_m, pid_n, :, :])
        tp.store(C[pid_m, pid_n, :, :], x)               # the tile's store


def _run(bug, tm, tn, grid):
    """(C, {element offset: set of blocks that wrote it}) from an interpreter run with access recording."""
    a = np.random.default_rng(tm * 100 + tn).standard_normal((tm, tn, 16, 16)).astype(np.float32)
    c = np.full_like(a, np.nan)
    trace = run_ir(grouped_copy.ir(BUG=bug), (grid,), [a, c], record=True)
    acc = trace.accesses
    w = acc[(acc["space"] == 0) & acc["write"].astype(bool)]
    writers: dict = {}
    for blk, buf, off in zip(w["block"], w["buffer"], w["offset"]):
        writers.setdefault((int(buf), int(off)), set()).add(int(blk))
    return a, c, writers


def _collisions(writers) -> int:
    return sum(len(b) > 1 for b in writers.values())


def test_grouped_persistent_copy_verifies_clean():
    report = tv.verify(grouped_copy)
    assert report.ok and not report.errors, str(report)


@pytest.mark.parametrize("tm, tn, grid", [(6, 3, 4), (5, 2, 3), (9, 5, 7), (4, 4, 16)])
def test_correct_scheduler_covers_every_tile_once(tm, tn, grid):
    a, c, writers = _run("none", tm, tn, grid)
    assert np.array_equal(c, a) and _collisions(writers) == 0


@pytest.mark.parametrize("bug", ["div", "stride"])
def test_seeded_scheduler_bug_is_a_global_race(bug):
    report = tv.verify(grouped_copy, BUG=bug)
    found = [f for f in report.errors if f.check == "global_race"]
    assert found, str(report)
    cex = found[0].counterexample
    assert cex["block"] != cex["other_block"] and cex["element"] is not None
    dims = cex["dims"]
    tm, tn = max(int(dims.get("TM", 1)), 1), max(int(dims.get("TN", 1)), 1)
    grid = max(cex["block"][0], cex["other_block"][0]) + 1
    _, _, writers = _run(bug, tm, tn, grid)
    assert _collisions(writers) > 0, (tm, tn, grid)  # the counterexample's sizes show two writers
