"""The fused LLM ops (stdlib_kernels/llm_ops.py) on the CPU interpreter against float64 references, on ragged
sizes (rows not multiples of the tiles, partial rotary, odd head counts), bf16 and f32; outputs poisoned with NaN
so an unwritten element fails. The tag assertions are proved by the verifier, fast, and a broken pairing in the
same kernel source is caught."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

import tilepy_verify as tv
from stdlib_kernels import llm_ops as L

# bf16 outputs are rounded once (relative error up to 2^-9 per element, ~2^-10 in norm); f32 ones agree to ~1e-7
TOL = {torch.bfloat16: 4e-3, torch.float32: 1e-6}
DTYPES = [torch.bfloat16, torch.float32]


def rel(out, ref) -> float:
    out, ref = L._f64(out), np.asarray(ref, np.float64)
    assert np.isfinite(out).all(), "NaN/inf in the output (an element not written?)"
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def nan_like(x):
    return torch.full_like(x, float("nan"))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,d", [(1, 1), (3, 300), (2, 2048), (5, 2049)])
def test_silu_and_mul(dtype, m, d):
    g = torch.Generator().manual_seed(m * 7919 + d)
    x = (torch.randn(m, 2 * d, generator=g) * 2).to(dtype)
    y = torch.full((m, d), float("nan"), dtype=dtype)
    L.launch_silu_and_mul(x, y)
    assert rel(y, L.ref_silu_and_mul(x)) < TOL[dtype]


def test_silu_and_mul_shape_error():
    with pytest.raises(ValueError, match=r"\(M, 2d\)"):
        L.launch_silu_and_mul(torch.zeros(2, 10), torch.zeros(2, 4))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n", [(1, 1), (3, 700), (2, 1024), (4, 1025)])
def test_fused_add_rmsnorm(dtype, m, n):
    g = torch.Generator().manual_seed(m * 31 + n)
    x, r = (torch.randn(m, n, generator=g).to(dtype) for _ in range(2))
    w = torch.randn(n, generator=g).to(dtype)
    y, ro = nan_like(x), nan_like(x)
    L.launch_fused_add_rmsnorm(x, r, w, y, ro, 1e-6)
    ref_y, ref_r = L.ref_fused_add_rmsnorm(x, r, w, 1e-6, round_residual=lambda a: torch.from_numpy(a).to(dtype))
    assert rel(ro, ref_r) == 0.0                      # the residual is x + residual rounded once to its dtype
    assert rel(y, ref_y) < TOL[dtype]


def test_fused_add_rmsnorm_in_place():
    """vLLM's convention: x becomes the normalized output, residual the sum."""
    g = torch.Generator().manual_seed(5)
    x, r, w = torch.randn(3, 500, generator=g), torch.randn(3, 500, generator=g), torch.randn(500, generator=g)
    ref_y, ref_r = L.ref_fused_add_rmsnorm(x, r, w, 1e-5)
    L.launch_fused_add_rmsnorm(x, r, w, x, r, 1e-5)
    assert rel(x, ref_y) < 1e-6 and rel(r, ref_r) < 1e-7


