"""The large-shape GEMM forms on the CPU interpreter and the verifier (issue 15): gemm_hopper's grouped tile
order (GROUP_M: the (x, y) grid's blocks in launch order take GROUP_M row tiles at a time down each column) on
ragged shapes whose last group is short, with split-K, the TMA-store epilogue and the 256 x 128 tile (two consumer
warpgroups of 128 rows each), f32 and bf16 out, against float64; gemm_persistent's TMA store overlapped with the
next tile; every form proved clean by the verifier; which kernels take GROUP_M. Outputs are poisoned with NaN
first (an unwritten or doubly mapped tile shows)."""

import numpy as np
import pytest

import tilepy as tp
from stdlib_kernels import gemm_hopper
from tilepy.dtypes import round_bf16

I128 = tp.nv.wgmma_m64n128k16_bf16
T128 = dict(BN=128, INSTR=I128)


def _inputs(m, k, n, seed):
    rng = np.random.default_rng(seed)
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    return a, b


@pytest.mark.parametrize("m,k,n,params", [
    (300, 129, 520, dict(STAGES=3, GROUP_M=2, **T128)),            # 3 x 5 tiles: groups of 2 rows, the last of 1
    (520, 70, 300, dict(STAGES=2, GROUP_M=3, IN_FLIGHT=1, **T128)),  # 5 x 3 tiles: groups of 3 and 2
    (300, 200, 300, dict(STAGES=2, GROUP_M=8, **T128)),            # one group taller than the grid
    (330, 300, 260, dict(STAGES=2, GROUP_M=2, SPLIT_K=2, **T128)),  # split-K: block z untouched by the order
    (260, 129, 300, dict(BM=256, CONSUMERS=2, STAGES=2, GROUP_M=1, **T128)),  # 256 x 128: 128 rows per consumer
])
@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
def test_grouped_order_on_the_interpreter(m, k, n, params, out):
    a, b = _inputs(m, k, n, m + 3 * k + 7 * n)
    c = np.full((m, n), np.nan, np.float32)
    gemm_hopper.launch(a, b, c, out_dtype=out, **params)
    ref = gemm_hopper.reference(a, b)
    assert not np.isnan(c).any(), "an output tile was never written"
    if out == tp.f32:
        assert float(np.linalg.norm(c - ref) / np.linalg.norm(ref)) < 1e-6
    else:
        np.testing.assert_array_equal(c, round_bf16(c))
        assert np.abs(c - ref).max() <= 2.0**-8 * np.abs(ref).max()


@pytest.mark.parametrize("params", [
    dict(STAGES=2, EPILOGUE=2, GROUP_M=2, PRODUCER_REGS=64, CONSUMER_REGS=216, **T128),   # TMA store, registers
    dict(BM=256, CONSUMERS=2, STAGES=2, EPILOGUE=2, GROUP_M=3, **T128),
])
def test_grouped_order_with_the_tma_store_on_the_interpreter(params):
    m, k, n = 520, 136, 392
    a, b = _inputs(m, k, n, 11)
    c = np.full((m, n), np.nan, np.float32)
    gemm_hopper.launch(a, b, c, out_dtype=tp.bf16, **params)
    ref = gemm_hopper.reference(a, b)
    assert not np.isnan(c).any()
    np.testing.assert_array_equal(c, round_bf16(c))
    assert np.abs(c - ref).max() <= 2.0**-8 * np.abs(ref).max()


@pytest.mark.parametrize("kernel,params", [
    # the large class's bf16 policy (3 stages, TMA store, 64 / 216 registers) in the grouped order
    (gemm_hopper.gemm_hopper_bf16, dict(STAGES=3, EPILOGUE=2, PRODUCER_REGS=64, CONSUMER_REGS=216, GROUP_M=16)),
    (gemm_hopper.gemm_hopper_bf16, dict(BM=256, BN=128, INSTR=I128, STAGES=3, EPILOGUE=2, PRODUCER_REGS=64,
                                        CONSUMER_REGS=216, GROUP_M=16)),
    (gemm_hopper.gemm_hopper, dict(BM=256, BN=128, INSTR=I128, STAGES=4, GROUP_M=8)),
])
def test_grouped_forms_verify_clean(kernel, params):
    """Every check (race, pipeline, bounds, banks, tags) proves the grouped tile order: the tiles' origins are
    run-time divisions of the block index, the copies' bounds and the tag assertion hold for any grid."""
    import tilepy_verify as tv

    report = tv.verify_ir(kernel.ir("sm_90a", **{**gemm_hopper.PRESETS["sm_90a"], **params}))
    assert not report.findings, str(report)


