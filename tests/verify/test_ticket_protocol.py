"""The last-arriver ticket protocol between blocks (tilepy_verify/checks/tickets.py) on a stream-K fix-up
(tests/verify/ticket_kernels.py): the correct kernel computes every tile's sum on the interpreter (float64
reference, blocks in any order) and verifies free of global races; each seeded bug is a global race with both
blocks and the element: the part put into the slot after the ticket (no release), the fix-up not masked by
the ticket (no acquire), the ticket on the next tile's lock, and a relaxed ticket (no order at all)."""

import numpy as np
import pytest

import tilepy_verify as tv
from tests.verify import ticket_kernels as tk


@pytest.mark.parametrize("tiles,kt,grid", [(3, 5, 4), (2, 7, 3), (4, 4, 4), (1, 9, 2)])
def test_fixup_is_correct_on_the_interpreter(tiles, kt, grid):
    rng = np.random.default_rng(tiles * 100 + kt * 10 + grid)
    bn = 32
    x = rng.standard_normal((tiles * kt, bn)).astype(np.float32)
    ref = x.astype(np.float64).reshape(tiles, kt, bn).sum(axis=1)
    ws = np.zeros((2 * grid, bn), np.float32)
    locks = np.zeros(tiles, np.int32)
    for _ in range(2):  # the tickets are left zero for the next call
        c = np.full((tiles, bn), np.nan, np.float32)
        tk.streamk_fixup[(grid,)](x, c, ws, locks, kt, BN=bn)
        np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5)
        assert not locks.any()


def test_correct_fixup_verifies_clean():
    report = tv.verify(tk.streamk_fixup, checks=["global_race"])
    assert report.findings == [], [f.message for f in report.findings]


@pytest.mark.parametrize("bug,params", [
    ("no_release", {"WS"}),
    ("no_acquire", {"WS", "C", "LOCKS"}),
    ("wrong_tile", {"WS", "C", "LOCKS"}),
    ("relaxed", {"WS", "LOCKS"}),
])
def test_seeded_fixup_bugs_are_races(bug, params):
    report = tv.verify(tk.streamk_fixup, checks=["global_race"], BUG=bug)
    assert not report.ok and all(f.check == "global_race" for f in report.findings)
    races = [f for f in report.findings if f.message.startswith("data race")]
    found = {f.message.split("'")[1] for f in races}
    # each race the bug makes is found (under heavy load a query of a tensor the bug also races on may end
    # "not proven" instead: still an error, never a proof); the first tensor named is the one the bug breaks
    assert found <= params and next(iter(sorted(params - {"LOCKS"}))) in found, [f.message for f in report.findings]
    if len(races) == len(report.findings):
        assert found == params, [f.message for f in report.findings]
    for f in races:
        cex = f.counterexample
        assert cex["block"] != cex["other_block"]
