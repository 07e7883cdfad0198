"""The symbolic-ring tag proof (tilepy_verify/symbolic_ring.py) for a ring loop nested in a persistent tile loop
(gemm_persistent, gemm_fp8_persistent_tma: `for t in range(first, tiles, step): turn = ((t - first) // step) *
rounds; for k in range(rounds * S): wait(full[k % S], turn + k // S)`): the producer's arrivals on an element are
counted over the tile loop (rounds a tile times the tile index, as mbarrier_arrays._flatten writes the slots for the
stage copies), and the copy a wait lands is found at a tile offset of the read's. Its findings must be those of the
stage copies on the nested ring's bugs and twin (tests/verify/test_persistent_nested.py's `ring`, ground truth the
interpreter), it must take the symbolic form where the phase is the tile's first slot plus a count in it, and its
closed form must name the copy that counting the arrivals tile by tile names."""

import logging
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

import tilepy_verify as tv
from tilepy.errors import InterpreterError
from tilepy.symbolic import Var
from tilepy_verify import symbolic_ring
from tilepy_verify.domain import analyze
from tilepy_verify.events import Loop, Point
from tilepy_verify.vc import evaluate_term

from .test_persistent_nested import SMALL, _run, ring

COVERED = ["none", "b_later_tiles", "no_prerelease", "early_refill", "wrong_n0"]
# a round late: at the block's last round the copy it waits for is never issued (that read never runs: the wait
# deadlocks); a round early: the block's first round waits for phase -1 (nothing copied yet). The matched copies
# (the next / the previous tile's) do not cover every execution of the read there
EDGES = ["next_round", "early_round"]
NOT_TILED = ["tile_phase", "late_turn", "short_turn"]  # (the phase is not the tile's first slot plus a count)


def _errors(on, monkeypatch, **cx):
    monkeypatch.setattr(symbolic_ring, "ENABLED", on)
    ring._cache.clear()
    report = tv.verify(ring, target="sm_90a", **{**SMALL, **cx})
    return sorted({(f.check, f.span.line) for f in report.errors}), report


def _gaps(kernel, target="sm_90a", **cx):
    kernel._cache.clear()
    return analyze(kernel.ir(target, **cx), symbolic=True).symbolic_gaps


def _line(text):
    from . import test_persistent_nested

    with open(test_persistent_nested.__file__) as f:
        return next(i for i, x in enumerate(f, 1) if text in x)


@pytest.mark.parametrize("bug", COVERED + EDGES + NOT_TILED)
def test_nested_ring_same_findings_as_the_copies(bug, monkeypatch):
    """Every bug of the nested ring and its twin: the same (check, line) findings with the switch on as on the
    stage copies; the twin clean."""
    off, _ = _errors(False, monkeypatch, BUG=bug)
    on, report = _errors(True, monkeypatch, BUG=bug)
    assert on == off, f"switch on {on} != copies {off}\n{report}"
    assert bool(on) == (bug != "none"), on


def test_nested_ring_takes_the_symbolic_form():
    """The twin and the bugs whose consumer phase is the tile's first slot plus a count (a round late or early, the
    wrong B k-tile from the second tile on, the hazards and deadlocks of the other role) are matched per element
    over the tile loop (no fallback); a phase that is not of that form falls back, naming why."""
    for bug in COVERED:
        assert _gaps(ring, BUG=bug, **SMALL) == [], bug
    for bug in EDGES:  # (matched where a copy exists; the rest falls back, or goes to reaching.py's chain)
        gaps = _gaps(ring, BUG=bug, **SMALL)
        assert gaps == [] or "do not cover every execution" in gaps[0], gaps
    assert _gaps(ring) == []  # the stdlib defaults: 128 x 256, 4 stages
    for bug in NOT_TILED:
        gaps = _gaps(ring, BUG=bug, **SMALL)
        assert gaps and "tile's first slot" in gaps[0], (bug, gaps)