def test_which_kernels_take_group_m():
    p = {**gemm_hopper.PRESETS["sm_90a"], "GROUP_M": 16}
    assert gemm_hopper.kernel_params(p)["GROUP_M"] == 16                                  # gemm_hopper
    assert gemm_hopper.kernel_params({**p, "PERSISTENT": 1})["GROUP_M"] == 16             # gemm_persistent
    assert "GROUP_M" not in gemm_hopper.kernel_params({**p, "CLUSTER_M": 2})              # gemm_cluster: no order
    split = {**p, "SPLIT_K": 2, "FIXUP": 3, "BM": 64, "BN": 128, "CONSUMERS": 1, "INSTR": I128}
    assert gemm_hopper.fixed_up(split) and "GROUP_M" not in gemm_hopper.kernel_params(split)   # gemm_splitk
    kernel, kp = gemm_hopper.plan_kernel(4096, 4096, tp.bf16, p, 4096)
    assert kernel is gemm_hopper.kernel_for(tp.bf16) and kp["GROUP_M"] == 16


def test_large_bf16_policy_groups_where_a_overflows_the_l2():
    """The policy's grouped order: the large class's bf16 output where A (M x K bf16) is larger than the L2, the
    row order elsewhere and for f32 out; the lowering's policy (no `fixup`) runs it in gemm_hopper, `launch`'s in
    gemm_persistent (whose own order is GROUP_M 8 where A fits)."""
    for shape in ((8192, 8192, 8192), (4096, 4096, 14336)):
        assert 2 * shape[0] * shape[2] > gemm_hopper.L2_BYTES
        p = gemm_hopper.policy(*shape, tp.bf16)
        assert p["GROUP_M"] == gemm_hopper.LARGE_GROUP_M == 16
        kernel, kp = gemm_hopper.plan_kernel(shape[0], shape[1], tp.bf16, p, shape[2])
        assert kernel is gemm_hopper.kernel_for(tp.bf16) and kp["GROUP_M"] == 16
        p = gemm_hopper.policy(*shape, tp.bf16, fixup=True)
        kernel, kp = gemm_hopper.plan_kernel(shape[0], shape[1], tp.bf16, p, shape[2])
        assert kernel is gemm_hopper.kernel_for(tp.bf16, persistent=True) and kp["GROUP_M"] == 16
        assert "GROUP_M" not in gemm_hopper.policy(*shape, tp.f32)
    for shape in ((4096, 4096, 4096), (4096, 14336, 4096), (8192, 8192, 1024), (1024, 1024, 1024)):
        assert "GROUP_M" not in gemm_hopper.policy(*shape, tp.bf16)
        assert gemm_hopper.policy(*shape, tp.bf16, fixup=True).get("GROUP_M") in (None, 8)


@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (4096, 4096, 14336),
                                   (8192, 8192, 1024)])
def test_launch_runs_the_large_bf16_class_persistent(shape):
    """`launch`'s policy for the large class's bf16 output (more 128 x 256 tiles than SMs): gemm_persistent with the
    TMA store overlapped with the next tile, in 64-column pieces beside 4 stages, 64 / 216 registers, a grid of one
    block per SM, the second half of each tile's pieces written under the next tile's first k-tile (DEFER=2, V11);
    f32 out (G18) the same in 64-column pieces through one buffer, GROUP_M 8, no DEFER; the lowering's policy
    (no `fixup`) and a
    caller's own constexprs keep gemm_hopper."""
    M, N, K = shape
    p = gemm_hopper.policy(M, N, K, tp.bf16, fixup=True)
    assert {k: p[k] for k in gemm_hopper.LARGE_PERSISTENT if k != "GROUP_M"} == \
        {k: v for k, v in gemm_hopper.LARGE_PERSISTENT.items() if k != "GROUP_M"}
    kernel, kp = gemm_hopper.plan_kernel(M, N, tp.bf16, p, K)
    assert kernel is gemm_hopper.kernel_for(tp.bf16, persistent=True) and kp["EPILOGUE"] == 2
    assert kp["DEFER"] == 2     # (V11) pieces 2 and 3 written under the next tile's first k-tile, the ring whole
    assert gemm_hopper.grid_of(M, N, p) == (gemm_hopper.NUM_SMS,)
    p32 = gemm_hopper.policy(M, N, K, tp.f32, fixup=True)
    assert {k: p32[k] for k in gemm_hopper.LARGE_PERSISTENT_F32} == gemm_hopper.LARGE_PERSISTENT_F32
    assert gemm_hopper.LARGE_PERSISTENT_F32["STORE_N"] == 32 and "IN_FLIGHT" not in p32
    kernel, kp = gemm_hopper.plan_kernel(M, N, tp.f32, p32, K)
    assert kernel is gemm_hopper.kernel_for(tp.f32, persistent=True) and kp["EPILOGUE"] == 2
    assert (kp["STORE_N"], kp["STORE_BUFS"], kp["DEFER"], kp["HELD"], kp["STORE_LOOP"]) == (32, 2, 2, 2, 1)
    assert gemm_hopper.grid_of(M, N, p32) == (gemm_hopper.NUM_SMS,)
    assert not gemm_hopper.policy(M, N, K, tp.f32).get("PERSISTENT")
    assert not gemm_hopper.policy(M, N, K, tp.bf16).get("PERSISTENT")
    assert not gemm_hopper.policy(M, N, K, tp.bf16, fixup=True, forms=False).get("PERSISTENT")


