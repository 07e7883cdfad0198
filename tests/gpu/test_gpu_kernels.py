"""Every stdlib kernel (and the extra kernels in tests/hip/kernels.py) on a real GPU through tilepy_hip, on fresh
random inputs with partial tiles, against torch in float64 and against the CPU interpreter. Outputs are
poisoned with NaN first, so an element the kernel forgets to write fails the test. Skips without a GPU."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm, gemm_hopper, rmsnorm, softmax, vector_add  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "hip"))
import kernels as extra  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


def _seed(request):
    return abs(hash(request.node.nodeid)) % 2**31 + int.from_bytes(os.urandom(2), "little")


def _rel(out, ref):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    assert np.isfinite(out).all(), "NaN/inf in the output (an element not written?)"
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def _poison(shape, dtype=torch.float32):
    shape = (shape,) if isinstance(shape, int) else shape
    return torch.full(shape, float("nan"), dtype=dtype, device=DEV)


@pytest.mark.parametrize("n", [1, 1000, 1024, 5000, (1 << 20) + 3])
def test_vector_add(n, request):
    g = torch.Generator(device="cpu").manual_seed(_seed(request))
    x, y = torch.randn(n, generator=g), torch.randn(n, generator=g)
    z = _poison(n)
    tilepy_hip.launch(vector_add.vector_add, (tp.cdiv(n, 1024),), x.to(DEV), y.to(DEV), z, BLOCK=1024)
    torch.cuda.synchronize()
    assert torch.equal(z.cpu(), x + y)
    if n <= 5000:
        zi = np.full(n, np.nan, np.float32)
        vector_add.vector_add[(tp.cdiv(n, 1024),)](x.numpy(), y.numpy(), zi, BLOCK=1024)
        np.testing.assert_array_equal(z.cpu().numpy(), zi)


@pytest.mark.parametrize("m,n", [(37, 1000), (5, 16), (3, 4097), (64, 128), (1, 1)])
def test_softmax(m, n, request):
    g = torch.Generator(device="cpu").manual_seed(_seed(request))
    x = torch.randn(m, n, generator=g) * 3
    y = _poison((m, n))
    block = max(16, 1 << (n - 1).bit_length())
    tilepy_hip.launch(softmax.softmax, (m,), x.to(DEV), y, BLOCK_N=block)
    torch.cuda.synchronize()
    assert _rel(y.cpu(), torch.softmax(x.double(), dim=1)) < 1e-5
    if m * n <= 40000:
        yi = np.full((m, n), np.nan, np.float32)
        softmax.softmax[(m,)](x.numpy(), yi, BLOCK_N=block)
        assert _rel(y.cpu(), yi) < 1e-5


@pytest.mark.parametrize("m,n", [(19, 700), (8, 4096), (2, 1), (3, 1025)])
def test_rmsnorm(m, n, request):
    g = torch.Generator(device="cpu").manual_seed(_seed(request))
    x, w = torch.randn(m, n, generator=g), torch.randn(n, generator=g)
    y = _poison((m, n))
    block = max(16, 1 << (n - 1).bit_length())
    tilepy_hip.launch(rmsnorm.rmsnorm, (m,), x.to(DEV), w.to(DEV), y, 1e-6, BLOCK_N=block)
    torch.cuda.synchronize()
    xd = x.double()
    ref = xd / torch.sqrt((xd * xd).mean(dim=1, keepdim=True) + 1e-6) * w.double()
    assert _rel(y.cpu(), ref) < 1e-5
    if m * n <= 40000:
        yi = np.full((m, n), np.nan, np.float32)
        rmsnorm.rmsnorm[(m,)](x.numpy(), w.numpy(), yi, 1e-6, BLOCK_N=block)
        assert _rel(y.cpu(), yi) < 1e-5


@pytest.mark.parametrize("preset", ["sm_90a", "sm_80"])  # wgmma, and mma.sync + ldmatrix, both on the H100
@pytest.mark.parametrize("m,k,n", [(70, 80, 72), (128, 64, 64), (256, 512, 192), (1, 16, 8), (130, 200, 66)])
def test_gemm(preset, m, k, n, request):
    g = torch.Generator(device="cpu").manual_seed(_seed(request))
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(k, n, generator=g).to(torch.bfloat16)
    c = _poison((m, n))
    p = gemm.PRESETS[preset]
    grid = (tp.cdiv(m, p["BM"]), tp.cdiv(n, p["BN"]))
    tilepy_hip.launch(gemm.gemm, grid, a.to(DEV), b.to(DEV), c, target="sm_90a", **p)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert _rel(c.cpu(), ref) < 1e-5
    if m * n * k <= 800_000:
        ci = np.full((m, n), np.nan, np.float32)
        gemm.gemm[grid](a.float().numpy(), b.float().numpy(), ci, target="sm_90a", **p)
        assert _rel(c.cpu(), ci) < 1e-5


HOPPER_VARIANTS = {
    "128x128x4": dict(gemm_hopper.PRESETS["sm_90a"], **gemm_hopper.SMALL_TILE),
    "128x256x4": dict(gemm_hopper.PRESETS["sm_90a"], BN=256, INSTR=tp.nv.wgmma_m64n256k16_bf16),
    "128x256x3": dict(gemm_hopper.PRESETS["sm_90a"], BN=256, STAGES=3, INSTR=tp.nv.wgmma_m64n256k16_bf16),
}


@pytest.mark.parametrize("variant", sorted(HOPPER_VARIANTS))
@pytest.mark.parametrize(
    "m,k,n", [(70, 80, 72), (256, 512, 256), (130, 200, 264), (1, 16, 8), (300, 1000, 520), (130, 200, 66)]
)
def test_gemm_hopper(variant, m, k, n, request):
    """TMA producer + wgmma consumers on ragged shapes; n=66 (132-byte rows of B) takes the element fallback."""
    g = torch.Generator(device="cpu").manual_seed(_seed(request))
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(k, n, generator=g).to(torch.bfloat16)
    c = _poison((m, n))
    p = HOPPER_VARIANTS[variant]
    grid = (tp.cdiv(m, p["BM"]), tp.cdiv(n, p["BN"]))
    ck = tilepy_hip.launch(gemm_hopper.gemm_hopper, grid, a.to(DEV), b.to(DEV), c, **p)
    torch.cuda.synchronize()
    assert len(ck.tensor_maps) == 2
    assert _rel(c.cpu(), a.double() @ b.double()) < 1e-5
    if m * n * k <= 800_000:
        ci = np.full((m, n), np.nan, np.float32)
        gemm_hopper.gemm_hopper[grid](a.float().numpy(), b.float().numpy(), ci, **p)
        assert _rel(c.cpu(), ci) < 1e-5


@pytest.mark.parametrize("bc,swizzle", [(64, tp.Swizzle(3, 3, 3)), (32, tp.Swizzle(2, 3, 3)),
                                        (16, tp.Swizzle(1, 3, 3)), (8, tp.Swizzle(0, 3, 3))])
@pytest.mark.parametrize("m,n,offset", [(150, 136, 0), (150, 50, 0), (150, 136, 1)])
def test_tma_swizzles_and_fallback(bc, swizzle, m, n, offset):
    """A tile through the copy engine's swizzle read back through the tile's: equal only if the modes match.
    n=50 (100-byte rows) and a 2-byte offset base cannot be tensor maps: the kernel's fallback runs."""
    from tilepy_hip.tensor_map import tensor_map

    flat = torch.randn(m * n + offset).to(torch.bfloat16).to(DEV)
    x = flat[offset:].view(m, n)
    y = _poison((m, n))
    ck = tilepy_hip.launch(extra.tma_tile, (tp.cdiv(m, 64), tp.cdiv(n, bc)), x, y, BC=bc, SWIZZLE=swizzle)
    torch.cuda.synchronize()
    assert torch.equal(y.cpu(), x.float().cpu())
    assert tensor_map(ck.tensor_maps[0], x)[1] == (n % 8 == 0 and offset == 0)


