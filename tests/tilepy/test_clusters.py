"""Thread-block clusters in the language and the interpreter: the cluster shape on the kernel (`cluster=`),
tp.cluster_rank(), tp.cluster_sync(), copy_bulk(..., multicast=, by=) and mbarrier_arrive(bar, cta=); the blocks
of a cluster run together (multicast data and remote arrivals shared), the grid is rounded up to whole clusters,
and misuse is a clear error at the line."""

import numpy as np
import pytest

import tilepy as tp
from stdlib_kernels import gemm_hopper
from tilepy.dtypes import round_bf16
from tilepy.errors import ConstexprError, InterpreterError, KernelTypeError, ResourceError, TargetError


@tp.kernel(threads=128, target="sm_90a", cluster=(2, 1, 1))
def ranks(Y: tp.Tensor[tp.i32, "N"]):
    s = tp.shared((4,), tp.i32)
    tp.cluster_sync()
    tp.store(Y[tp.block_id(0) * 2:tp.block_id(0) * 2 + 2],
             tp.full((2,), tp.cluster_rank(), tp.i32) + tp.arange(2) * 10 + tp.num_blocks(0) * 100)
    tp.cluster_sync()


def test_cluster_rank_and_grid_rounded_to_whole_clusters():
    y = np.full(8, -1, np.int32)
    ranks[(3,)](y)           # 3 blocks asked for: 4 run (two clusters of 2)
    assert y.tolist() == [400, 410, 401, 411, 400, 410, 401, 411]
    assert ranks.ir().cluster == (2, 1, 1) and ranks.ir().cluster_size == 2


@tp.kernel(threads=128, target="sm_90a", cluster=(2, 1, 1))
def broadcast(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"]):
    s = tp.shared((128,), tp.f32)
    bar = tp.mbarrier(1)
    tp.cluster_sync()
    # every block of the cluster gets the tile of the cluster's first block, loaded once by rank 1
    c0 = (tp.block_id(0) // 2) * 256
    tp.copy_bulk(X[c0:c0 + 128], s, bar, multicast=0b11, by=1)
    tp.mbarrier_arrive(bar)
    tp.mbarrier_wait(bar, 0)
    i0 = tp.block_id(0) * 128
    tp.store(Y[i0:i0 + 128], tp.load(s))
    tp.cluster_sync()


def test_multicast_lands_in_every_block_of_the_mask():
    x = np.arange(512, dtype=np.float32)
    y = np.full(512, np.nan, np.float32)
    trace = broadcast[(4,)](x, y, record=True)
    np.testing.assert_array_equal(y, np.concatenate([x[0:128], x[0:128], x[256:384], x[256:384]]))
    acc = trace.accesses
    reads = acc[(acc["space"] == 0) & ~acc["write"] & (acc["buffer"] == 0)]
    assert sorted(set(reads["block"].tolist())) == [1, 3]      # only rank 1 of each cluster reads X


def test_cluster_gemm_through_launch_matches_float64():
    rng = np.random.default_rng(2)
    a = round_bf16(rng.standard_normal((200, 300)).astype(np.float32))   # 4 M tiles of 64, ragged; K ragged
    b = round_bf16(rng.standard_normal((300, 96)).astype(np.float32))
    ref = a.astype(np.float64) @ b
    small = dict(BM=64, BN=64, STAGES=2, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n64k16_bf16, CLUSTER_M=2)
    c = np.full((200, 96), np.nan, np.float32)
    gemm_hopper.launch(a, b, c, **small)
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)
    c = np.full((200, 96), np.nan, np.float32)
    gemm_hopper.launch(a, b, c, out_dtype=tp.bf16, EPILOGUE=2, **small)
    np.testing.assert_allclose(c, ref, rtol=2 ** -8, atol=1e-3)     # rounded once to bf16 (half an ulp: 2^-9)
    assert np.array_equal(c, round_bf16(c))


def test_cluster_kernel_params():
    p = gemm_hopper.kernel_params({**gemm_hopper.PRESETS["sm_90a"], "CLUSTER_M": 2, "EPILOGUE": 2, "IN_FLIGHT": 0})
    assert "IN_FLIGHT" not in p and p["CLUSTER_M"] == 2
    assert "CLUSTER_M" not in gemm_hopper.kernel_params({**gemm_hopper.PRESETS["sm_90a"], "CLUSTER_M": 1})
    with pytest.raises(ValueError, match="CLUSTER_M"):
        gemm_hopper.kernel_params({**gemm_hopper.PRESETS["sm_90a"], "CLUSTER_M": 2, "SPLIT_K": 2})


def _kernel(body: str, cluster="(2, 1, 1)", target="sm_90a"):
    src = f'''
import tilepy as tp

@tp.kernel(threads=128, target="{target}", cluster={cluster})
def k(X: tp.Tensor[tp.f32, "N"]):
    s = tp.shared((128,), tp.f32)
    bar = tp.mbarrier(1)
{body}
'''
    return tp.kernels_from_source(src, f"<cluster_{abs(hash(body + cluster + target))}>")["k"]


def test_multicast_without_a_cluster_is_an_error():
    k = _kernel("    tp.copy_bulk(X[0:128], s, bar, multicast=0b11)", cluster="None")
    with pytest.raises(ConstexprError, match="multicast= must be"):
        k.ir()


def test_remote_arrival_without_a_cluster_is_an_error():
    k = _kernel("    tp.mbarrier_arrive(bar, cta=1)", cluster="None")
    with pytest.raises(KernelTypeError, match="has no cluster"):
        k.ir()


def test_cluster_sync_in_a_role_branch_is_an_error():
    k = _kernel("    tp.cluster_sync()\n    if tp.warp_id() == 0:\n        tp.cluster_sync()")
    x = np.zeros(256, np.float32)
    with pytest.raises(InterpreterError, match="role branch"):
        k[(2,)](x)


def test_cluster_shape_limits_and_targets():
    with pytest.raises(ResourceError, match="at most 8"):
        _kernel("    pass", cluster="(4, 4, 1)").ir()
    with pytest.raises(TargetError, match="cluster"):
        _kernel("    pass", target="sm_80", cluster="(2, 1, 1)").ir()
