"""The coverage check (tilepy_verify/checks/coverage.py, issue 17): a persistent tile loop over exactly as many
tiles as its store-only output has, one of whose writes lands outside the output, leaves an element of it
unwritten. The seeded bug of a grouped (L2-swizzled) scheduler: `% GROUP_M` instead of `% gm` on the ragged
last group maps tiles onto rows past the end (masked off) while the rows of the group stay unwritten; the
two tiles never collide, so it is no global race. The interpreter shows it: on the counterexample's sizes,
with any grid, elements of the output keep their fill value; the correct scheduler writes every one."""

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv
from tilepy.interpreter import run_ir


@tp.kernel(threads=128)
def grouped(A: tp.Tensor[tp.f32, "TM", "TN", 16, 16], C: tp.Tensor[tp.f32, "TM", "TN", 16, 16],
            GROUP_M: tp.constexpr = 4, BUG: tp.constexpr = "none"):
    n_m = A.shape[0]
    n_n = A.shape[1]
    npg = GROUP_M * n_n
    stop = n_m * n_n - 1 if BUG == "short" else n_m * n_n
    for t in range(tp.block_id(0), stop, tp.num_blocks(0)):
        group = t // npg
        first_m = group * GROUP_M
        gm = tp.minimum(n_m - first_m, GROUP_M)          # the last group may be ragged
        if BUG == "mod":
            pid_m = first_m + (t % npg) % GROUP_M        # the bug: rows past the ragged group
        else:
            pid_m = first_m + (t % npg) % gm
        pid_n = (t % npg) // gm
        x = tp.load(A[pid_m, pid_n, :, :])
        tp.store(C[pid_m, pid_n, :, :], x)               # the tile's store


def _unwritten(bug, tm, tn, grid) -> int:
    a = np.random.default_rng(tm * 10 + tn).standard_normal((tm, tn, 16, 16)).astype(np.float32)
    c = np.full_like(a, np.nan)
    run_ir(grouped.ir(BUG=bug), (grid,), [a, c])
    written = ~np.isnan(c)
    assert np.array_equal(c[written], a[written])
    return int((~written).sum())


@pytest.mark.parametrize("tm, tn, grid", [(5, 3, 4), (6, 2, 5), (2, 2, 1), (9, 4, 7)])
def test_correct_scheduler_writes_every_element(tm, tn, grid):
    assert _unwritten("none", tm, tn, grid) == 0


def test_correct_scheduler_verifies_clean():
    report = tv.verify(grouped)
    assert report.ok, str(report)


def test_mod_group_bug_is_reported_and_replays():
    report = tv.verify(grouped, BUG="mod")
    assert not [f for f in report.errors if f.check == "global_race"]  # no two tiles collide
    (f,) = [f for f in report.errors if f.check == "coverage"]
    cex = f.counterexample
    assert "never written" in f.message and f.span.line == _line("the tile's store")
    tm, tn = int(cex["dims"]["TM"]), int(cex["dims"]["TN"])
    t = cex["iteration"]["t"]
    assert 0 <= t < tm * tn
    elem = cex["element"]
    assert not (0 <= elem[0] < tm and 0 <= elem[1] < tn)  # the write it names lands outside C
    for grid in (1, 3, tm * tn):  # whatever the grid, elements stay unwritten on the interpreter
        assert _unwritten("mod", tm, tn, grid) > 0


def test_one_tile_short_is_reported_without_a_query():
    """stop = TM * TN - 1: fewer tile writes than C has elements, for every size."""
    report = tv.verify(grouped, BUG="short")
    (f,) = [f for f in report.errors if f.check == "coverage"]
    assert "fewer tiles" in f.message
    dims = f.counterexample["dims"]
    assert _unwritten("short", int(dims["TM"]), int(dims["TN"]), 2) > 0
    assert _unwritten("short", 5, 3, 4) > 0


SRC = open(__file__).read().splitlines()


def _line(marker):
    return next(i + 1 for i, s in enumerate(SRC) if marker in s and "_line(" not in s)