def test_bulk_copy_with_mbarrier():
    n = 32 * 5 + 7
    x = torch.randn(n)
    y = _poison(n)
    tilepy_hip.launch(extra.bulk_ws, (tp.cdiv(n, 32),), x.to(DEV), y, BLOCK=32)
    torch.cuda.synchronize()
    assert torch.equal(y.cpu(), 2 * x)


def test_producer_consumer_roles():
    n = 512 * 3 + 100
    x = torch.randn(n)
    y = _poison(n)
    tilepy_hip.launch(extra.producer_consumer, (tp.cdiv(n, 512),), x.to(DEV), y)
    torch.cuda.synchronize()
    assert torch.equal(y.cpu(), 2 * x + 1)


def test_shared_memory_over_48kb():
    n = 16384 * 2 + 5
    x = torch.randn(n)
    y = _poison(n)
    ck = tilepy_hip.launch(extra.big_smem, (tp.cdiv(n, 16384),), x.to(DEV), y)
    torch.cuda.synchronize()
    assert ck.smem_bytes > 48 * 1024
    assert torch.equal(y.cpu(), 2 * x)


def test_column_reductions():
    m, n = 50, 70
    x = torch.randn(m, n)
    s, mx = _poison(n), _poison(n)
    tilepy_hip.launch(extra.col_stats, (tp.cdiv(n, 32),), x.to(DEV), s, mx)
    torch.cuda.synchronize()
    assert _rel(s.cpu(), x.double().sum(0)) < 1e-5
    assert torch.equal(mx.cpu(), x.max(0).values)


