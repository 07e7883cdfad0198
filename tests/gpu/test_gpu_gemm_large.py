"""The large-shape GEMM forms on a real GPU (issue 15): gemm_hopper's grouped tile order (GROUP_M over the (x, y)
grid), the 256 x 128 tile (two consumer warpgroups of 128 rows each), with the TMA-store epilogue and the register
budgets, bf16 and f32 out, on ragged shapes whose tiles are partial in M, N and K and on grids where the last
group is short; and the policy table's large class through `launch`. Every output is poisoned with NaN first and
checked against float64 computed on the GPU, and against cuBLAS's bf16 error on the same inputs. Skips without a
GPU."""

from __future__ import annotations

import re

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")
P = {**gemm_hopper.PRESETS["sm_90a"], "SPLIT_K": 1}   # (the small class's policy would split (300, 4096, 520))
I128 = tp.nv.wgmma_m64n128k16_bf16
I192 = tp.nv.wgmma_m64n192k16_bf16
R64 = dict(PRODUCER_REGS=64, CONSUMER_REGS=216)

VARIANTS = {
    "g3_tma_regs": dict(STAGES=3, EPILOGUE=2, IN_FLIGHT=0, GROUP_M=3, **R64),
    "g16_tma_regs": dict(STAGES=3, EPILOGUE=2, IN_FLIGHT=0, GROUP_M=16, **R64),
    "g2_s4": dict(STAGES=4, EPILOGUE=0, IN_FLIGHT=0, GROUP_M=2),
    "g2_128x128_wait1": dict(BN=128, INSTR=I128, STAGES=4, IN_FLIGHT=1, GROUP_M=2),
    "256x128_g2_tma_regs": dict(BM=256, BN=128, CONSUMERS=2, INSTR=I128, STAGES=3, EPILOGUE=2, IN_FLIGHT=0,
                                GROUP_M=2, **R64),
    "256x128_s4": dict(BM=256, BN=128, CONSUMERS=2, INSTR=I128, STAGES=4, EPILOGUE=0, IN_FLIGHT=0),
    "g2_split2": dict(BN=128, INSTR=I128, STAGES=4, IN_FLIGHT=1, GROUP_M=2, SPLIT_K=2),   # block z beside the order
    # gemm_persistent with the TMA store overlapped with the next tile: 7 / 5 blocks walk every tile (the handshake
    # of c_s runs once per tile, the last tile's store after the loop)
    "pers_tma_g3": dict(PERSISTENT=1, NUM_SMS=7, STAGES=3, EPILOGUE=2, GROUP_M=3, **R64),
    "pers_tma_g16_r88": dict(PERSISTENT=1, NUM_SMS=5, STAGES=3, EPILOGUE=2, GROUP_M=16, PRODUCER_REGS=88,
                             CONSUMER_REGS=208),
    # the store in 64-column pieces through two buffers (STORE_N=64: a store warp hands them back one by one), 4
    # stages; 7 / 5 blocks walk every tile (each buffer's phases run on across tiles)
    "pers_n64_s4_g3": dict(PERSISTENT=1, NUM_SMS=7, STAGES=4, EPILOGUE=2, STORE_N=64, GROUP_M=3, **R64),
    "pers_n64_s4_g16_r96": dict(PERSISTENT=1, NUM_SMS=5, STAGES=4, EPILOGUE=2, STORE_N=64, GROUP_M=16,
                                PRODUCER_REGS=96, CONSUMER_REGS=200),
    # 8 pieces of 32 columns (64-byte swizzled rows) through 4 buffers
    "pers_n32_b4_g3": dict(PERSISTENT=1, NUM_SMS=7, STAGES=4, EPILOGUE=2, STORE_N=32, STORE_BUFS=4, GROUP_M=3, **R64),
    # DEFER=1: the second half of a tile's pieces held in registers (bf16 out: rounded first) and written under the
    # next tile's first k-tile; 7 / 1 blocks walk every tile (one block: every tile's held pieces through one pair)
    "pers_defer_g3": dict(PERSISTENT=1, NUM_SMS=7, STAGES=4, EPILOGUE=2, STORE_N=64, GROUP_M=3, DEFER=1, **R64),
    "pers_n32_b4_defer_1blk": dict(PERSISTENT=1, NUM_SMS=1, STAGES=4, EPILOGUE=2, STORE_N=32, STORE_BUFS=4,
                                   GROUP_M=2, DEFER=1, **R64),
    # DEFER=2: the same schedule with the ring loop whole from slot 0 (the verifier's form)
    "pers_defer2_g3": dict(PERSISTENT=1, NUM_SMS=7, STAGES=4, EPILOGUE=2, STORE_N=64, GROUP_M=3, DEFER=2, **R64),
    # (G18) the pieces that fit beside the ring for f32 out too: 8 pieces of 32 f32 columns (128-byte rows) through
    # two 16 KB buffers, 4 stages, and the same in 32-byte column blocks (STORE_SPAN=32: four TMA boxes a piece);
    # 16 pieces of 16 through four 8 KB buffers; 4 pieces of 64 (two 32 KB buffers), 3 stages; 7 / 5 blocks walk
    # every tile
    "pers_n32_s4_g3": dict(PERSISTENT=1, NUM_SMS=7, STAGES=4, EPILOGUE=2, STORE_N=32, GROUP_M=3, **R64),
    "pers_n32_sp32_s4_g16": dict(PERSISTENT=1, NUM_SMS=5, STAGES=4, EPILOGUE=2, STORE_N=32, STORE_SPAN=32,
                                 GROUP_M=16, **R64),
    "pers_n16_b4_sp32_g3": dict(PERSISTENT=1, NUM_SMS=7, STAGES=4, EPILOGUE=2, STORE_N=16, STORE_BUFS=4,
                                STORE_SPAN=32, GROUP_M=3, **R64),
    "pers_n64_sp32_s3_g3": dict(PERSISTENT=1, NUM_SMS=7, STAGES=3, EPILOGUE=2, STORE_N=64, STORE_SPAN=32, GROUP_M=3,
                                **R64),
    # 4 pieces of 64 through one buffer (32 KB for f32) beside 4 stages
    "pers_n64_b1_s4_g3": dict(PERSISTENT=1, NUM_SMS=7, STAGES=4, EPILOGUE=2, STORE_N=64, STORE_BUFS=1, GROUP_M=3,
                              **R64),
    # (G26) DEFER=2 with HELD: the one-buffer form's last piece held (f32: 32 registers) and written under the next
    # tile's first k-tile; 8 pieces of 32 through two buffers, the last 2 held; 7 / 1 blocks walk every tile
    "pers_b1_held1_g3": dict(PERSISTENT=1, NUM_SMS=7, STAGES=4, EPILOGUE=2, STORE_N=64, STORE_BUFS=1, GROUP_M=3,
                             DEFER=2, HELD=1, **R64),
    "pers_n32_held2_1blk": dict(PERSISTENT=1, NUM_SMS=1, STAGES=4, EPILOGUE=2, STORE_N=32, STORE_BUFS=2, GROUP_M=2,
                                DEFER=2, HELD=2, **R64),
    # (G26) the store warp's pieces in a run-time loop (STORE_LOOP=1): the 8-piece HELD=2 form, the bf16 policy's form
    "pers_n32_held2_loop_g3": dict(PERSISTENT=1, NUM_SMS=7, STAGES=4, EPILOGUE=2, STORE_N=32, STORE_BUFS=2, GROUP_M=3,
                                   DEFER=2, HELD=2, STORE_LOOP=1, **R64),
    "pers_defer2_loop_g3": dict(PERSISTENT=1, NUM_SMS=7, STAGES=4, EPILOGUE=2, STORE_N=64, GROUP_M=3, DEFER=2,
                                STORE_LOOP=1, **R64),
    # (G26) 128 x 192 tiles (wgmma n192) in 2x1 clusters: the TMA store beside 4 stages (bf16) / 3 (f32), the
    # registers' store beside 5; clusters of 4 (rows rounded up to whole clusters)
    "c2_n192_s4_tma": dict(CLUSTER_M=2, BN=192, INSTR=I192, STAGES=4, EPILOGUE=2, IN_FLIGHT=0, **R64),
    "c2_n192_s3_tma": dict(CLUSTER_M=2, BN=192, INSTR=I192, STAGES=3, EPILOGUE=2, IN_FLIGHT=0, **R64),
    "c2_n192_s5": dict(CLUSTER_M=2, BN=192, INSTR=I192, STAGES=5, EPILOGUE=0, IN_FLIGHT=0, **R64),
    "c4_s3_tma": dict(CLUSTER_M=4, STAGES=3, EPILOGUE=2, IN_FLIGHT=0, **R64),
    "c4_s4_regs": dict(CLUSTER_M=4, STAGES=4, EPILOGUE=0, IN_FLIGHT=0, **R64),   # the f32 policy's (UNALIGNED_B_F32)
}
SMEM = 232448       # the H100's shared memory a block may opt into


