"""The warp-specialized Hopper GEMM (stdlib_kernels/gemm_hopper.py) on the CPU interpreter: producer and
consumer warpgroups synchronized through the full/empty mbarrier rings, on ragged shapes (partial tiles in M,
N and K, fewer k-tiles than stages), against numpy in float64. Outputs are poisoned with NaN first."""

import numpy as np
import pytest

import tilepy as tp
from stdlib_kernels import gemm_hopper
from tilepy.dtypes import round_bf16


def _rel(out, ref):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    assert not np.isnan(out).any(), "some output element was never written"
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


@pytest.mark.parametrize(
    "m,k,n,params",
    [
        (100, 200, 150, dict(STAGES=2, **gemm_hopper.SMALL_TILE)),  # 4 k-tiles through 2 stages: every stage reused
        (37, 70, 90, dict(STAGES=4)),  # 2 k-tiles, 4 stages: a partial round
        (130, 64, 129, dict(STAGES=3, **gemm_hopper.SMALL_TILE)),  # M and N one past the tile
        (20, 300, 40, dict(BN=256, STAGES=3, INSTR=tp.nv.wgmma_m64n256k16_bf16)),
        (70, 90, 64, dict(BM=64, CONSUMERS=1, STAGES=2, INSTR=tp.nv.wgmma_m64n64k16_bf16, BN=64)),
    ],
)
def test_gemm_hopper_on_the_interpreter(m, k, n, params):
    rng = np.random.default_rng(m * 1000 + k + n)
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    c = np.full((m, n), np.nan, np.float32)
    gemm_hopper.launch(a, b, c, **params)
    assert _rel(c, gemm_hopper.reference(a, b)) < 1e-6


def test_b_tile_is_stored_in_64_column_blocks():
    lay = gemm_hopper.b_layout(64, 256)
    assert lay(0, 64) == 64 * 64 and lay(1, 0) == 64 and lay(3, 65) == 64 * 64 + 3 * 64 + 1


@pytest.mark.parametrize("m,k,n", [(100, 200, 150), (37, 70, 90)])
def test_gemm_hopper_bf16_out(m, k, n):
    rng = np.random.default_rng(m + k + n)
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    c = np.full((m, n), np.nan, np.float32)            # a float32 array standing for the bf16 C
    gemm_hopper.launch(a, b, c, out_dtype=tp.bf16, STAGES=2, **gemm_hopper.SMALL_TILE)
    ref = gemm_hopper.reference(a, b)
    assert not np.isnan(c).any()
    np.testing.assert_array_equal(c, round_bf16(c))    # the epilogue rounded to bf16
    assert np.abs(c - ref).max() <= 2.0**-8 * np.abs(ref).max()
    assert gemm_hopper.gemm_hopper_bf16.params[2][1].dtype == tp.bf16
    assert gemm_hopper.gemm_hopper.params[2][1].dtype == tp.f32


@pytest.mark.parametrize("m,k,n,params", [
    (100, 200, 150, dict(STAGES=2, IN_FLIGHT=0, **gemm_hopper.SMALL_TILE)),   # wait_group 0
    (100, 330, 150, dict(STAGES=2, IN_FLIGHT=1, **gemm_hopper.SMALL_TILE)),   # one group in flight, 2 stages
    (37, 70, 90, dict(STAGES=4, IN_FLIGHT=1)),                                # fewer k-tiles than stages
    (130, 520, 70, dict(STAGES=3, IN_FLIGHT=1, PRODUCER_REGS=56, CONSUMER_REGS=216, **gemm_hopper.SMALL_TILE)),
    (70, 700, 129, dict(STAGES=2, SPLIT_K=3, **gemm_hopper.SMALL_TILE)),      # 11 k-tiles in 3 splits of 4
    (70, 200, 129, dict(STAGES=2, SPLIT_K=5, IN_FLIGHT=1, **gemm_hopper.SMALL_TILE)),  # splits past K add 0
])
@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
def test_gemm_hopper_policies_on_the_interpreter(m, k, n, params, out):
    rng = np.random.default_rng(m * 7 + k + n)
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    c = np.full((m, n), np.nan, np.float32)
    gemm_hopper.launch(a, b, c, out_dtype=out, **params)
    ref = gemm_hopper.reference(a, b)
    if out == tp.f32:
        assert _rel(c, ref) < 1e-6
    else:
        assert not np.isnan(c).any()
        np.testing.assert_array_equal(c, round_bf16(c))
        assert np.abs(c - ref).max() <= 2.0**-8 * np.abs(ref).max()


