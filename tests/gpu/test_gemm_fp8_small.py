"""The fp8 GEMM's small / mid forms (G28; stdlib_kernels/gemm_fp8.py) on a real GPU against float64 of the e4m3
inputs and next to torch._scaled_mm on the same inputs: 64 x 128 / 64 x 64 / 128 x 128 tiles with deep rings, one
wgmma group in flight or none, the TMA-store epilogue (its fallback where C's rows are not 16-byte multiples), and the
persistent form on 128 x 128 tiles; ragged M, N and K (K a multiple of 16 but not of the 128-wide k-tile); outputs
poisoned with NaN first; the forms' SASS. Skips without a GPU."""

from __future__ import annotations

import re

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp8  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")
I128, I64 = tp.nv.wgmma_m64n128k32_e4m3, tp.nv.wgmma_m64n64k32_e4m3
I144, I192, I256 = tp.nv.wgmma_m64n144k32_e4m3, tp.nv.wgmma_m64n192k32_e4m3, tp.nv.wgmma_m64n256k32_e4m3
BASE = dict(gemm_fp8.PRESETS["sm_90a"], PRODUCER_REGS=0, CONSUMER_REGS=0, GROUP_M=8)
FORMS = {
    "64x128_s8_w1": dict(BM=64, BN=128, STAGES=8, CONSUMERS=1, INSTR=I128, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "64x128_s8_w0": dict(BM=64, BN=128, STAGES=8, CONSUMERS=1, INSTR=I128, IN_FLIGHT=0, EPILOGUE=2, TMA_ONLY=1),
    "64x128_s4_w1": dict(BM=64, BN=128, STAGES=4, CONSUMERS=1, INSTR=I128, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "64x64_s8_w1": dict(BM=64, BN=64, STAGES=8, CONSUMERS=1, INSTR=I64, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "64x64_s12_w1": dict(BM=64, BN=64, STAGES=12, CONSUMERS=1, INSTR=I64, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "128x128_s5_w1": dict(BM=128, BN=128, STAGES=5, CONSUMERS=2, INSTR=I128, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "128x128_s6_w0": dict(BM=128, BN=128, STAGES=6, CONSUMERS=2, INSTR=I128, IN_FLIGHT=0, EPILOGUE=2, TMA_ONLY=1),
    "p128x128_s6": dict(BM=128, BN=128, STAGES=6, CONSUMERS=2, INSTR=I128, PERSISTENT=1, STORE_N=64),
    # the policy's forms (gemm_fp8.small_form) as the table spells them
    "SMALL_64x64_s4": dict(gemm_fp8.SMALL_64x64, STAGES=4),
    "SMALL_64x64": gemm_fp8.SMALL_64x64,
    "SMALL_64x128": gemm_fp8.SMALL_64x128,
    "MID_128x128": gemm_fp8.MID_128x128,
    "UNALIGNED_N_128x128": gemm_fp8.UNALIGNED_N_128x128,
    "UNALIGNED_N_192x192": gemm_fp8.UNALIGNED_N_192x192,
    "LARGE_STAGED": gemm_fp8.LARGE_STAGED,
    "UNALIGNED_N_192x176": gemm_fp8.UNALIGNED_N_192x176,
    "WAVE_128x144": gemm_fp8.WAVE_128x144,
    # gemm_fp8_cluster: the forms on 2x1 clusters, B multicast (a second row tile wholly past M at 130 / 520 rows)
    "c64x128_s8_w0": dict(gemm_fp8.SMALL_64x128, IN_FLIGHT=0, CLUSTER_M=2),
    "c64x64_s6_w0": dict(gemm_fp8.SMALL_64x64, IN_FLIGHT=0, CLUSTER_M=2),
    "c128x128_s5_w0": dict(gemm_fp8.MID_128x128, IN_FLIGHT=0, CLUSTER_M=2),
    # (G35) wave-filling widths storing from the registers (128 x 144: 1536 columns in 11 tiles, the last 96 wide;
    # 128 x 192), and the large tile storing from the registers (C's rows off 16 bytes)
    "g35_128x144_s6_w1_ep0": dict(BM=128, BN=144, STAGES=6, CONSUMERS=2, INSTR=I144, IN_FLIGHT=1, EPILOGUE=0,
                                  TMA_ONLY=1),
    "g35_128x192_s5_w1_ep0": dict(BM=128, BN=192, STAGES=5, CONSUMERS=2, INSTR=I192, IN_FLIGHT=1, EPILOGUE=0,
                                  TMA_ONLY=1),
    "g35_128x256_s4_w1_ep0": dict(BM=128, BN=256, STAGES=4, CONSUMERS=2, INSTR=I256, IN_FLIGHT=1, EPILOGUE=0,
                                  TMA_ONLY=1),
    # the tile staged in shared memory, stored coalesced by the producer warpgroup (EPILOGUE=1); 192 x 192 tiles over
    # three consumers; 128 x 144 with the TMA store in 16-column blocks
    "g35_128x256_s3_w1_ep1": dict(BM=128, BN=256, STAGES=3, CONSUMERS=2, INSTR=I256, IN_FLIGHT=1, EPILOGUE=1,
                                  TMA_ONLY=1),
    "g35_192x192_s3_w1_ep1": dict(BM=192, BN=192, STAGES=3, CONSUMERS=3, INSTR=I192, IN_FLIGHT=1, EPILOGUE=1,
                                  TMA_ONLY=1),
    "g35_192x192_s4_w1_ep0": dict(BM=192, BN=192, STAGES=4, CONSUMERS=3, INSTR=I192, IN_FLIGHT=1, EPILOGUE=0,
                                  TMA_ONLY=1),
    "g35_128x144_s5_w1_ep2": dict(BM=128, BN=144, STAGES=5, CONSUMERS=2, INSTR=I144, IN_FLIGHT=1, EPILOGUE=2,
                                  TMA_ONLY=1),
}
# ragged M, N, K; one k-tile under a deep ring; the ring turning over many times; C rows off 16 bytes (N % 8)
SHAPES = [(200, 300, 1040), (130, 264, 64), (1000, 1000, 4096), (520, 1030, 528)]


def _quantize(x):
    scale = (x.abs().max().float() / 448.0).clamp(min=1e-12)
    return (x / scale).to(torch.float8_e4m3fn), scale.reshape(1)


def _rel(x, ref):
    x = x.double()
    assert torch.isfinite(x).all(), "NaN/inf in the output (an element not written?)"
    return float((x - ref).norm() / ref.norm())


def _params(name):
    p = {**BASE, **FORMS[name]}
    if p.get("PERSISTENT"):
        p.pop("IN_FLIGHT", None)
        p.pop("EPILOGUE", None)
    return p


@pytest.mark.parametrize("name", list(FORMS))
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_small_forms_against_float64_and_scaled_mm(name, m, n, k):
    p = _params(name)
    if p.get("PERSISTENT") and n % 8:
        pytest.skip("the persistent form's store is TMA only: C rows of 16-byte multiples (N % 8 == 0)")
    g = torch.Generator(device=DEV).manual_seed(m * 7 + n * 13 + k)
    a, sa = _quantize(torch.randn(m, k, device=DEV, generator=g))
    b, sb = _quantize(torch.randn(n, k, device=DEV, generator=g) * 0.02)
    out = torch.full((m, n), float("nan"), device=DEV, dtype=torch.bfloat16)
    kernel, kp = gemm_fp8.kernel_of(p)
    grid = gemm_fp8.grid_of(m, n, {**p, "NUM_SMS": 7} if p.get("PERSISTENT") else p)   # persistent: several tiles
    kernel[grid](a, b, sa, sb, out, target="sm_90a", **kp)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().t()) * sa.double() * sb.double()
    err = _rel(out, ref)
    assert err <= 2.0**-8, err
    if m % 16 == 0 and n % 16 == 0:
        fast = torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True)
        promoted = torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16)
        err_fast, err_promoted = _rel(fast, ref), _rel(promoted, ref)
        assert err <= 1.5 * err_fast + 1e-5 and err <= 2.0 * err_promoted + 1e-5, (err, err_fast, err_promoted)
    mag = (a.double().abs() @ b.double().abs().t()) * sa.double() * sb.double()
    excess = (out.double() - ref).abs() - (2.0**-8 * ref.abs() + 2.0**-9 * mag)
    assert bool((excess <= 0).all()), (float(excess.max()), divmod(int(excess.argmax()), n))
    again = torch.full_like(out, float("nan"))
    kernel[grid](a, b, sa, sb, again, target="sm_90a", **kp)
    torch.cuda.synchronize()
    assert torch.equal(out, again)          # the same bits on a second call


@pytest.mark.parametrize("name", list(FORMS))
def test_sass_of_the_small_forms(name):
    """QGMMA e4m3 of the tile's width, the TMA store, no local memory (no spills)."""
    p = _params(name)
    kernel, kp = gemm_fp8.kernel_of(p)
    ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
    sass = ck.sass()
    assert f"QGMMA.64x{p['BN']}x32.F32.E4M3.E4M3" in sass, sorted(set(re.findall(r"\bQGMMA\.[\w.]+", sass)))
    assert ("UTMASTG" in sass) == (p.get("EPILOGUE") == 2 or bool(p.get("STORE_N"))) and "UTMALDG" in sass
    assert ("UTMALDG.2D.MULTICAST" in sass) == (p.get("CLUSTER_M", 1) > 1)
    assert not re.findall(r"\b(?:LDL|STL)\b", sass), ck.resources


# shapes whose policy is each small form (and the ragged ones); a second call gives the same bits
POLICY_SHAPES = [(512, 512, 512), (640, 640, 640), (1024, 1024, 1024), (1000, 1000, 1024), (1024, 1024, 4096),
                 (2048, 1024, 4096), (2051, 2045, 1008), (300, 130, 400), (600, 1000, 272), (1536, 1536, 1536),
                 # C's rows off 16 bytes: the staged tile stored by every warpgroup (192 x 192, the large row's tiles,
                 # 64 x 128)
                 (3000, 3001, 2048), (1536, 1530, 1536), (4096, 4090, 1024), (768, 765, 768)]


@pytest.mark.parametrize("m,n,k", POLICY_SHAPES)
def test_small_policy_through_launch(m, n, k):
    assert gemm_fp8.small_form(m, n, k) is not None
    g = torch.Generator(device=DEV).manual_seed(m + 3 * n + 7 * k)
    a, sa = _quantize(torch.randn(m, k, device=DEV, generator=g))
    b, sb = _quantize(torch.randn(n, k, device=DEV, generator=g))
    out = torch.full((m, n), float("nan"), device=DEV, dtype=torch.bfloat16)
    gemm_fp8.launch(a, b, sa, sb, out)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().t()) * sa.double() * sb.double()
    assert _rel(out, ref) <= 2.0**-8
    mag = (a.double().abs() @ b.double().abs().t()) * sa.double() * sb.double()
    assert bool(((out.double() - ref).abs() <= 2.0**-8 * ref.abs() + 2.0**-9 * mag).all())
    again = torch.full_like(out, float("nan"))
    gemm_fp8.launch(a, b, sa, sb, again)
    torch.cuda.synchronize()
    assert torch.equal(out, again)


@pytest.mark.parametrize("m,n,k", [(2000, 2048, 1024), (4000, 1000, 1024), (2560, 1536, 2048)])
def test_one_wave_large_policy_through_launch(m, n, k):
    """(G35) the large class on one wave of 128 x 256 tiles: the persistent piece store (LARGE_PERSISTENT), ragged M
    and N, against float64; a second call gives the same bits."""
    assert gemm_fp8.policy(m, n, k).get("STORE_N") == 64
    g = torch.Generator(device=DEV).manual_seed(m + n + k)
    a, sa = _quantize(torch.randn(m, k, device=DEV, generator=g))
    b, sb = _quantize(torch.randn(n, k, device=DEV, generator=g))
    out = torch.full((m, n), float("nan"), device=DEV, dtype=torch.bfloat16)
    gemm_fp8.launch(a, b, sa, sb, out)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().t()) * sa.double() * sb.double()
    assert _rel(out, ref) <= 2.0**-8
    mag = (a.double().abs() @ b.double().abs().t()) * sa.double() * sb.double()
    assert bool(((out.double() - ref).abs() <= 2.0**-8 * ref.abs() + 2.0**-9 * mag).all())
    again = torch.full_like(out, float("nan"))
    gemm_fp8.launch(a, b, sa, sb, again)
    torch.cuda.synchronize()
    assert torch.equal(out, again)


