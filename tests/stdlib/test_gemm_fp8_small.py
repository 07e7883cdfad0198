"""The fp8 GEMM's small / mid forms (G28; stdlib_kernels/gemm_fp8.py) on the CPU interpreter against float64 of the
e4m3 inputs: 64 x 128 / 64 x 64 / 128 x 128 tiles with one wgmma group in flight or none and the TMA-store epilogue,
rings that turn over (more k-tiles than stages) and that are never filled (fewer), ragged M, N and K; each form
verifies clean with tilepy-verify."""


import numpy as np
import pytest
from verify_budget import assert_within_budget, cpu_seconds

import tilepy as tp
from stdlib_kernels import gemm_fp8
from tilepy.dtypes import round_bf16, round_e4m3

I128, I64 = tp.nv.wgmma_m64n128k32_e4m3, tp.nv.wgmma_m64n64k32_e4m3
I144, I192, I256 = tp.nv.wgmma_m64n144k32_e4m3, tp.nv.wgmma_m64n192k32_e4m3, tp.nv.wgmma_m64n256k32_e4m3
BASE = dict(gemm_fp8.PRESETS["sm_90a"], PRODUCER_REGS=0, CONSUMER_REGS=0, GROUP_M=8)
FORMS = {   # (the forms of benchmarks/gemm_fp8_small.py; stages cut where the interpreter needs the ring to turn)
    "64x128_w1": dict(BM=64, BN=128, STAGES=3, CONSUMERS=1, INSTR=I128, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "64x128_w0": dict(BM=64, BN=128, STAGES=3, CONSUMERS=1, INSTR=I128, IN_FLIGHT=0, EPILOGUE=2, TMA_ONLY=1),
    "64x64_w1": dict(BM=64, BN=64, STAGES=2, CONSUMERS=1, INSTR=I64, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "128x128_w1": dict(BM=128, BN=128, STAGES=2, CONSUMERS=2, INSTR=I128, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "128x128_w0_s6": dict(BM=128, BN=128, STAGES=6, CONSUMERS=2, INSTR=I128, IN_FLIGHT=0, EPILOGUE=2, TMA_ONLY=1),
    # (G35) wave-filling widths: 128 x 144 (1536 columns in 11 tiles, the last 96 wide) and 128 x 192, the registers'
    # store; the large tile storing from the registers (C's rows off 16 bytes)
    "128x144_w1_ep0": dict(BM=128, BN=144, STAGES=3, CONSUMERS=2, INSTR=I144, IN_FLIGHT=1, EPILOGUE=0, TMA_ONLY=1),
    "128x192_w1_ep0": dict(BM=128, BN=192, STAGES=2, CONSUMERS=2, INSTR=I192, IN_FLIGHT=1, EPILOGUE=0, TMA_ONLY=1),
    "128x256_w1_ep0": dict(BM=128, BN=256, STAGES=3, CONSUMERS=2, INSTR=I256, IN_FLIGHT=1, EPILOGUE=0, TMA_ONLY=1),
    # the tile staged in shared memory and stored by the producer warpgroup (EPILOGUE=1); 192 x 192 over three
    # consumers; 128 x 144 with the TMA store in 16-column blocks
    "128x128_w1_ep1": dict(BM=128, BN=128, STAGES=2, CONSUMERS=2, INSTR=I128, IN_FLIGHT=1, EPILOGUE=1, TMA_ONLY=1),
    "192x192_w1_ep1": dict(BM=192, BN=192, STAGES=2, CONSUMERS=3, INSTR=I192, IN_FLIGHT=1, EPILOGUE=1, TMA_ONLY=1),
    "192x192_w1_ep0": dict(BM=192, BN=192, STAGES=3, CONSUMERS=3, INSTR=I192, IN_FLIGHT=1, EPILOGUE=0, TMA_ONLY=1),
    "128x144_w1_ep2": dict(BM=128, BN=144, STAGES=3, CONSUMERS=2, INSTR=I144, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    # the staged tile stored by every warpgroup after a block barrier (STORE_ALL=1: C's rows off 16 bytes, realigned
    # in the render), on the forms a policy for such rows takes
    "192x192_w1_ep1_all": dict(BM=192, BN=192, STAGES=2, CONSUMERS=3, INSTR=I192, IN_FLIGHT=1, EPILOGUE=1, TMA_ONLY=1,
                               STORE_ALL=1),
    "192x176_w1_ep1_all": dict(BM=192, BN=176, STAGES=2, CONSUMERS=3, INSTR=tp.nv.wgmma_m64n176k32_e4m3, IN_FLIGHT=1,
                               EPILOGUE=1, TMA_ONLY=1, STORE_ALL=1),
    "128x256_w0_ep1_all": dict(BM=128, BN=256, STAGES=3, CONSUMERS=2, INSTR=I256, IN_FLIGHT=0, EPILOGUE=1,
                               STORE_ALL=1),
    "64x128_w1_ep1_all": dict(BM=64, BN=128, STAGES=3, CONSUMERS=1, INSTR=I128, IN_FLIGHT=1, EPILOGUE=1, TMA_ONLY=1,
                              STORE_ALL=1),
}


def _inputs(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    a = round_e4m3(rng.standard_normal((M, K)).astype(np.float32) * 3)
    b = round_e4m3(rng.standard_normal((N, K)).astype(np.float32) * 3)
    sa = np.array([rng.uniform(0.01, 0.1)], np.float32)
    sb = np.array([rng.uniform(0.5, 2.0)], np.float32)
    return a, b, sa, sb


def _check(out, a, b, sa, sb):
    ref = gemm_fp8.reference(a, b, sa, sb)
    mag = (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)).T) * float(sa[0]) * float(sb[0])
    bound = 2.0**-8 * np.abs(ref) + 1e-5 * mag + 1e-30
    assert not np.isnan(out).any()
    assert np.array_equal(out, round_bf16(out))
    worst = np.abs(out.astype(np.float64) - ref) - bound
    assert worst.max() <= 0, f"error over the bound by {worst.max()} at {np.unravel_index(worst.argmax(), ref.shape)}"


@pytest.mark.parametrize("name", list(FORMS))
@pytest.mark.parametrize("shape", [(200, 300, 1040), (70, 136, 64)], ids=["turns", "one_k_tile"])
def test_small_forms_against_float64(name, shape):
    M, N, K = shape
    p = {**BASE, **FORMS[name]}
    a, b, sa, sb = _inputs(M, N, K, seed=M + N + K)
    out = np.full((M, N), np.nan, np.float32)
    kernel, kp = gemm_fp8.kernel_of(p)
    kernel[gemm_fp8.grid_of(M, N, p)](a, b, sa, sb, out, target="sm_90a", **kp)
    _check(out, a, b, sa, sb)


@pytest.mark.parametrize("name", list(FORMS))
def test_small_forms_verify_clean(name):
    import tilepy_verify as tv

    f = FORMS[name]
    c_s = 2 * f["BM"] * f["BN"] if f["EPILOGUE"] > 0 else 0
    deepest = (227 * 1024 - c_s) // ((f["BM"] + f["BN"]) * 128)
    p = {**BASE, **f, "STAGES": 8 if f["BM"] == 64 else min(6, deepest)}     # the timed depths
    kernel, kp = gemm_fp8.kernel_of(p)

    def run():
        kernel._cache.clear()
        return cpu_seconds(lambda: tv.verify(kernel, target="sm_90a", **kp))

    took, report = run()
    assert report.ok and not report.findings, str(report)
    assert_within_budget(took, lambda: run()[0], name)


# (shape, the form's BM, BN, STAGES, EPILOGUE) where `small_form` picks one, as measured (benchmarks/NOTES.md G28)
PICKS = [((512, 512, 512), (64, 64, 4, 2)), ((640, 640, 640), (64, 64, 6, 2)), ((768, 768, 768), (64, 128, 8, 2)),
         ((1024, 1024, 1024), (64, 128, 8, 2)), ((1024, 1024, 4096), (64, 128, 8, 2)),
         ((512, 2048, 4096), (64, 128, 8, 2)), ((2048, 512, 2048), (64, 128, 8, 2)),
         ((2048, 1024, 4096), (128, 128, 5, 2)), ((1024, 2048, 2048), (128, 128, 5, 2)),
         ((2051, 2045, 1008), (192, 176, 3, 1)), ((300, 130, 400), (64, 64, 4, 1)),
         ((1536, 1536, 1536), (128, 144, 5, 2))]     # (G35: 132 tiles of 128 x 144 where 128 x 128 gives 144)


@pytest.mark.parametrize("shape,want", PICKS, ids=[f"{m}x{n}x{k}" for (m, n, k), _ in PICKS])
def test_small_policy_picks(shape, want):
    p = gemm_fp8.policy(*shape)
    assert (p["BM"], p["BN"], p["STAGES"], p["EPILOGUE"]) == want
    assert p["TMA_ONLY"] == 1 and p["IN_FLIGHT"] == 1 and p["INSTR"].n == p["BN"] and p["BM"] == 64 * p["CONSUMERS"]
    assert not p.get("PRODUCER_REGS") and not p.get("CONSUMER_REGS")
    smem = p["STAGES"] * (p["BM"] + p["BN"]) * p["BK"] + (2 * p["BM"] * p["BN"] if p["EPILOGUE"] > 0 else 0)
    assert smem <= 227 * 1024
    assert gemm_fp8.kernel_of(gemm_fp8.params_for(*shape))[0] is gemm_fp8.gemm_fp8
    assert "TMA_ONLY" not in gemm_fp8.policy(*shape, forms=False)      # a caller's constexprs lie over the row


# C's rows off 16 bytes (N % 8): the staged tile stored by every warpgroup on every form; 192 x 192 tiles where they
# or 192 x 176 fill the waves better than 128 x 256 by 0.1 (2051 x 2045: 132 tiles of 192 x 176 against 136 of 128 x
# 256; 3000 x 3001: 256 of 192 x 192 against 288), else the large row's tiles (4096 x 4090: 512 in 4 waves; 1536 x
# 1530: 64 against 72); the small forms
ROWS_OFF_16 = [((2051, 2045, 1008), (192, 176)), ((2051, 2045, 4096), (192, 176)), ((3000, 3001, 2048), (192, 192)),
               ((4096, 4090, 1024), (128, 256)), ((1536, 1530, 1536), (128, 256)), ((8192, 8190, 1024), (128, 256)),
               ((2560, 2045, 1024), (128, 256)), ((768, 765, 768), (64, 128)), ((512, 509, 512), (64, 64)),
               ((1000, 1001, 1024), (64, 128))]


@pytest.mark.parametrize("shape,tile", ROWS_OFF_16, ids=[f"{m}x{n}x{k}" for (m, n, k), _ in ROWS_OFF_16])
def test_rows_off_16_bytes_stage_c_for_every_warpgroup(shape, tile):
    p = gemm_fp8.policy(*shape)
    assert (p["BM"], p["BN"]) == tile
    assert p["EPILOGUE"] == 1 and p["STORE_ALL"] == 1 and not p.get("PRODUCER_REGS") and not p.get("CONSUMER_REGS")
    smem = p["STAGES"] * (p["BM"] + p["BN"]) * p["BK"] + 2 * p["BM"] * p["BN"]
    assert smem <= 227 * 1024
    assert gemm_fp8.kernel_of(p)[1]["STORE_ALL"] == 1


def test_store_all_refuses_what_its_common_code_cannot_keep():
    base = dict(gemm_fp8.LARGE_STAGED)
    for bad in (dict(PRODUCER_REGS=96, CONSUMER_REGS=200), dict(EPILOGUE=2), dict(EPILOGUE=0)):
        with pytest.raises(ValueError, match="STORE_ALL=1"):
            gemm_fp8.kernel_of({**gemm_fp8.PRESETS["sm_90a"], **base, **bad})


def test_large_row_stays_where_its_tiles_fill_the_sms():
    """Where 128 x 256 tiles fill more than 3/4 of a wave (2048^3, 4096 x 1024 x 1024: every small form measured
    slower) or more than a wave, and skinny rows (swap-AB), no small form; the large class's shapes with C rows of
    16-byte multiples run the persistent piece store there (G35: also on one wave filled past 3/4 with whole
    k-tiles); 1536^3 (128 x 128 tiles in 144, 128 x 144 in 132) the wave-filling 128 x 144 form."""
    for shape in ((2048, 2048, 2048), (4096, 1024, 1024), (4096, 4096, 4096), (128, 4096, 4096)):
        assert gemm_fp8.small_form(*shape) is None, shape
    for shape in ((2048, 2048, 2048), (4096, 1024, 1024), (2560, 1536, 2048), (4096, 4096, 4096)):
        assert gemm_fp8.policy(*shape) == {**gemm_fp8.PRESETS["sm_90a"], **gemm_fp8.LARGE_PERSISTENT}, shape
    for shape in ((2048, 2048, 1008), (1600, 1600, 1600)):     # (the persistent form measured slower there)
        assert gemm_fp8.policy(*shape) == {**gemm_fp8.PRESETS["sm_90a"], **gemm_fp8.POLICIES["large"]}, shape
    assert gemm_fp8.small_form(1536, 1536, 1536) == gemm_fp8.WAVE_128x144
    assert gemm_fp8.small_form(1536, 1532, 1536)["BN"] != 144     # (C rows off 16 bytes: no TMA store)
    # a caller's own constexprs lie over the large row (no persistent form)
    assert gemm_fp8.policy(2048, 2048, 2048, forms=False) == {**gemm_fp8.PRESETS["sm_90a"],
                                                              **gemm_fp8.POLICIES["large"]}


@pytest.mark.parametrize("shape", [(300, 136, 528), (600, 1000, 256), (300, 130, 400)],
                         ids=["64x64_s6", "64x128_s8", "64x64_registers_store"])
def test_small_policy_through_launch(shape):
    M, N, K = shape
    a, b, sa, sb = _inputs(M, N, K, seed=M * 3 + N + K)
    out = np.full((M, N), np.nan, np.float32)
    gemm_fp8.launch(a, b, sa, sb, out)
    _check(out, a, b, sa, sb)


def test_launch_drops_tma_only_for_unaligned_bases(monkeypatch):
    """The policy's TMA_ONLY needs tensor maps (16-byte aligned bases): `launch` runs the copies' fallback for an
    operand whose base is not (a view one byte into a buffer); a caller's own TMA_ONLY is kept."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    M, N, K = 300, 136, 528
    a, b, sa, sb = _inputs(M, N, K, seed=5)
    buf = torch.zeros(M * K + 1, dtype=torch.float8_e4m3fn)
    ta = buf[1:].view(M, K)
    ta.copy_(torch.from_numpy(a).to(torch.float8_e4m3fn))
    tb = torch.from_numpy(b).to(torch.float8_e4m3fn)
    assert ta.is_contiguous() and ta.data_ptr() % 16 == 1
    seen = []
    kernel_of = gemm_fp8.kernel_of
    monkeypatch.setattr(gemm_fp8, "kernel_of", lambda p: seen.append(dict(p)) or kernel_of(p))
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    gemm_fp8.launch(ta, tb, torch.from_numpy(sa), torch.from_numpy(sb), out)
    _check(out.float().numpy(), a, b, sa, sb)
    gemm_fp8.launch(ta, tb, torch.from_numpy(sa), torch.from_numpy(sb), out, TMA_ONLY=1)
    assert seen[0]["TMA_ONLY"] == 0 and seen[1]["TMA_ONLY"] == 1
    assert gemm_fp8.policy(M, N, K)["TMA_ONLY"] == 1


CLUSTER_FORMS = {   # gemm_fp8_cluster (2x1 clusters, B multicast, wait_group 0; not in the policy: it measured slower)
    "c64x128": dict(BM=64, BN=128, STAGES=3, CONSUMERS=1, INSTR=I128, EPILOGUE=2),
    "c64x128_registers_store": dict(BM=64, BN=128, STAGES=2, CONSUMERS=1, INSTR=I128, EPILOGUE=0),
    "c128x128": dict(BM=128, BN=128, STAGES=2, CONSUMERS=2, INSTR=I128, EPILOGUE=2),
}


@pytest.mark.parametrize("name", list(CLUSTER_FORMS))
@pytest.mark.parametrize("shape", [(200, 300, 1040), (130, 136, 64)], ids=["turns", "a_row_tile_past_m"])
def test_cluster_forms_against_float64(name, shape):
    """Through kernel_of / grid_of (CLUSTER_M=2): grid x a multiple of 2; at 130 rows on 64-row tiles the fourth row
    tile (the second cluster's rank 1) lies wholly past M: it loads zeros, shares its B multicast, stores nothing."""
    M, N, K = shape
    p = {**BASE, **CLUSTER_FORMS[name], "CLUSTER_M": 2}
    kernel, kp = gemm_fp8.kernel_of(p)
    assert kernel is gemm_fp8.gemm_fp8_cluster and "GROUP_M" not in kp
    grid = gemm_fp8.grid_of(M, N, p)
    assert grid[0] % 2 == 0
    a, b, sa, sb = _inputs(M, N, K, seed=M + 2 * N + K)
    out = np.full((M, N), np.nan, np.float32)
    kernel[grid](a, b, sa, sb, out, target="sm_90a", **kp)
    _check(out, a, b, sa, sb)


@pytest.mark.parametrize("params", [{}, dict(BM=128, BN=128, CONSUMERS=2, STAGES=5), dict(BN=64, INSTR=I64, STAGES=6),
                                    dict(EPILOGUE=0)], ids=["default", "128x128", "64x64", "registers_store"])
def test_cluster_forms_verify_clean(params):
    """The relaxed opening barrier and the producer's tail (every stage's last releases from both blocks awaited
    before the block exits) prove clean, in under 2 s."""
    import tilepy_verify as tv

    def run():
        gemm_fp8.gemm_fp8_cluster._cache.clear()
        return cpu_seconds(lambda: tv.verify(gemm_fp8.gemm_fp8_cluster, target="sm_90a", **params))

    took, report = run()
    assert report.ok and not report.findings, str(report)
    assert_within_budget(took, lambda: run()[0], str(params))


def test_cluster_refusals():
    with pytest.raises(ValueError, match="wait_group 0"):
        gemm_fp8.kernel_of({**gemm_fp8.SMALL_64x128, "CLUSTER_M": 2})          # IN_FLIGHT=1
    with pytest.raises(ValueError, match="setmaxnreg"):
        gemm_fp8.kernel_of({**gemm_fp8.PRESETS["sm_90a"], **gemm_fp8.POLICIES["large"], "CLUSTER_M": 2})