def test_policy_table_by_shape_class():
    assert gemm_hopper.shape_class(128, 4096, 4096) == "skinny"
    assert gemm_hopper.shape_class(1024, 1024, 1024) == "small"
    assert gemm_hopper.shape_class(2051, 2045, 1000) == "unaligned"           # 4090-byte rows of B
    assert gemm_hopper.policy(1024, 1024, 1024)["BM"] == 64                   # 128 tiles of 64 x 128
    assert gemm_hopper.shape_class(4096, 4096, 4096) == "large"
    big = gemm_hopper.policy(4096, 4096, 4096)
    assert big["BN"] == 256 and big.get("SPLIT_K", 1) == 1            # 128 output tiles: no split
    skinny = gemm_hopper.policy(128, 4096, 4096)
    tiles = 64                                                          # 2 x 32 tiles of 64 x 128
    assert (skinny["BM"], skinny["BN"], skinny["STAGES"], skinny["MIN_BLOCKS"]) == (64, 128, 4, 2)
    assert skinny["SPLIT_K"] == gemm_hopper.NUM_SMS // tiles == 2
    assert gemm_hopper.grid_of(128, 4096, skinny) == (2, 32, 2)
    assert "FIXUP" not in skinny and gemm_hopper.policy(128, 4096, 4096, fixup=True, forms=False)["FIXUP"] == 3
    assert gemm_hopper.policy(128, 4096, 4096, fixup=True)["K_WAYS"] == 2    # launch's form (G11: swap-AB K_WAYS=2)
    # 64 x 128 tiles filling more than half a wave run unsplit (6 stages, no register cap)
    wide_n = gemm_hopper.policy(128, 8192, 4096, fixup=True)
    assert (wide_n["BM"], wide_n["BN"], wide_n["STAGES"], wide_n.get("SPLIT_K", 1)) == (64, 128, 6, 1)
    assert "MIN_BLOCKS" not in wide_n and "FIXUP" not in wide_n
    # a short K keeps >= 4 k-tiles per split
    assert gemm_hopper.policy(128, 4096, 512).get("SPLIT_K", 1) == 2
    # where 64 x 128 tiles fill one wave (4 x 32 = 128 of them at M = 256) they run unsplit
    wide = gemm_hopper.policy(256, 4096, 4096)
    assert (wide["BM"], wide["BN"], wide["CONSUMERS"], wide.get("SPLIT_K", 1)) == (64, 128, 1, 1)
    assert gemm_hopper.policy(256, 14336, 4096)["BM"] == 128          # 448 such tiles: more than a wave
    # through launch (fixup) without the forms: 129-256 rows whose 128 x 128 tiles fill a third to a half of the SMs
    # take them, split 2 with FIXUP=3 (6 stages); the lowering (no fixup) keeps the unsplit 64 x 128 tiles
    # (with the forms, G27: two unsplit swap-AB row tiles, tests/stdlib/test_gemm_splitk_swap.py)
    for m in (200, 256):
        wide_f = gemm_hopper.policy(m, 4096, 4096, fixup=True, forms=False)
        assert (wide_f["BM"], wide_f["BN"], wide_f["CONSUMERS"], wide_f["STAGES"]) == (128, 128, 2, 6)
        assert (wide_f["SPLIT_K"], wide_f["FIXUP"]) == (2, 3) and "MIN_BLOCKS" not in wide_f
        assert gemm_hopper.policy(m, 4096, 4096, fixup=True)["K_WAYS"] == 2
    assert gemm_hopper.policy(256, 4096, 256, fixup=True, forms=False)["BM"] == 64   # 4 k-tiles: no split, 64 x 128
    assert gemm_hopper.policy(256, 2048, 4096, fixup=True)["BM"] == 64     # 32 such tiles: not this branch


def test_policy_table_decode_unaligned_and_bf16_out():
    # decode M (<= 64): 64 x 128 tiles, one consumer, split over K to fill the SMs (32 tiles x 4)
    assert gemm_hopper.shape_class(16, 4096, 4096) == gemm_hopper.shape_class(64, 4096, 4096) == "decode"
    assert gemm_hopper.shape_class(65, 4096, 4096) == "skinny"
    dec = gemm_hopper.policy(16, 4096, 4096)
    assert (dec["BM"], dec["BN"], dec["CONSUMERS"], dec["SPLIT_K"]) == (64, 128, 1, 4)
    assert gemm_hopper.policy(16, 8192, 4096, fixup=True)["FIXUP"] == 3     # through launch: the slots' sum (at N ~
    # 4096, 1-128 rows take gemm_splitk_swap's cluster split instead: tests/stdlib/test_gemm_splitk_swap.py)
    assert gemm_hopper.grid_of(16, 4096, dec) == (1, 32, 4)
    # unaligned rows are padded, then run the large tile
    una = gemm_hopper.policy(2051, 2045, 1000)
    assert (una["BM"], una["BN"], una["STAGES"], una["IN_FLIGHT"]) == (128, 256, 4, 0)
    assert gemm_hopper.shape_class(1000, 1000, 1000) == "small"             # small first, padded all the same
    # bf16 out stores the small class's tile through the TMA store (G16); f32 out and the other classes do not
    assert gemm_hopper.policy(1024, 1024, 1024, tp.bf16)["EPILOGUE"] == 2
    assert not gemm_hopper.policy(1024, 1024, 1024).get("EPILOGUE")
    big = gemm_hopper.policy(4096, 4096, 4096, tp.bf16)                 # large, bf16: the TMA store, 3 stages
    assert (big["EPILOGUE"], big["STAGES"]) == (2, 3) and not gemm_hopper.policy(4096, 4096, 4096).get("EPILOGUE")
    assert not gemm_hopper.policy(2051, 2045, 1000, tp.bf16).get("EPILOGUE")   # C's rows: no TMA
    with pytest.raises(ValueError, match="EPILOGUE"):
        gemm_hopper.kernel_params({**gemm_hopper.PRESETS["sm_90a"], "PERSISTENT": 1, "EPILOGUE": 1})