def test_small_policy_with_an_unaligned_base():
    """An operand whose base is not 16-byte aligned (a view one byte into a buffer): `launch` drops the policy's
    TMA_ONLY (the copies' fallback instead of a refused tensor map); the caller's own TMA_ONLY=1 is refused."""
    m, n, k = 600, 1000, 272
    g = torch.Generator(device=DEV).manual_seed(3)
    a0, sa = _quantize(torch.randn(m, k, device=DEV, generator=g))
    b, sb = _quantize(torch.randn(n, k, device=DEV, generator=g))
    buf = torch.zeros(m * k + 1, device=DEV, dtype=torch.uint8)
    a = buf[1:].view(torch.float8_e4m3fn).view(m, k)
    a.copy_(a0)
    assert a.data_ptr() % 16 == 1 and a.is_contiguous()
    out = torch.full((m, n), float("nan"), device=DEV, dtype=torch.bfloat16)
    gemm_fp8.launch(a, b, sa, sb, out)
    torch.cuda.synchronize()
    ref = (a0.double() @ b.double().t()) * sa.double() * sb.double()
    assert _rel(out, ref) <= 2.0**-8
    with pytest.raises(Exception, match="16"):
        gemm_fp8.launch(a, b, sa, sb, out, TMA_ONLY=1)


def test_large_row_with_c_off_16_bytes_stages_c():
    """C on a base off 16 bytes (a view one element into a buffer) under the large row's TMA store: `launch` takes the
    staged tile stored by every warpgroup instead (the TMA store's fallback is one thread's copy); exact against
    float64 as the aligned output, the buffer's first element untouched."""
    m, n, k = 2048, 2048, 1008
    assert gemm_fp8.policy(m, n, k)["EPILOGUE"] == 2
    g = torch.Generator(device=DEV).manual_seed(11)
    a, sa = _quantize(torch.randn(m, k, device=DEV, generator=g))
    b, sb = _quantize(torch.randn(n, k, device=DEV, generator=g))
    buf = torch.full((m * n + 1,), 5.0, device=DEV, dtype=torch.bfloat16)
    out = buf[1:].view(m, n)
    assert out.data_ptr() % 16 == 2
    gemm_fp8.launch(a, b, sa, sb, out)
    aligned = torch.full((m, n), float("nan"), device=DEV, dtype=torch.bfloat16)
    gemm_fp8.launch(a, b, sa, sb, aligned)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().t()) * sa.double() * sb.double()
    assert _rel(out, ref) <= 2.0**-8 and torch.equal(out, aligned) and buf[0].item() == 5.0
