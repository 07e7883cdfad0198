"""gemm_hopper's Hopper policies on a real GPU: one flat k loop over mbarrier arrays, wait_group 1 (one wgmma
group in flight, the stage released one k-tile later), setmaxnreg per role, split-K with f32 atomics (f32 out
zeroed first; bf16 out through an f32 workspace), and the policy table per shape class through `launch`.
Every output is poisoned with NaN first and checked against float64 (computed on the GPU) and against the
CPU interpreter on a ragged shape. Skips without a GPU."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")
P = gemm_hopper.PRESETS["sm_90a"]
I128 = tp.nv.wgmma_m64n128k16_bf16
I64, I32, SW64 = tp.nv.wgmma_m64n64k16_bf16, tp.nv.wgmma_m64n32k16_bf16, tp.Swizzle(2, 3, 3)

VARIANTS = {
    "wait1": dict(IN_FLIGHT=1),
    "wait1_s3": dict(IN_FLIGHT=1, STAGES=3),
    "wait1_regs": dict(IN_FLIGHT=1, PRODUCER_REGS=64, CONSUMER_REGS=216),
    "wait1_128": dict(IN_FLIGHT=1, BN=128, INSTR=I128),
    "wait1_64x128_1c": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128),
    "split3": dict(IN_FLIGHT=1, BN=128, INSTR=I128, SPLIT_K=3),
    "split2_wait0": dict(IN_FLIGHT=0, BN=128, INSTR=I128, SPLIT_K=2),
    "persistent": dict(PERSISTENT=1),
    "persistent_128_s5": dict(PERSISTENT=1, BN=128, STAGES=5, INSTR=I128),
    "persistent_grid3": dict(PERSISTENT=1, BN=128, INSTR=I128, NUM_SMS=3, GROUP_M=2),  # many tiles per block
    # 64 x 32 tiles (one 32-column B block, 64-byte swizzle) and 64 x 64 tiles: the skinny / small candidates
    "narrow_64x32": dict(IN_FLIGHT=1, BM=64, BN=32, STAGES=8, CONSUMERS=1, INSTR=I32, B_SWIZZLE=SW64),
    "narrow_64x32_split2": dict(IN_FLIGHT=1, BM=64, BN=32, STAGES=8, CONSUMERS=1, INSTR=I32, B_SWIZZLE=SW64,
                                SPLIT_K=2),
    "64x64_s8": dict(IN_FLIGHT=1, BM=64, BN=64, STAGES=8, CONSUMERS=1, INSTR=I64),
    # the output tile staged in shared memory, stored by the producer warpgroup
    "staged_128x128": dict(BN=128, STAGES=5, INSTR=I128, EPILOGUE=1),
    "staged_64x128_1c": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128, EPILOGUE=1),
    # the TMA store epilogue (tp.store_bulk from c_s; N = 264 / 520: C's rows are TMA-able; the fallback copy
    # where they are not is the 2051 x 2045 case below)
    "tma_store_64x128_1c": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128, EPILOGUE=2),
    "tma_store_128x128": dict(BN=128, STAGES=5, INSTR=I128, EPILOGUE=2),
    # two blocks per SM (MIN_BLOCKS=2: at most 128 registers a thread; 4 stages of 24 KB), unsplit and split-K
    "mb2_64x128_1c_s4": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=4, CONSUMERS=1, INSTR=I128, MIN_BLOCKS=2),
    "mb2_64x128_1c_s4_split2": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=4, CONSUMERS=1, INSTR=I128, MIN_BLOCKS=2,
                                    SPLIT_K=2),
}


def _rel(x, ref):
    x = x.double()
    assert torch.isfinite(x).all(), "some output element was never written"
    return float((x - ref).norm() / ref.norm())


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("m,k,n", [(130, 1000, 264), (300, 4096, 520), (300, 200, 520)])
@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
def test_policy_variants(variant, m, k, n, out):
    g = torch.Generator(device="cuda").manual_seed(m + k + n)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    b = torch.randn(k, n, device=DEV, generator=g).bfloat16()
    c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
    gemm_hopper.launch(a, b, c, **{**P, **VARIANTS[variant]})
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    err = _rel(c, ref)
    assert err < (1e-5 if out == torch.float32 else 4e-3), err
    if out == torch.bfloat16:  # no worse than cuBLAS's bf16 output on the same inputs (x2)
        assert err <= 2 * _rel(torch.matmul(a, b), ref) + 1e-6


@pytest.mark.parametrize("m,k,n", [(130, 1000, 264), (300, 4096, 520), (2051, 1000, 2045)])
@pytest.mark.parametrize("epilogue", [1, 2])
def test_staged_epilogue_128x256_bf16(m, k, n, epilogue):
    """The large tile with the staged epilogue / the TMA store (3 stages + a 64 KB bf16 c_s: f32 out does not
    fit); at N = 2045 C's rows are not 16-byte multiples, so the TMA store falls back to the producer's copy."""
    g = torch.Generator(device="cuda").manual_seed(m + n)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    b = torch.randn(k, n, device=DEV, generator=g).bfloat16()
    c = torch.full((m, n), float("nan"), device=DEV, dtype=torch.bfloat16)
    gemm_hopper.launch(a, b, c, **{**P, "IN_FLIGHT": 0, "STAGES": 3, "EPILOGUE": epilogue})
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert _rel(c, ref) <= 2 * _rel(torch.matmul(a, b), ref) + 1e-6


@pytest.mark.parametrize("m,n,k", [(128, 4096, 4096), (1024, 1024, 1024), (2051, 2045, 1000), (16, 512, 2048),
                                   (4096, 4096, 512), (100, 4096, 1000), (64, 4096, 4096), (16, 2045, 4096),
                                   (200, 4096, 1000)])
def test_policy_table_through_launch(m, n, k):
    g = torch.Generator(device="cuda").manual_seed(7)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    b = torch.randn(k, n, device=DEV, generator=g).bfloat16()
    ref = a.double() @ b.double()
    for out in (torch.float32, torch.bfloat16):
        c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
        for _ in range(2):  # twice: split-K must zero its target each call, not accumulate across calls
            gemm_hopper.launch(a, b, c)
        torch.cuda.synchronize()
        assert _rel(c, ref) < (1e-5 if out == torch.float32 else 4e-3)


def test_gpu_matches_the_interpreter_with_wait_group_1_and_split_k():
    rng = np.random.default_rng(3)
    m, k, n = 70, 700, 129
    a = torch.from_numpy(rng.standard_normal((m, k)).astype(np.float32)).bfloat16()
    b = torch.from_numpy(rng.standard_normal((k, n)).astype(np.float32)).bfloat16()
    p = {**P, **VARIANTS["split3"]}
    c_gpu = torch.full((m, n), float("nan"), device=DEV)
    gemm_hopper.launch(a.to(DEV), b.to(DEV), c_gpu, **p)
    c_int = np.full((m, n), np.nan, np.float32)
    gemm_hopper.launch(a.float().numpy(), b.float().numpy(), c_int, **p)
    torch.cuda.synchronize()
    # the same products, summed in another order (atomics): equal to f32 rounding
    np.testing.assert_allclose(c_gpu.cpu().numpy(), c_int, rtol=1e-5, atol=1e-4)


def test_sass_of_the_policies():
    import re

    ck = tilepy_hip.compile(gemm_hopper.gemm_hopper_bf16, target="sm_90a", **{**P, **VARIANTS["tma_store_128x128"]})
    assert "UTMASTG" in ck.sass() and "HGMMA.64x" in ck.sass()   # the TMA store epilogue
    for extra in (VARIANTS["wait1"], VARIANTS["wait1_regs"], VARIANTS["split3"], VARIANTS["narrow_64x32"],
                  VARIANTS["staged_64x128_1c"]):
        ck = tilepy_hip.compile(gemm_hopper.gemm_hopper, target="sm_90a", **{**P, **extra})
        sass = ck.sass()
        assert "HGMMA.64x" in sass and "WARPGROUP.DEPBAR.LE gsb0, 0x1" in sass
        assert not re.search(r"\b(LDL|STL)\b", sass) and ck.resources["spill_stores"] == 0
    for extra in (VARIANTS["persistent"], VARIANTS["persistent_128_s5"]):
        params = gemm_hopper.kernel_params({**P, **extra})
        ck = tilepy_hip.compile(gemm_hopper.gemm_persistent, target="sm_90a", **params)
        sass = ck.sass()
        assert "HGMMA.64x" in sass and "UTMALDG" in sass
        # the SASS is the authority on local memory (a build loaded from another process's cache entry may
        # carry no ptxas spill line)
        assert not re.search(r"\b(LDL|STL)\b", sass) and ck.resources.get("spill_stores", 0) == 0


@pytest.mark.parametrize("m", [96, 80])
def test_store_bulk_ring_on_the_gpu(m):
    """tests/verify/test_store_bulk.py's two-role ring of bulk-stored tiles on the GPU: every tile lands, rows past
    the tensor (m = 80: the last tile half outside) are not written."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "verify"))
    from test_store_bulk import tiles_out

    a = torch.arange(m * 32, device=DEV, dtype=torch.float32).reshape(m, 32)
    c = torch.full((m + 16, 32), float("nan"), device=DEV)    # rows past C's view stay NaN
    tiles_out[(1,)](a, c[:m], target="sm_90a", TILES=-(-m // 32), BUG=0)
    torch.cuda.synchronize()
    assert torch.equal(c[:m], 2 * a) and torch.isnan(c[m:]).all()
    assert "UTMASTG" in tilepy_hip.compile(tiles_out, target="sm_90a", TILES=-(-m // 32), BUG=0).sass()


# split-K reduced in the kernel (gemm_splitk): a ticket per output tile, the last split stores C in C's dtype;
# FIXUP=1 atomics into an f32 workspace (zeroed again by the last split), FIXUP=2 one workspace slot per split
FIXUP_VARIANTS = {
    "fix1_64x128_1c_split4": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128, SPLIT_K=4, FIXUP=1),
    "fix2_64x128_1c_split4": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128, SPLIT_K=4, FIXUP=2),
    "fix2_64x128_1c_split3_s8": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=8, CONSUMERS=1, INSTR=I128, SPLIT_K=3,
                                     FIXUP=2),
    "fix1_128x128_split3": dict(IN_FLIGHT=1, BN=128, INSTR=I128, SPLIT_K=3, FIXUP=1),
    "fix1_128x128_wait0_split2": dict(IN_FLIGHT=0, BN=128, INSTR=I128, SPLIT_K=2, FIXUP=1),
    # FIXUP=3: the slots summed (and rounded) by a second kernel, splitk_sum
    "fix3_64x128_1c_split4": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128, SPLIT_K=4, FIXUP=3),
    "fix3_128x128_split3": dict(IN_FLIGHT=1, BN=128, INSTR=I128, SPLIT_K=3, FIXUP=3),
    "fix3_64x128_1c_s4_split8_mb2": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=4, CONSUMERS=1, INSTR=I128, SPLIT_K=8,
                                         FIXUP=3, MIN_BLOCKS=2),
    # the slot store masked to the rows below M (SLOT_ROWS=1)
    "fix3_64x128_1c_split4_rows": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128, SPLIT_K=4,
                                       FIXUP=3, SLOT_ROWS=1),
    "fix3_128x128_s6_split2_rows": dict(IN_FLIGHT=1, BN=128, STAGES=6, INSTR=I128, SPLIT_K=2, FIXUP=3, SLOT_ROWS=1),
}