def test_persistent_form_only_where_it_was_measured():
    """Not for one wave of tiles or fewer (2048 x 2048 x 1024: 128 tiles, 1536^3: 72), the mid-size 128 x 128 form,
    B rows off 128-byte lines (the cluster form), padded rows or the other classes."""
    for shape in ((2048, 2048, 1024), (1536, 1536, 1536), (2048, 1024, 1024), (3000, 5000, 4096), (2051, 2045, 1000),
                  (1024, 1024, 1024), (128, 4096, 4096), (16, 4096, 4096)):
        for out in (tp.bf16, tp.f32):
            assert not gemm_hopper.policy(*shape, out, fixup=True).get("PERSISTENT"), (shape, out)


def test_tma_storable_output():
    """The persistent form's store is TMA only: `launch` keys its plan on whether C can take it (contiguous, 16-byte
    aligned base) and runs the policy without the form otherwise."""
    torch = pytest.importorskip("torch")
    c = torch.empty(64, 72, dtype=torch.bfloat16)
    assert gemm_hopper._tma_storable(c)
    assert not gemm_hopper._tma_storable(c[:, 8:])                  # rows of 72 elements, 64 of them used
    flat = torch.empty(64 * 72 + 8, dtype=torch.bfloat16)
    assert not gemm_hopper._tma_storable(flat[1:1 + 64 * 72].reshape(64, 72))   # base 2 bytes off
    assert gemm_hopper._tma_storable(np.zeros((3, 8), np.float32))


I64 = tp.nv.wgmma_m64n64k16_bf16
PERS_TMA = dict(PERSISTENT=1, EPILOGUE=2)


@pytest.mark.parametrize("m,k,n,params", [
    # 3 blocks over 3 x 3 tiles of 64 columns: each block stores its tiles one tile late through c_s, the last
    # after the loop; 4 k-tiles in 3 stages (two ring turns per tile, 2 empty slots)
    (300, 200, 152, dict(NUM_SMS=3, BN=64, STAGES=3, GROUP_M=2, INSTR=I64, **PERS_TMA)),
    (260, 130, 72, dict(NUM_SMS=4, BN=64, STAGES=2, GROUP_M=1, INSTR=I64, **PERS_TMA)),    # 3 x 2 tiles, 4 blocks
    (130, 64, 136, dict(NUM_SMS=2, STAGES=2, GROUP_M=8, **PERS_TMA, **T128)),              # partial tiles in M, N
    (520, 330, 264, dict(NUM_SMS=5, BN=64, STAGES=2, GROUP_M=3, INSTR=I64, PRODUCER_REGS=64, CONSUMER_REGS=216,
                         **PERS_TMA)),                                                      # 5 x 5 tiles, 5 blocks
])
def test_persistent_tma_store_on_the_interpreter(m, k, n, params):
    """gemm_persistent EPILOGUE=2 (bf16 out): the consumers stage each tile in c_s and go on; the producer stores
    it with a TMA store once it has issued the next tile's copies and hands c_s back; every element written once
    (NaN-poisoned), rounded once, against float64."""
    a, b = _inputs(m, k, n, m + 5 * k + 3 * n)
    c = np.full((m, n), np.nan, np.float32)
    gemm_hopper.launch(a, b, c, out_dtype=tp.bf16, **params)
    ref = gemm_hopper.reference(a, b)
    assert not np.isnan(c).any(), "an output tile was never written"
    np.testing.assert_array_equal(c, round_bf16(c))
    assert np.abs(c - ref).max() <= 2.0**-8 * np.abs(ref).max()


@pytest.mark.parametrize("params", [
    dict(STAGES=3, GROUP_M=8, PRODUCER_REGS=64, CONSUMER_REGS=216),       # what the large sweep times
    dict(STAGES=2, BN=64, INSTR=I64, GROUP_M=2),
])
def test_persistent_tma_store_verifies_clean(params):
    """Every check proves the per-tile handshake of c_s (`staged` / `c_free`, phase = the block's tile index) in
    the nested tile x ring loops, and the TMA store's asynchronous read ordered before the next tile's writes."""
    import tilepy_verify as tv

    k = gemm_hopper.kernel_for(tp.bf16, persistent=True)
    report = tv.verify(k, target="sm_90a", **{**gemm_hopper.PRESETS["sm_90a"], "EPILOGUE": 2, **params})
    assert report.ok and not report.findings, str(report)


PIECES = dict(PERSISTENT=1, EPILOGUE=2, STORE_N=64, **gemm_hopper.PRESETS["sm_90a"])