def _smem_bytes(v, out):
    """The ring's and the staged store's shared memory of variant v (bf16 operands, C of dtype `out`)."""
    bm, bn, bk = v.get("BM", 128), v.get("BN", 256), v.get("BK", 64)
    ring = v.get("STAGES", 4) * (bm + bn) * bk * 2
    if v.get("EPILOGUE") != 2:
        return ring
    cols = v["STORE_N"] * v.get("STORE_BUFS", 2) if v.get("STORE_N") else bn
    return ring + bm * cols * out.itemsize


def _rel(x, ref):
    x = x.double()
    assert torch.isfinite(x).all(), "some output element was never written"
    return float((x - ref).norm() / ref.norm())


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("m,k,n", [(1000, 1000, 1800), (300, 4096, 520), (2051, 136, 776)])
@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
def test_large_variants(variant, m, k, n, out):
    v = VARIANTS[variant]
    if _smem_bytes(v, out) > SMEM - 1024:
        pytest.skip(f"{out}: the staged store ({_smem_bytes(v, out)} bytes with the ring) does not fit")
    if out == torch.float32 and v.get("DEFER") and not v.get("HELD"):
        pytest.skip("DEFER holds half the tile in registers in C's dtype: f32's would double them (HELD: a form)")
    g = torch.Generator(device="cuda").manual_seed(m + k + n)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    b = torch.randn(k, n, device=DEV, generator=g).bfloat16()
    c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
    gemm_hopper.launch(a, b, c, **{**P, **v})
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    err = _rel(c, ref)
    assert err < (1e-5 if out == torch.float32 else 4e-3), err
    if out == torch.bfloat16:  # no worse than cuBLAS's bf16 output on the same inputs (x1.5)
        assert err <= 1.5 * _rel(torch.matmul(a, b), ref) + 1e-6


