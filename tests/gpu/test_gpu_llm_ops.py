"""The fused LLM ops (stdlib_kernels/llm_ops.py) on the GPU through tilepy_hip, on fresh random inputs with
ragged sizes, against float64 references and (small sizes) the CPU interpreter. Outputs are poisoned with NaN
first, so an element the kernel forgets to write fails the test. Skips without a GPU."""

from __future__ import annotations

import os

import numpy as np
import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

from stdlib_kernels import llm_ops as L  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")
TOL = {torch.bfloat16: 4e-3, torch.float32: 1e-6}
DTYPES = [torch.bfloat16, torch.float32]


def _gen(request):
    seed = abs(hash(request.node.nodeid)) % 2**31 + int.from_bytes(os.urandom(2), "little")
    return torch.Generator().manual_seed(seed)


def rel(out, ref) -> float:
    out, ref = L._f64(out), np.asarray(L._f64(ref), np.float64)
    assert np.isfinite(out).all(), "NaN/inf in the output (an element not written?)"
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def nan(shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype, device=DEV)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,d", [(1, 1), (37, 1000), (8, 14336), (3, 2049)])
def test_silu_and_mul(dtype, m, d, request):
    x = (torch.randn(m, 2 * d, generator=_gen(request)) * 2).to(dtype)
    y = nan((m, d), dtype)
    L.launch_silu_and_mul(x.to(DEV), y)
    torch.cuda.synchronize()
    assert rel(y, L.ref_silu_and_mul(x)) < TOL[dtype]
    if m * d <= 4000:
        yi = torch.full((m, d), float("nan"), dtype=dtype)
        L.launch_silu_and_mul(x, yi)
        assert rel(y, yi) < TOL[dtype] / 4


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n", [(1, 1), (19, 700), (64, 4096), (3, 8193)])
def test_fused_add_rmsnorm(dtype, m, n, request):
    g = _gen(request)
    x, r = torch.randn(m, n, generator=g).to(dtype), torch.randn(m, n, generator=g).to(dtype)
    w = torch.randn(n, generator=g).to(dtype)
    y, ro = nan((m, n), dtype), nan((m, n), dtype)
    L.launch_fused_add_rmsnorm(x.to(DEV), r.to(DEV), w.to(DEV), y, ro, 1e-6)
    torch.cuda.synchronize()
    ref_y, ref_r = L.ref_fused_add_rmsnorm(x, r, w, 1e-6, round_residual=lambda a: torch.from_numpy(a).to(dtype))
    assert rel(ro, ref_r) == 0.0
    assert rel(y, ref_y) < TOL[dtype]
    xd, rd = x.to(DEV), r.to(DEV)                     # in place, as vLLM calls it
    L.launch_fused_add_rmsnorm(xd, rd, w.to(DEV), xd, rd, 1e-6)
    torch.cuda.synchronize()
    assert torch.equal(xd, y) and torch.equal(rd, ro)


@pytest.mark.parametrize("one_pass,rows", [(False, 1), (True, 1), (False, 2), (False, 4)])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n", [(1, 1), (19, 700), (64, 4096), (5, 33)])
def test_layer_norm(dtype, m, n, one_pass, rows, request):
    g = _gen(request)
    x = (torch.randn(m, n, generator=g) * 3 + 1.5).to(dtype)
    w, b = torch.randn(n, generator=g).to(dtype), torch.randn(n, generator=g).to(dtype)
    y = nan((m + 1, n), dtype)
    L.launch_layer_norm(x.to(DEV), w.to(DEV), b.to(DEV), y[:m], 1e-5, ONE_PASS=one_pass, ROWS=rows)
    torch.cuda.synchronize()
    assert rel(y[:m], L.ref_layer_norm(x, w, b, 1e-5)) < TOL[dtype]
    assert torch.isnan(y[m]).all()                   # rows past M (ROWS > 1: the last block's) not written


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t,h,d", [(37, 5, 100), (1, 1, 128), (300, 32, 128), (4, 3, 64)])
def test_merge_attn_states_lse(dtype, t, h, d, request):
    g = _gen(request)
    po, so = torch.randn(t, h, d, generator=g).to(dtype), torch.randn(t, h, d, generator=g).to(dtype)
    pl, sl = torch.randn(t, h, generator=g) * 4, torch.randn(t, h, generator=g) * 4
    pl.view(-1)[0] = float("-inf")
    if t * h > 2:
        pl.view(-1)[2] = sl.view(-1)[2] = float("-inf")
    o, ol = nan((t, h, d), dtype), nan((t, h), torch.float32)
    L.launch_merge_attn_states_lse(po.to(DEV), pl.to(DEV), so.to(DEV), sl.to(DEV), o, ol)
    torch.cuda.synchronize()
    ref_o, ref_l = L.ref_merge_attn_states_lse(po, pl, so, sl)
    assert rel(o, ref_o) < TOL[dtype]
    olc = ol.cpu().numpy()
    finite = np.isfinite(ref_l)
    assert np.array_equal(np.isfinite(olc), finite)
    np.testing.assert_allclose(olc[finite], ref_l[finite], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("neox", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t,hq,hk,hs,rot", [(37, 32, 8, 128, 128), (5, 6, 1, 64, 32), (3, 3, 3, 80, 80),
                                            (1, 1, 1, 16, 8)])
