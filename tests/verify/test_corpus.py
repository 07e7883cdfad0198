"""The second seeded-bug corpus (tests/verify/seeded_corpus.py): every seeded bug is reported by one of its
expected checks, every correct twin verifies without errors, and every bug is real: the interpreter run shows
it (wrong output against a float64 reference, a race or hazard in the trace oracle, an out-of-bounds stage,
a divergent barrier or a deadlock), except the two that change nothing observable (a tag convention, a bank
conflict). benchmarks/verify_corpus.py prints caught / false alarms / time."""

import numpy as np
import pytest

import tilepy_verify as tv
from tilepy.dtypes import round_bf16

from . import oracle
from . import seeded_corpus as S

RNG = np.random.default_rng(17)


def _bf16(*shape):
    return round_bf16(RNG.standard_normal(shape).astype(np.float32))


def _attn_ref(q, kt, v):
    out = np.zeros((q.shape[0], v.shape[1]))
    for t in range(kt.shape[1] // 16):
        s = q.astype(np.float64) @ kt[:, t * 16:(t + 1) * 16]
        p = round_bf16(np.exp(s - s.max(axis=1, keepdims=True)).astype(np.float32))
        out += p.astype(np.float64) @ v[t * 16:(t + 1) * 16]
    return out


def inputs(kernel):
    """(grid, args, reference of the last argument, tolerance)."""
    name = kernel.name
    if name == "attn":
        q, kt, v = _bf16(32, 16), _bf16(16, 48), _bf16(48, 16)
        return (1,), [q, kt, v, np.full((32, 16), np.nan, np.float32)], _attn_ref(q, kt, v), 2e-2
    if name in ("ws_ring", "tma_loop"):
        x = RNG.standard_normal(6 * 64).astype(np.float32)
        return (1,), [x, np.full((6, 64), np.nan, np.float32)], x.reshape(6, 64), 0
    if name == "stencil":
        x = RNG.standard_normal((6, 64)).astype(np.float32)
        ref = np.zeros_like(x)
        ref[1:-1] = x[:-2] + x[1:-1] + x[2:]
        return (1,), [x, np.zeros_like(x)], ref, 1e-6
    if name == "block_reduce":
        x = RNG.standard_normal((16, 128)).astype(np.float32)
        return (2,), [x, np.full((4, 4), np.nan, np.float32)], x.astype(np.float64).sum(1).reshape(4, 4), 1e-5
    if name == "gemm_nt":
        a, bt = _bf16(32, 48), _bf16(16, 48)
        return (1, 1), [a, bt, np.full((32, 16), np.nan, np.float32)], a.astype(np.float64) @ bt.T, 1e-4
    if name == "transpose":
        x = RNG.standard_normal((64, 96)).astype(np.float32)
        return (2, 3), [x, np.full((96, 64), np.nan, np.float32)], x.T, 0
    raise KeyError(name)


def observe(kernel, bug) -> set:
    grid, args, ref, tol = inputs(kernel)
    obs = oracle.run(kernel.ir(BUG=bug), grid, args)
    kinds = obs.classes()
    if obs.error is None and not np.allclose(args[-1], ref, rtol=tol, atol=tol):
        kinds.add("wrong")
    return kinds


@pytest.mark.parametrize("kernel", S.KERNELS, ids=[k.name for k in S.KERNELS])
def test_twin_is_clean_and_correct(kernel):
    report = tv.verify(kernel)
    assert report.ok, str(report)
    assert observe(kernel, "none") == set()


@pytest.mark.parametrize("kernel, bug, checks, shows", S.CORPUS, ids=[f"{c[0].name}-{c[1]}" for c in S.CORPUS])
def test_seeded_bug_is_caught_and_real(kernel, bug, checks, shows):
    report = tv.verify(kernel, BUG=bug)
    found = [f for f in report.findings if f.check in checks]
    assert found, f"expected one of {sorted(checks)}:\n{report}"
    f = found[0]
    assert f.span.line > 0 and f.counterexample and str(f.span.file).endswith("seeded_corpus.py")
    if shows is not None:
        assert shows in observe(kernel, bug)


def test_corpus_size():
    assert len(S.CORPUS) >= 40 and {k for k, *_ in S.CORPUS} == set(S.KERNELS)
