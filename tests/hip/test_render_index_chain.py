"""Rendering an index built as a chain of steps that each read earlier steps more than once (the lowering's
binary search over a sorted row: torch.mode's run lengths) takes time linear in the chain, not exponential:
the renderer's compile-time index analysis (`GatherOps._static_index`) is memoized per call. The lowered
sort family hung in rendering on the GPU machine before (tests/gpu/test_gpu_sort.py, cut at 400 s)."""

import numpy as np

import tilepy as tp
import tilepy_hip
from tilepy_hip.render.gathers import GatherOps


@tp.kernel(threads=128)
def search_rows(S: tp.Tensor[tp.f32, "R", "N"], Out: tp.Tensor[tp.i32, "R", "N"], STEPS: tp.constexpr = 12,
                BLOCK: tp.constexpr = 256):
    """For every element, the position of the first element of its row not less than it (lower bound), by a
    binary search written out STEPS times: each step reads lo, hi and mid of the step before twice."""
    row = tp.block_id(1)
    i = tp.block_id(0) * BLOCK + tp.arange(BLOCK)
    n = S.shape[1]
    x = tp.load(S[row, i], other=0.0)
    lo = tp.zeros((BLOCK,), tp.i32)
    hi = tp.zeros((BLOCK,), tp.i32) + n
    for _ in tp.static_range(STEPS):
        mid = (lo + hi) // 2
        v = tp.load(S[row, tp.minimum(mid, n - 1)])
        go = (v < x) & (lo < hi)
        lo = tp.where(go, mid + 1, lo)
        hi = tp.where(go | (lo >= hi), hi, mid)
    tp.store(Out[row, i], lo, mask=i < n)


@tp.kernel(threads=128)
def mixed_index(S: tp.Tensor[tp.f32, "N"], Out: tp.Tensor[tp.f32, "N"], STEPS: tp.constexpr = 12,
                BLOCK: tp.constexpr = 256):
    """Out[i] = S[f(i)] with f a chain of compile-time-known steps, each reading both steps before it (a
    Fibonacci recurrence of positions): a tree walk of it visits ~1.6^STEPS nodes."""
    i = tp.block_id(0) * BLOCK + tp.arange(BLOCK)
    a = i % 7
    b = (i + 1) % 7
    for _ in tp.static_range(STEPS):
        a, b = b, (a + b) % 7
    tp.store(Out[i], tp.load(S[i - i % 8 + b], other=0.0), mask=i < S.shape[0])


def test_index_chain_renders_in_linear_work(monkeypatch):
    calls = []
    real = GatherOps._static_index_uncached

    def counted(self, e, coords, depth):
        calls.append(1)
        return real(self, e, coords, depth)

    monkeypatch.setattr(GatherOps, "_static_index_uncached", counted)
    sizes = {}
    for steps in (12, 24):
        calls.clear()
        src = tilepy_hip.render(mixed_index.ir("sm_90a", STEPS=steps), "sm_90a")
        assert "mixed_index" in src
        sizes[steps] = len(calls)
    # twice the steps, about twice the work (a tree walk: ~1.6^12 = 280 times more)
    assert sizes[24] <= 3 * sizes[12] + 50, sizes


def test_index_chain_values():
    s = np.arange(64, dtype=np.float32) * 1.5
    out = np.zeros(64, np.float32)
    mixed_index[(1,)](s, out, STEPS=9, BLOCK=64)
    i = np.arange(64)
    a, b = i % 7, (i + 1) % 7
    for _ in range(9):
        a, b = b, (a + b) % 7
    ref = np.where(i - i % 8 + b < 64, s[np.minimum(i - i % 8 + b, 63)], 0.0)
    assert np.array_equal(out, ref)


def test_written_out_search_renders():
    assert "search_rows" in tilepy_hip.render(search_rows.ir("sm_90a", STEPS=12), "sm_90a")


def test_written_out_search_is_a_lower_bound():
    rng = np.random.default_rng(0)
    s = np.sort(rng.integers(-20, 20, (3, 300)).astype(np.float32), axis=1)
    out = np.zeros((3, 300), np.int32)
    search_rows[(tp.cdiv(300, 256), 3)](s, out, STEPS=10)
    ref = np.stack([np.searchsorted(r, r, side="left") for r in s]).astype(np.int32)
    assert np.array_equal(out, ref)