@pytest.mark.parametrize("m,k,n,params", [
    # 3 blocks over 3 x 3 tiles of 256 columns (4 pieces a tile, each buffer's phase running on across tiles), 4 k-tiles
    # in 3 stages (two ring turns a tile, 2 empty slots)
    (300, 200, 600, dict(PIECES, NUM_SMS=3, STAGES=3, GROUP_M=2)),
    (260, 130, 250, dict(PIECES, NUM_SMS=4, STAGES=2, GROUP_M=1, **T128)),      # 2 pieces a tile, 4 blocks
    (130, 64, 136, dict(PIECES, NUM_SMS=2, STAGES=3, GROUP_M=8, STORE_N=128)),   # 2 pieces of 128, partial tiles
    (520, 330, 600, dict(PIECES, NUM_SMS=5, STAGES=4, GROUP_M=3, PRODUCER_REGS=64, CONSUMER_REGS=216)),   # the policy's
    # 8 pieces of 32 columns (64-byte rows, their swizzle) through 4 buffers
    (300, 200, 600, dict(PIECES, NUM_SMS=3, STAGES=4, GROUP_M=2, STORE_N=32, STORE_BUFS=4)),
])
def test_persistent_store_in_pieces_on_the_interpreter(m, k, n, params):
    """gemm_persistent STORE_N (bf16 out): the consumers stage each tile in column pieces through two buffers, a
    store warp stores them and hands each buffer back; every element written once, rounded once, against float64."""
    a, b = _inputs(m, k, n, m + 7 * k + n)
    c = np.full((m, n), np.nan, np.float32)
    gemm_hopper.launch(a, b, c, out_dtype=tp.bf16, **params)
    ref = gemm_hopper.reference(a, b)
    assert not np.isnan(c).any(), "an output tile was never written"
    np.testing.assert_array_equal(c, round_bf16(c))
    assert np.abs(c - ref).max() <= 2.0**-8 * np.abs(ref).max()


@pytest.mark.parametrize("m,k,n,params", [
    # (G18) f32 out, the policy's form (4 pieces of 64 columns through one 32 KB buffer, 4 stages): 3 blocks over 3 x
    # 3 tiles with 4 k-tiles (one ring turn a tile), ragged M, N and K; 8 pieces of 32 through two 16 KB buffers
    (300, 200, 600, dict(PIECES, **gemm_hopper.F32_ONE_BUFFER, NUM_SMS=3)),
    (300, 200, 600, dict({**PIECES, **gemm_hopper.LARGE_PERSISTENT_F32}, NUM_SMS=3)),    # (G26: 8 x 32, 2 held)
    (300, 200, 600, dict(PIECES, NUM_SMS=3, STAGES=4, GROUP_M=2, STORE_N=32, PRODUCER_REGS=64, CONSUMER_REGS=216)),
    (300, 200, 600, dict(PIECES, NUM_SMS=3, STAGES=4, GROUP_M=2, STORE_N=32, STORE_SPAN=32)),   # 32-byte blocks
    (520, 330, 600, dict(PIECES, NUM_SMS=5, STAGES=3, GROUP_M=3, STORE_N=32)),      # 5 x 3 tiles, 2 turns a tile
    (300, 200, 600, dict(PIECES, NUM_SMS=2, STAGES=4, GROUP_M=2, STORE_N=16, STORE_BUFS=4)),   # 16 of 16 (64 B rows)
    (130, 64, 136, dict(PIECES, NUM_SMS=1, STAGES=3, GROUP_M=8, STORE_N=64)),      # 4 of 64, one block, one k-tile
])
def test_persistent_store_in_pieces_f32_on_the_interpreter(m, k, n, params):
    """gemm_persistent STORE_N with f32 out (G18): every element written once (NaN-poisoned), the f32 sums against
    float64 at f32 accuracy."""
    a, b = _inputs(m, k, n, 2 * m + k + n)
    c = np.full((m, n), np.nan, np.float32)
    gemm_hopper.launch(a, b, c, **params)
    ref = gemm_hopper.reference(a, b)
    assert not np.isnan(c).any(), "an output tile was never written"
    assert float(np.linalg.norm(c - ref) / np.linalg.norm(ref)) < 1e-6