def test_wrong_b_tile_in_later_tiles_caught_symbolically(monkeypatch, caplog):
    """The seeded bug: the producer copies B's k-tile k + 1 from the block's second tile on (tile 0 is right).
    Wrong products on the interpreter; on the symbolic form (no fallback logged) the tag assertion fails at its
    line, the counterexample in a later tile of the block."""
    c, ref = _run("b_later_tiles")
    assert not np.isnan(c).any() and np.abs(c - ref).max() > 1e-2
    with caplog.at_level(logging.DEBUG, logger="tilepy_verify.symbolic_ring"):
        found, report = _errors(True, monkeypatch, BUG="b_later_tiles")
    assert not any("stage copies" in r.getMessage() for r in caplog.records), caplog.text
    line = _line("tp.assert_tag(tp.mma_operands(acc)")
    assert found == [("tag_assertion", line)], (found, line)
    cex = report.errors[0].counterexample
    assert cex["iteration"]["t"] > cex["block"][0], cex  # (not the block's first tile: t = block + n grid, n >= 1)
    assert cex["tags"]["a"][2] != cex["tags"]["b"][1], cex


def test_round_offsets_on_the_interpreter():
    """The two phase bugs the symbolic form matches at another tile offset: a round late deadlocks at the block's
    last round (its copy is never issued); a round early reads stages before their copy (NaN and stale products)."""
    with pytest.raises(InterpreterError, match="deadlock"):
        _run("next_round")
    c, ref = _run("early_round")
    assert np.isnan(c).any() or np.nanmax(np.abs(c - ref)) > 1e-2


def _stdlib_nested():
    from stdlib_kernels import gemm_fp8, gemm_hopper

    yield "gemm_persistent", gemm_hopper.gemm_persistent, dict(gemm_hopper.PRESETS["sm_90a"])
    yield "gemm_persistent 128x128 s5", gemm_hopper.gemm_persistent, {**gemm_hopper.PRESETS["sm_90a"],
                                                                      **gemm_hopper.SMALL_TILE, "STAGES": 5}
    import tilepy as tp

    kern, params = gemm_hopper.plan_kernel(4096, 4096, tp.f32, gemm_hopper.policy(4096, 4096, 4096, tp.f32,
                                                                                    fixup=True), 4096)
    yield "gemm_persistent policy large f32", kern, params
    kern, params = gemm_hopper.plan_kernel(4096, 4096, tp.bf16, gemm_hopper.policy(4096, 4096, 4096, tp.bf16,
                                                                                     fixup=True), 4096)
    yield "gemm_persistent policy large bf16 (DEFER=2)", kern, params
    kern, params = gemm_fp8.kernel_of(gemm_fp8.policy(4096, 4096, 4096))
    yield "gemm_fp8_persistent_tma policy large", kern, params


@pytest.mark.parametrize("case", range(5), ids=[n for n, *_ in _stdlib_nested()])
def test_stdlib_nested_rings_prove_their_tags_symbolically(case, monkeypatch):
    name, kernel, params = list(_stdlib_nested())[case]
    if "policy large" in name and "fp8" not in name:  # (the policy's own forms: pieces, DEFER=2 for bf16 out)
        assert kernel.name == "gemm_persistent" and params.get("STORE_N"), (kernel.name, params)
        assert "bf16" not in name or params.get("DEFER") == 2, params
    kernel._cache.clear()
    kir = kernel.ir("sm_90a", **params)
    analysis = analyze(kir, symbolic=True)
    assert analysis.symbolic_gaps == [] and analysis.assertions, analysis.symbolic_gaps
    monkeypatch.setattr(symbolic_ring, "ENABLED", True)
    report = tv.verify_ir(kir)
    assert report.ok and not report.errors, str(report)


# ------------------------------------------------------------------------------ the count over the tile loop alone


def _nested_model(first, step, tiles, a0, S, rounds, d, C, nx, nb, e, q):
    """Brute force: the producer's tiles in order, each a ring of S * rounds iterations from a0, nb arrivals on
    element (k + d) % S, the copy, nx - nb more; (whether phase q of e completes, the (t, k) of the latest copy on e
    issued with fewer than (q + 1) C arrivals on e before it, or None)."""
    count, latest = 0, None
    for t in range(first, tiles, step):
        for k in range(a0, a0 + S * rounds):
            if (k + d) % S != e:
                continue
            count += nb
            if count < (q + 1) * C:
                latest = (t, k)
            count += nx - nb
    return count >= (q + 1) * C, latest


