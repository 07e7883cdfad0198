"""The symbolic-ring switch (TILEPY_VERIFY_SYMBOLIC_RINGS, on by default; tilepy_verify/symbolic_ring.py): the tag
proof of a ring over mbarrier arrays on the kernel as written, its reads matched to the copies their waits land per
element, instead of on the STAGES loop-body copies. Its findings must be those of the copies on every ring kernel,
bug and twin (the stage-ring bugs, the corpora's ring kernels, a family at element offsets and several arrivals a
tile), the proof must be the symbolic one where the ring is of the covered form (no fallback), and the copies must
be used, with the reason, where it is not. Ground truth for the family: the interpreter (wrong output, trace
hazards, deadlock)."""

import logging
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

import tilepy_verify as tv
from tilepy.symbolic import Var
from tilepy_verify import symbolic_ring
from tilepy_verify.domain import analyze
from tilepy_verify.events import Loop, Point

from . import oracle, seeded_corpus, seeded_corpus2
from . import stage_ring_kernels as S
from . import symbolic_ring_kernels as K
from . import symbolic_ring_kernels2 as K2
from .test_ring_as_written import ring as gated_ring


def _errors(kernel, on, monkeypatch, **cx):
    monkeypatch.setattr(symbolic_ring, "ENABLED", on)
    kernel._cache.clear()
    report = tv.verify(kernel, **cx)
    return sorted({(f.check, f.span.line) for f in report.errors}), report


def _gaps(kernel, **cx):
    """Why the switch-on tag check would fall back to the copies ([]: it runs symbolically)."""
    kernel._cache.clear()
    return analyze(kernel.ir(None, **cx), symbolic=True).symbolic_gaps


def _same(kernel, monkeypatch, **cx):
    off, _ = _errors(kernel, False, monkeypatch, **cx)
    on, report = _errors(kernel, True, monkeypatch, **cx)
    assert on == off, f"switch on {on} != copies {off}\n{report}"
    return on


STAGE_RING = [("none", st) for st in (2, 3, 4, 6)] + [(b, st) for b, *_ in S.BUGS for st in (3, 4)]


@pytest.mark.parametrize("bug, stages", STAGE_RING, ids=[f"{b}-{s}" for b, s in STAGE_RING])
def test_stage_ring_same_findings(bug, stages, monkeypatch):
    found = _same(S.ring, monkeypatch, BUG=bug, STAGES=stages)
    assert bool(found) == (bug != "none")


def test_stage_ring_twin_and_tag_bug_take_the_symbolic_form():
    """The correct ring and the one-stage wrong-rows bug are of the covered form: proved / caught without the
    copies; so are the bugs with two waits on `full` in the consumer (a phase a round late / early in one stage:
    tests/verify/test_symbolic_ring_fallbacks.py)."""
    for st in (2, 3, 4, 6):
        assert _gaps(S.ring, STAGES=st) == []
    assert _gaps(S.ring, BUG="rowsone") == [] and _gaps(S.ring, BUG="phaselate") == []


def _ring_cases():
    out = []
    for C in (seeded_corpus, seeded_corpus2):
        for kernel in C.KERNELS:
            if not symbolic_ring.uses_arrays(kernel.ir(None)):
                continue
            out.append((kernel, "none"))
            out += [(kernel, bug) for k, bug, *_ in C.CORPUS if k is kernel]
    return out


CORPUS_RINGS = _ring_cases()


@pytest.mark.parametrize("kernel, bug", CORPUS_RINGS, ids=[f"{k.name}-{b}" for k, b in CORPUS_RINGS])
def test_corpus_rings_same_findings(kernel, bug, monkeypatch):
    cx = {} if bug == "none" else {"BUG": bug}
    found = _same(kernel, monkeypatch, **cx)
    if bug == "none":
        assert found == []


def test_corpus_has_ring_kernels():
    assert len({k.name for k, _ in CORPUS_RINGS}) >= 3, [k.name for k, _ in CORPUS_RINGS]


