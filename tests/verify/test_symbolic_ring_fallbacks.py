"""Ring shapes the symbolic tag proof (tilepy_verify/symbolic_ring.py, issue 17 item 4) once left to the stage
copies and now proves on the kernel as written: two waits on the array in the reader's line under complementary
guards (the one-stage phase bugs), a ring on constant elements in a loop over rounds (conv_tma's), a ring its
reading role fills itself (layer_norm_ring, rotary_ring), arrive ops on another element than the copy's, and reads
the landed copies do not cover (reaching.py's general chain after them). For each: the switch-on findings equal
the stage copies' on the twin and every seeded bug, the symbolic form is taken (no fallback), the correct kernel is
right on the interpreter and every bug shows there (a wrong tile, a hazard or a deadlock); the new counts are
checked against brute force."""

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

from . import oracle
from . import stage_ring_kernels as S
from . import symbolic_ring_kernels as K
from . import symbolic_ring_kernels2 as K2


def _errors(kernel, on, monkeypatch, **cx):
    monkeypatch.setattr(symbolic_ring, "ENABLED", on)
    kernel._cache.clear()
    report = tv.verify(kernel, **cx)
    return sorted({(f.check, f.span.line) for f in report.errors}), report


def _gaps(kernel, target=None, **cx):
    kernel._cache.clear()
    return analyze(kernel.ir(target, **cx), symbolic=True).symbolic_gaps


def _observe(kernel, **cx) -> set:
    rows = 10 * 32  # 10 tiles: more than three rounds at 3 stages
    rng = np.random.default_rng(1729)
    x = rng.standard_normal((rows, 64)).astype(np.float32)
    y = np.full((rows, 64), np.nan, np.float32)
    obs = oracle.run(kernel.ir(None, **cx), (1,), [x, y])
    kinds = obs.classes()
    if obs.error is None and not np.array_equal(y.astype(np.float64), 2.0 * x.astype(np.float64)):
        kinds.add("wrong")
    return kinds


CASES = ([(K2.self_ring, dict(BUG=b)) for b in ("none", "stage", "rows", "prologue", "phase")]
         + [(K2.self_ring, dict(STAGES=s, BUG=b)) for s in (2, 4) for b in ("none", "rows")]
         + [(K2.two_waits, dict(LATE=la, BUG=b)) for la in (0, 2) for b in ("none", "late", "early", "rows")]
         + [(K2.unrolled, dict(BUG=b)) for b in ("none", "stage", "phase", "rows")]
         + [(K2.unrolled, dict(STAGES=4, BUG=b)) for b in ("none", "rows")])


@pytest.mark.parametrize("kernel, cx", CASES, ids=[f"{k.name}-{c}" for k, c in CASES])
def test_new_shapes_symbolic_and_as_the_copies(kernel, cx, monkeypatch):
    off, _ = _errors(kernel, False, monkeypatch, **cx)
    on, report = _errors(kernel, True, monkeypatch, **cx)
    assert on == off, f"switch on {on} != copies {off}\n{report}"
    assert _gaps(kernel, **cx) == []
    shows = _observe(kernel, **cx)
    if cx["BUG"] == "none":
        assert on == [] and shows == set(), (on, shows)
    else:
        assert on and shows, (on, shows)
        if cx["BUG"] == "rows":  # a wrong tile behind a right wait: the symbolic tag proof itself fails
            assert [f for f in on if f[0] == "tag_assertion"], on


STAGE_RING = [(b, st) for b in ("phaselate", "phaseearly", "copyone", "copyall") for st in (2, 3, 4, 6)]


@pytest.mark.parametrize("bug, stages", STAGE_RING, ids=[f"{b}-{s}" for b, s in STAGE_RING])
def test_stage_ring_bugs_symbolic(bug, stages, monkeypatch):
    """The one-stage phase bugs (two waits on `full` under complementary guards) and the copies into the wrong
    stage (reads their copies do not cover) take the symbolic form with the copies' findings."""
    off, _ = _errors(S.ring, False, monkeypatch, BUG=bug, STAGES=stages)
    on, report = _errors(S.ring, True, monkeypatch, BUG=bug, STAGES=stages)
    assert on == off and ("tag_assertion", 61) in on, (on, off)
    assert _gaps(S.ring, BUG=bug, STAGES=stages) == []


FAMILY = [dict(BUG="phase"), dict(BUG="phase", D=2, NX=2), dict(BUG="elem", NX=2), dict(BUG="elem", D=1, NX=2, NB=1),
          dict(BUG="elem", D=2, NX=3, NB=1, STAGES=4), dict(STAGES=2, D=1, NX=2, NB=2)]