@pytest.mark.parametrize("variant", list(FIXUP_VARIANTS))
@pytest.mark.parametrize("m,k,n", [(16, 4096, 520), (130, 1000, 264), (70, 700, 2045)])
@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
def test_split_k_fix_up(variant, m, k, n, out):
    """Three calls through one plan (workspace and tickets reused: each call must leave them as it found
    them), every output NaN-poisoned first and checked against float64; N = 2045: B padded, C's rows odd."""
    g = torch.Generator(device="cuda").manual_seed(m + k + n)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    b = torch.randn(k, n, device=DEV, generator=g).bfloat16()
    ref = a.double() @ b.double()
    gemm_hopper._PLANS.clear()
    for call in range(3):
        c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
        gemm_hopper.launch(a, b, c, **{**P, **FIXUP_VARIANTS[variant]})
        torch.cuda.synchronize()
        err = _rel(c, ref)
        assert err < (1e-5 if out == torch.float32 else 4e-3), (call, err)
        if out == torch.bfloat16:
            assert err <= 2 * _rel(torch.matmul(a, b), ref) + 1e-6
    (plan,) = gemm_hopper._PLANS.values()
    bufs = {key[0]: buf for key, buf in plan.bufs.items()}
    assert plan.fixup and not bufs["fixup_locks"].any()
    assert FIXUP_VARIANTS[variant]["FIXUP"] in (2, 3) or not bufs["fixup_ws"].any()   # 2 / 3: slots, overwritten