def test_wrong_tag_caught_symbolically(monkeypatch):
    """tests/verify/test_ring_as_written.py's ring: a wrong row in the assertion fails on the symbolic form, the
    right one (in every iteration, or only where k == 0, copy 0) is proved there."""
    assert _gaps(gated_ring, OFF=1) == [] and _gaps(gated_ring, HI=1) == []
    found, report = _errors(gated_ring, True, monkeypatch, OFF=1)
    assert found == [("tag_assertion", found[0][1])] and "fails for element" in report.errors[0].message, report
    assert _errors(gated_ring, True, monkeypatch)[0] == []
    assert _errors(gated_ring, True, monkeypatch, HI=1)[0] == []


def test_fallback_is_logged(monkeypatch, caplog):
    monkeypatch.setattr(symbolic_ring, "ENABLED", True)
    K2.two_producers._cache.clear()
    with caplog.at_level(logging.DEBUG, logger="tilepy_verify.symbolic_ring"):
        tv.verify(K2.two_producers)  # (two producer roles on one array: not of the covered form)
    assert any("tag check on the stage copies" in r.getMessage() and "line" in r.getMessage()
               for r in caplog.records), caplog.text


def test_switch_reads_the_environment(monkeypatch):
    monkeypatch.setattr(symbolic_ring, "ENABLED", None)
    monkeypatch.setenv(symbolic_ring.ENV, "1")
    assert symbolic_ring.enabled()
    monkeypatch.setenv(symbolic_ring.ENV, "0")
    assert not symbolic_ring.enabled()
    monkeypatch.delenv(symbolic_ring.ENV)
    assert symbolic_ring.enabled()  # on by default


ROWS = 10 * 32  # 10 tiles: more than three rounds at 3 stages


def _observe(**cx) -> set:
    rng = np.random.default_rng(1729)
    x = rng.standard_normal((ROWS, 64)).astype(np.float32)
    y = np.full((ROWS, 64), np.nan, np.float32)
    obs = oracle.run(K.ring.ir(None, **cx), (1,), [x, y])
    kinds = obs.classes()
    if obs.error is None and not np.array_equal(y.astype(np.float64), 2.0 * x.astype(np.float64)):
        kinds.add("wrong")
    return kinds


FAMILY = [dict(), dict(D=1), dict(D=2, STAGES=4), dict(NX=2), dict(NX=2, NB=1), dict(D=1, NX=3, NB=2)]
# (every arrival before the copy: the phase completes before the copy is issued, so the wait does not cover it)
BUGGY = [dict(BUG="rows"), dict(BUG="rows", D=1, NX=2, NB=1), dict(BUG="phase"), dict(BUG="phase", D=2, NX=2),
         dict(BUG="elem", NX=2), dict(BUG="elem", D=1, NX=2, NB=1), dict(STAGES=2, D=1, NX=2, NB=2)]


@pytest.mark.parametrize("cx", FAMILY + BUGGY, ids=[repr(c) for c in FAMILY + BUGGY])
def test_family_against_copies_and_interpreter(cx, monkeypatch):
    """Offsets, several arrivals a tile and arrivals before the copy: the switch-on findings are the copies', the
    correct ones are proved symbolically (no fallback) and right on the interpreter, the buggy ones are reported
    and wrong there (a wrong tile, a hazard or a deadlock)."""
    found = _same(K.ring, monkeypatch, **cx)
    shows = _observe(**cx)
    if cx in FAMILY:
        assert found == [] and shows == set(), (found, shows)
        assert _gaps(K.ring, **cx) == []
    else:
        assert found and shows, (found, shows)
        if cx.get("BUG") == "rows":  # a wrong tag in a covered ring: caught by the symbolic proof itself
            assert _gaps(K.ring, **cx) == [] and ("tag_assertion", found[0][1]) in found