@pytest.mark.parametrize("cx", FAMILY, ids=[repr(c) for c in FAMILY])
def test_family_bugs_symbolic(cx, monkeypatch):
    """symbolic_ring_kernels' arrive on the next element and early waits: symbolic, the copies' findings, and a
    bug on the interpreter."""
    off, _ = _errors(K.ring, False, monkeypatch, **cx)
    on, report = _errors(K.ring, True, monkeypatch, **cx)
    assert on == off and on, (on, off)
    assert _gaps(K.ring, **cx) == []
    assert _observe(K.ring, **cx)


def test_stdlib_shapes_symbolic(monkeypatch):
    """conv_tma (a loop over rounds, the stages unrolled on constant elements; no tag assertion of its own),
    layer_norm_ring and rotary_ring (a ring the block fills itself): no fallback, every tag assertion proved."""
    from stdlib_kernels import conv_tma, llm_ops

    monkeypatch.setattr(symbolic_ring, "ENABLED", True)
    for kernel, target, cx in ((conv_tma.conv_tma, "sm_90a", dict(conv_tma.PRESETS["sm_90a"])),
                               (llm_ops.layer_norm_ring, "sm_90a", {}), (llm_ops.rotary_ring, "sm_90a", {})):
        kernel._cache.clear()
        kir = kernel.ir(target, **cx)
        analysis = analyze(kir, symbolic=True)
        assert analysis.symbolic_gaps == [], (kernel.name, analysis.symbolic_gaps)
        assert analysis.assertions or kernel is conv_tma.conv_tma
        report = tv.verify_ir(kir)
        assert report.ok, str(report)


def test_two_roles_fill_a_ring_falls_back(monkeypatch):
    """Two producer roles on one array are not of the covered form: the reason is recorded and the findings are
    the copies'. (Both forms report this correct kernel, which the interpreter runs right: the copies' cross-role
    rule needs one arriving role per mbarrier; a limit of the checks on the copies, not of the symbolic form.)"""
    assert any("several roles write the ring's tile" in g for g in _gaps(K2.two_producers))
    off, _ = _errors(K2.two_producers, False, monkeypatch)
    on, _ = _errors(K2.two_producers, True, monkeypatch)
    assert on == off
    assert _observe(K2.two_producers) == set()


# ------------------------------------------------------------------------------- the new counts against brute force


def _fake(L, copy_t, elem, arrives):
    """A walker, copy and arrive ops as `_latest` reads them: `arrives` [(T, element term)]."""

    def point(t):
        return Point((L,), {"T": t}, True, None, (), None)

    y = SimpleNamespace(point=point(copy_t), elem=elem, stage=0)
    xs = [SimpleNamespace(bar="mbar:full", point=point(t), elem=el) for t, el in arrives]
    A = SimpleNamespace(arrives=xs, _arrive_ops={("mbar:full", ()): len(xs)})
    return SimpleNamespace(A=A), y


def _brute(a0, stop, R, C, ops, d, e, q):
    """The producer's iterations in order: ops [(dx, before)] arrive on (k + dx) % R before / after the copy on
    (k + d) % R. (whether phase q of element e completes, the latest copy on e issued with fewer than (q + 1) C
    arrivals on e before it, or None)."""
    count = [0] * R
    latest = None
    for k in range(a0, stop):
        for dx, before in ops:
            if before:
                count[(k + dx) % R] += 1
        if (k + d) % R == e and count[e] < (q + 1) * C:
            latest = k
        for dx, before in ops:
            if not before:
                count[(k + dx) % R] += 1
    return count[e] >= (q + 1) * C, latest


def _answer(got):
    assert not isinstance(got, str), got
    ((m, valid, _order),) = got
    return m, valid


@settings(max_examples=400, deadline=None)
@given(a0=hst.integers(0, 3), n=hst.integers(0, 20), d=hst.integers(-3, 5), R=hst.integers(2, 6),
       C=hst.integers(1, 3), ops=hst.lists(hst.tuples(hst.integers(-3, 5), hst.booleans()), min_size=1, max_size=4),
       e=hst.integers(0, 5), q=hst.integers(0, 8))
def test_arrivals_on_other_elements_match_brute_force(a0, n, d, R, C, ops, e, q):
    """`_latest` with arrive ops on any elements (k + dx) % R (`_latest_mixed`, `_arrivals_ahead`: the m-th copy on
    e has m nx + nb + [u + delta >= R] per other op arrivals before it, capped at the loop's last copy on e), with
    constant bounds, element and phase (the terms fold to numbers): wherever the phase completes, the copy named is
    the brute force's, and none exactly where none precedes it."""
    e = e % R
    stop = a0 + n
    k = Var("k#0")
    L = Loop(0, "k", k, a0, stop, 1, Var("trip#0"), None, None, None)
    before = [op for op in ops if op[1]]
    after = [op for op in ops if not op[1]]
    nb = len(before)
    arrives = [(i + 1, (k + dx) % R) for i, (dx, _) in enumerate(before)]
    arrives += [(nb + 2 + i, (k + dx) % R) for i, (dx, _) in enumerate(after)]
    walker, y = _fake(L, nb + 1, (k + d) % R, arrives)
    W = SimpleNamespace(elem=e, phase=q, point=Point((L,), {"T": 0}, True, None, (), None))
    got = symbolic_ring._latest(walker, y, "mbar:full", (), C, W)
    completes, want = _brute(a0, stop, R, C, before + after, d, e, q)
    if not completes:  # the wait never returns (the deadlock check's case): no read runs to be given a tag
        return
    m, valid = _answer(got)
    if want is None:
        assert valid is False, (m, valid)
    else:
        assert valid is True and int(m["k#0"]) == want, (m, valid, want)