def test_launch_passes_the_output_dtype_to_the_policy():
    rng = np.random.default_rng(5)
    # (576 x 1000: 72 tiles of 64 x 128, more than half a wave: the small class's 64 x 128 tile, not SMALL_64x64)
    a = round_bf16(rng.standard_normal((576, 64)).astype(np.float32))
    b = round_bf16(rng.standard_normal((64, 1000)).astype(np.float32))
    c = np.full((576, 1000), np.nan, np.float32)
    gemm_hopper.launch(a, b, c, out_dtype=tp.bf16, STAGES=2)                # small class, bf16: the TMA store
    plan = next(p for key, p in gemm_hopper._PLANS.items() if key[:3] == (576, 1000, 64) and key[4] == tp.bf16)
    assert plan.params["EPILOGUE"] == 2
    ref = gemm_hopper.reference(a, b)
    assert not np.isnan(c).any() and np.abs(c - ref).max() <= 2.0**-8 * np.abs(ref).max()


@pytest.mark.parametrize("m,k,n", [(300, 100, 90), (300, 70, 130)])
def test_unaligned_rows_are_padded(m, k, n):
    """Rows of A (K = 100: 200 bytes) or B (N = 90, 130) that are no multiple of 16 bytes go through zero-padded
    copies; the padding never reaches C, and a second call reuses the plan's buffers."""
    rng = np.random.default_rng(m + k + n)
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    for _ in range(2):
        c = np.full((m, n), np.nan, np.float32)
        gemm_hopper.launch(a, b, c, STAGES=2)
        assert _rel(c, gemm_hopper.reference(a, b)) < 1e-6
        a, b = -a, b  # new values through the same (cached) padded buffers
    plan = next(p for key, p in gemm_hopper._PLANS.items() if key[:3] == (m, n, k))
    assert plan.pad_a == ((2 * k) % 16 != 0) and plan.pad_b == ((2 * n) % 16 != 0)


@pytest.mark.parametrize(
    "m,k,n,params",
    [
        # 3 blocks over 3 x 3 tiles of 64 columns: every block walks 3 output tiles through one ring; 4 k-tiles
        # in 3 stages, so each tile takes two turns with 2 empty slots (no copy, no product)
        (300, 200, 150, dict(PERSISTENT=1, NUM_SMS=3, BN=64, STAGES=3, GROUP_M=2,
                             INSTR=tp.nv.wgmma_m64n64k16_bf16)),
        (130, 64, 129, dict(PERSISTENT=1, NUM_SMS=2, STAGES=2, GROUP_M=8, **gemm_hopper.SMALL_TILE)),
        (260, 130, 70, dict(PERSISTENT=1, NUM_SMS=4, BN=64, STAGES=2, GROUP_M=1, INSTR=tp.nv.wgmma_m64n64k16_bf16)),
    ],
)
@pytest.mark.parametrize("out", [np.float32, "bf16"])
def test_persistent_grid_on_the_interpreter(m, k, n, params, out):
    """gemm_persistent: a grid capped below the tile count, grouped tile order with a ragged last group, the
    ring running on across a block's tiles; every element written once (NaN-poisoned output)."""
    rng = np.random.default_rng(m + k + n)
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    c = np.full((m, n), np.nan, np.float32)
    ref = gemm_hopper.reference(a, b)
    if out == "bf16":
        gemm_hopper.launch(a, b, c, out_dtype=tp.bf16, **params)
        assert _rel(c, ref) < 4e-3 and np.array_equal(c, round_bf16(c))
    else:
        gemm_hopper.launch(a, b, c, **params)
        assert _rel(c, ref) < 1e-6
    assert gemm_hopper.grid_of(m, n, {**gemm_hopper.PRESETS["sm_90a"], **params}) == (params["NUM_SMS"],)


def test_persistent_rejects_policies_it_does_not_run():
    with pytest.raises(ValueError, match="PERSISTENT=1"):
        gemm_hopper.kernel_params({**gemm_hopper.PRESETS["sm_90a"], "PERSISTENT": 1, "IN_FLIGHT": 1})
    with pytest.raises(ValueError, match="SPLIT_K"):
        gemm_hopper.kernel_params({**gemm_hopper.PRESETS["sm_90a"], "PERSISTENT": 1, "SPLIT_K": 2})


@pytest.mark.parametrize("params", [dict(STAGES=2, BN=64, INSTR=tp.nv.wgmma_m64n64k16_bf16), {},
                                    dict(BN=128, STAGES=5, INSTR=tp.nv.wgmma_m64n128k16_bf16)])