@pytest.mark.parametrize("m,n,k", [(4096, 4096, 4096), (3000, 5000, 4096), (8192, 1024, 1024), (4096, 2048, 14336),
                                   (2056, 4160, 1040)])
def test_large_class_through_launch(m, n, k):
    """The policy's large class as `launch` runs it (bf16 and f32 out: gemm_persistent's pieces, the 2x1 cluster at
    3000 x 5000 x 4096), twice through one plan; 4096 x 2048 x 14336 (A 117 MB, over the L2) runs the grouped order
    (GROUP_M=16) for bf16 out; 2056 x 4160 x 1040 has tiles partial in M, N and K."""
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    b = torch.randn(k, n, device=DEV, generator=g).bfloat16()
    ref = a.double() @ b.double()
    peer = _rel(torch.matmul(a, b), ref)
    # f32 out against its like (the peer): cuBLAS's f32-out product; a fixed 1e-5 failed at K = 14336
    # (1.6e-5: f32 accumulation over 14336 terms), so the bound is cuBLAS's own error on these inputs
    peer32 = _rel(torch.mm(a, b, out_dtype=torch.float32), ref)
    if 2 * m * k > gemm_hopper.L2_BYTES and m > 128 * gemm_hopper.LARGE_GROUP_M:
        assert gemm_hopper.policy(m, n, k, tp.bf16, fixup=True).get("GROUP_M") == gemm_hopper.LARGE_GROUP_M
    for out in (torch.bfloat16, torch.float32):
        for _ in range(2):
            c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
            gemm_hopper.launch(a, b, c)
            torch.cuda.synchronize()
            err = _rel(c, ref)
            bound = 1.5 * peer + 1e-6 if out == torch.bfloat16 else 1.5 * peer32 + 1e-7
            assert err <= bound, (out, err, peer, peer32)


