"""The relaxed cluster barriers (checks/cluster.py): a relaxed opening barrier publishes the mbarrier initializations
(tp.mbarrier's init is fenced at cluster scope), and the producer's tail, which waits on `empty` for one more phase
of every stage after its ring, replaces the closing barrier where it waits for every remote arrival into the block
(`remote_writes_awaited`: per element, a wait whose phase covers all the arrivals counted on it). The twin of
tests/verify/cluster_tail_kernels.py is clean and right on the interpreter; each seeded bug is reported (race) and
shows on the interpreter (a remote arrival into a block that exited, or before its init) for some K; gemm_cluster
RELAXED=1 verifies clean."""

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify
from stdlib_kernels import gemm_hopper
from tilepy.dtypes import round_bf16
from tilepy.errors import InterpreterError

from .cluster_tail_kernels import cluster_tail

BUGS = {"short": 66, "early": 66, "notail": 66, "extra": 69, "strictopen": 48}   # (lines of cluster_tail_kernels.py)


def _run(bug, K):
    rng = np.random.default_rng(0)
    a = round_bf16(rng.standard_normal((256, K)).astype(np.float32))
    b = round_bf16(rng.standard_normal((K, 128)).astype(np.float32))
    c = np.full((256, 128), np.nan, np.float32)
    try:
        cluster_tail[(4, 2)](a, b, c, BUG=bug)
    except InterpreterError as e:
        return str(e)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
    return None


def test_twin_clean_and_right():
    r = tilepy_verify.verify(cluster_tail)
    assert r.ok, str(r)
    for K in (64, 128, 200, 320):  # 1, 2, 4, 5 k-tiles at 2 stages
        assert _run("none", K) is None


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_bug_reported_and_shown(bug):
    r = tilepy_verify.verify(cluster_tail, BUG=bug)
    found = {(f.check, f.span.line) for f in r.errors}
    assert found == {("race", BUGS[bug])}, str(r)
    says = [_run(bug, K) for K in (64, 200)]
    assert any(s and ("remote" in s) for s in says), says


@pytest.mark.parametrize("extra", [
    dict(BM=64, BN=128, BK=64, STAGES=8, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n128k16_bf16, EPILOGUE=2, CLUSTER_M=2),
    dict(STAGES=4, EPILOGUE=0),
    dict(BN=128, STAGES=5, INSTR=tp.nv.wgmma_m64n128k16_bf16, EPILOGUE=2),
], ids=["64x128_s8_tma", "128x256_s4", "128x128_s5_tma"])
def test_gemm_cluster_relaxed_verifies_clean(extra):
    r = tilepy_verify.verify(gemm_hopper.gemm_cluster_bf16, target="sm_90a", RELAXED=1, **extra)
    assert r.ok, str(r)
