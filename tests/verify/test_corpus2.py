"""The third seeded-bug corpus (tests/verify/seeded_corpus2.py, issue 17 item 7): every seeded bug is reported
by one of its expected checks at a line of the corpus with a counterexample, every correct twin verifies
without errors and computes the float64 reference on the interpreter, and every bug is real: the interpreter
run shows it (wrong output against the reference, a race or hazard in the trace oracle, an out-of-bounds
stage, a divergent barrier or a deadlock), except those that change nothing observable (a tag convention, a
bank conflict). Known misses and known false alarms (seeded_corpus2.KNOWN_MISSES, KNOWN_FALSE_ALARMS) are
xfail (strict) with the reason; their bugs must still show on the interpreter and their twins compute the
reference. A check that reports on a kernel's twin does not count as catching that kernel's bugs.
benchmarks/verify_corpus.py prints caught / missed / false alarms / time."""

import numpy as np
import pytest

import tilepy_verify as tv
from tilepy.dtypes import round_bf16

from . import oracle
from . import seeded_corpus2 as S

RNG = np.random.default_rng(177)


def _bf16(*shape):
    return round_bf16(RNG.standard_normal(shape).astype(np.float32))


def _nan(*shape):
    return np.full(shape, np.nan, np.float32)


def inputs(kernel):
    """(grid, args, {argument index: float64 reference}, tolerance)."""
    name = kernel.name
    if name == "flash":
        q, kt, v = _bf16(64, 32), _bf16(32, 96), _bf16(96, 32)
        s = q.astype(np.float64) @ kt
        p = np.exp(s - s.max(axis=1, keepdims=True))
        ref = (p / p.sum(axis=1, keepdims=True)) @ v
        return (1,), [q, kt, v, _nan(64, 32)], {3: ref}, 3e-2
    if name == "ws_pipe":
        x = RNG.standard_normal((6 * 32, 64)).astype(np.float32)
        return (1,), [x, _nan(6 * 32, 64)], {1: 2.0 * x.astype(np.float64)}, 0
    if name == "stencil2d":
        x = RNG.standard_normal((64, 128)).astype(np.float32)
        p = np.pad(x.astype(np.float64), 1)
        ref = 4 * p[1:-1, 1:-1] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
        return (2, 2), [x, _nan(64, 128)], {1: ref}, 1e-5
    if name == "transpose_swz":
        x = RNG.standard_normal((128, 256)).astype(np.float32)
        return (2, 2), [x, _nan(256, 128)], {1: x.T}, 0
    if name == "tree_reduce":
        x = RNG.standard_normal((4, 256)).astype(np.float32)
        return (2,), [x, _nan(4, 32)], {1: x.astype(np.float64).reshape(4, 8, 32).sum(axis=1)}, 1e-5
    if name == "splitk":
        a, b = _bf16(64, 128), _bf16(128, 32)
        return (1, 1, 2), [a, b, np.zeros((64, 32), np.float32), 2], {2: a.astype(np.float64) @ b}, 1e-3
    if name == "block_scan":
        x = RNG.standard_normal((4, 4, 128)).astype(np.float32)
        ref = np.cumsum(x.astype(np.float64).reshape(4, 512), axis=1).reshape(4, 4, 128)
        return (2,), [x, _nan(4, 4, 128)], {1: ref}, 1e-4
    if name == "gather_scatter":
        x = RNG.standard_normal((128, 64)).astype(np.float32)
        dst = RNG.integers(0, 16, 128).astype(np.int32)
        y = np.zeros((16, 64))
        np.add.at(y, dst, x[:, ::-1].astype(np.float64))
        return (2,), [x, dst, np.zeros((16, 64), np.float32), _nan(128, 64)], {2: y, 3: x[:, ::-1]}, 1e-5
    if name == "wgmma_ring":
        a, b = _bf16(64, 192), _bf16(192, 64)
        return (1, 1), [a, b, _nan(64, 64)], {2: a.astype(np.float64) @ b}, 1e-3
    if name == "two_consumers":
        x = RNG.standard_normal((6 * 32, 64)).astype(np.float32)
        return (1,), [x, _nan(6 * 32, 64)], {1: x}, 0
    raise KeyError(name)


def observe(kernel, bug) -> set:
    grid, args, refs, tol = inputs(kernel)
    obs = oracle.run(kernel.ir(BUG=bug), grid, args)
    kinds = obs.classes()
    if obs.error is None and not all(np.allclose(args[i], r, rtol=tol, atol=tol) for i, r in refs.items()):
        kinds.add("wrong")
    return kinds


FALSE_ALARM = {k.name: why for k, why in S.KNOWN_FALSE_ALARMS}
TWINS = [pytest.param(k, marks=pytest.mark.xfail(reason=FALSE_ALARM[k.name], strict=True))
         if k.name in FALSE_ALARM else k for k in S.KERNELS]


@pytest.mark.parametrize("kernel", TWINS, ids=[k.name for k in S.KERNELS])
def test_twin_verifies_clean(kernel):
    report = tv.verify(kernel)
    assert report.ok, str(report)


@pytest.mark.parametrize("kernel", S.KERNELS, ids=[k.name for k in S.KERNELS])
def test_twin_is_correct(kernel):
    assert observe(kernel, "none") == set()


def twin_errors(kernel) -> set:
    """The checks that report errors on the correct twin (a known false alarm): they cannot catch its bugs."""
    return {f.check for f in tv.verify(kernel).errors}


SRC = open(S.__file__).read().splitlines()


def kernel_lines(kernel) -> range:
    """The source lines of `kernel`'s definition in the corpus file."""
    lo = next(i for i, t in enumerate(SRC) if t.startswith(f"def {kernel.name}("))
    hi = next(i for i, t in enumerate(SRC) if i > lo and (t.startswith("@tp.kernel") or t.startswith("CORPUS")))
    return range(lo + 1, hi + 1)


MISSED = {(k.name, bug): why for k, bug, why in S.KNOWN_MISSES}
CASES = [pytest.param(*c, marks=pytest.mark.xfail(reason=MISSED[c[0].name, c[1]], strict=True))
         if (c[0].name, c[1]) in MISSED else c for c in S.CORPUS]


@pytest.mark.parametrize("kernel, bug, checks, shows", CASES, ids=[f"{c[0].name}-{c[1]}" for c in S.CORPUS])
def test_seeded_bug_is_caught(kernel, bug, checks, shows):
    report = tv.verify(kernel, BUG=bug)
    found = [f for f in report.findings if f.check in checks - twin_errors(kernel)]
    assert found, f"expected one of {sorted(checks)} (not also on the twin):\n{report}"
    f = found[0]
    assert f.counterexample and str(f.span.file).endswith("seeded_corpus2.py")
    assert f.span.line in kernel_lines(kernel), f"{f.span.line} is outside {kernel.name}:\n{report}"


REAL = [c for c in S.CORPUS if c[3] is not None]   # the others change nothing observable


@pytest.mark.parametrize("kernel, bug, checks, shows", REAL, ids=[f"{c[0].name}-{c[1]}" for c in REAL])
def test_seeded_bug_is_real(kernel, bug, checks, shows):
    assert shows in observe(kernel, bug)


def test_corpus_size():
    assert len(S.CORPUS) >= 40 and len(S.KERNELS) >= 9 and {k for k, *_ in S.CORPUS} == set(S.KERNELS)
    assert {(k, b) for k, b, _ in S.KNOWN_MISSES} <= {(k, b) for k, b, *_ in S.CORPUS}
    assert {k for k, _ in S.KNOWN_FALSE_ALARMS} <= set(S.KERNELS)