@pytest.mark.parametrize("hpb,threads", [(None, None), (8, 64), (4, 32), (None, -256)])   # one block a token,
def test_rotary(neox, dtype, t, hq, hk, hs, rot, hpb, threads, request):           # head blocks; -256: EARLY_K
    g = _gen(request)
    pos = torch.randint(0, 4096, (t,), generator=g)
    ang = torch.rand(4096, rot // 2, generator=g, dtype=torch.float64) * 6.3
    cs = torch.cat([ang.cos(), ang.sin()], dim=1).float()
    q, k = torch.randn(t, hq * hs, generator=g).to(dtype), torch.randn(t, hk * hs, generator=g).to(dtype)
    ref_q, ref_k = L.ref_rotary(pos, q, k, cs, hs, neox)
    qd, kd = q.to(DEV), k.to(DEV)
    kw = {"THREADS": abs(threads)} if threads else {}
    if threads and threads < 0 and neox:
        kw["EARLY_K"] = True
    L.launch_rotary(pos.to(DEV), qd, kd, cs.to(DEV), hs, neox, heads_per_block=hpb, **kw)
    torch.cuda.synchronize()
    assert rel(qd, ref_q) < TOL[dtype] and rel(kd, ref_k) < TOL[dtype]
    if t * hq * hs <= 2000:
        qi, ki = q.clone(), k.clone()
        L.launch_rotary(pos, qi, ki, cs, hs, neox)
        assert rel(qd, qi) < TOL[dtype] / 4 and rel(kd, ki) < TOL[dtype] / 4


# rotary_*_stream: (tokens, q heads, k heads, head size, rot dim, blocks per SM, threads); 3000 tokens at 1-2
# blocks per SM: 12-23 tokens a block
# rotary_neox_rows: (tokens, q heads, k heads, head size, rot dim, heads a block, threads)
HALVES_CASES = [(37, 32, 8, 128, 128, 16, 64), (300, 32, 8, 128, 128, None, 128), (5, 6, 1, 64, 32, 2, 32),
                (3, 3, 3, 16, 16, 4, 32)]
STREAM_CASES = [(37, 32, 8, 128, 128, 2, 256), (3000, 32, 8, 128, 128, 1, 256), (5, 6, 1, 64, 32, 3, 128),
                (3, 3, 3, 80, 80, 1, 64), (1, 1, 1, 16, 8, 2, 32)]


@pytest.mark.parametrize("neox", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t,hq,hk,hs,rot,stream,threads", STREAM_CASES)
def test_rotary_stream(neox, dtype, t, hq, hk, hs, rot, stream, threads, request):
    """The streaming rotary kernels (a block loops over the tokens, the next position loaded ahead): every token
    rotated once, the columns past rot untouched, against float64, out of place and in place."""
    g = _gen(request)
    pos = torch.randint(0, 4096, (t,), generator=g)
    ang = torch.rand(4096, rot // 2, generator=g, dtype=torch.float64) * 6.3
    cs = torch.cat([ang.cos(), ang.sin()], dim=1).float()
    q, k = torch.randn(t, hq * hs, generator=g).to(dtype), torch.randn(t, hk * hs, generator=g).to(dtype)
    ref_q, ref_k = L.ref_rotary(pos, q, k, cs, hs, neox)
    qd, kd, cd, pd = q.to(DEV), k.to(DEV), cs.to(DEV), pos.to(DEV)
    qo, ko = nan(q.shape, dtype), nan(k.shape, dtype)
    L.launch_rotary(pd, qd, kd, cd, hs, neox, q_out=qo, k_out=ko, stream=stream, THREADS=threads)
    torch.cuda.synchronize()
    assert rel(qo.view(t, hq, hs)[..., :rot], ref_q.reshape(t, hq, hs)[..., :rot]) < TOL[dtype]
    assert rel(ko.view(t, hk, hs)[..., :rot], ref_k.reshape(t, hk, hs)[..., :rot]) < TOL[dtype]
    kw = {"PREFETCH": True} if neox else {}       # (neox: the next token's q / k loaded ahead too)
    L.launch_rotary(pd, qd, kd, cd, hs, neox, stream=stream, THREADS=threads, **kw)          # in place
    torch.cuda.synchronize()
    assert rel(qd, ref_q) < TOL[dtype] and rel(kd, ref_k) < TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t,hq,hk,hs,rot,hpb,threads", HALVES_CASES)
def test_rotary_neox_halves(dtype, t, hq, hk, hs, rot, hpb, threads, request):
    """rotary_neox_rows (launch_rotary(HALVES=True)): whole heads, the partner half by one shuffle; against float64,
    out of place (columns past rot untouched) and in place."""
    g = _gen(request)
    pos = torch.randint(0, 4096, (t,), generator=g)
    ang = torch.rand(4096, rot // 2, generator=g, dtype=torch.float64) * 6.3
    cs = torch.cat([ang.cos(), ang.sin()], dim=1).float()
    q, k = torch.randn(t, hq * hs, generator=g).to(dtype), torch.randn(t, hk * hs, generator=g).to(dtype)
    ref_q, ref_k = L.ref_rotary(pos, q, k, cs, hs, True)
    qd, kd, cd, pd = q.to(DEV), k.to(DEV), cs.to(DEV), pos.to(DEV)
    qo, ko = nan(q.shape, dtype), nan(k.shape, dtype)
    L.launch_rotary(pd, qd, kd, cd, hs, True, q_out=qo, k_out=ko, heads_per_block=hpb, THREADS=threads, HALVES=True)
    torch.cuda.synchronize()
    assert rel(qo.view(t, hq, hs)[..., :rot], ref_q.reshape(t, hq, hs)[..., :rot]) < TOL[dtype]
    assert rel(ko.view(t, hk, hs)[..., :rot], ref_k.reshape(t, hk, hs)[..., :rot]) < TOL[dtype]
    L.launch_rotary(pd, qd, kd, cd, hs, True, heads_per_block=hpb, THREADS=threads, HALVES=True)
    torch.cuda.synchronize()
    assert rel(qd, ref_q) < TOL[dtype] and rel(kd, ref_k) < TOL[dtype]


@pytest.mark.parametrize("rows", [1, 2])
@pytest.mark.parametrize("m,n", [(64, 4096), (19, 1024), (5, 8192)])
def test_row_sums_per_warp(m, n, rows, request):
    """WARP_SUMS (per-warp sums, one exchange of the warps' partials through shared memory) on rows of one
    vector a thread: layer_norm and fused_add_rmsnorm against float64, rows past M untouched."""
    g = _gen(request)
    dtype = torch.bfloat16
    x = (torch.randn(m, n, generator=g) * 3 + 1.5).to(dtype)
    r = torch.randn(m, n, generator=g).to(dtype)
    w, b = torch.randn(n, generator=g).to(dtype), torch.randn(n, generator=g).to(dtype)
    y = nan((m + 1, n), dtype)
    L.launch_layer_norm(x.to(DEV), w.to(DEV), b.to(DEV), y[:m], 1e-5, ROWS=rows, WARP_SUMS=True)
    y2, ro = nan((m, n), dtype), nan((m, n), dtype)
    L.launch_fused_add_rmsnorm(x.to(DEV), r.to(DEV), w.to(DEV), y2, ro, 1e-6, WARP_SUMS=True)
    torch.cuda.synchronize()
    assert rel(y[:m], L.ref_layer_norm(x, w, b, 1e-5)) < TOL[dtype]
    assert torch.isnan(y[m]).all()
    ref_y, ref_r = L.ref_fused_add_rmsnorm(x, r, w, 1e-6, round_residual=lambda a: torch.from_numpy(a).to(dtype))
    assert rel(ro, ref_r) == 0.0 and rel(y2, ref_y) < TOL[dtype]


@pytest.mark.parametrize("stages,bps", [(2, 2), (3, 2), (4, 2), (4, 1)])
@pytest.mark.parametrize("m,n", [(1000, 4096), (37, 1024), (5, 8192), (300, 2048)])
def test_layer_norm_ring(m, n, stages, bps, request):
    """layer_norm_ring: rows through a ring of shared-memory buffers filled by bulk tensor copies, a grid of a
    few blocks an SM each looping over rows b, b + G, ... (m > grid: several rows a block, the last round
    partial); against float64, the row past M untouched."""
    g = _gen(request)
    x = (torch.randn(m, n, generator=g) * 3 + 1.5).to(torch.bfloat16)
    w, b = torch.randn(n, generator=g).to(torch.bfloat16), torch.randn(n, generator=g).to(torch.bfloat16)
    y = nan((m + 1, n), torch.bfloat16)
    L.launch_layer_norm_ring(x.to(DEV), w.to(DEV), b.to(DEV), y[:m], 1e-5, blocks_per_sm=bps, STAGES=stages)
    torch.cuda.synchronize()
    assert rel(y[:m], L.ref_layer_norm(x, w, b, 1e-5)) < TOL[torch.bfloat16]
    assert torch.isnan(y[m]).all()


@pytest.mark.parametrize("cs_smem", [False, True])
@pytest.mark.parametrize("neox", [True, False])
@pytest.mark.parametrize("t,hq,hk,hs,rot,bps,threads,stages", [(3000, 32, 8, 128, 128, 2, 512, 3),
                                                               (37, 32, 8, 128, 128, 3, 256, 4),
                                                               (500, 6, 1, 64, 32, 2, 64, 2),
                                                               (5, 3, 3, 80, 16, 1, 32, 3)])
def test_rotary_ring(neox, t, hq, hk, hs, rot, bps, threads, stages, cs_smem, request):
    """rotary_ring (q / k through shared-memory buffers filled by bulk tensor copies, a few blocks an SM looping
    over tokens): against float64, out of place and in place, partial rotary columns untouched."""
    g = _gen(request)
    pos = torch.randint(0, 4096, (t,), generator=g)
    ang = torch.rand(4096, rot // 2, generator=g, dtype=torch.float64) * 6.3
    cs = torch.cat([ang.cos(), ang.sin()], dim=1).float()
    q, k = torch.randn(t, hq * hs, generator=g).bfloat16(), torch.randn(t, hk * hs, generator=g).bfloat16()
    ref_q, ref_k = L.ref_rotary(pos, q, k, cs, hs, neox)
    qd, kd = q.to(DEV), k.to(DEV)
    qo, ko = nan(q.shape, torch.bfloat16), nan(k.shape, torch.bfloat16)
    L.launch_rotary_ring(pos.to(DEV), qd, kd, cs.to(DEV), hs, neox, q_out=qo, k_out=ko, blocks_per_sm=bps,
                         THREADS=threads, STAGES=stages, CS_SMEM=cs_smem)
    torch.cuda.synchronize()
    assert rel(qo.reshape(t, hq, hs)[..., :rot], ref_q.reshape(t, hq, hs)[..., :rot]) < TOL[torch.bfloat16]
    assert rel(ko.reshape(t, hk, hs)[..., :rot], ref_k.reshape(t, hk, hs)[..., :rot]) < TOL[torch.bfloat16]
    if rot < hs:
        assert torch.isnan(qo.reshape(t, hq, hs)[..., rot:]).all()      # columns past rot not written
    L.launch_rotary_ring(pos.to(DEV), qd, kd, cs.to(DEV), hs, neox, blocks_per_sm=bps, THREADS=threads,
                         STAGES=stages, CS_SMEM=cs_smem)
    torch.cuda.synchronize()
    assert rel(qd, ref_q) < TOL[torch.bfloat16] and rel(kd, ref_k) < TOL[torch.bfloat16]