@pytest.mark.parametrize("out", [torch.bfloat16, torch.float32])
def test_large_policy_is_persistent_and_writes_any_c(out):
    """The large class's bf16 (and, since G18, f32) output through `launch` runs gemm_persistent's overlapped TMA
    store in pieces (the policy) on a contiguous C, and the policy without it on a C the TMA-only store cannot write
    (a column slice of a wider tensor): both against float64 and cuBLAS's error in the same output dtype, the
    slice's neighbours untouched."""
    m, n, k = 2048, 4096, 1024          # 16 x 16 = 256 tiles of 128 x 256 over 132 blocks
    p = gemm_hopper.policy(m, n, k, tp.bf16 if out == torch.bfloat16 else tp.f32, fixup=True)
    assert p.get("PERSISTENT") and (p["STORE_N"], p.get("STORE_BUFS", 2)) == ((64, 2) if out == torch.bfloat16
                                                                                else (32, 2))
    g = torch.Generator(device="cuda").manual_seed(11)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    b = torch.randn(k, n, device=DEV, generator=g).bfloat16()
    ref = a.double() @ b.double()
    if out == torch.bfloat16:
        bound = 1.5 * _rel(torch.matmul(a, b), ref) + 1e-6
    else:
        bound = 1.5 * _rel(torch.mm(a, b, out_dtype=torch.float32), ref) + 1e-7
    c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
    gemm_hopper.launch(a, b, c)
    wide = torch.full((m, n + 64), float("nan"), device=DEV, dtype=out)
    view = wide[:, 64:]
    assert not gemm_hopper._tma_storable(view)
    gemm_hopper.launch(a, b, view)
    torch.cuda.synchronize()
    assert _rel(c, ref) <= bound and _rel(view, ref) <= bound
    assert torch.isnan(wide[:, :64]).all()


def test_sass_of_the_grouped_large_policy():
    """HGMMA, the TMA store, setmaxnreg and no local memory in the k loop (the 64-register producer may keep
    one 8-byte spill outside it)."""
    p = {**gemm_hopper.policy(4096, 4096, 4096, tp.bf16), "GROUP_M": 16}
    k, kp = gemm_hopper.plan_kernel(4096, 4096, tp.bf16, p, 4096)
    ck = tilepy_hip.compile(k, target="sm_90a", **kp)
    sass = ck.sass()
    assert "HGMMA.64x256x16.F32.BF16" in sass and "UTMASTG" in sass and "USETMAXREG" in sass
    assert len(re.findall(r"\b(?:LDL|STL)\b", sass)) <= 2, ck.resources


def test_sass_of_the_persistent_tma_store():
    """gemm_persistent EPILOGUE=2 (bf16 out, 3 stages, 64 / 216 registers): HGMMA, the TMA store, setmaxnreg and no
    local memory anywhere (the store is TMA only: its per-element fallback spilled the producer's registers)."""
    p = {**gemm_hopper.PRESETS["sm_90a"], "PERSISTENT": 1, "STAGES": 3, "EPILOGUE": 2, "GROUP_M": 8, **R64}
    k, kp = gemm_hopper.plan_kernel(4096, 4096, tp.bf16, p, 4096)
    assert k is gemm_hopper.kernel_for(tp.bf16, persistent=True) and kp["EPILOGUE"] == 2
    ck = tilepy_hip.compile(k, target="sm_90a", **kp)
    sass = ck.sass()
    assert "HGMMA.64x256x16.F32.BF16" in sass and "UTMASTG" in sass and "USETMAXREG" in sass
    assert not re.findall(r"\b(?:LDL|STL)\b", sass), ck.resources


@pytest.mark.parametrize("regs", [(0, 0), (64, 216), (96, 200)])
def test_sass_of_the_persistent_store_in_pieces(regs):
    """gemm_persistent STORE_N=64 (4 stages, two 16 KB store buffers, a store warp): HGMMA, four TMA stores per
    tile, no local memory at these register budgets (its loads are TMA only: the per-row fallback beside them
    spilled the 64-register producer)."""
    p = {**gemm_hopper.PRESETS["sm_90a"], "PERSISTENT": 1, "STAGES": 4, "EPILOGUE": 2, "STORE_N": 64,
         "PRODUCER_REGS": regs[0], "CONSUMER_REGS": regs[1]}
    k, kp = gemm_hopper.plan_kernel(4096, 4096, tp.bf16, p, 4096)
    ck = tilepy_hip.compile(k, target="sm_90a", **kp)
    sass = ck.sass()
    assert "HGMMA.64x256x16.F32.BF16" in sass and sass.count("UTMASTG") >= 4
    assert ("USETMAXREG" in sass) == (regs[0] > 0)
    assert not re.findall(r"\b(?:LDL|STL)\b", sass), ck.resources
    assert ck.resources["dynamic_smem"] <= 232448