@settings(max_examples=300, deadline=None)
@given(first=hst.integers(0, 3), step=hst.integers(1, 3), n_tiles=hst.integers(1, 4), a0=hst.integers(0, 2),
       S=hst.integers(2, 4), rounds=hst.integers(1, 3), d=hst.integers(-2, 3), c=hst.integers(1, 2),
       nx=hst.integers(1, 2), nb=hst.integers(0, 2), a=hst.integers(1, 2), off=hst.integers(-1, 1),
       i=hst.integers(0, 3), kr=hst.integers(0, 11))
def test_tiled_latest_matches_brute_force(first, step, n_tiles, a0, S, rounds, d, c, nx, nb, a, off, i, kr):
    """symbolic_ring._latest for a copy in a ring loop in a tile loop (its candidates, one per tile offset, each with
    its validity) against counting the arrivals tile by tile, iteration by iteration: the reader in tile i at ring
    iteration kr waits on element kr % S for phase a * i * rounds + kr // S + off. Where the phase completes, a
    valid candidate is exactly the brute force's copy, and there is one wherever a copy precedes it when the copy's
    round is within one of the wait's (c = a = 1, an arrival after the copy: the offsets -1, 0, 1 cover it; farther
    ones are left to reaching.py's general chain); none is valid where none does."""
    nb, kr, i = min(nb, nx), kr % (S * rounds), i % n_tiles
    tiles = first + n_tiles * step - (step - 1 if step > 1 else 0)  # (a stop that is not on the grid of tiles)
    C = c * nx
    fv, sv, tv_, rv = Var("first"), Var("step"), Var("tiles"), Var("rounds")
    Lt = Loop(0, "t", Var("t#0"), fv, tv_, sv, Var("trip#0"), None, None, None)
    L = Loop(1, "k", Var("k#1"), a0, rv * S + a0, 1, Var("trip#1"), None, None, Lt)
    Lrt = Loop(2, "t", Var("t#2"), fv, tv_, sv, Var("trip#2"), None, None, None)
    Lrk = Loop(3, "k", Var("k#3"), 0, rv * S, 1, Var("trip#3"), None, None, Lrt)

    def point(loops, t):
        return Point(loops, {"T": t}, True, None, (), None)

    elem = (L.var + d) % S
    y = SimpleNamespace(point=point((Lt, L), nb + 1), elem=elem, stage=0)
    xs = [SimpleNamespace(bar="mbar:full", point=point((Lt, L), j + 1 if j < nb else j + 2), elem=elem)
          for j in range(nx)]
    A = SimpleNamespace(arrives=xs, _arrive_ops={("mbar:full", ()): nx})
    phase = (Lrt.index() * rv) * a + Lrk.var // S + off
    W = SimpleNamespace(elem=Lrk.var % S, phase=phase, point=point((Lrt, Lrk), 0))
    assert symbolic_ring._tiled_phase(W) is not None
    got = symbolic_ring._latest(SimpleNamespace(A=A), y, "mbar:full", (), C, W)
    assert not isinstance(got, str), got
    env = {"first": first, "step": step, "tiles": tiles, "rounds": rounds, "t#2": first + i * step, "k#3": kr}
    valid = [(evaluate_term(m["t#0"], env), evaluate_term(m["k#1"], env)) for m, v, _ in got
             if evaluate_term(v, env)]
    q = a * i * rounds + kr // S + off
    completes, want = _nested_model(first, step, tiles, a0, S, rounds, d, C, nx, nb, kr % S, q)
    if not completes:  # the wait never returns (the deadlock check's case): no read runs to be given a tag
        return
    assert len(valid) <= 1, valid
    if want is None:
        assert valid == [], (valid, q)
    elif c == a == 1 and nb < nx:  # the copy's round is the wait's +- 1: one of the three offsets is its tile
        assert valid == [want], (valid, want, q)
    else:
        assert valid in ([], [want]), (valid, want, q)

