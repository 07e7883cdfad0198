"""A persistent ring whose first slot is taken out of the ring loop (gemm_persistent DEFER=1's consumer: slot 0's
wait and product in the tile's prologue, the ring loop from k = 1): `mbarrier_arrays._flatten` writes it as one
slot loop as it does the ring from 0 (the copies of round 0 before the loop's start skipped), so the proof of the
whole-ring form carries over. `first_slot` below is that shape on a small ring of row sums:

* BUG == "none": the tile's k-tiles at least 1 (`tp.maximum(k_tiles, 1)`, as gemm_persistent DEFER=2 has it):
  clean;
* BUG == "k0": k_tiles as it is: with K = 0 the ring runs no round, and the prologue waits on full[0] for a copy
  the producer never issues (a real deadlock, on the interpreter too; gemm_persistent DEFER=1's remaining
  finding);
* BUG == "shifted": the producer copies k-tile k + 1 into k's stage: every tag assertion fails (the prologue's and
  the ring's), wrong sums on the interpreter;
* BUG == "prologue_late": the prologue waits for phase turn + 1 of full[0] (round 1's copy of stage 0).
WHOLE=1 is gemm_persistent DEFER=2's form (the ring loop whole from slot 0, slot 0's wait repeated there, its load
skipped): two waits on full in the consumer's tile loop, the prologue's directly in it, the ring's in the ring loop.
The symbolic tag proof (symbolic_ring._tiled_reader_waits) matches both reads there."""

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv
from tilepy.errors import InterpreterError