def test_sass_of_the_f32_persistent_policy():
    """The large class's f32 output (G26: gemm_persistent, 8 pieces of 32 f32 columns through two 16 KB buffers, the
    last two held, the store warp's run-time loop over the pieces; 4 stages, 64 / 216): HGMMA with the first k-tile's
    wgmma from zero, the TMA store, setmaxnreg, no local memory, inside the opt-in shared memory."""
    p = gemm_hopper.policy(8192, 8192, 1024, tp.f32, fixup=True)
    k, kp = gemm_hopper.plan_kernel(8192, 8192, tp.f32, p, 1024)
    assert k is gemm_hopper.kernel_for(tp.f32, persistent=True) and (kp["STORE_N"], kp["STORE_BUFS"]) == (32, 2)
    ck = tilepy_hip.compile(k, target="sm_90a", **kp)
    sass = ck.sass()
    assert "HGMMA.64x256x16.F32.BF16" in sass and "UTMASTG" in sass and "USETMAXREG" in sass
    assert re.search(r"HGMMA\.64x256x16\.F32\.BF16 R\d+, gdesc\[UR\d+\]\.tnspB, RZ, !UPT", sass)
    assert not re.findall(r"\b(?:LDL|STL)\b", sass), ck.resources
    assert ck.resources["dynamic_smem"] <= 232448


@pytest.mark.parametrize("store", [(64, 2), (32, 4)])
def test_sass_of_the_deferred_pieces(store):
    """gemm_persistent DEFER=1 (the policy's form with the second half of the pieces held in registers): HGMMA, the
    first k-tile's wgmma from zero (no zeroing of the accumulator: scale-d off, `RZ, !UPT`), the TMA stores, no
    local memory at 64 / 216 registers."""
    p = {**gemm_hopper.PRESETS["sm_90a"], "PERSISTENT": 1, "STAGES": 4, "EPILOGUE": 2, "STORE_N": store[0],
         "STORE_BUFS": store[1], "DEFER": 1, **R64}
    k, kp = gemm_hopper.plan_kernel(8192, 8192, tp.bf16, p, 1024)
    ck = tilepy_hip.compile(k, target="sm_90a", **kp)
    sass = ck.sass()
    assert "HGMMA.64x256x16.F32.BF16" in sass and "UTMASTG" in sass and "USETMAXREG" in sass
    assert re.search(r"HGMMA\.64x256x16\.F32\.BF16 R\d+, gdesc\[UR\d+\]\.tnspB, RZ, !UPT", sass)
    assert not re.findall(r"\b(?:LDL|STL)\b", sass), ck.resources


def test_sass_of_the_f32_held_piece():
    """gemm_persistent f32 out, one 64-column buffer, DEFER=2 with the last piece held (HELD=1, G26): HGMMA with the
    first k-tile's wgmma from zero (`RZ, !UPT`), the TMA stores, setmaxnreg, no local memory at 64 / 216."""
    p = {**gemm_hopper.PRESETS["sm_90a"], **gemm_hopper.F32_ONE_BUFFER, "DEFER": 2, "HELD": 1}
    k, kp = gemm_hopper.plan_kernel(8192, 8192, tp.f32, p, 1024)
    ck = tilepy_hip.compile(k, target="sm_90a", **kp)
    sass = ck.sass()
    assert "HGMMA.64x256x16.F32.BF16" in sass and "UTMASTG" in sass and "USETMAXREG" in sass
    assert re.search(r"HGMMA\.64x256x16\.F32\.BF16 R\d+, gdesc\[UR\d+\]\.tnspB, RZ, !UPT", sass)
    assert not re.findall(r"\b(?:LDL|STL)\b", sass), ck.resources
    assert ck.resources["dynamic_smem"] <= 232448


def test_sass_of_the_n192_cluster():
    """gemm_cluster with 128 x 192 tiles (G26: 3000 x 5000 x 4096's candidate): HGMMA.64x192x16, the bulk tensor
    copies, the TMA store, no local memory in the k-loop (ptxas may keep 8 bytes outside it, as the 128 x 256 form)."""
    p = {**gemm_hopper.PRESETS["sm_90a"], "CLUSTER_M": 2, "BN": 192, "INSTR": I192, "STAGES": 4, "EPILOGUE": 2,
         **R64}
    k, kp = gemm_hopper.plan_kernel(3000, 5000, tp.bf16, p, 4096)
    ck = tilepy_hip.compile(k, target="sm_90a", **kp)
    sass = ck.sass()
    assert "HGMMA.64x192x16.F32.BF16" in sass and "UTMASTG" in sass and "UTMALDG" in sass, sass[:400]
    assert ck.resources["spill_stores"] <= 8, ck.resources
    assert ck.resources["dynamic_smem"] <= 232448