def test_elementwise_math_and_layout_conversion():
    m, n = 4, 256
    x = torch.randn(m, n) * 2
    y = _poison((m, n))
    tilepy_hip.launch(extra.row_math, (m,), x.to(DEV), y)
    torch.cuda.synchronize()
    yi = np.full((m, n), np.nan, np.float32)
    extra.row_math[(m,)](x.numpy(), yi)
    assert _rel(y.cpu(), yi) < 2e-3  # one bf16 rounding in the chain


def test_cuda_graph_capture():
    n = 10000
    x, y = torch.randn(n, device=DEV), torch.randn(n, device=DEV)
    z = _poison(n)
    grid = (tp.cdiv(n, 1024),)
    tilepy_hip.launch(vector_add.vector_add, grid, x, y, z)  # loads the module before capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        tilepy_hip.launch(vector_add.vector_add, grid, x, y, z)
    x.copy_(torch.randn(n, device=DEV))
    z.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(z, x + y)


def test_launch_on_a_side_stream():
    n = 4096
    x, y = torch.randn(n, device=DEV), torch.randn(n, device=DEV)
    z = _poison(n)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        tilepy_hip.launch(vector_add.vector_add, (4,), x, y, z)
    s.synchronize()
    assert torch.equal(z, x + y)


def test_launch_errors_on_gpu():
    x = torch.randn(100, device=DEV)
    with pytest.raises(tp.LaunchError, match="dtype"):
        tilepy_hip.launch(vector_add.vector_add, (1,), x.double(), x, x)
    with pytest.raises(tp.LaunchError, match="contiguous"):
        tilepy_hip.launch(
            softmax.softmax,
            (1,),
            torch.randn(8, 8, device=DEV).t(),
            torch.empty(8, 8, device=DEV),
            BLOCK_N=16,
        )
    with pytest.raises(tp.LaunchError, match="cpu"):
        tilepy_hip.launch(vector_add.vector_add, (1,), x.cpu(), x, x)


def test_gemm_hopper_cooperative_fallback_large():
    """(2051, 1000, 2045): B's rows (4090 bytes) cannot be a tensor map, so B takes the producer warpgroup's
    cooperative copy while A goes through TMA: one phase mixes both."""
    from tilepy_hip.tensor_map import tensor_map

    m, k, n = 2051, 1000, 2045
    g = torch.Generator(device="cpu").manual_seed(7)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16).to(DEV)
    b = torch.randn(k, n, generator=g).to(torch.bfloat16).to(DEV)
    c = _poison((m, n))
    p = HOPPER_VARIANTS["128x256x4"]
    ck = tilepy_hip.launch(gemm_hopper.gemm_hopper, (tp.cdiv(m, p["BM"]), tp.cdiv(n, p["BN"])), a, b, c, **p)
    torch.cuda.synchronize()
    assert tensor_map(ck.tensor_maps[0], a)[1] and not tensor_map(ck.tensor_maps[1], b)[1]
    assert _rel(c.cpu(), a.double().cpu() @ b.double().cpu()) < 1e-5