@pytest.mark.parametrize("m,k,n,params", [
    # the policy's form (4 pieces of 64, two buffers) with pieces 2 and 3 held in registers: 3 blocks over 3 x 3
    # tiles, 4 k-tiles in 3 stages (2 ring turns a tile), ragged M, N and K
    (300, 200, 600, dict(PIECES, NUM_SMS=3, STAGES=3, GROUP_M=2, DEFER=1)),
    (520, 330, 600, dict(PIECES, NUM_SMS=5, STAGES=4, GROUP_M=3, PRODUCER_REGS=64, CONSUMER_REGS=216, DEFER=1)),
    (300, 200, 600, dict(PIECES, NUM_SMS=3, STAGES=4, GROUP_M=2, STORE_N=32, STORE_BUFS=4, DEFER=1)),   # 8 pieces
    (260, 70, 250, dict(PIECES, NUM_SMS=4, STAGES=2, GROUP_M=1, STORE_N=32, DEFER=1, **T128)),   # 4 pieces of 32
    (130, 64, 136, dict(PIECES, NUM_SMS=1, STAGES=3, GROUP_M=8, DEFER=1)),     # one block, one k-tile a tile
    (300, 64, 600, dict(PIECES, NUM_SMS=1, STAGES=2, GROUP_M=2, DEFER=1)),     # one block over 9 tiles
    (130, 0, 136, dict(PIECES, NUM_SMS=2, STAGES=3, GROUP_M=8, DEFER=1)),      # K = 0: one k-tile of zeros a tile
    # DEFER=2: the same schedule, the ring loop whole from slot 0
    (300, 200, 600, dict(PIECES, NUM_SMS=3, STAGES=3, GROUP_M=2, DEFER=2)),
    (520, 330, 600, dict(PIECES, NUM_SMS=5, STAGES=4, GROUP_M=3, PRODUCER_REGS=64, CONSUMER_REGS=216, DEFER=2)),
    (130, 64, 136, dict(PIECES, NUM_SMS=1, STAGES=3, GROUP_M=8, DEFER=2)),
    (130, 0, 136, dict(PIECES, NUM_SMS=2, STAGES=3, GROUP_M=8, DEFER=2)),
])
def test_deferred_pieces_on_the_interpreter(m, k, n, params):
    """gemm_persistent DEFER=1 (bf16 out): the second half of a tile's pieces rounded and held in registers, written
    under the next tile's first k-tile (the last tile's after the loop): every element written once, rounded once,
    against float64."""
    a, b = _inputs(m, k, n, m + 3 * k + n)
    c = np.full((m, n), np.nan, np.float32)
    gemm_hopper.launch(a, b, c, out_dtype=tp.bf16, **params)
    ref = gemm_hopper.reference(a, b)
    assert not np.isnan(c).any(), "an output tile was never written"
    np.testing.assert_array_equal(c, round_bf16(c))
    assert np.abs(c - ref).max() <= 2.0**-8 * np.abs(ref).max()


def test_deferred_pieces_need_half_the_tile_in_the_buffers():
    with pytest.raises(ValueError, match="DEFER=1"):
        gemm_hopper.kernel_params({**PIECES, "DEFER": 1, "STORE_N": 32})       # 8 pieces, 2 buffers: 6 held
    with pytest.raises(ValueError, match="DEFER=1"):
        gemm_hopper.kernel_params({**PIECES, "DEFER": 1, "STORE_N": 0})
    assert gemm_hopper.kernel_params({**PIECES, "DEFER": 1})["DEFER"] == 1
    with pytest.raises(ValueError, match="DEFER is 0, 1 or 2"):
        gemm_hopper.kernel_params({**PIECES, "DEFER": 3})


def test_deferred_pieces_verify_clean():
    """DEFER=1 (the first slot in the tile's prologue, the ring loop from k = 1): the verifier flattens that ring as
    it does the whole one (tilepy_verify/mbarrier_arrays.py), and proves it clean: no race, deadlock or hazard, the
    tag assertion proved. (Before k_tiles was at least 1 for DEFER=1 too, K = 0 was a real deadlock it reported.)"""
    import tilepy_verify as tv

    k = gemm_hopper.kernel_for(tp.bf16, persistent=True)
    report = tv.verify(k, target="sm_90a", **{**gemm_hopper.PRESETS["sm_90a"], "EPILOGUE": 2, "STORE_N": 64,
                                              "STAGES": 2, "GROUP_M": 2, "DEFER": 1})
    assert report.ok and not report.findings, str(report)


@pytest.mark.parametrize("params", [
    dict(STAGES=4, GROUP_M=8, PRODUCER_REGS=64, CONSUMER_REGS=216),      # the policy's (LARGE_PERSISTENT)
    dict(STAGES=4, GROUP_M=16, PRODUCER_REGS=64, CONSUMER_REGS=216),     # the policy's where A overflows the L2
    dict(STAGES=2, GROUP_M=2),
    dict(STAGES=3, GROUP_M=2, STORE_N=32, STORE_BUFS=4),                  # 8 pieces of 32, 4 buffers
])
def test_deferred_pieces_whole_ring_verify_clean(params):
    """DEFER=2: k-tile 0's wait and wgmma in the tile's prologue (a second wait op on full[0] beside the ring's:
    reaching.cross_role takes the one with the highest phase), the held pieces' handshake there: no race, no
    deadlock, no pipeline hazard, the tag assertion proved."""
    import tilepy_verify as tv

    k = gemm_hopper.kernel_for(tp.bf16, persistent=True)
    report = tv.verify(k, target="sm_90a", **{**gemm_hopper.PRESETS["sm_90a"], "EPILOGUE": 2, "STORE_N": 64,
                                              "DEFER": 2, **params})
    assert report.ok and not report.findings, str(report)


def test_store_in_pieces_needs_whole_rounds_of_the_buffers():
    with pytest.raises(ValueError, match="whole number of rounds"):
        gemm_hopper.kernel_params({**PIECES, "STORE_N": 128, "BN": 128})
    with pytest.raises(ValueError, match="EPILOGUE=2"):
        gemm_hopper.kernel_params({**PIECES, "EPILOGUE": 0})


