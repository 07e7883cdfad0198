"""tp.store_remote(dst, value, mbarrier, cta): a register tile written into another cluster block's shared tile
(st.async), its bytes completing that block's mbarrier, of which the op is one arrival. The interpreter delivers the
values into the other block when its wait sees the phase complete; the renderer emits mapa + st.async and one
arrive.expect_tx; the verifier reads it as a store into the block's own tile and asks for a cluster barrier before
it, a wait after it and partners that are a permutation of the ranks; misuse is an error at the line."""

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv
from tilepy.errors import KernelTypeError
from tilepy_hip.render import render_kernel


@tp.kernel(threads=128, target="sm_90a", cluster=(2, 1, 1))
def swap_sum(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"]):
    recv = tp.shared((128,), tp.f32)
    got = tp.mbarrier(1)
    tp.cluster_sync(relaxed=True)               # (the other block's `got` initialized)
    i0 = tp.block_id(0) * 128
    x = tp.load(X[i0:i0 + 128])
    tp.store_remote(recv, x, got, tp.cluster_rank() ^ 1)
    tp.mbarrier_wait(got, 0)
    tp.store(Y[i0:i0 + 128], x + tp.load(recv))


def test_each_block_gets_its_partners_tile():
    x = np.random.default_rng(0).standard_normal(512).astype(np.float32)
    y = np.full(512, np.nan, np.float32)
    swap_sum[(4,)](x, y)
    pair = [x[0:128] + x[128:256], x[256:384] + x[384:512]]
    np.testing.assert_array_equal(y, np.concatenate([pair[0], pair[0], pair[1], pair[1]]))


def test_render_has_st_async_and_one_arrival_with_the_bytes():
    src, _, _ = render_kernel(swap_sum.ir("sm_90a"))
    assert "tp_mapa_shared(tp_smem_addr(recv)" in src and "tp_st_async4(" in src
    assert src.count("tp_mbar_arrive_expect_tx_remote(") == 1 and "512u" in src     # 128 f32, once
    assert "tp_cluster_sync()" not in src                                          # no release barrier


def test_verifies_clean():
    assert tv.verify(swap_sum, target="sm_90a").findings == []


@tp.kernel(threads=128, target="sm_90a", cluster=(2, 1, 1))
def _all_to_rank0(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"]):
    recv = tp.shared((128,), tp.f32)
    got = tp.mbarrier(1)
    tp.cluster_sync(relaxed=True)
    i0 = tp.block_id(0) * 128
    x = tp.load(X[i0:i0 + 128])
    tp.store_remote(recv, x, got, 0)            # BUG: rank 0 gets two stores, rank 1 none (its wait never returns)
    tp.mbarrier_wait(got, 0)
    tp.store(Y[i0:i0 + 128], x + tp.load(recv))


@tp.kernel(threads=128, target="sm_90a", cluster=(2, 1, 1))
def _no_wait_after(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"]):
    recv = tp.shared((128,), tp.f32)
    got = tp.mbarrier(1)
    tp.cluster_sync(relaxed=True)
    i0 = tp.block_id(0) * 128
    x = tp.load(X[i0:i0 + 128])
    tp.store_remote(recv, x, got, tp.cluster_rank() ^ 1)
    tp.store(Y[i0:i0 + 128], x + tp.load(recv))      # BUG: read (and exit) without waiting for the partner's store


@tp.kernel(threads=128, target="sm_90a", cluster=(2, 1, 1))
def _no_barrier_before(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"]):
    recv = tp.shared((128,), tp.f32)
    got = tp.mbarrier(1)
    i0 = tp.block_id(0) * 128
    x = tp.load(X[i0:i0 + 128])
    tp.store_remote(recv, x, got, tp.cluster_rank() ^ 1)    # BUG: the partner's `got` may not be initialized yet
    tp.mbarrier_wait(got, 0)
    tp.store(Y[i0:i0 + 128], x + tp.load(recv))


@tp.kernel(threads=128, target="sm_90a", cluster=(2, 1, 1))
def _read_before_wait(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"]):
    recv = tp.shared((128,), tp.f32)
    got = tp.mbarrier(1)
    tp.cluster_sync(relaxed=True)
    i0 = tp.block_id(0) * 128
    x = tp.load(X[i0:i0 + 128])
    tp.store_remote(recv, x, got, tp.cluster_rank() ^ 1)
    early = tp.load(recv)                       # BUG: before the wait that makes the partner's store visible
    tp.mbarrier_wait(got, 0)
    tp.store(Y[i0:i0 + 128], x + early)


@pytest.mark.parametrize("kernel,check,words", [
    (_all_to_rank0, "race", "permutation"),
    (_no_wait_after, "race", "no wait on"),
    (_no_barrier_before, "race", "before it initialized"),
    (_read_before_wait, "pipeline_hazard", "read while"),
])
def test_seeded_bugs_are_reported(kernel, check, words):
    found = tv.verify(kernel, target="sm_90a").findings
    assert any(f.check == check and words in f.message for f in found), [str(f) for f in found]


def _kernel(body: str, cluster="(2, 1, 1)", target="sm_90a", dtype="tp.f32"):
    src = f'''
import tilepy as tp

@tp.kernel(threads=128, target="{target}", cluster={cluster})
def k(X: tp.Tensor[{dtype}, "N"]):
    s = tp.shared((128,), {dtype})
    bar = tp.mbarrier(1)
{body}
'''
    return tp.kernels_from_source(src, f"<store_remote_{abs(hash(body + cluster + target + dtype))}>")["k"]


def test_misuse_is_an_error_at_the_line():
    with pytest.raises(KernelTypeError, match="no cluster"):
        _kernel("    tp.store_remote(s, tp.load(X[0:128]), bar, 1)", cluster="None").ir()
    with pytest.raises(KernelTypeError, match="32-bit"):
        _kernel("    tp.store_remote(s, tp.load(X[0:128]), bar, 1)", dtype="tp.bf16").ir()
    with pytest.raises(KernelTypeError, match="shared"):
        _kernel("    tp.store_remote(X[0:128], tp.load(X[0:128]), bar, 1)").ir()
    with pytest.raises(KernelTypeError, match="uniform integer"):
        _kernel("    tp.store_remote(s, tp.load(X[0:128]), bar, tp.thread_id())").ir()


# A receive tile the block also uses BEFORE the other block's push into it (checks/cluster._receive_tile_order): the
# block's own tile is written and read, then the other block's sum is pushed into it. The push is ordered after the
# reads only by a signal: the block pushes values computed from its reads into the other block's `flag` (completing
# its `free`), and pushes into `recv` only once its own `free` has completed.
@tp.kernel(threads=128, target="sm_90a", cluster=(2, 1, 1))
def reuse_after_signal(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"]):
    recv = tp.shared((128,), tp.f32)
    flag = tp.shared((128,), tp.f32)
    got = tp.mbarrier(1)
    free = tp.mbarrier(1)
    tp.cluster_sync(relaxed=True)
    i0 = tp.block_id(0) * 128
    tp.store(recv, tp.load(X[i0:i0 + 128]) * 2.0)
    tp.barrier()
    x = tp.load(recv)                            # the block's own use of the tile
    tp.store_remote(flag, x * 0.0, free, tp.cluster_rank() ^ 1)     # computed from the read: leaves after it
    tp.mbarrier_wait(free, 0)                    # the other block has read its tile too
    tp.store_remote(recv, x, got, tp.cluster_rank() ^ 1)
    tp.mbarrier_wait(got, 0)
    tp.store(Y[i0:i0 + 128], x + tp.load(recv))


def _reuse_variant(old: str, new: str):
    src = reuse_after_signal.source
    assert src.count(old) == 1
    src = "import tilepy as tp\n\n" + src.replace(old, new).replace("def reuse_after_signal", "def k")
    return tp.kernels_from_source(src, f"<reuse_{abs(hash(new))}>")["k"]


def test_reuse_after_signal_verifies_clean_and_runs_right():
    assert tv.verify(reuse_after_signal, target="sm_90a").findings == []
    x = np.random.default_rng(1).standard_normal(512).astype(np.float32)
    y = np.full(512, np.nan, np.float32)
    reuse_after_signal[(4,)](x, y)
    two = 2 * x
    pair = [two[0:128] + two[128:256], two[256:384] + two[384:512]]
    np.testing.assert_array_equal(y, np.concatenate([pair[0], pair[0], pair[1], pair[1]]))


@pytest.mark.parametrize("old,new", [
    # the push before the wait for the other block's signal: it may overwrite the tile the other block still reads
    ("    tp.mbarrier_wait(free, 0)                    # the other block has read its tile too\n"
     "    tp.store_remote(recv, x, got, tp.cluster_rank() ^ 1)\n",
     "    tp.store_remote(recv, x, got, tp.cluster_rank() ^ 1)\n"
     "    tp.mbarrier_wait(free, 0)\n"),
    # the signal not computed from the read: a thread's signal may leave before another thread's read returned
    ("x * 0.0, free", "tp.load(X[i0:i0 + 128]), free"),
    # no signal at all: only the wait on `got` after the push
    ("    tp.store_remote(flag, x * 0.0, free, tp.cluster_rank() ^ 1)     # computed from the read: leaves after it\n"
     "    tp.mbarrier_wait(free, 0)                    # the other block has read its tile too\n", ""),
    # the block's own store into the tile not ordered (no barrier) before the read the signal is computed from
    ("    tp.barrier()\n", ""),
])
def test_receive_tile_used_before_the_push_needs_the_signal(old, new):
    found = tv.verify(_reuse_variant(old, new), target="sm_90a").findings
    assert any(f.check == "race" and "'recv' receives" in f.message for f in found), [str(f) for f in found]


def test_signal_from_a_reassigned_name_is_not_from_the_read():
    """The signal's name `x` reassigned between the read and the signal: its value no longer comes from the read."""
    kernel = _reuse_variant("    tp.store_remote(flag, x * 0.0, free",
                            "    x = tp.load(X[i0:i0 + 128])\n    tp.store_remote(flag, x * 0.0, free")
    found = tv.verify(kernel, target="sm_90a").findings
    assert any(f.check == "race" and "'recv' receives" in f.message for f in found), [str(f) for f in found]
