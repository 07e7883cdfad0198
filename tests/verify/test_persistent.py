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
        if BUG == "select" or BUG == "select_div":
            gm = n_m - first_m if n_m - first_m < GROUP_M else GROUP_M   # the same, as a conditional expression
        else:
            gm = tp.minimum(n_m - first_m, GROUP_M)      # the last group may be ragged
        pid_m = first_m + (t % npg) % gm
        if BUG == "div" or BUG == "select_div":
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


@pytest.mark.parametrize("form", ["none", "select"])
def test_grouped_persistent_copy_verifies_clean(form):
    report = tv.verify(grouped_copy, BUG=form)
    assert report.ok and not report.errors, str(report)
    assert report.stats["queries"] > 0


def test_stdlib_fp32_gemm_with_grouped_order_verifies_clean():
    """stdlib gemm_fp32 maps its block to a grouped tile order with a run-time divisor and a conditional
    expression for the ragged group: no global race (the blocks past the last tile divide by 0 and stop)."""
    from stdlib_kernels import gemm_fp32

    report = tv.verify(gemm_fp32.gemm_fp32, target="sm_90a", **gemm_fp32.PRESETS["sm_90a"])
    assert report.ok, str(report)


@pytest.mark.parametrize("tm, tn, grid", [(6, 3, 4), (5, 2, 3), (9, 5, 7), (4, 4, 16)])
def test_correct_scheduler_covers_every_tile_once(tm, tn, grid):
    a, c, writers = _run("none", tm, tn, grid)
    assert np.array_equal(c, a) and _collisions(writers) == 0
    _, c2, writers2 = _run("select", tm, tn, grid)
    assert np.array_equal(c2, a) and _collisions(writers2) == 0


@pytest.mark.parametrize("bug", ["div", "stride", "select_div"])
def test_seeded_scheduler_bug_is_a_global_race(bug):
    report = tv.verify(grouped_copy, BUG=bug)
    found = [f for f in report.errors if f.check == "global_race"]
    assert found, str(report)
    cex = found[0].counterexample
    assert cex["block"] != cex["other_block"] and cex["element"] is not None
    dims = cex["dims"]
    tm, tn = max(int(dims.get("TM", 1)), 1), max(int(dims.get("TN", 1)), 1)
    # two tiles of the counterexample's sizes write one element; with one tile per block (a grid of TM * TN)
    # they are two blocks (the race check keeps only the range of a persistent loop, so the iterations it
    # names for the two blocks may need that grid)
    _, _, writers = _run(bug, tm, tn, tm * tn)
    assert _collisions(writers) > 0, (tm, tn)
