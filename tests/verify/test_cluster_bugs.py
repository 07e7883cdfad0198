"""Thread-block clusters in the verifier: the seeded bugs of tests/verify/cluster_kernels.py are each reported
with the finding they are (a stage refilled before every block released it: pipeline_hazard; a missing remote
release: deadlock; remote traffic before the first / after the last cluster barrier: race; a read not ordered
after the multicast: the ordinary bulk-copy ordering), the correct twin is clean, and the interpreter agrees
where the bug shows in one run (deadlock, uninitialized / exited peer, poison read). gemm_cluster verifies clean,
each configuration under 2 s."""

import os
import sys
import time

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify
from stdlib_kernels import gemm_hopper
from tilepy.dtypes import round_bf16
from tilepy.errors import InterpreterError

sys.path.insert(0, os.path.dirname(__file__))
from cluster_kernels import cluster_gemm  # noqa: E402

EXPECT = {1: "pipeline_hazard", 2: "deadlock", 3: "race", 4: "race", 5: "pipeline_hazard"}


def test_correct_twin_is_clean():
    r = tilepy_verify.verify(cluster_gemm, BUG=0)
    assert r.ok, str(r)


@pytest.mark.parametrize("bug", sorted(EXPECT))
def test_seeded_cluster_bug_is_reported(bug):
    r = tilepy_verify.verify(cluster_gemm, BUG=bug)
    assert not r.ok
    assert EXPECT[bug] in {f.check for f in r.findings}, str(r)


def test_missing_remote_release_names_the_rank():
    r = tilepy_verify.verify(cluster_gemm, BUG=2)
    (f,) = [f for f in r.findings if f.check == "deadlock"]
    assert "rank 1" in f.message and "cta=r" in f.counterexample["detail"]
    (h,) = [f for f in tilepy_verify.verify(cluster_gemm, BUG=1).findings if f.check == "pipeline_hazard"]
    assert "never release to" in h.message


def _inputs(M=256, K=200, N=128, seed=0):
    rng = np.random.default_rng(seed)
    a = round_bf16(rng.standard_normal((M, K)).astype(np.float32))
    b = round_bf16(rng.standard_normal((K, N)).astype(np.float32))
    return a, b, np.full((M, N), np.nan, np.float32)


def test_interpreter_runs_the_correct_twin_against_float64():
    a, b, c = _inputs()
    cluster_gemm[(4, 2)](a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("bug,says", [(2, "deadlock in a cluster"), (3, "before it initialized"),
                                      (4, "already exited")])
def test_interpreter_reports_the_bug(bug, says):
    a, b, c = _inputs()
    with pytest.raises(InterpreterError, match=says):
        cluster_gemm[(4, 2)](a, b, c, BUG=bug)


def test_interpreter_read_before_the_multicast_landed_is_poison():
    a, b, c = _inputs()
    cluster_gemm[(4, 2)](a, b, c, BUG=5)
    assert np.isnan(c).all()


@pytest.mark.parametrize("kernel,extra", [
    (gemm_hopper.gemm_cluster, {}),
    (gemm_hopper.gemm_cluster_bf16, dict(STAGES=3, EPILOGUE=2)),
    (gemm_hopper.gemm_cluster, dict(BN=128, STAGES=5, INSTR=tp.nv.wgmma_m64n128k16_bf16)),
], ids=["128x256_s4", "bf16_tma_s3", "128x128_s5"])
def test_gemm_cluster_verifies_clean(kernel, extra):
    t = time.perf_counter()
    r = tilepy_verify.verify(kernel, **extra)
    assert r.ok, str(r)
    assert time.perf_counter() - t < 10    # (about 1 s unloaded; the bar is 2 s: benchmarks/verify_speed.py)


def test_releases_written_per_rank():
    """cta=tp.cluster_rank() ^ 1 (the peer) is evaluated per rank: clean; releasing to itself twice meets the
    count without the peer's release: a stage refilled under the peer's reads (pipeline hazard)."""
    from cluster_kernels import cluster_gemm_peer

    assert tilepy_verify.verify(cluster_gemm_peer).ok
    r = tilepy_verify.verify(cluster_gemm_peer, BUG=6)
    (f,) = [f for f in r.findings if f.check == "pipeline_hazard"]
    assert "never release to" in f.message
    a, b, c = _inputs()
    cluster_gemm_peer[(4, 2)](a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
