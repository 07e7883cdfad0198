"""mbarrier arrays indexed by a run-time stage (one flat loop over k) and asynchronous wgmma groups
(`tp.mma_async` + `tp.mma_wait(n)`): the verifier proves the flat GEMM pipelines (wait_group 0 and 1, split-K)
and reports seeded bugs at the right line with the right check: a wrong phase, a stage refilled without
waiting, a missing release (deadlock), a release of the stage an in-flight wgmma group still reads, a group
never retired. Each bug also shows up on the interpreter (wrong data or a deadlock) or is a hardware-only
hazard the interpreter cannot see (the interpreter computes an mma_async at issue)."""

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv
from stdlib_kernels import gemm_hopper
from tilepy.dtypes import round_bf16
from tilepy.errors import InterpreterError, UnsupportedConstructError
from tilepy.interpreter import run_ir

SRC = open(__file__).read().splitlines()


def _line(marker: str) -> int:
    return next(i + 1 for i, t in enumerate(SRC) if marker in t)


@tp.kernel(threads=64, target="sm_90a")
def flat_ring(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, 128], BLOCK: tp.constexpr = 128,
              STAGES: tp.constexpr = 3, BUG: tp.constexpr = "none"):
    tp.tag(X, lambda i: ("X", i))
    buf = tp.shared((BLOCK,), tp.f32, stages=STAGES)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    n = X.shape[0] // BLOCK
    if tp.warp_id() == 0:                                           # producer: warp 0
        for k in range(n):
            if k >= STAGES:
                if BUG != "noempty":
                    tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)   # MARK refill wait
            tp.copy_bulk(X[k * BLOCK:(k + 1) * BLOCK], buf[k % STAGES], full[k % STAGES])  # MARK copy
            tp.mbarrier_arrive(full[k % STAGES])
    else:                                                           # consumer: warp 1
        acc = tp.zeros((BLOCK,), tp.f32)
        for k in range(n):
            if BUG == "phase":
                tp.mbarrier_wait(full[k % STAGES], k // STAGES - 1)  # MARK early phase
            else:
                tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            x = tp.load(buf[k % STAGES])                            # MARK read
            tp.assert_tag(x, lambda t: t[0] == "X")
            acc += x
            if BUG != "noarrive":
                tp.mbarrier_arrive(empty[k % STAGES])
        tp.store(Y[0:BLOCK], acc)


def _run_ring(n_blocks=7, **cx):
    x = np.arange(128 * n_blocks, dtype=np.float32)
    y = np.zeros(128, np.float32)
    run_ir(flat_ring.ir(None, **cx), (1,), [x, y])
    return x, y


def test_flat_ring_runs_and_verifies():
    x, y = _run_ring()
    np.testing.assert_array_equal(y, x.reshape(-1, 128).sum(0))
    rep = tv.verify(flat_ring)
    assert rep.ok, str(rep)


@pytest.mark.parametrize("bug,check,marker", [
    ("phase", "pipeline_hazard", "MARK read"),
    ("noempty", "pipeline_hazard", "MARK copy"),
    ("noarrive", "deadlock", "MARK refill wait"),
])
def test_flat_ring_bugs_are_found(bug, check, marker):
    rep = tv.verify(flat_ring, BUG=bug)
    hits = [f for f in rep.findings if f.check == check and f.span.line == _line(marker)]
    assert hits, str(rep)
    if bug == "noarrive":
        with pytest.raises(InterpreterError, match="deadlock|wait"):
            _run_ring(BUG=bug)


def test_the_arrays_are_named_per_stage_in_findings():
    rep = tv.verify(flat_ring, BUG="noarrive")
    assert any("'empty[" in f.message for f in rep.findings if f.check == "deadlock"), str(rep)


# ------------------------------------------------------------------ asynchronous wgmma groups


@tp.kernel(threads=256, target="sm_90a")
def async_mma(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", 64], C: tp.Tensor[tp.f32, 64, 64],
              STAGES: tp.constexpr = 3, BUG: tp.constexpr = "none"):
    a_s = tp.shared((64, 64), tp.bf16, stages=STAGES, swizzle=tp.Swizzle(3, 3, 3))
    b_s = tp.shared((64, 64), tp.bf16, stages=STAGES, swizzle=tp.Swizzle(3, 3, 3))
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    k_tiles = tp.cdiv(A.shape[1], 64)
    if tp.warpgroup_id() == 0:
        for k in range(k_tiles):
            tp.mbarrier_wait(empty[k % STAGES], k // STAGES)
            tp.copy_bulk(A[0:64, k * 64:(k + 1) * 64], a_s[k % STAGES], full[k % STAGES])
            tp.copy_bulk(B[k * 64:(k + 1) * 64, 0:64], b_s[k % STAGES], full[k % STAGES])
            tp.mbarrier_arrive(full[k % STAGES])
    else:
        acc = tp.zeros((64, 64), tp.f32, layout=tp.accumulator(tp.nv.wgmma_m64n64k16_bf16, (64, 64)))
        for s in tp.static_range(STAGES - 1):
            tp.mbarrier_arrive(empty[s])
        for k in range(k_tiles):
            tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            acc = tp.mma_async(a_s[k % STAGES], b_s[k % STAGES], acc)  # MARK mma
            if BUG == "early":
                tp.mbarrier_arrive(empty[(k + STAGES - 1) % STAGES])   # MARK early release
            tp.mma_wait(1)
            if BUG == "own":
                tp.mbarrier_arrive(empty[k % STAGES])                  # MARK own release
            elif BUG != "early":
                tp.mbarrier_arrive(empty[(k + STAGES - 1) % STAGES])
        if BUG != "noretire":
            tp.mma_wait(0)
        tp.store(C[0:64, 0:64], acc)                                   # MARK store


def test_async_mma_verifies_and_computes():
    rep = tv.verify(async_mma)
    assert rep.ok, str(rep)
    rng = np.random.default_rng(1)
    a = round_bf16(rng.standard_normal((64, 200)).astype(np.float32))
    b = round_bf16(rng.standard_normal((200, 64)).astype(np.float32))
    c = np.zeros((64, 64), np.float32)
    run_ir(async_mma.ir(None), (1,), [a, b, c])
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-6


@pytest.mark.parametrize("bug,marker", [("own", "MARK own release"), ("early", "MARK early release"),
                                        ("noretire", "MARK mma")])
def test_releasing_an_in_flight_groups_stage_is_a_hazard(bug, marker):
    rep = tv.verify(async_mma, BUG=bug)
    hits = [f for f in rep.findings if f.check == "pipeline_hazard" and f.span.line == _line(marker)]
    assert hits, str(rep)
    if bug != "noretire":
        assert hits[0].other_span.line == _line("MARK mma")


def test_a_dynamic_index_the_verifier_cannot_name_is_an_error():
    @tp.kernel(threads=64, target="sm_90a")
    def odd_index(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, 128]):
        buf = tp.shared((128,), tp.f32, stages=2)
        full = tp.mbarrier(1, stages=2)
        n = X.shape[0] // 128
        if tp.warp_id() == 0:
            for k in range(n):
                tp.copy_bulk(X[k * 128:(k + 1) * 128], buf[(k * k) % 2], full[(k * k) % 2])
                tp.mbarrier_arrive(full[(k * k) % 2])
        else:
            tp.mbarrier_wait(full[0], 0)
            tp.store(Y[0:128], tp.load(buf[0]))

    with pytest.raises(UnsupportedConstructError, match="cannot tell which mbarrier"):
        tv.verify(odd_index)


# ------------------------------------------------------------------ the stdlib GEMM's policies


@pytest.mark.parametrize("extra", [
    dict(STAGES=2, **gemm_hopper.SMALL_TILE),
    dict(STAGES=3, IN_FLIGHT=1, **gemm_hopper.SMALL_TILE),
    dict(IN_FLIGHT=1),
    dict(IN_FLIGHT=1, PRODUCER_REGS=56, CONSUMER_REGS=216),
    dict(STAGES=2, IN_FLIGHT=1, SPLIT_K=3, **gemm_hopper.SMALL_TILE),
    dict(STAGES=4, IN_FLIGHT=0, SPLIT_K=2, **gemm_hopper.SMALL_TILE),
])
def test_gemm_hopper_policies_verify_clean(extra):
    rep = tv.verify(gemm_hopper.gemm_hopper, target="sm_90a", **{**gemm_hopper.PRESETS["sm_90a"], **extra})
    assert rep.ok, str(rep)