def test_persistent_flat_verifies(params):
    """gemm_persistent_flat: the ring's phase is g // STAGES of one flat loop per role, and every check proves
    it (the tag assertion included) at the small, default and 128x128 s5 constexprs."""
    import tilepy_verify as tv

    report = tv.verify(gemm_hopper.gemm_persistent_flat, target="sm_90a", **params)
    assert report.ok and not report.findings, str(report)
    assert report.stats["queries"] > 0


@pytest.mark.parametrize("params", [dict(STAGES=2, BN=64, INSTR=tp.nv.wgmma_m64n64k16_bf16), {},
                                    dict(BN=128, STAGES=5, INSTR=tp.nv.wgmma_m64n128k16_bf16)])
def test_persistent_verifies(params):
    """gemm_persistent (the nested tile x ring loops, phase ((t - first) // step) * rounds + k // STAGES): the
    verifier writes the two loops as one loop over the block's slots (tilepy_verify/mbarrier_arrays.py
    `_flatten`) and proves every check, the tag assertion included; its seeded bugs:
    tests/verify/test_persistent_nested.py."""
    import tilepy_verify as tv

    report = tv.verify(gemm_hopper.gemm_persistent, target="sm_90a", **params)
    assert report.ok and not report.findings, str(report)
    assert report.stats["queries"] > 0


def test_persistent_flat_matches_the_reference_on_the_interpreter():
    """The flat twin computes the GEMM (f32 and bf16 out): 3 blocks over 3 x 5 tiles of a ragged shape."""
    rng = np.random.default_rng(7)
    m, k, n = 300, 200, 300
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    ref = gemm_hopper.reference(a, b)
    p = dict(BN=64, STAGES=3, GROUP_M=2, INSTR=tp.nv.wgmma_m64n64k16_bf16)
    c = np.full((m, n), np.nan, np.float32)
    gemm_hopper.gemm_persistent_flat[(3,)](a, b, c, target="sm_90a", **p)
    assert _rel(c, ref) < 1e-6
    c16 = np.full((m, n), np.nan, np.float32)
    gemm_hopper.gemm_persistent_flat.retyped(C=tp.Tensor[tp.bf16, "M", "N"])[(3,)](a, b, c16, target="sm_90a", **p)
    assert _rel(c16, ref) < 4e-3 and np.array_equal(c16, round_bf16(c16))


def test_only_launchs_policy_picks_the_persistent_kernel():
    """gemm_persistent (verified clean, its TMA-store epilogue included) is launch's large form only, bf16 and (since
    G18) f32 out (tests/stdlib/test_gemm_large.py): the lowering's policy (no `fixup`) and the other classes keep
    gemm_hopper."""
    for shape in ((4096, 4096, 4096), (8192, 8192, 8192), (1024, 1024, 1024), (128, 4096, 4096)):
        assert not gemm_hopper.policy(*shape).get("PERSISTENT")
        assert not gemm_hopper.policy(*shape, tp.bf16).get("PERSISTENT")
        large = shape in ((4096, 4096, 4096), (8192, 8192, 8192))       # more 128 x 256 tiles than SMs
        assert bool(gemm_hopper.policy(*shape, tp.f32, fixup=True).get("PERSISTENT")) == large


I32, I64 = tp.nv.wgmma_m64n32k16_bf16, tp.nv.wgmma_m64n64k16_bf16
NARROW = dict(BM=64, BN=32, CONSUMERS=1, INSTR=I32, B_SWIZZLE=tp.Swizzle(2, 3, 3), IN_FLIGHT=1)


@pytest.mark.parametrize("m,k,n,params", [
    (70, 200, 90, dict(STAGES=3, **NARROW)),                            # 32-column B tiles (64-byte swizzle)
    (20, 330, 70, dict(STAGES=3, SPLIT_K=2, **NARROW)),                 # ... split over K, M one tile of 64
    (130, 520, 129, dict(STAGES=3, EPILOGUE=1, **gemm_hopper.SMALL_TILE)),  # output staged in shared memory
    (70, 200, 129, dict(BM=64, CONSUMERS=1, STAGES=2, IN_FLIGHT=1, EPILOGUE=1, **gemm_hopper.SMALL_TILE)),
    (70, 700, 129, dict(STAGES=2, EPILOGUE=1, SPLIT_K=3, **gemm_hopper.SMALL_TILE)),  # split-K: atomics
    (130, 520, 129, dict(STAGES=3, EPILOGUE=2, **gemm_hopper.SMALL_TILE)),  # TMA store (tp.store_bulk)
    (70, 200, 300, dict(BM=64, CONSUMERS=1, STAGES=2, IN_FLIGHT=1, EPILOGUE=2, **gemm_hopper.SMALL_TILE)),
    (70, 200, 90, dict(STAGES=3, EPILOGUE=1, **NARROW)),                # staged 32-column tile (swizzle <= row)
])
@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
def test_narrow_tiles_and_staged_epilogue_on_the_interpreter(m, k, n, params, out):
    """The skinny class's 64x32 tiles and the staged epilogue (consumers -> c_s -> the producer warpgroup's
    coalesced copy) on ragged shapes: every element written once, f32 to f32 rounding, bf16 rounded once."""
    rng = np.random.default_rng(m * 3 + k + n)
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    c = np.full((m, n), np.nan, np.float32)
    gemm_hopper.launch(a, b, c, out_dtype=out, **params)
    ref = gemm_hopper.reference(a, b)
    if out == tp.f32:
        assert _rel(c, ref) < 1e-6
    else:
        assert not np.isnan(c).any()
        np.testing.assert_array_equal(c, round_bf16(c))
        assert np.abs(c - ref).max() <= 2.0**-8 * np.abs(ref).max()