@pytest.mark.parametrize("fixup", [1, 2, 3])
def test_split_k_fix_up_back_to_back(fixup):
    """The policy's decode shape, 30 calls back to back on one stream (no synchronization between them: a
    call's last split resets the tickets the next call's first splits take), each into a fresh NaN-poisoned
    output, all checked afterwards. FIXUP 1 / 2 are not bitwise equal from call to call (which split arrives
    last, and so the order of the f32 sum, changes; on the H100 they differed); FIXUP=3 sums the slots in one
    fixed order: the same bits every call."""
    g = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn(16, 4096, device=DEV, generator=g).bfloat16()
    b = torch.randn(4096, 4096, device=DEV, generator=g).bfloat16()
    ref = a.double() @ b.double()
    outs = [torch.full((16, 4096), float("nan"), device=DEV, dtype=torch.bfloat16) for _ in range(30)]
    for c in outs:
        gemm_hopper.launch(a, b, c, FIXUP=fixup, **gemm_hopper.policy(16, 4096, 4096, tp.bf16))
    torch.cuda.synchronize()
    bound = 2 * _rel(torch.matmul(a, b), ref) + 1e-6
    assert all(_rel(c, ref) <= bound for c in outs)
    if fixup == 3:
        assert all(torch.equal(c, outs[0]) for c in outs)