@pytest.mark.parametrize("params", [
    dict(STAGES=4, GROUP_M=8, PRODUCER_REGS=64, CONSUMER_REGS=216),      # the policy's (4 pieces of 64 columns)
    dict(STAGES=2, BN=128, INSTR=I128, GROUP_M=2),                       # 2 pieces
])
def test_persistent_store_in_pieces_verifies_clean(params):
    """The two buffers' handshakes (staged / c_free per buffer, phase = its use count in the block, running on
    across tiles) and the store warp's reads: no race, no deadlock, no pipeline hazard."""
    import tilepy_verify as tv

    k = gemm_hopper.kernel_for(tp.bf16, persistent=True)
    report = tv.verify(k, target="sm_90a", **{**gemm_hopper.PRESETS["sm_90a"], "EPILOGUE": 2, "STORE_N": 64, **params})
    assert report.ok and not report.findings, str(report)


def test_persistent_store_in_pieces_f32_verifies_clean():
    """The f32 piece form at its policy's constexprs (G26: 8 pieces of 32 columns through two buffers, the last two
    held under the next tile's first k-tile, the store warp's pieces in a run-time loop; 4 stages, 64 / 216):
    no race, no deadlock, no pipeline hazard; the consumers' 8-byte writes of the accumulator's pairs into 128-byte
    swizzled rows are a 2-way bank conflict (a half-warp's four rows take the same two 16-byte chunks under the
    TMA's XOR; no TMA swizzle spreads them), reported as a performance finding, not a fault."""
    import tilepy_verify as tv

    kernel, kp = gemm_hopper.plan_kernel(4096, 4096, tp.f32, gemm_hopper.policy(4096, 4096, 4096, tp.f32, fixup=True),
                                         4096)
    assert kernel is gemm_hopper.kernel_for(tp.f32, persistent=True) and (kp["STORE_N"], kp["STORE_BUFS"]) == (32, 2)
    report = tv.verify(kernel, target="sm_90a", **kp)
    assert report.ok, str(report)
    assert {(f.check, f.severity) for f in report.findings} <= {("bank_conflict", "performance")}, str(report)