@pytest.mark.parametrize("kernel,params", [
    (gemm_hopper.gemm_hopper_bf16, dict(IN_FLIGHT=0, STAGES=3, EPILOGUE=1)),       # 128x256, staged bf16 out
    (gemm_hopper.gemm_hopper, dict(IN_FLIGHT=1, STAGES=3, EPILOGUE=1, BM=64, CONSUMERS=1, BN=128,
                                   INSTR=tp.nv.wgmma_m64n128k16_bf16)),
    (gemm_hopper.gemm_hopper, dict(STAGES=3, **NARROW)),
    (gemm_hopper.gemm_hopper_bf16, dict(IN_FLIGHT=0, STAGES=3, EPILOGUE=2)),       # the TMA store epilogue
])
def test_new_policies_verify_clean(kernel, params):
    """No race (the producer reads c_s only after the consumers' arrival), no bank conflict on the staged
    stores (the swizzle spreads the accumulator's 8 rows), no pipeline hazard."""
    import tilepy_verify as tv

    report = tv.verify_ir(kernel.ir("sm_90a", **{**gemm_hopper.PRESETS["sm_90a"], **params}))
    assert not report.findings, str(report)


@tp.kernel(threads=256, target="sm_90a")
def _staged_epilogue(A: tp.Tensor[tp.f32, "M", "N"], C: tp.Tensor[tp.f32, "M", "N"], WAIT: tp.constexpr = 1):
    """The staged epilogue's handshake alone: warpgroup 1 writes a tile into c_s and arrives; warpgroup 0 copies
    c_s out. WAIT=0 is the seeded bug: the copy does not wait for the arrival."""
    c_s = tp.shared((64, 64), tp.f32, swizzle=tp.Swizzle(3, 2, 4))
    staged = tp.mbarrier(1)
    if tp.warpgroup_id() == 0:
        if WAIT == 1:
            tp.mbarrier_wait(staged, 0)
        tp.copy(c_s, C[0:64, 0:64])
    else:
        tp.store(c_s, tp.load(A[0:64, 0:64]) * 2.0)
        tp.mbarrier_arrive(staged)


def test_staged_epilogue_without_the_wait_is_a_race():
    import tilepy_verify as tv

    good = tv.verify_ir(_staged_epilogue.ir("sm_90a", WAIT=1))
    assert not good.findings, str(good)
    bad = tv.verify_ir(_staged_epilogue.ir("sm_90a", WAIT=0))
    assert any(f.check == "race" and "c_s" in f.message for f in bad.findings), str(bad)
    a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    c = np.full((64, 64), np.nan, np.float32)
    _staged_epilogue[(1,)](a, c, target="sm_90a", WAIT=1)
    np.testing.assert_array_equal(c, 2 * a)


def test_a_callers_own_tile_does_not_inherit_the_policys_epilogue(monkeypatch):
    """576 x 1000 x 200 with bf16 out is the small class, whose policy stages the output (EPILOGUE=2, the TMA
    store) in a shared tile sized for its 64x128 tile; a caller's 128x256 4-stage tile with that staging would not
    fit in shared memory, so another tile given without EPILOGUE runs the direct store (asked for, it is kept;
    fewer stages of the policy's own tile keep it: test_launch_passes_the_output_dtype_to_the_policy)."""
    m, k, n = 576, 200, 1000
    assert gemm_hopper.policy(m, n, k, tp.bf16).get("EPILOGUE") == 2
    seen = []
    real = gemm_hopper._Plan

    def spy(M, N, K, out, params):
        seen.append(dict(params))
        return real(M, N, K, out, params)

    monkeypatch.setattr(gemm_hopper, "_Plan", spy)
    rng = np.random.default_rng(5)
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    for params, epilogue in ((dict(BM=128, BN=256, STAGES=4, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n256k16_bf16), None),
                             (dict(STAGES=2, EPILOGUE=1, **gemm_hopper.SMALL_TILE), 1)):
        c = np.full((m, n), np.nan, np.float32)
        gemm_hopper.launch(a, b, c, out_dtype=tp.bf16, IN_FLIGHT=1, **params)
        assert seen[-1].get("EPILOGUE") == epilogue
        assert np.abs(c - gemm_hopper.reference(a, b)).max() <= 2.0**-8 * np.abs(gemm_hopper.reference(a, b)).max()