@pytest.mark.parametrize("one_pass", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n", [(1, 1), (3, 700), (2, 4096), (4, 33)])
def test_layer_norm(dtype, m, n, one_pass):
    g = torch.Generator().manual_seed(m * 17 + n)
    x = (torch.randn(m, n, generator=g) * 3 + 1.5).to(dtype)            # a mean far from 0
    w, b = torch.randn(n, generator=g).to(dtype), torch.randn(n, generator=g).to(dtype)
    y = nan_like(x)
    L.launch_layer_norm(x, w, b, y, 1e-5, ONE_PASS=one_pass)
    ref = L.ref_layer_norm(x, w, b, 1e-5)
    assert rel(y, ref) < TOL[dtype]               # n == 1: the centred row is 0, the output the bias alone
    torch.testing.assert_close(torch.from_numpy(ref), torch.nn.functional.layer_norm(
        x.double(), (n,), w.double(), b.double(), 1e-5), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,m,n", [(2, 5, 700), (4, 6, 33), (2, 1, 4096)])
def test_layer_norm_rows(dtype, rows, m, n):
    """ROWS rows a block, the next one's x loaded ahead: M not a multiple of ROWS (the last block's rows past M
    neither read nor write)."""
    g = torch.Generator().manual_seed(rows * 1000 + m * 17 + n)
    x = (torch.randn(m, n, generator=g) * 3 - 2).to(dtype)
    w, b = torch.randn(n, generator=g).to(dtype), torch.randn(n, generator=g).to(dtype)
    y = torch.full((m + 1, n), float("nan"), dtype=dtype)
    L.launch_layer_norm(x, w, b, y[:m], 1e-5, ROWS=rows)
    assert rel(y[:m], L.ref_layer_norm(x, w, b, 1e-5)) < TOL[dtype]
    assert torch.isnan(y[m]).all()                               # the row after the output is not touched


@pytest.mark.parametrize("one_pass,rows", [(False, 1), (True, 1), (False, 2)])
@pytest.mark.parametrize("m,n", [(3, 16), (5, 256)])
def test_layer_norm_even(m, n, one_pass, rows):
    """Rows of exactly the block's power of two take EVEN (no mask on the centred values) by default; the result
    is the same as the masked kernel's and float64's, M not a multiple of ROWS; a ragged row refuses EVEN."""
    g = torch.Generator().manual_seed(m * 31 + n + rows)
    x = torch.randn(m, n, generator=g) * 2 + 4
    w, b = torch.randn(n, generator=g), torch.randn(n, generator=g)
    y, y2 = nan_like(x), nan_like(x)
    L.launch_layer_norm(x, w, b, y, 1e-5, ONE_PASS=one_pass, ROWS=rows)               # EVEN by default
    L.launch_layer_norm(x, w, b, y2, 1e-5, ONE_PASS=one_pass, ROWS=rows, EVEN=False)
    ref = L.ref_layer_norm(x, w, b, 1e-5)
    assert rel(y, ref) < 1e-6 and rel(y2, ref) < 1e-6
    torch.testing.assert_close(y, y2, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="EVEN=True needs rows of a power of two"):
        L.launch_layer_norm(x[:, :n - 1].contiguous(), w[:n - 1], b[:n - 1], y[:, :n - 1].contiguous(), EVEN=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t,h,d", [(3, 5, 100), (1, 1, 128), (4, 3, 64), (2, 7, 8)])
def test_merge_attn_states_lse(dtype, t, h, d):
    g = torch.Generator().manual_seed(t * 100 + h * 10 + d)
    po, so = torch.randn(t, h, d, generator=g).to(dtype), torch.randn(t, h, d, generator=g).to(dtype)
    pl, sl = torch.randn(t, h, generator=g) * 4, torch.randn(t, h, generator=g) * 4
    pl.view(-1)[0] = float("-inf")                                  # an empty prefix
    if t * h > 2:
        pl.view(-1)[2] = sl.view(-1)[2] = float("-inf")              # both empty: 0, lse -inf
    o, ol = nan_like(po), torch.full_like(pl, float("nan"))
    L.launch_merge_attn_states_lse(po, pl, so, sl, o, ol)
    ref_o, ref_l = L.ref_merge_attn_states_lse(po, pl, so, sl)
    assert rel(o, ref_o) < TOL[dtype]
    finite = np.isfinite(ref_l)
    assert np.array_equal(np.isfinite(ol.numpy()), finite)
    np.testing.assert_allclose(ol.numpy()[finite], ref_l[finite], rtol=1e-6, atol=1e-6)
    # against the definition, with torch's logaddexp
    torch.testing.assert_close(torch.from_numpy(ref_l)[torch.from_numpy(finite)],
                               torch.logaddexp(pl.double(), sl.double())[torch.from_numpy(finite)])


@pytest.mark.parametrize("neox", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t,hq,hk,hs,rot", [(5, 4, 2, 64, 64), (3, 6, 1, 64, 32), (2, 3, 3, 128, 128),
                                            (4, 2, 1, 80, 80), (1, 1, 1, 16, 8)])
@pytest.mark.parametrize("hpb", [None, 2, 0])   # the default, blocks of 2 q / k heads (SPLIT), one block a token
def test_rotary(neox, dtype, t, hq, hk, hs, rot, hpb):
    g = torch.Generator().manual_seed(t * 1000 + hq * 100 + hs + rot)
    pos = torch.randint(0, 40, (t,), generator=g)
    ang = torch.rand(40, rot // 2, generator=g, dtype=torch.float64) * 6.3
    cs = torch.cat([ang.cos(), ang.sin()], dim=1).float()
    q, k = torch.randn(t, hq * hs, generator=g).to(dtype), torch.randn(t, hk * hs, generator=g).to(dtype)
    ref_q, ref_k = L.ref_rotary(pos, q, k, cs, hs, neox)
    qo, ko = torch.full_like(q, float("nan")), torch.full_like(k, float("nan"))
    L.launch_rotary(pos, q, k, cs, hs, neox, q_out=qo, k_out=ko, heads_per_block=hpb)
    # columns past rot_dim are not written to q_out: compare the rotated part, then check in place
    rq = qo.reshape(t, hq, hs)[..., :rot]
    assert rel(rq, ref_q.reshape(t, hq, hs)[..., :rot]) < TOL[dtype]
    assert rel(ko.reshape(t, hk, hs)[..., :rot], ref_k.reshape(t, hk, hs)[..., :rot]) < TOL[dtype]
    L.launch_rotary(pos, q, k, cs, hs, neox, heads_per_block=hpb)     # in place: the rest stays as it was
    assert rel(q, ref_q) < TOL[dtype] and rel(k, ref_k) < TOL[dtype]


@pytest.mark.parametrize("kvec,threads", [(8, 128), (4, 128), (2, 256)])
@pytest.mark.parametrize("t,hq,hk,hs,rot", [(3, 6, 1, 64, 32), (2, 3, 3, 80, 80), (2, 32, 8, 128, 128)])
def test_rotary_neox_early_k(t, hq, hk, hs, rot, kvec, threads):
    """k's loads issued with q's (EARLY_K), k tiles in KVEC-wide vectors: the same result."""
    g = torch.Generator().manual_seed(t * 100 + hq + hs)
    pos = torch.randint(0, 40, (t,), generator=g)
    ang = torch.rand(40, rot // 2, generator=g, dtype=torch.float64) * 6.3
    cs = torch.cat([ang.cos(), ang.sin()], dim=1).float()
    q, k = torch.randn(t, hq * hs, generator=g).to(torch.bfloat16), torch.randn(t, hk * hs, generator=g).to(
        torch.bfloat16)
    ref_q, ref_k = L.ref_rotary(pos, q, k, cs, hs, True)
    L.launch_rotary(pos, q, k, cs, hs, True, EARLY_K=True, KVEC=kvec, THREADS=threads)
    assert rel(q, ref_q) < TOL[torch.bfloat16] and rel(k, ref_k) < TOL[torch.bfloat16]


@pytest.mark.parametrize("neox,prefetch", [(True, False), (True, True), (False, False)])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t,hq,hk,hs,rot,stream,threads", [(7, 32, 8, 128, 128, 1, 256), (9, 6, 1, 64, 32, 1, 64),
                                                           (5, 3, 3, 80, 80, 2, 32), (1, 1, 1, 16, 8, 1, 32)])
def test_rotary_stream(neox, prefetch, dtype, t, hq, hk, hs, rot, stream, threads, monkeypatch):
    """rotary_*_stream: a grid of fewer blocks than tokens (the interpreter's 132 "SMs" are patched down to 2 so
    that a block loops over several tokens, the last ones past the grid's multiple), the next position (and with
    PREFETCH the next q / k) loaded one iteration ahead: every token rotated once, columns past rot untouched."""
    monkeypatch.setattr(L, "_num_sms", lambda x: 2)
    g = torch.Generator().manual_seed(t * 100 + hq * 10 + hs + rot)
    pos = torch.randint(0, 40, (t,), generator=g)
    ang = torch.rand(40, rot // 2, generator=g, dtype=torch.float64) * 6.3
    cs = torch.cat([ang.cos(), ang.sin()], dim=1).float()
    q, k = torch.randn(t, hq * hs, generator=g).to(dtype), torch.randn(t, hk * hs, generator=g).to(dtype)
    ref_q, ref_k = L.ref_rotary(pos, q, k, cs, hs, neox)
    kw = {"PREFETCH": True} if prefetch else {}
    qo, ko = torch.full_like(q, float("nan")), torch.full_like(k, float("nan"))
    L.launch_rotary(pos, q, k, cs, hs, neox, q_out=qo, k_out=ko, stream=stream, THREADS=threads, **kw)
    assert rel(qo.reshape(t, hq, hs)[..., :rot], ref_q.reshape(t, hq, hs)[..., :rot]) < TOL[dtype]
    assert rel(ko.reshape(t, hk, hs)[..., :rot], ref_k.reshape(t, hk, hs)[..., :rot]) < TOL[dtype]
    L.launch_rotary(pos, q, k, cs, hs, neox, stream=stream, THREADS=threads, **kw)     # in place
    assert rel(q, ref_q) < TOL[dtype] and rel(k, ref_k) < TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t,hq,hk,hs,rot,hpb,threads", [(3, 32, 8, 128, 128, 16, 64), (3, 32, 8, 128, 128, None, 128),
                                                        (4, 6, 1, 64, 32, 2, 32), (2, 3, 3, 16, 16, 4, 32),
                                                        (2, 3, 3, 80, 80, None, 64)])   # (HALF 40: the plain kernel)
def test_rotary_neox_halves(dtype, t, hq, hk, hs, rot, hpb, threads):
    """rotary_neox_rows (HALVES): heads loaded whole, the partner half through a sum along (heads, 2, HALF) halves:
    the same result as the reference, out of place and in place; partial rotary leaves the rest."""
    g = torch.Generator().manual_seed(t * 100 + hq + hs + rot)
    pos = torch.randint(0, 40, (t,), generator=g)
    ang = torch.rand(40, rot // 2, generator=g, dtype=torch.float64) * 6.3
    cs = torch.cat([ang.cos(), ang.sin()], dim=1).float()
    q, k = torch.randn(t, hq * hs, generator=g).to(dtype), torch.randn(t, hk * hs, generator=g).to(dtype)
    ref_q, ref_k = L.ref_rotary(pos, q, k, cs, hs, True)
    qo, ko = torch.full_like(q, float("nan")), torch.full_like(k, float("nan"))
    L.launch_rotary(pos, q, k, cs, hs, True, q_out=qo, k_out=ko, heads_per_block=hpb, THREADS=threads, HALVES=True)
    assert rel(qo.reshape(t, hq, hs)[..., :rot], ref_q.reshape(t, hq, hs)[..., :rot]) < TOL[dtype]
    assert rel(ko.reshape(t, hk, hs)[..., :rot], ref_k.reshape(t, hk, hs)[..., :rot]) < TOL[dtype]
    L.launch_rotary(pos, q, k, cs, hs, True, heads_per_block=hpb, THREADS=threads, HALVES=True)
    assert rel(q, ref_q) < TOL[dtype] and rel(k, ref_k) < TOL[dtype]


def test_rotary_stream_refuses_head_blocks():
    q = torch.zeros(2, 64)
    with pytest.raises(ValueError, match="heads_per_block does not apply"):
        L.launch_rotary(torch.zeros(2, dtype=torch.int64), q, q.clone(), torch.zeros(4, 64), 64, stream=1,
                        heads_per_block=2)


def test_rotary_styles_differ():
    """The two styles pair different elements: each one's reference disagrees with the other's kernel."""
    g = torch.Generator().manual_seed(1)
    pos = torch.arange(3)
    ang = torch.rand(3, 8, generator=g, dtype=torch.float64) * 3 + 0.5
    cs = torch.cat([ang.cos(), ang.sin()], dim=1).float()
    q, k = torch.randn(3, 16, generator=g), torch.randn(3, 16, generator=g)
    gq, gk = q.clone(), k.clone()
    L.launch_rotary(pos, gq, gk, cs, 16, is_neox=False)
    assert rel(gq, L.ref_rotary(pos, q, k, cs, 16, False)[0]) < 1e-6
    assert rel(gq, L.ref_rotary(pos, q, k, cs, 16, True)[0]) > 0.1


KERNEL_NAMES = ["silu_and_mul", "fused_add_rmsnorm", "layer_norm", "merge_attn_states_lse", "rotary_neox",
                "rotary_gptj"]


@pytest.mark.parametrize("name,params", [(n, {}) for n in KERNEL_NAMES] + [("layer_norm", {"ONE_PASS": True})]
                         + [("layer_norm", {"ROWS": 2}), ("layer_norm", {"ROWS": 4, "ONE_PASS": True}),
                            ("rotary_neox", {"EARLY_K": True}), ("layer_norm", {"EVEN": True}),
                            ("layer_norm", {"EVEN": True, "ONE_PASS": True}), ("layer_norm", {"EVEN": True, "ROWS": 2}),
                            ("layer_norm", {"WARP_SUMS": True}), ("fused_add_rmsnorm", {"WARP_SUMS": True}),
                            ("layer_norm", {"WARP_SUMS": True, "ROWS": 2}),
                            ("rotary_neox", {"EARLY_K": True, "KVEC": 4}),
                            ("rotary_neox", {"EARLY_K": True, "KVEC": 2, "THREADS": 256})]
                         + [(n, dict(SPLIT=True, BHQ=8, BHK=8, THREADS=64)) for n in ("rotary_neox", "rotary_gptj")]
                         + [("rotary_neox_stream", {}), ("rotary_neox_stream", {"PREFETCH": True}),
                            ("rotary_gptj_stream", {}), ("layer_norm", {"WARP_SUMS": True, "ONE_PASS": True}),
                            ("rotary_neox_rows", {}), ("rotary_neox_rows", dict(SPLIT=False, BHQ=32, THREADS=128)),
                            ("layer_norm", {"WARP_SUMS": True, "ONE_PASS": True, "EVEN": True}),
                            ("layer_norm_ring", {}), ("layer_norm_ring", dict(STAGES=2, BLOCK_N=1024)),
                            ("rotary_ring", {}), ("rotary_ring", dict(NEOX=False, THREADS=512)),
                            ("rotary_ring", dict(HALF=16, BHQ=4, BHK=2, THREADS=32, STAGES=2)),
                            ("rotary_ring", dict(CS_SMEM=True)), ("rotary_ring", dict(CS_SMEM=True, NEOX=False))])
def test_verifies_clean_and_fast(name, params):
    kernel = L.KERNELS[name][L.tp.bf16]
    kernel._cache.clear()
    t0 = time.perf_counter()
    report = tv.verify(kernel, **params)
    assert report.ok and not report.errors, str(report)
    # a hang guard, not a benchmark: the 2 s bar is measured by benchmarks/verify_speed.py (a timed test on a loaded
    # 2-core CI machine fails on load, not on the verifier)
    assert time.perf_counter() - t0 < 30
    assert report.stats["queries"] > 0


def test_broken_pairing_is_caught(tmp_path):
    """The neox kernel with its second half read one column off (x2 at j + 1 instead of j + HALF) fails its
    pairing assertion: the assertions are not vacuous."""
    import importlib.util
    from pathlib import Path

    src = Path(L.__file__).read_text()
    good = "x2 = tp.load(Q[t, hq0:hq0 + BHQ, HALF:HALF + BHALF], layout=lx)"
    assert good in src
    path = tmp_path / "broken_llm_ops.py"
    path.write_text(src.replace(good, "x2 = tp.load(Q[t, hq0:hq0 + BHQ, 1:1 + BHALF], layout=lx)"))
    spec = importlib.util.spec_from_file_location("broken_llm_ops", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    report = tv.verify(mod.rotary_neox)
    assert not report.ok
    assert any(f.check == "tag_assertion" and "x1 - x2" in str(f) for f in report.errors), str(report)


@pytest.mark.parametrize("kernel,good,bad", [
    ("rotary_neox_stream", "y2 = tp.load(K[t, 0:BHK, HALF:HALF + BHALF], layout=lkx)",
     "y2 = tp.load(K[t + 1, 0:BHK, HALF:HALF + BHALF], layout=lkx)"),                 # k's half of the next token
    ("rotary_neox_stream", "x2n = tp.load(Q[t + g, 0:BHQ, HALF:HALF + BHALF], layout=lx)",
     "x2n = tp.load(Q[t + g, 0:BHQ, 1:1 + BHALF], layout=lx)"),                     # PREFETCH: one column off
    ("rotary_gptj_stream", "y = tp.load(K[t, 0:BHK, 0:2 * BHALF], layout=lk).to(tp.f32)",
     "y = tp.load(K[t, 0:BHK, 1:1 + 2 * BHALF], layout=lk).to(tp.f32)"),           # pairs straddling two pairs
    ("rotary_neox_rows", "x = tp.load(Q[t, hq0:hq0 + BHQ, 0:2 * HALF], layout=lq).to(tp.f32)",
     "x = tp.load(Q[t, hq0:hq0 + BHQ, 1:1 + 2 * HALF], layout=lq).to(tp.f32)"),      # the window one column off
    ("rotary_neox_rows", "yp = tp.reshape(tp.sum(y3, axis=1, keepdims=True) - y3",
     "yp = tp.reshape(tp.sum(y3, axis=2, keepdims=True) - y3")])                     # summed along the half
def test_broken_stream_pairing_is_caught(tmp_path, kernel, good, bad):
    """The streaming kernels' pairing assertions are not vacuous: a seeded mis-pairing is reported."""
    import importlib.util
    from pathlib import Path

    src = Path(L.__file__).read_text()
    assert src.count(good) == 1
    path = tmp_path / "broken_stream.py"
    path.write_text(src.replace(good, bad))
    spec = importlib.util.spec_from_file_location("broken_stream", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    report = tv.verify(getattr(mod, kernel), **({"PREFETCH": True} if "x2n" in good else {}))
    assert not report.ok
    assert any(f.check == "tag_assertion" for f in report.errors), str(report)


@pytest.mark.parametrize("even", [True, False])
def test_layer_norm_mean_of_another_row_is_caught(tmp_path, even):
    """layer_norm's per-warp sums (WARP_SUMS) reading the next row's x for the mean fail the assertion that the
    mean and the variance read the output's row only: the reshape / convert_layout path keeps the tags."""
    import importlib.util
    from pathlib import Path

    src = Path(L.__file__).read_text()
    good = "ws = tp.sum(tp.reshape(x, (WARPS,"
    assert good in src
    path = tmp_path / "broken_ln.py"
    path.write_text(src.replace(good, "ws = tp.sum(tp.reshape(tp.load(X[row + 1, 0:BLOCK_N], layout=lay).to(tp.f32), "
                                      "(WARPS,"))
    spec = importlib.util.spec_from_file_location("broken_ln", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert tv.verify(L.layer_norm, EVEN=even, WARP_SUMS=True).ok
    report = tv.verify(mod.layer_norm, EVEN=even, WARP_SUMS=True)
    assert not report.ok
    mean_check = "t[0][0][0][1][0][1] == t[0][0][0][0][1]" if even else "t[0][0][0][1][1][0][1] == t[0][0][0][1][0][1]"
    assert [f.check for f in report.errors] == ["tag_assertion"] and mean_check in str(report.errors[0]), str(report)


@pytest.mark.parametrize("good,bad", [
    # GPT-J: the partner summed over the wrong axis (across the pairs of a row instead of within a pair)
    ("xp = tp.reshape(tp.sum(x3, axis=2, keepdims=True) - x3,",
     "xp = tp.reshape(tp.sum(x3, axis=1, keepdims=True) - x3,"),
])
def test_broken_gptj_pairing_is_caught(tmp_path, good, bad):
    import importlib.util
    from pathlib import Path

    src = Path(L.__file__).read_text()
    assert good in src
    path = tmp_path / "broken_gptj.py"
    path.write_text(src.replace(good, bad))
    spec = importlib.util.spec_from_file_location("broken_gptj", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    report = tv.verify(mod.rotary_gptj)
    assert not report.ok
    assert any(f.check == "tag_assertion" and "t[0][3] // 2 == t[1][3] // 2" in str(f) for f in report.errors), \
        str(report)


# ---------------------------------------------------------------- the register bound per block (min_blocks)
@pytest.mark.parametrize("name,params,dtype,bound", [
    ("layer_norm", dict(BLOCK_N=4096, EVEN=True), "bf16", 4),       # 512 threads: 4 blocks a SM
    ("layer_norm", dict(BLOCK_N=1024), "bf16", 16),                 # 128 threads
    ("fused_add_rmsnorm", dict(BLOCK_N=4096), "bf16", 4),
    ("fused_add_rmsnorm", dict(BLOCK_N=4096, MIN_BLOCKS=0), "bf16", 0),   # asked off
    ("layer_norm", dict(BLOCK_N=64), "bf16", 0),                    # short rows would spill: no bound
    ("layer_norm", dict(BLOCK_N=4096, ROWS=2), "bf16", 0),          # two rows' values a thread
    ("layer_norm", dict(BLOCK_N=16384), "bf16", 0),                 # 16 values a thread
    ("layer_norm", dict(BLOCK_N=4096), "f32", 0),                   # f32 tiles: twice the registers
])
def test_row_kernels_register_bound(name, params, dtype, bound):
    """`@tp.kernel(min_blocks=...)` renders CUDA's `__launch_bounds__(threads, min_blocks)` where the rule asks for
    one, never on gfx942 (HIP reads the second argument as waves per unit), and NVRTC then fits the row kernel
    in 32 registers without spilling (H100: layer_norm 76.6 -> 86.9%, fused_add_rmsnorm 96.5 -> 99.5% of copy)."""
    from tilepy_hip import build
    from tilepy_hip.render import render_kernel

    kernel = L.KERNELS[name][L.tp.bf16 if dtype == "bf16" else L.tp.f32]
    kir = kernel.ir("sm_90a", **params)
    assert kir.min_blocks == bound
    src = render_kernel(kir)[0]
    threads = kir.num_threads
    want = f"__launch_bounds__({threads}, {bound})" if bound else f"__launch_bounds__({threads})"
    assert want in src
    amd = render_kernel(kernel.ir("gfx942", **params))[0]
    assert f"__launch_bounds__({kernel.ir('gfx942', **params).num_threads})" in amd and ", 4)" not in amd
    if bound and build.nvidia_compiler() is not None:
        import tilepy_hip

        ck = tilepy_hip.compile(kernel, target="sm_90a", **params)
        regs = ck.resources
        assert regs["registers"] * threads * bound <= 65536 and regs["spill_stores"] == 0, regs


@pytest.mark.parametrize("rows", [1, 2])
@pytest.mark.parametrize("m,n", [(3, 1024), (5, 4096)])
def test_row_sums_per_warp(m, n, rows):
    """Rows of 8 values a thread sum per warp and exchange the warps' partials (WARP_SUMS):
    layer_norm and fused_add_rmsnorm equal float64 and the renderer's plain block sums (WARP_SUMS=False)."""
    g = torch.Generator().manual_seed(m * 7 + n + rows)
    x, r = torch.randn(m, n, generator=g) * 2 + 3, torch.randn(m, n, generator=g)
    w, b = torch.randn(n, generator=g), torch.randn(n, generator=g)
    outs = []
    for ws in (True, False):
        y = nan_like(x)
        L.launch_layer_norm(x, w, b, y, 1e-5, ROWS=rows, WARP_SUMS=ws)
        assert rel(y, L.ref_layer_norm(x, w, b, 1e-5)) < 1e-6
        y1 = nan_like(x)                    # one pass: both sums per warp before the exchanges
        L.launch_layer_norm(x, w, b, y1, 1e-5, ROWS=rows, WARP_SUMS=ws, ONE_PASS=True)
        assert rel(y1, L.ref_layer_norm(x, w, b, 1e-5)) < 1e-6
        y2, ro = nan_like(x), nan_like(x)
        L.launch_fused_add_rmsnorm(x, r, w, y2, ro, 1e-6, WARP_SUMS=ws)
        ref_y, ref_r = L.ref_fused_add_rmsnorm(x, r, w, 1e-6)
        assert rel(y2, ref_y) < 1e-6 and rel(ro, ref_r) < 1e-7
        outs.append((y, y2))
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- layer_norm_ring
@pytest.mark.parametrize("m,n,stages,bps", [(7, 1024, 3, 2), (9, 1024, 2, 1), (5, 2048, 4, 2), (3, 1024, 4, 4),
                                            (1, 4096, 3, 2)])
def test_layer_norm_ring(m, n, stages, bps, monkeypatch):
    """Rows through a ring of shared-memory buffers filled by bulk copies, each block looping over rows b, b + G,
    ... (the interpreter's 132 "SMs" patched down to 2: a grid smaller than the rows, the last round partial, and
    blocks past M with no row); against float64, with a mean far from 0."""
    monkeypatch.setattr(L, "_num_sms", lambda x: 2)
    g = torch.Generator().manual_seed(m * 13 + n + stages)
    x = (torch.randn(m, n, generator=g) * 3 + 5).to(torch.bfloat16)
    w, b = torch.randn(n, generator=g).to(torch.bfloat16), torch.randn(n, generator=g).to(torch.bfloat16)
    y = torch.full((m + 1, n), float("nan"), dtype=torch.bfloat16)
    L.launch_layer_norm_ring(x, w, b, y[:m], 1e-5, blocks_per_sm=bps, STAGES=stages)
    assert rel(y[:m], L.ref_layer_norm(x, w, b, 1e-5)) < TOL[torch.bfloat16]
    assert torch.isnan(y[m].float()).all()


def test_layer_norm_ring_refuses_other_rows():
    x = torch.zeros(4, 700, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="power of two 1024 .. 8192"):
        L.launch_layer_norm_ring(x, x[0], x[0], x.clone())
    with pytest.raises(ValueError, match="use launch_layer_norm"):
        L.launch_layer_norm_ring(torch.zeros(4, 1024), torch.zeros(1024), torch.zeros(1024), torch.zeros(4, 1024))


@pytest.mark.parametrize("good,bad,check", [
    # the copy one round too far ahead: the buffer holds another row
    ("tp.copy_bulk(X[row + (STAGES - 1) * g, 0:BLOCK_N]", "tp.copy_bulk(X[row + STAGES * g, 0:BLOCK_N]",
     "tag_assertion"),
    # the refill without waiting for the block to have read the buffer
    ("            if i >= 1:\n                tp.mbarrier_wait(empty[(i + STAGES - 1) % STAGES], (i - 1) // STAGES)\n",
     "", "pipeline_hazard"),
    # reading the next buffer
    ("x = tp.load(x_s[i % STAGES], layout=lay)", "x = tp.load(x_s[(i + 1) % STAGES], layout=lay)", "pipeline_hazard"),
])
def test_broken_layer_norm_ring_is_caught(tmp_path, good, bad, check):
    import importlib.util
    from pathlib import Path

    src = Path(L.__file__).read_text()
    assert src.count(good) == 1
    path = tmp_path / "broken_ring.py"
    path.write_text(src.replace(good, bad))
    spec = importlib.util.spec_from_file_location("broken_ring", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    report = tv.verify(mod.layer_norm_ring, BLOCK_N=1024, STAGES=3)
    assert any(f.check == check for f in report.errors), str(report)


# ---------------------------------------------------------------- rotary_ring
@pytest.mark.parametrize("cs_smem", [False, True])
@pytest.mark.parametrize("neox", [True, False])
@pytest.mark.parametrize("t,hq,hk,hs,rot,bps,threads,stages", [(7, 32, 8, 128, 128, 2, 256, 3),
                                                               (9, 6, 1, 64, 32, 1, 64, 2),
                                                               (5, 3, 3, 80, 16, 2, 32, 4),
                                                               (1, 2, 1, 64, 64, 2, 64, 3)])
def test_rotary_ring(neox, t, hq, hk, hs, rot, bps, threads, stages, cs_smem, monkeypatch):
    """rotary_ring: q / k of each token through shared-memory buffers filled by bulk tensor copies, a grid of
    fewer blocks than tokens (the interpreter's 132 "SMs" patched down to 2), odd head counts (the tiles' rows
    past the heads), partial rotary (columns past rot untouched); out of place and in place, against float64."""
    monkeypatch.setattr(L, "_num_sms", lambda x: 2)
    g = torch.Generator().manual_seed(t * 100 + hq * 10 + hs + rot + neox)
    pos = torch.randint(0, 40, (t,), generator=g)
    ang = torch.rand(40, rot // 2, generator=g, dtype=torch.float64) * 6.3
    cs = torch.cat([ang.cos(), ang.sin()], dim=1).float()
    q, k = torch.randn(t, hq * hs, generator=g).bfloat16(), torch.randn(t, hk * hs, generator=g).bfloat16()
    ref_q, ref_k = L.ref_rotary(pos, q, k, cs, hs, neox)
    qo, ko = torch.full_like(q, float("nan")), torch.full_like(k, float("nan"))
    L.launch_rotary_ring(pos, q, k, cs, hs, neox, q_out=qo, k_out=ko, blocks_per_sm=bps, THREADS=threads,
                         STAGES=stages, CS_SMEM=cs_smem)
    assert rel(qo.reshape(t, hq, hs)[..., :rot], ref_q.reshape(t, hq, hs)[..., :rot]) < TOL[torch.bfloat16]
    assert rel(ko.reshape(t, hk, hs)[..., :rot], ref_k.reshape(t, hk, hs)[..., :rot]) < TOL[torch.bfloat16]
    L.launch_rotary_ring(pos, q, k, cs, hs, neox, blocks_per_sm=bps, THREADS=threads, STAGES=stages,
                         CS_SMEM=cs_smem)                                        # in place
    assert rel(q, ref_q) < TOL[torch.bfloat16] and rel(k, ref_k) < TOL[torch.bfloat16]


def test_rotary_ring_refuses_what_it_cannot_copy():
    pos = torch.zeros(2, dtype=torch.int64)
    q = torch.zeros(2, 4 * 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="power-of-two rot_dim"):
        L.launch_rotary_ring(pos, q, q.clone(), torch.zeros(4, 48), 64)
    with pytest.raises(ValueError, match="contiguous q, k"):
        L.launch_rotary_ring(pos, torch.zeros(2, 8 * 64, dtype=torch.bfloat16)[:, ::2], q, torch.zeros(4, 64), 64)
    with pytest.raises(ValueError, match="bf16 q and k"):
        L.launch_rotary_ring(pos, q.float(), q.float(), torch.zeros(4, 64), 64)


@pytest.mark.parametrize("good,bad,check", [
    # the copy one round too far ahead: the buffer holds another token
    ("tp.copy_bulk(Q[t + (STAGES - 1) * g, 0:BHQ, 0:2 * HALF]", "tp.copy_bulk(Q[t + STAGES * g, 0:BHQ, 0:2 * HALF]",
     "tag_assertion"),
    # the neox partner summed within a half instead of across the halves
    ("qp = tp.reshape(tp.sum(qh, axis=1, keepdims=True) - qh,",
     "qp = tp.reshape(tp.sum(qh, axis=2, keepdims=True) - qh,",
     "tag_assertion"),
])
def test_broken_rotary_ring_is_caught(tmp_path, good, bad, check):
    import importlib.util
    from pathlib import Path

    src = Path(L.__file__).read_text()
    assert src.count(good) == 1
    path = tmp_path / "broken_rotary_ring.py"
    path.write_text(src.replace(good, bad))
    spec = importlib.util.spec_from_file_location("broken_rotary_ring", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    report = tv.verify(mod.rotary_ring)
    assert any(f.check == check for f in report.errors), str(report)