@pytest.mark.parametrize("old,check,loop", [
    # (4 pieces of 64 columns) the consumers write piece p >= 2 before the store of piece p - 2 has read the buffer
    ("                        tp.mbarrier_wait(c_free[p % STORE_BUFS],\n"
     "                                         it * (BN // (STORE_BUFS * STORE_N)) + p // STORE_BUFS - 1)", "race", 0),
    ("                        tp.mbarrier_wait(c_free[p % STORE_BUFS],\n"
     "                                         it * (BN // (STORE_BUFS * STORE_N)) + p // STORE_BUFS - 1)", "race", 1),
    # the store warp stores a piece before the consumers staged it (unrolled, and in the run-time loop: STORE_LOOP=1)
    ("                            tp.mbarrier_wait(staged[p % STORE_BUFS],\n"
     "                                             it * (BN // (STORE_BUFS * STORE_N)) + p // STORE_BUFS)", "race", 0),
    ("                            tp.mbarrier_wait(staged[p % STORE_BUFS],        # the consumers staged piece p\n"
     "                                             it * (BN // (STORE_BUFS * STORE_N)) + p // STORE_BUFS)", "race", 1),
])
def test_store_in_pieces_seeded_bugs_are_found(tmp_path, old, check, loop):
    import importlib.util
    import inspect

    import tilepy_verify as tv

    src = inspect.getsource(gemm_hopper)
    assert src.count(old) == 1
    path = tmp_path / "gemm_hopper_seeded.py"
    path.write_text(src.replace(old, " " * (len(old) - len(old.lstrip())) + "pass"))
    spec = importlib.util.spec_from_file_location("gemm_hopper_seeded", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    report = tv.verify(mod.kernel_for(tp.bf16, persistent=True), target="sm_90a",
                       **{**mod.PRESETS["sm_90a"], "EPILOGUE": 2, "STORE_N": 64, "STAGES": 2, "GROUP_M": 2,
                          "STORE_LOOP": loop})
    assert any(f.check == check and "c_s" in f.message for f in report.findings), str(report)


def test_persistent_tma_store_without_its_handback_is_a_race(tmp_path):
    """Seeded bug: the consumers write c_s without waiting for `c_free` (the previous tile's TMA store may still
    be reading it): the verifier reports a race on c_s."""
    import importlib.util
    import inspect

    import tilepy_verify as tv

    src = inspect.getsource(gemm_hopper)
    old = "                    tp.mbarrier_wait(c_free, it - 1)    # the previous tile's store has read c_s"
    assert src.count(old) == 1
    path = tmp_path / "gemm_hopper_no_handback.py"
    path.write_text(src.replace(old, "                    pass"))
    spec = importlib.util.spec_from_file_location("gemm_hopper_no_handback", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    report = tv.verify(mod.kernel_for(tp.bf16, persistent=True), target="sm_90a",
                       **{**mod.PRESETS["sm_90a"], "EPILOGUE": 2, "STAGES": 2, "BN": 64, "INSTR": I64, "GROUP_M": 2})
    assert any(f.check == "race" and "c_s" in f.message for f in report.findings), str(report)


def test_a_strided_c_is_written_through_a_contiguous_buffer():
    """launch on a C that the kernels cannot store into (a column slice of a wider tensor): the product lands in
    the slice, within one bf16 rounding of float64, and the columns beside it stay untouched."""
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(5)
    a = torch.randn(40, 48, generator=g).bfloat16()
    b = torch.randn(48, 56, generator=g).bfloat16()
    wide = torch.full((40, 70), float("nan"), dtype=torch.bfloat16)
    view = wide[:, 14:]
    assert not view.is_contiguous()
    gemm_hopper.launch(a, b, view, STAGES=2, **T128)
    ref = a.double() @ b.double()
    assert float((view.double() - ref).norm() / ref.norm()) <= 2.0 ** -8
    assert torch.isnan(wide[:, :14]).all()


@pytest.mark.parametrize("m,k,n,params", [
    # (G26) DEFER=2 with HELD: the last piece(s) held in registers in C's dtype, the pieces before them written at the
    # tile's end (those past the first STORE_BUFS waiting for their buffer's read inside the tile). One 64-column
    # buffer with piece 3 held: 3 blocks over 3 x 3 tiles (ragged M, N, K), one block over 9 tiles, one k-tile a tile
    (300, 200, 600, dict({**PIECES, **gemm_hopper.F32_ONE_BUFFER}, NUM_SMS=3, DEFER=2, HELD=1)),
    (300, 64, 600, dict({**PIECES, **gemm_hopper.F32_ONE_BUFFER, "STAGES": 2, "GROUP_M": 2}, NUM_SMS=1, DEFER=2,
                        HELD=1)),
    (130, 64, 136, dict(PIECES, NUM_SMS=1, STAGES=3, GROUP_M=8, STORE_BUFS=1, DEFER=2, HELD=1)),
    # 8 pieces of 32 through two buffers, pieces 6 and 7 held (one a buffer) / 4-7 held (two a buffer: the first of
    # each buffer handed to the store warp while the next tile's first wgmma runs, for the second to wait on)
    (520, 330, 600, dict(PIECES, NUM_SMS=5, STAGES=4, GROUP_M=3, STORE_N=32, DEFER=2, HELD=2)),
    (300, 200, 600, dict(PIECES, NUM_SMS=3, STAGES=4, GROUP_M=2, STORE_N=32, DEFER=2, HELD=4)),
    (300, 200, 600, dict(PIECES, NUM_SMS=3, STAGES=3, GROUP_M=2, STORE_BUFS=1, DEFER=1, HELD=1)),   # DEFER=1's ring
    # the store warp's pieces in a run-time loop (STORE_LOOP=1): 8 of 32 with 2 held, the bf16 policy's form
    (520, 330, 600, dict(PIECES, NUM_SMS=5, STAGES=4, GROUP_M=3, STORE_N=32, DEFER=2, HELD=2, STORE_LOOP=1)),
    (300, 64, 600, dict(PIECES, NUM_SMS=1, STAGES=2, GROUP_M=2, DEFER=2, STORE_LOOP=1)),
])
@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
def test_held_pieces_on_the_interpreter(m, k, n, params, out):
    """gemm_persistent DEFER with HELD (G26), f32 and bf16 out: every element written once (NaN-poisoned), f32 at
    f32 accuracy against float64, bf16 rounded once."""
    a, b = _inputs(m, k, n, m + 5 * k + n)
    c = np.full((m, n), np.nan, np.float32)
    gemm_hopper.launch(a, b, c, out_dtype=out, **params)
    ref = gemm_hopper.reference(a, b)
    assert not np.isnan(c).any(), "an output tile was never written"
    if out == tp.f32:
        assert float(np.linalg.norm(c - ref) / np.linalg.norm(ref)) < 1e-6
    else:
        np.testing.assert_array_equal(c, round_bf16(c))
        assert np.abs(c - ref).max() <= 2.0**-8 * np.abs(ref).max()


@pytest.mark.parametrize("out,params", [
    (tp.f32, dict(gemm_hopper.LARGE_PERSISTENT_F32)),         # the f32 policy since G26: 8 x 32, 2 held, the loop
    (tp.f32, dict(gemm_hopper.F32_ONE_BUFFER, STORE_LOOP=1)),
    (tp.bf16, dict(gemm_hopper.LARGE_PERSISTENT, STORE_LOOP=1)),
])
def test_store_loop_forms_verify_clean(out, params):
    """STORE_LOOP=1 (G26): the store warp's pieces in a run-time loop, one TMA store site of c_s: no race, no deadlock,
    no pipeline hazard (the f32 pairs' bank conflict is the f32 forms' one, performance, finding); the 8 pieces of 32
    with 6 and 7 held verify so (its unrolled store warp took ~4-5 s CPU, this ~1 s)."""
    import tilepy_verify as tv

    kernel, kp = gemm_hopper.plan_kernel(4096, 4096, out, {**gemm_hopper.PRESETS["sm_90a"], **params}, 4096)
    assert kp["STORE_LOOP"] == 1
    report = tv.verify(kernel, target="sm_90a", **kp)
    assert report.ok, str(report)
    assert {(f.check, f.severity) for f in report.findings} <= {("bank_conflict", "performance")}, str(report)
    if out == tp.bf16:
        assert not report.findings, str(report)


def test_held_pieces_need_a_deferred_window():
    for bad in (dict(HELD=1), dict(DEFER=2, HELD=3), dict(DEFER=2, HELD=2, STORE_BUFS=1, STORE_N=128, BN=256),
                dict(DEFER=2, STORE_BUFS=1, HELD=4)):
        with pytest.raises(ValueError, match="HELD="):
            gemm_hopper.kernel_params({**PIECES, **bad})
    assert gemm_hopper.kernel_params({**PIECES, "DEFER": 2, "STORE_BUFS": 1, "HELD": 1})["HELD"] == 1
    with pytest.raises(ValueError, match="STORE_LOOP=1"):
        gemm_hopper.kernel_params({**PIECES, "STORE_N": 0, "STORE_LOOP": 1})


def test_held_piece_f32_verifies_clean():
    """The f32 one-buffer form with piece 3 held (DEFER=2, HELD=1: its handshake in the tile's prologue, its staged
    arrival after the first wgmma retires): no race, no deadlock, no pipeline hazard; the 2-way bank conflict of the
    f32 pairs (the policy form's own) is its one, performance, finding."""
    import tilepy_verify as tv

    p = {**gemm_hopper.PRESETS["sm_90a"], **gemm_hopper.F32_ONE_BUFFER, "DEFER": 2, "HELD": 1}
    kernel, kp = gemm_hopper.plan_kernel(4096, 4096, tp.f32, p, 4096)
    report = tv.verify(kernel, target="sm_90a", **kp)
    assert report.ok, str(report)
    assert {(f.check, f.severity) for f in report.findings} <= {("bank_conflict", "performance")}, str(report)


@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
@pytest.mark.parametrize("params", [
    dict(CLUSTER_M=2, STAGES=3, EPILOGUE=2),      # 128 x 192 tiles (wgmma n192), 2x1 clusters, the TMA store
    dict(CLUSTER_M=2, STAGES=4, EPILOGUE=0),      # the registers' store
    dict(CLUSTER_M=4, STAGES=2, EPILOGUE=2),      # clusters of 4: 3 row tiles rounded up to 4
])
def test_n192_clusters_on_the_interpreter(params, out):
    """gemm_cluster with 128 x 192 tiles (G26), ragged in M, N and K (3 row tiles: the grid rounded up to whole
    clusters), against float64."""
    a, b = _inputs(300, 200, 420, 7)
    c = np.full((300, 420), np.nan, np.float32)
    gemm_hopper.launch(a, b, c, out_dtype=out, **{**gemm_hopper.PRESETS["sm_90a"], "BN": 192,
                                                   "INSTR": tp.nv.wgmma_m64n192k16_bf16, "IN_FLIGHT": 0, **params})
    ref = gemm_hopper.reference(a, b)
    assert not np.isnan(c).any(), "an output tile was never written"
    tol = 1e-6 if out == tp.f32 else 2.0**-8
    assert np.abs(c - ref).max() <= tol * np.abs(ref).max()


def test_unaligned_b_f32_policy_takes_clusters_of_four():
    """B rows off 128-byte lines (the 2x1 cluster's class): f32 out in clusters of 4 with 64 / 216 registers where the
    row tiles are whole clusters of 4 (G26: 3000 x 5000 x 4096 0.84-0.85 -> 0.87-0.90x), else the 2x1 cluster; bf16
    out keeps the 2x1 cluster (clusters of 4 measured even)."""
    f32 = gemm_hopper.policy(3000, 5000, 4096, tp.f32, fixup=True)
    assert (f32["CLUSTER_M"], f32["PRODUCER_REGS"], f32["CONSUMER_REGS"]) == (4, 64, 216)
    assert gemm_hopper.kernel_params(f32)["CLUSTER_M"] == 4
    assert gemm_hopper.policy(2056, 4104, 1040, tp.f32, fixup=True)["CLUSTER_M"] == 2     # 17 row tiles
    assert gemm_hopper.policy(3000, 5000, 4096, tp.bf16, fixup=True)["CLUSTER_M"] == 2
    assert not gemm_hopper.clustered(gemm_hopper.policy(3000, 5000, 4096, tp.f32))        # the lowering's policy