# split-K reduced in the kernel (gemm_splitk): FIXUP=1 (atomics into a workspace the last block zeroes), FIXUP=2
# (one workspace slot per split, summed by the last block); no zeroing or rounding pass around it
D64 = dict(BM=64, BN=128, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n128k16_bf16, IN_FLIGHT=1)
W128 = dict(BM=128, BN=64, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n64k16_bf16, IN_FLIGHT=0)


@pytest.mark.parametrize("m,k,n,params", [
    (16, 700, 129, dict(STAGES=2, SPLIT_K=3, **D64)),        # 11 k-tiles in 3 splits of 4 (the last short)
    (70, 200, 300, dict(STAGES=3, SPLIT_K=5, **D64)),        # 2 x 3 tiles; splits past K add zeros
    (130, 500, 70, dict(STAGES=2, SPLIT_K=2, **W128)),       # two consumer warpgroups, M and N one past a tile
])
@pytest.mark.parametrize("fixup", [1, 2, 3])
@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
def test_split_k_fix_up_on_the_interpreter(m, k, n, params, fixup, out):
    rng = np.random.default_rng(m + 3 * k + n)
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    ref = gemm_hopper.reference(a, b)
    gemm_hopper._PLANS.clear()
    for call in range(2):       # the second call reuses the plan's workspace and tickets: left as found
        c = np.full((m, n), np.nan, np.float32)
        gemm_hopper.launch(a, b, c, out_dtype=out, FIXUP=fixup, **params)
        if out == tp.f32:
            assert _rel(c, ref) < 1e-6, call
        else:
            assert not np.isnan(c).any()
            np.testing.assert_array_equal(c, round_bf16(c))     # rounded once, in the last block's store
            assert np.abs(c - ref).max() <= 2.0**-8 * np.abs(ref).max(), call
    (plan,) = gemm_hopper._PLANS.values()
    assert plan.fixup and not plan.split
    bufs = {key[0]: buf for key, buf in plan.bufs.items()}
    ws, locks = bufs["fixup_ws"], bufs["fixup_locks"]
    assert not locks.any() and (fixup != 1 or not ws.any())      # tickets reset; FIXUP=1's sums zeroed
    assert ws.shape == ((m, n) if fixup == 1 else (params["SPLIT_K"] * -(-m // params["BM"]) * params["BM"], n))
    assert (plan.summer is not None) == (fixup == 3)               # FIXUP=3: splitk_sum, a second launch


def test_split_k_fix_up_takes_its_order_from_the_ticket():
    """The block whose ticket is SPLIT_K - 1 writes C, whichever split it is: with a stale ticket (one arrival
    left over) split 2 of 4 takes the last ticket and stores a sum without split 3's part (its slot zero), and
    split 3 then finds the ticket reset and stores nothing. (The interpreter runs the splits in grid order.)"""
    rng = np.random.default_rng(11)
    m, k, n = 20, 512, 130
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    ref = gemm_hopper.reference(a, b)
    p = dict(STAGES=2, SPLIT_K=4, FIXUP=2, **D64)
    ws, locks = np.zeros((4 * 64, n), np.float32), np.zeros(2, np.int32)
    c = np.full((m, n), np.nan, np.float32)
    gemm_hopper.gemm_splitk[(1, 2, 4)](a, b, c, ws, locks, **p)
    assert not locks.any() and _rel(c, ref) < 1e-6
    ws[:], locks[:] = 0, 1
    c = np.full((m, n), np.nan, np.float32)
    gemm_hopper.gemm_splitk[(1, 2, 4)](a, b, c, ws, locks, **p)
    part3 = a[:, 384:].astype(np.float64) @ b[384:]                 # split 3's k-tiles: 6 and 7 of 8
    assert _rel(c, ref - part3) < 1e-6 and (locks == 1).all()


def test_split_k_fix_up_policy_and_verifier():
    import time

    import tilepy_verify as tv

    dec = gemm_hopper.policy(16, 4096, 4096)
    assert "FIXUP" not in dec                                          # a caller of gemm_hopper itself (lowering)
    saved = dict(gemm_hopper.SPLIT_FIXUP)
    # (gemm_splitk's split: the policy without swap-AB, which takes FIXUP=3 whatever the class table says)
    try:       # a class entry puts the fix-up on the class's splits, where `launch` asks for it
        gemm_hopper.SPLIT_FIXUP.update(decode=2)
        assert gemm_hopper.policy(16, 4096, 4096, fixup=True, forms=False)["FIXUP"] == 2
        assert "FIXUP" not in gemm_hopper.policy(16, 4096, 4096)
        assert "FIXUP" not in gemm_hopper.policy(16, 128, 65536, fixup=True, forms=False)   # 128 splits: no slot sum
        gemm_hopper.SPLIT_FIXUP.update(decode=1)
        assert gemm_hopper.policy(16, 128, 65536, fixup=True, forms=False)["FIXUP"] == 1    # (atomics: any count)
        gemm_hopper.SPLIT_FIXUP.clear()
        assert "FIXUP" not in gemm_hopper.policy(16, 4096, 4096, fixup=True, forms=False)
    finally:
        gemm_hopper.SPLIT_FIXUP.clear()
        gemm_hopper.SPLIT_FIXUP.update(saved)
    dec = {**dec, "FIXUP": 2}
    assert "FIXUP" not in gemm_hopper.kernel_params({**gemm_hopper.PRESETS["sm_90a"], "SPLIT_K": 1, "FIXUP": 2})
    kp = gemm_hopper.kernel_params({**dec, "EPILOGUE": 1})
    assert kp["FIXUP"] == dec["FIXUP"] and "EPILOGUE" not in kp
    with pytest.raises(ValueError, match="FIXUP"):
        gemm_hopper.kernel_params({**dec, "FIXUP": 4})
    # every check proves it, global_race included: the ticket protocol between blocks (tilepy_verify/checks/
    # tickets.py) orders each part before the last arriver's fix-up, whose test counts the grid's z blocks
    for kernel in (gemm_hopper.gemm_splitk, gemm_hopper.gemm_splitk_bf16):
        for fixup in (1, 2):
            t = time.perf_counter()
            report = tv.verify(kernel, target="sm_90a", FIXUP=fixup, SPLIT_K=4, STAGES=6, **D64)
            assert report.findings == [], [f.message for f in report.findings]
            assert time.perf_counter() - t < 30      # (0.4-0.6 s idle; a hang guard under load, not a benchmark)
    # FIXUP=3 (each split stores its own slot, splitk_sum adds them in a second launch): every check, global_race
    # included, proves both kernels clean
    for kernel in (gemm_hopper.gemm_splitk, gemm_hopper.gemm_splitk_bf16):
        report = tv.verify(kernel, target="sm_90a", FIXUP=3, SPLIT_K=4, STAGES=6, **D64)
        assert report.findings == [], [f.message for f in report.findings]
    for kernel in (gemm_hopper.splitk_sum, gemm_hopper.splitk_sum_bf16):
        assert tv.verify(kernel, SPLIT_K=3).findings == []


def test_small_class_f32_out_takes_four_stages():
    assert gemm_hopper.policy(1024, 1024, 1024)["STAGES"] == 4
    assert gemm_hopper.policy(1024, 1024, 1024, tp.bf16)["STAGES"] == 8      # bf16: the TMA store, 8 (G22)


def test_two_blocks_per_sm_is_the_launch_bound_and_changes_no_result():
    """MIN_BLOCKS=2 (gemm_hopper / gemm_splitk) is the kernel's `min_blocks`: __launch_bounds__(threads, 2) in the
    build; the interpreter's result is the same bits with or without it (split-K 8 through FIXUP=3 here). The
    persistent and cluster kernels take no such constexpr: asking them for it is an error naming it."""
    p = dict(STAGES=4, SPLIT_K=8, FIXUP=3, **D64)
    assert gemm_hopper.gemm_splitk.ir("sm_90a", MIN_BLOCKS=2, **p).min_blocks == 2
    assert gemm_hopper.gemm_hopper.ir("sm_90a", MIN_BLOCKS=2, **D64).min_blocks == 2
    assert gemm_hopper.gemm_hopper.ir("sm_90a", **D64).min_blocks == 0
    rng = np.random.default_rng(8)
    m, k, n = 20, 600, 130                                  # 10 k-tiles in 8 splits of 2 (the last three empty)
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    outs = []
    for mb in (0, 2):
        c = np.full((m, n), np.nan, np.float32)
        gemm_hopper.launch(a, b, c, out_dtype=tp.bf16, MIN_BLOCKS=mb, **p)
        outs.append(c)
    ref = gemm_hopper.reference(a, b)
    np.testing.assert_array_equal(outs[0], outs[1])
    assert np.abs(outs[1] - ref).max() <= 2.0**-8 * np.abs(ref).max()
    for bad in (dict(PERSISTENT=1), dict(CLUSTER_M=2, IN_FLIGHT=0)):
        with pytest.raises(ValueError, match="MIN_BLOCKS"):
            gemm_hopper.kernel_params({**gemm_hopper.PRESETS["sm_90a"], "MIN_BLOCKS": 2, **bad})


@pytest.mark.parametrize("m,k,n,params", [
    (100, 200, 150, dict(STAGES=2, IN_FLIGHT=0, **gemm_hopper.SMALL_TILE)),   # 4 k-tiles through 2 stages
    (70, 90, 130, dict(STAGES=3, EPILOGUE=1, **D64)),                        # wait_group 1, the staged epilogue
    (130, 130, 264, dict(STAGES=3, IN_FLIGHT=0)),                             # 128x256, M / N / K past a tile
])
@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
def test_b_given_as_n_by_k_on_the_interpreter(m, k, n, params, out):
    """gemm_hopper_nk (B_NK=1): B is (N, K), an nn.Linear weight read in place; c = a @ b.T against float64."""
    rng = np.random.default_rng(m + k + n)
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    w = round_bf16(rng.standard_normal((n, k)).astype(np.float32))
    ref = gemm_hopper.reference(a, w.T)
    kernel = gemm_hopper.gemm_hopper_nk_bf16 if out == tp.bf16 else gemm_hopper.gemm_hopper_nk
    p = {**gemm_hopper.PRESETS["sm_90a"], **params, "B_NK": 1}
    c = np.full((m, n), np.nan, np.float32)
    kernel[gemm_hopper.grid_of(m, n, p)](a, w, c, **p)
    if out == tp.f32:
        assert _rel(c, ref) < 1e-6
    else:
        np.testing.assert_array_equal(c, round_bf16(c))
        assert np.abs(c - ref).max() <= 2.0**-8 * np.abs(ref).max()


@pytest.mark.parametrize("kernel,params", [
    (gemm_hopper.gemm_hopper_nk, dict(IN_FLIGHT=0, STAGES=4)),                       # 128x256
    (gemm_hopper.gemm_hopper_nk_bf16, dict(STAGES=6, EPILOGUE=1, **D64)),
    (gemm_hopper.gemm_hopper_nk_bf16, dict(IN_FLIGHT=0, STAGES=3, EPILOGUE=2)),
])
def test_b_given_as_n_by_k_verifies_clean(kernel, params):
    import tilepy_verify as tv

    report = tv.verify_ir(kernel.ir("sm_90a", **{**gemm_hopper.PRESETS["sm_90a"], **params, "B_NK": 1}))
    assert not report.findings, str(report)


def test_a_callers_own_block_drops_the_policys_register_cap_and_fix_up():
    """At 128 x 4096 x 512 the policy runs 64 x 128 tiles with MIN_BLOCKS=2 and FIXUP=3; a caller's 128 x 256 tile
    with two consumer warpgroups (no build fits 384 threads twice in the registers) runs without either, unless it
    asks for them; the policy's own constexprs keep both. Checked on the plans `launch` makes (interpreter)."""
    rng = np.random.default_rng(3)
    m, k, n = 100, 512, 256
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    ref = gemm_hopper.reference(a, b)
    pol = gemm_hopper.policy(m, n, k, fixup=True)
    assert (pol["MIN_BLOCKS"], pol["FIXUP"], pol["BM"]) == (2, 3, 64)
    for given, kept in ((dict(gemm_hopper.PRESETS["sm_90a"], STAGES=2), False), ({}, True),
                        (dict(STAGES=2, FIXUP=3), None)):
        gemm_hopper._PLANS.clear()
        c = np.full((m, n), np.nan, np.float32)
        gemm_hopper.launch(a, b, c, **given)
        (plan,) = gemm_hopper._PLANS.values()
        assert _rel(c, ref) < 1e-6
        if kept is None:       # its own stages, FIXUP asked for: kept; the register cap dropped
            assert plan.params["FIXUP"] == 3 and "MIN_BLOCKS" not in plan.params
        else:
            assert (plan.params.get("MIN_BLOCKS", 0) == 2) == kept and plan.fixup == kept


@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
def test_fix_up_3_stores_only_the_slot_rows_below_m(out):
    """SLOT_ROWS=1: each split's slot store is masked to the rows below M (a 20-row GEMM in 64-row tiles writes
    20 rows per slot, the padding rows stay as they were), and splitk_sum's result is the same bits as with the
    whole slots stored; every verifier check proves it clean."""
    import tilepy_verify as tv

    rng = np.random.default_rng(9)
    m, k, n = 20, 600, 130
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    splitk, summer = ((gemm_hopper.gemm_splitk_bf16, gemm_hopper.splitk_sum_bf16) if out == tp.bf16
                      else (gemm_hopper.gemm_splitk, gemm_hopper.splitk_sum))
    outs = []
    for rows in (0, 1):
        ws, locks = np.full((4 * 64, n), np.nan, np.float32), np.zeros(2, np.int32)
        c = np.full((m, n), np.nan, np.float32)
        splitk[(1, 2, 4)](a, b, c, ws, locks, FIXUP=3, SLOT_ROWS=rows, SPLIT_K=4, STAGES=2, **D64)
        written = (~np.isnan(ws).any(axis=1)).reshape(4, 64)
        assert (written.sum(axis=1) == (m if rows else 64)).all() and written[:, :m].all()
        summer[(-(-m // 8), -(-n // 128))](ws, c, SPLIT_K=4)
        outs.append(c)
    np.testing.assert_array_equal(outs[0], outs[1])
    ref = gemm_hopper.reference(a, b)
    assert (_rel(outs[1], ref) < 1e-6) if out == tp.f32 else np.abs(outs[1] - ref).max() <= 2.0**-8 * np.abs(ref).max()
    report = tv.verify(splitk, target="sm_90a", FIXUP=3, SLOT_ROWS=1, SPLIT_K=4, STAGES=6, **D64)
    assert report.findings == [], [f.message for f in report.findings]