@tp.kernel(threads=64)
def first_slot(X: tp.Tensor[tp.f32, "T", "K"], Y: tp.Tensor[tp.f32, "T", 32], STAGES: tp.constexpr = 2,
               BUG: tp.constexpr = "none", WHOLE: tp.constexpr = 0):
    buf = tp.shared((1, 32), tp.f32, stages=STAGES)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    tp.tag(X, lambda t, c: ("X", t, c))
    n_t = X.shape[0]
    k_tiles = tp.cdiv(X.shape[1], 32)
    if BUG != "k0":
        k_tiles = tp.maximum(k_tiles, 1)
    rounds = tp.cdiv(k_tiles, STAGES)
    first = tp.block_id(0)
    step = tp.num_blocks(0)
    if tp.warp_id() == 0:
        for t in range(first, n_t, step):
            turn = ((t - first) // step) * rounds
            for k in range(rounds * STAGES):
                tp.mbarrier_wait(empty[k % STAGES], turn + k // STAGES)
                if k < k_tiles:
                    if BUG == "shifted":    # k-tile k + 1 into k's stage
                        tp.copy_bulk(X[t:t + 1, k * 32 + 32:k * 32 + 64], buf[k % STAGES], full[k % STAGES])
                    else:
                        tp.copy_bulk(X[t:t + 1, k * 32:k * 32 + 32], buf[k % STAGES], full[k % STAGES])
                tp.mbarrier_arrive(full[k % STAGES])
    else:
        for s in tp.static_range(STAGES):
            tp.mbarrier_arrive(empty[s])
        for t in range(first, n_t, step):
            turn = ((t - first) // step) * rounds
            if BUG == "prologue_late":
                tp.mbarrier_wait(full[0], turn + 1)     # round 1's copy of stage 0
            else:
                tp.mbarrier_wait(full[0], turn)         # slot 0 in the prologue: k-tile 0
            x0 = tp.load(buf[0])
            tp.assert_tag(x0, lambda g, r, c: g == ("X", r, c),
                          at=((t + tp.arange(1))[:, None], tp.arange(32)[None, :]))
            acc = x0
            if WHOLE:   # (gemm_persistent DEFER=2: the ring whole from slot 0, its load skipped)
                for k in range(rounds * STAGES):
                    tp.mbarrier_wait(full[k % STAGES], turn + k // STAGES)
                    if k < k_tiles and k > 0:
                        x = tp.load(buf[k % STAGES])
                        tp.assert_tag(x, lambda g, r, c: g == ("X", r, c),
                                      at=((t + tp.arange(1))[:, None], (k * 32 + tp.arange(32))[None, :]))
                        acc = acc + x
                    tp.mbarrier_arrive(empty[k % STAGES])
            else:
                tp.mbarrier_arrive(empty[0])
                for k in range(1, rounds * STAGES):
                    tp.mbarrier_wait(full[k % STAGES], turn + k // STAGES)
                    if k < k_tiles:
                        x = tp.load(buf[k % STAGES])
                        tp.assert_tag(x, lambda g, r, c: g == ("X", r, c),
                                      at=((t + tp.arange(1))[:, None], (k * 32 + tp.arange(32))[None, :]))
                        acc = acc + x
                    tp.mbarrier_arrive(empty[k % STAGES])
            tp.store(Y[t:t + 1, :], acc)


def _sums(x):
    n_t, kk = x.shape
    pad = np.zeros((n_t, max(-(-kk // 32), 1) * 32), np.float64)
    pad[:, :kk] = x
    return pad.reshape(n_t, -1, 32).sum(1)


@pytest.mark.parametrize("n_t, kk, grid, stages", [(5, 160, 2, 2), (4, 32, 3, 2), (7, 96, 1, 3), (3, 0, 2, 2)])
def test_slot_loop_computes_what_the_nested_loops_do(n_t, kk, grid, stages):
    """The rewrite is exact for a ring loop from k = 1: the rewritten IR (one slot loop per role) stores what the
    kernel as written does, and both the row sums (K = 0: one k-tile of zeros)."""
    from tilepy.interpreter import run_ir
    from tilepy_verify.mbarrier_arrays import expand

    x = np.random.default_rng(n_t + kk).standard_normal((n_t, kk)).astype(np.float32)
    kir = first_slot.ir(None, STAGES=stages)
    flat = expand(kir)
    assert flat is not kir
    outs = []
    for ir_ in (kir, flat):
        y = np.full((n_t, 32), np.nan, np.float32)
        run_ir(ir_, (grid,), [x, y])
        outs.append(y)
    np.testing.assert_array_equal(outs[1], outs[0])
    np.testing.assert_allclose(outs[0], _sums(x), rtol=1e-5, atol=1e-5)


def test_first_slot_out_of_the_loop_is_one_slot_loop():
    """Both roles' tile and ring loops become one loop each (the consumer's prologue under `j == 0`, its ring's
    copy 0 under k >= 1): no loop nested in another is left."""
    from tilepy.printer import format_ir
    from tilepy_verify.mbarrier_arrays import expand

    text = format_ir(expand(first_slot.ir(None)))
    loops = [x for x in text.splitlines() if x.strip().startswith("for ")]
    assert len(loops) == 2 and all(x.startswith("    for ") for x in loops), loops


@pytest.mark.parametrize("stages", [2, 3])
def test_first_slot_ring_verifies_clean(stages):
    report = tv.verify(first_slot, STAGES=stages)
    assert report.ok and not report.findings, str(report)
    assert report.stats["queries"] > 0


def test_no_k_tile_deadlocks_and_is_reported():
    """k_tiles = 0 (K = 0): the prologue's wait on full[0] never returns, on the interpreter and in the verifier."""
    x = np.zeros((3, 0), np.float32)
    y = np.full((3, 32), np.nan, np.float32)
    with pytest.raises(InterpreterError, match="deadlock"):
        first_slot[(2,)](x, y, BUG="k0")
    fs = tv.verify(first_slot, BUG="k0").errors
    dl = [f for f in fs if f.check == "deadlock"]
    assert dl and "full[0]" in dl[0].message and dl[0].counterexample, [str(f) for f in fs]


def test_shifted_copy_fails_both_assertions():
    x = np.random.default_rng(5).standard_normal((4, 96)).astype(np.float32)
    y = np.full((4, 32), np.nan, np.float32)
    first_slot[(2,)](x, y, BUG="shifted")
    assert np.abs(y - _sums(x)).max() > 1e-2
    fs = tv.verify(first_slot, BUG="shifted").errors
    lines = sorted({f.span.line for f in fs if f.check == "tag_assertion"})
    assert len(lines) == 2 and all(f.counterexample for f in fs), [str(f) for f in fs]


WHOLE_CASES = [("none", 2), ("none", 3), ("shifted", 2), ("prologue_late", 2), ("k0", 2)]


@pytest.mark.parametrize("bug, stages", WHOLE_CASES, ids=[f"{b}-{st}" for b, st in WHOLE_CASES])
def test_whole_ring_with_prologue_wait_symbolic_same_findings(bug, stages, monkeypatch):
    """DEFER=2's form: with the symbolic-ring switch on the same (check, line) findings as on the stage copies; the
    twin (and the shifted copy, caught at both assertions) take the symbolic form (no fallback); right sums on the
    interpreter for the twin."""
    from tilepy_verify import symbolic_ring
    from tilepy_verify.domain import analyze

    found, reports = [], []
    for on in (False, True):
        monkeypatch.setattr(symbolic_ring, "ENABLED", on)
        first_slot._cache.clear()
        report = tv.verify(first_slot, BUG=bug, STAGES=stages, WHOLE=1)
        found.append(sorted({(f.check, f.span.line) for f in report.errors}))
        reports.append(str(report))
    assert found[0] == found[1], (found, reports)
    first_slot._cache.clear()
    gaps = analyze(first_slot.ir(None, BUG=bug, STAGES=stages, WHOLE=1), symbolic=True).symbolic_gaps
    if bug in ("none", "shifted"):
        assert gaps == [], gaps
    if bug == "none":
        assert found[1] == []
        x = np.random.default_rng(stages).standard_normal((5, 130)).astype(np.float32)
        y = np.full((5, 32), np.nan, np.float32)
        first_slot[(2,)](x, y, STAGES=stages, WHOLE=1)
        np.testing.assert_allclose(y, _sums(x), rtol=1e-5, atol=1e-5)
    elif bug == "shifted":
        assert len({line for check, line in found[1] if check == "tag_assertion"}) == 2, found
    else:
        assert found[1], found