def test_sass_of_the_split_k_fix_up():
    import re

    for out in (gemm_hopper.gemm_splitk, gemm_hopper.gemm_splitk_bf16):
        for variant in FIXUP_VARIANTS.values():
            ck = tilepy_hip.compile(out, target="sm_90a", **gemm_hopper.kernel_params({**P, **variant}))
            sass = ck.sass()
            assert "HGMMA.64x" in sass and "UTMALDG" in sass
            if variant["FIXUP"] in (1, 2):
                assert "MEMBAR" in sass     # the ticket's fences (FIXUP=3 has none of its own; on the H100 its
                                            # SASS still held a MEMBAR from elsewhere: not asserted either way)
            assert not re.search(r"\b(LDL|STL)\b", sass) and ck.resources.get("spill_stores", 0) == 0


@pytest.mark.parametrize("kernel,variant", [(gemm_hopper.gemm_hopper, VARIANTS["mb2_64x128_1c_s4"]),
                                            (gemm_hopper.gemm_hopper_bf16, VARIANTS["mb2_64x128_1c_s4"]),
                                            (gemm_hopper.gemm_splitk_bf16,
                                             FIXUP_VARIANTS["fix3_64x128_1c_s4_split8_mb2"])])
def test_two_blocks_per_sm(kernel, variant):
    """MIN_BLOCKS=2 is __launch_bounds__(256, 2): at most 128 registers a thread (two blocks' 256 threads fit the
    SM's 65536), no local memory, HGMMA; and two blocks are resident per SM (the occupancy API)."""
    import re

    ck = tilepy_hip.compile(kernel, target="sm_90a", **gemm_hopper.kernel_params({**P, **variant}))
    sass = ck.sass()
    assert "HGMMA.64x128x16.F32.BF16" in sass and "UTMALDG" in sass
    assert not re.search(r"\b(LDL|STL)\b", sass) and ck.resources.get("spill_stores", 0) == 0
    assert ck.resources["registers"] <= 128
    smem = ck.resources["dynamic_smem"] + ck.resources.get("static_smem", 0)
    assert 2 * (smem + 1024) <= torch.cuda.get_device_properties(0).shared_memory_per_multiprocessor


@pytest.mark.parametrize("params", [dict(IN_FLIGHT=0, STAGES=4),
                                    dict(STAGES=3, EPILOGUE=2, PRODUCER_REGS=64, CONSUMER_REGS=216),
                                    dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128, EPILOGUE=1)])
@pytest.mark.parametrize("m,k,n", [(130, 1000, 264), (300, 4096, 520)])
@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
def test_b_given_as_n_by_k(params, m, k, n, out):
    """gemm_hopper_nk (B_NK=1): c = a @ w.T with w (N, K) read in place (K-major B tiles), against float64."""
    g = torch.Generator(device="cuda").manual_seed(m + k + n)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    w = torch.randn(n, k, device=DEV, generator=g).bfloat16()
    c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
    kernel = gemm_hopper.gemm_hopper_nk_bf16 if out == torch.bfloat16 else gemm_hopper.gemm_hopper_nk
    p = {**P, **params, "B_NK": 1}
    if out == torch.float32 and p.get("EPILOGUE") == 2:
        p["EPILOGUE"] = 0                     # (f32 c_s beside 128x256 tiles does not fit)
    kernel[gemm_hopper.grid_of(m, n, p)](a, w, c, **p)
    torch.cuda.synchronize()
    ref = a.double() @ w.double().T
    err = _rel(c, ref)
    assert err < (1e-5 if out == torch.float32 else 4e-3), err
    if out == torch.bfloat16:
        assert err <= 2 * _rel(torch.nn.functional.linear(a, w), ref) + 1e-6