def _stdlib_rings():
    from stdlib_kernels import attention, gemm_hopper, gemm_streamk

    return [("gemm_hopper", gemm_hopper.gemm_hopper, "sm_90a", dict(gemm_hopper.PRESETS["sm_90a"])),
            ("gemm_persistent_flat", gemm_hopper.gemm_persistent_flat, "sm_90a", {}),
            ("attention_fwd d64 causal", attention.attention_fwd, None, {**attention.PRESETS[64], "CAUSAL": True}),
            ("gemm_streamk narrow", gemm_streamk.gemm_streamk, "sm_90a", dict(gemm_streamk.PRESETS["narrow"]))]


@pytest.mark.parametrize("case", range(4), ids=["gemm_hopper", "gemm_persistent_flat", "attention_fwd", "streamk"])
def test_stdlib_rings_prove_their_tags_symbolically(case, monkeypatch):
    """The stdlib's flat rings are of the covered form: every ring read is matched per element (no fallback) and
    every tag assertion is proved there, with the switch on as with it off."""
    _name, kernel, target, cx = _stdlib_rings()[case]
    kernel._cache.clear()
    kir = kernel.ir(target, **cx)
    analysis = analyze(kir, symbolic=True)
    assert analysis.symbolic_gaps == [] and analysis.assertions
    monkeypatch.setattr(symbolic_ring, "ENABLED", True)
    report = tv.verify_ir(kir)
    assert report.ok, str(report)


# ---------------------------------------------------------------------------------------- the element count alone


def _ring_model(a0, stop, d, R, C, nx, nb, e, q):
    """Brute force: the producer's iterations in order, nb arrivals on element (k + d) % R, the copy, nx - nb more;
    (whether phase q of element e completes, the latest copy on e issued with fewer than (q + 1) C arrivals on e
    before it or None)."""
    count, latest = 0, None
    for k in range(a0, stop):
        if (k + d) % R != e:
            continue
        count += nb
        if count < (q + 1) * C:
            latest = k
        count += nx - nb
    return count >= (q + 1) * C, latest


@settings(max_examples=300, deadline=None)
@given(a0=hst.integers(0, 3), n=hst.integers(0, 20), d=hst.integers(-3, 5), R=hst.integers(1, 6),
       C=hst.integers(1, 3), nx=hst.integers(1, 3), nb=hst.integers(0, 3), e=hst.integers(0, 5), q=hst.integers(0, 8))
def test_latest_copy_matches_brute_force(a0, n, d, R, C, nx, nb, e, q):
    """symbolic_ring._latest's closed form (the copy instance k_p = v0 + m R with m = ((q + 1) C - 1 - nb) // nx,
    valid where 0 <= m and k_p < stop) against counting the arrivals iteration by iteration, with constant bounds,
    element and phase (the terms fold to numbers), wherever the phase completes (otherwise the wait never returns:
    the deadlock check's case; no read runs to be given a tag). Invalid exactly where no copy precedes it."""
    nb = min(nb, nx)
    e = e % R
    stop = a0 + n
    k = Var("k#0")
    L = Loop(0, "k", k, a0, stop, 1, Var("trip#0"), None, None, None)

    def point(t):
        return Point((L,), {"T": t}, True, None, (), None)

    elem = (k + d) % R
    y = SimpleNamespace(point=point(nb + 1), elem=elem, stage=0)
    xs = [SimpleNamespace(bar="mbar:full", point=point(i + 1 if i < nb else i + 2), elem=elem) for i in range(nx)]
    A = SimpleNamespace(arrives=xs, _arrive_ops={("mbar:full", ()): nx})
    walker = SimpleNamespace(A=A)
    W = SimpleNamespace(elem=e, phase=q)
    got = symbolic_ring._latest(walker, y, "mbar:full", (), C, W)
    assert not isinstance(got, str), got
    ((m, valid, _order),) = got  # (one candidate in a flat ring)
    completes, want = _ring_model(a0, stop, d, R, C, nx, nb, e, q)
    if not completes:  # the wait never returns (the deadlock check's case): no read runs to be given a tag
        return
    if want is None:
        assert valid is False, (m, valid)
    else:
        assert valid is True and int(m["k#0"]) == want, (m, valid, want)