@settings(max_examples=300, deadline=None)
@given(a0=hst.integers(0, 3), n=hst.integers(0, 12), c=hst.integers(0, 3), C=hst.integers(1, 3),
       ops=hst.lists(hst.tuples(hst.integers(0, 3), hst.booleans()), min_size=1, max_size=5),
       e=hst.integers(0, 3), q=hst.integers(0, 8))
def test_constant_elements_match_brute_force(a0, n, c, C, ops, e, q):
    """`_latest_constant` (conv_tma's ring: round j's copy, wait and arrive on the constant element s): arrive ops
    on constant elements, the copy on c; against counting the arrivals round by round."""
    stop = a0 + n
    k = Var("k#0")
    L = Loop(0, "k", k, a0, stop, 1, Var("trip#0"), None, None, None)
    before = [op for op in ops if op[1]]
    after = [op for op in ops if not op[1]]
    arrives = [(i + 1, ex) for i, (ex, _) in enumerate(before)]
    arrives += [(len(before) + 2 + i, ex) for i, (ex, _) in enumerate(after)]
    walker, y = _fake(L, len(before) + 1, c, arrives)
    W = SimpleNamespace(elem=e, phase=q, point=Point((L,), {"T": 0}, True, None, (), None))
    got = symbolic_ring._latest(walker, y, "mbar:full", (), C, W)
    if not any(ex == c for ex, _ in ops):
        assert isinstance(got, str)  # no arrive on the copy's element: not of the form
        return
    count, latest = 0, None
    for _k in range(a0, stop):  # arrivals on e, and on e only where the copy is (e == c)
        count += sum(1 for ex, b in before if ex == e)
        if e == c and count < (q + 1) * C:
            latest = _k
        count += sum(1 for ex, b in after if ex == e)
    if count < (q + 1) * C:
        return
    m, valid = _answer(got)
    if latest is None:
        assert valid is False, (m, valid)
    else:
        assert valid is True and int(m["k#0"]) == latest, (m, valid, latest)


def _cluster_cases():
    from . import cluster_kernels as CK

    return [(CK.cluster_gemm, dict(BUG=b)) for b in range(6)] + [(CK.cluster_gemm_peer, dict(BUG=b)) for b in (0, 6)]


CLUSTER = _cluster_cases()


@pytest.mark.parametrize("kernel, cx", CLUSTER, ids=[f"{k.name}-{c['BUG']}" for k, c in CLUSTER])
def test_cluster_rings_symbolic_and_as_the_copies(kernel, cx, monkeypatch):
    """Multicast copies and remote arrives (`cta=`) on the ring's arrays: the walk as written takes them as the
    copies' walk does (the block's own stage and element), so the cluster kernels' twins and bugs take the symbolic
    form with the copies' findings (the bugs themselves are checks/cluster.py's and the copies' checks')."""
    off, _ = _errors(kernel, False, monkeypatch, **cx)
    on, report = _errors(kernel, True, monkeypatch, **cx)
    assert on == off, f"switch on {on} != copies {off}\n{report}"
    assert _gaps(kernel, **cx) == []
    assert bool(on) == (cx["BUG"] != 0)


def test_stdlib_cluster_rings_symbolic(monkeypatch):
    """gemm_cluster (B multicast, releases to every rank) and gemm_splitk_swap K_WAYS=2 in 2x1 clusters: symbolic,
    their assertions proved."""
    import tilepy as tp
    from stdlib_kernels import gemm_hopper, gemm_splitk_swap

    monkeypatch.setattr(symbolic_ring, "ENABLED", True)
    swap = dict(BM=32, BN=64, K_WAYS=2, STAGES=8, CLUSTER_M=2, INSTR=tp.nv.wgmma_m64n32k16_bf16)
    for kernel, cx in ((gemm_hopper.gemm_cluster, {}), (gemm_splitk_swap.gemm_splitk_swap, swap)):
        kernel._cache.clear()
        kir = kernel.ir("sm_90a", **cx)
        assert analyze(kir, symbolic=True).symbolic_gaps == [], kernel.name
        report = tv.verify_ir(kir)
        assert report.ok, str(report)
