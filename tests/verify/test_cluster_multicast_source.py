"""checks/cluster.py: a multicast copy's source must be one tile for every block of the cluster (G33). The walk reads a
multicast as each block's copy of its own source, which holds only when the source's coordinates do not depend on
the block's place in the cluster. Seeded into tests/verify/cluster_tail_kernels.py's 2x1 cluster (row tiles): A's
tile multicast instead of B's, directly and through a reassigned first row; each is reported and is wrong on the
interpreter; the twin (B's tile multicast) is clean. The stdlib's multicast forms stay clean: B over row tiles
(gemm_cluster, gemm_splitk_swap CLUSTER_M) and A over column tiles (gemm_splitk_swap CLUSTER_N)."""

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify
from stdlib_kernels import gemm_hopper
from tilepy.dtypes import round_bf16

from .cluster_tail_kernels import cluster_tail


@pytest.mark.parametrize("bug", ["mcast_a", "mcast_a_shifted"])
def test_multicast_of_a_per_block_tile_reported_and_wrong(bug):
    r = tilepy_verify.verify(cluster_tail, BUG=bug)
    found = [f for f in r.errors if "multicast copy of a source tile that differs" in f.message]
    assert found and "tp.block_id(0)" in found[0].message, str(r)
    rng = np.random.default_rng(1)
    a = round_bf16(rng.standard_normal((256, 200)).astype(np.float32))
    b = round_bf16(rng.standard_normal((200, 128)).astype(np.float32))
    c = np.full((256, 128), np.nan, np.float32)
    cluster_tail[(4, 2)](a, b, c, BUG=bug)
    assert not np.allclose(c, a.astype(np.float64) @ b, rtol=1e-3, atol=1e-2)   # a block got its partner's rows


def test_multicast_of_the_shared_tile_clean():
    r = tilepy_verify.verify(cluster_tail)
    assert not [f for f in r.findings if "multicast" in f.message], str(r)


KW = dict(SWAP_AB=1, K_WAYS=2, CONSUMERS=2, IN_FLIGHT=1, SPLIT_K=1, STAGES=4, BM=128, BN=64,
          INSTR=tp.nv.wgmma_m64n128k16_bf16)


@pytest.mark.parametrize("params", [dict(KW, CLUSTER_N=2, RELAXED=1), dict(KW, CLUSTER_M=2),
                                    dict(BM=64, BN=128, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n128k16_bf16, IN_FLIGHT=0,
                                         CLUSTER_M=2, RELAXED=1, STAGES=8, EPILOGUE=2)],
                         ids=["kways_a_over_columns", "kways_b_over_rows", "gemm_cluster_b_over_rows"])
def test_stdlib_multicasts_clean(params):
    kernel, kp = gemm_hopper.plan_kernel(1024, 1024, tp.bf16, params, 1024)
    r = tilepy_verify.verify(kernel, target="sm_90a", **kp)
    assert r.findings == [], r.findings
