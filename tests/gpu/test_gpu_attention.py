"""Forward attention (stdlib_kernels/attention.py) on a real GPU against float64 torch on fresh random inputs:
both head dims, causal and not, grouped-query attention, ragged sequence lengths (partial query and key
tiles, fewer keys than queries), and the log-sum-exp output; the error is compared with torch's own bf16 SDPA
on the same inputs. Outputs are poisoned with NaN first. Skips without a GPU."""

from __future__ import annotations

import math

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

from stdlib_kernels import attention  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


def reference(q, k, v, causal):
    """float64 (out, lse); q (BH, SQ, D), k, v (BHKV, SKV, D)."""
    g = q.shape[0] // k.shape[0]
    q, k, v = q.double(), k.double().repeat_interleave(g, 0), v.double().repeat_interleave(g, 0)
    s = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    if causal:
        i = torch.arange(s.shape[1], device=s.device)[:, None]
        j = torch.arange(s.shape[2], device=s.device)[None, :]
        s = s.masked_fill(j > i, float("-inf"))
    lse = torch.logsumexp(s, -1)
    return torch.exp(s - lse[..., None]) @ v, lse


def rel(x, ref):
    x = x.double()
    assert torch.isfinite(x).all(), "non-finite or unwritten output"
    return float((x - ref).norm() / ref.norm())


CASES = [  # batch, heads, kv heads, sq, skv, d, causal
    (2, 4, 4, 1024, 1024, 128, False),
    (2, 4, 4, 1024, 1024, 128, True),
    (2, 8, 8, 2048, 2048, 64, True),
    (1, 8, 2, 1000, 1000, 128, True),     # GQA 4:1, ragged
    (1, 6, 3, 777, 1531, 64, False),      # GQA 2:1, keys end mid-tile, queries too
    (3, 2, 1, 129, 65, 128, False),       # one row past a block, one key past a tile
    (1, 4, 4, 300, 200, 64, True),        # causal with fewer keys than queries
    (1, 2, 2, 4096, 4096, 128, True),
]


@pytest.mark.parametrize("b,h,hkv,sq,sk,d,causal", CASES)
def test_attention_matches_float64(b, h, hkv, sq, sk, d, causal):
    g = torch.Generator(device=DEV).manual_seed(b * 1000 + sq + sk + d + causal)
    q = torch.randn(b * h, sq, d, device=DEV, generator=g).bfloat16()
    k = torch.randn(b * hkv, sk, d, device=DEV, generator=g).bfloat16()
    v = torch.randn(b * hkv, sk, d, device=DEV, generator=g).bfloat16()
    o = torch.full_like(q, float("nan"))
    lse = torch.full((b * h, sq), float("nan"), device=DEV)
    attention.launch(q, k, v, o, lse, causal=causal)
    torch.cuda.synchronize()
    ref_o, ref_lse = reference(q, k, v, causal)
    err = rel(o, ref_o)
    assert err < 5e-3, err
    assert float((lse.double() - ref_lse).abs().max()) < 1e-4 * max(1.0, float(ref_lse.abs().max()))
    # torch's own bf16 attention on the same inputs lands in the same place (within 2x)
    qt, kt, vt = (x.view(b, -1, x.shape[1], d) for x in (q, k, v))
    try:
        ot = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=h != hkv)
    except RuntimeError:
        return
    if sq == sk or not causal:  # torch's causal mask for sq != sk is the same top-left one; compare anyway
        assert err < 2 * rel(ot.reshape(o.shape), ref_o) + 1e-3


def test_repeated_runs_agree():
    """The same inputs give the same bits every time (a race would move them)."""
    g = torch.Generator(device=DEV).manual_seed(7)
    q = torch.randn(16, 1024, 128, device=DEV, generator=g).bfloat16()
    k = torch.randn(16, 1024, 128, device=DEV, generator=g).bfloat16()
    v = torch.randn(16, 1024, 128, device=DEV, generator=g).bfloat16()
    outs = []
    for _ in range(3):
        o = torch.full_like(q, float("nan"))
        lse = torch.empty(16, 1024, device=DEV)
        attention.launch(q, k, v, o, lse, causal=True)
        outs.append(o)
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


def reference_decode(q, k, v, causal):
    """float64 (out, lse) of qlen new tokens that are the cache's last qlen positions."""
    g = q.shape[0] // k.shape[0]
    q, k, v = q.double(), k.double().repeat_interleave(g, 0), v.double().repeat_interleave(g, 0)
    s = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    if causal:
        qlen, skv = s.shape[1:]
        i = torch.arange(qlen, device=s.device)[:, None]
        j = torch.arange(skv, device=s.device)[None, :]
        s = s.masked_fill(j > skv - qlen + i, float("-inf"))
    lse = torch.logsumexp(s, -1)
    return torch.exp(s - lse[..., None]) @ v, lse


@pytest.mark.parametrize("b,h,hkv,qlen,skv,d,causal", [
    (4, 32, 8, 1, 8192, 128, False),     # one new token, GQA 4:1, long cache
    (2, 8, 2, 4, 3001, 64, True),        # four new tokens, ragged cache
    (16, 32, 8, 1, 4100, 128, False),    # 128 KV heads fill the SMs: one split, bf16 output written directly
    (33, 8, 4, 4, 1000, 64, True),       # 132 KV heads, four new tokens, causal: one split
])
def test_split_kv_decode_matches_float64(b, h, hkv, qlen, skv, d, causal):
    g = torch.Generator(device=DEV).manual_seed(qlen * 100 + skv)
    q = torch.randn(b * h, qlen, d, device=DEV, generator=g).bfloat16()
    k = torch.randn(b * hkv, skv, d, device=DEV, generator=g).bfloat16()
    v = torch.randn(b * hkv, skv, d, device=DEV, generator=g).bfloat16()
    o = torch.full_like(q, float("nan"))
    lse = torch.full((b * h, qlen), float("nan"), device=DEV)
    attention.decode(q, k, v, o, lse, causal=causal)
    torch.cuda.synchronize()
    ref_o, ref_lse = reference_decode(q, k, v, causal)
    assert rel(o, ref_o) < 5e-3
    assert float((lse.double() - ref_lse).abs().max()) < 1e-4 * max(1.0, float(ref_lse.abs().max()))


@pytest.mark.parametrize("splits,d", [(4, 128), (3, 64), (8, 128)])
def test_decode_merge_with_empty_splits(splits, d):
    """Causal, four new tokens, 385 keys in `splits` splits of whole 128-key tiles: the last split holds key 384
    alone, which the first three new tokens do not see (their partial there is empty: lse -inf, weight 0); the
    merge loads every split at once (merge_params)."""
    g = torch.Generator(device=DEV).manual_seed(splits * 10 + d)
    b, h, hkv, qlen, skv = 3, 8, 2, 4, 128 * (splits - 1) + 1
    q = torch.randn(b * h, qlen, d, device=DEV, generator=g).bfloat16()
    k = torch.randn(b * hkv, skv, d, device=DEV, generator=g).bfloat16()
    v = torch.randn(b * hkv, skv, d, device=DEV, generator=g).bfloat16()
    o = torch.full_like(q, float("nan"))
    lse = torch.full((b * h, qlen), float("nan"), device=DEV)
    _, lse_parts = attention.decode(q, k, v, o, lse, causal=True, splits=splits)
    torch.cuda.synchronize()
    assert lse_parts.shape[0] == splits and torch.isneginf(lse_parts[-1, :, 0]).all()
    ref_o, ref_lse = reference_decode(q, k, v, True)
    assert rel(o, ref_o) < 5e-3
    assert float((lse.double() - ref_lse).abs().max()) < 1e-4 * max(1.0, float(ref_lse.abs().max()))


@pytest.mark.parametrize("causal", [False, True])
def test_one_tile_at_a_time_variant_matches_float64(causal):
    """PIPELINE=False (the ablation's step before the FA3 overlap) computes the same function."""
    g = torch.Generator(device=DEV).manual_seed(11 + causal)
    q = torch.randn(8, 1000, 128, device=DEV, generator=g).bfloat16()
    k = torch.randn(8, 1000, 128, device=DEV, generator=g).bfloat16()
    v = torch.randn(8, 1000, 128, device=DEV, generator=g).bfloat16()
    o = torch.full_like(q, float("nan"))
    lse = torch.empty(8, 1000, device=DEV)
    attention.launch(q, k, v, o, lse, causal=causal, PIPELINE=False)
    torch.cuda.synchronize()
    assert rel(o, reference(q, k, v, causal)[0]) < 5e-3


VARIANTS = [  # the policy table's alternatives (benchmarks/attention.py --sweep), each on ragged shapes
    (64, dict(attention.THREE_CONSUMERS)),
    (64, {**attention.THREE_CONSUMERS, "PIPELINE": True}),
    (64, dict(BN=256, STAGES=3)),
    (128, dict(BN=64, STAGES=4)),
    (128, dict(STAGES=2)),
    (64, dict(PAIRED=True, PIPELINE=False)),                       # two row blocks a CTA through one ring
    (64, dict(attention.THREE_CONSUMERS, PAIRED=True)),
    (128, dict(PAIRED=True, PIPELINE=False, STAGES=2)),
]


@pytest.mark.parametrize("d,cfg", VARIANTS)
@pytest.mark.parametrize("b,h,hkv,sq,sk,causal", [(1, 6, 3, 777, 1531, False), (1, 4, 2, 1000, 1000, True),
                                                   (1, 2, 2, 300, 200, True)])
def test_policy_variants_match_float64(d, cfg, b, h, hkv, sq, sk, causal):
    g = torch.Generator(device=DEV).manual_seed(d + sq + sk + causal + len(cfg))
    q = torch.randn(b * h, sq, d, device=DEV, generator=g).bfloat16()
    k = torch.randn(b * hkv, sk, d, device=DEV, generator=g).bfloat16()
    v = torch.randn(b * hkv, sk, d, device=DEV, generator=g).bfloat16()
    o = torch.full_like(q, float("nan"))
    lse = torch.full((b * h, sq), float("nan"), device=DEV)
    attention.launch(q, k, v, o, lse, causal=causal, **cfg)
    torch.cuda.synchronize()
    ref_o, ref_lse = reference(q, k, v, causal)
    assert rel(o, ref_o) < 5e-3
    assert float((lse.double() - ref_lse).abs().max()) < 1e-4 * max(1.0, float(ref_lse.abs().max()))


def test_launch_follows_the_policy_table():
    """launch() with no constexprs runs policy(d, sq, causal): same bits as passing those constexprs."""
    g = torch.Generator(device=DEV).manual_seed(5)
    q = torch.randn(4, 512, 64, device=DEV, generator=g).bfloat16()
    k = torch.randn(4, 512, 64, device=DEV, generator=g).bfloat16()
    v = torch.randn(4, 512, 64, device=DEV, generator=g).bfloat16()
    outs = []
    for extra in ({}, attention.policy(64, 512, True)):
        o = torch.full_like(q, float("nan"))
        lse = torch.empty(4, 512, device=DEV)
        attention.launch(q, k, v, o, lse, causal=True, **extra)
        outs.append(o)
    assert torch.equal(outs[0], outs[1])


def test_unaligned_inputs_take_the_fallback_build_and_tma_only_refuses_them():
    """launch builds the TMA-only kernel for contiguous, aligned tensors and the fallback build otherwise (a
    query tensor 2 bytes past an aligned base); forcing FALLBACK=False on it is a clear error, not a launch."""
    from tilepy_hip.tensor_map import TensorMapRefused

    g = torch.Generator(device="cuda").manual_seed(5)
    bh, s, d = 4, 200, 128
    q = torch.randn(bh * s * d + 1, device=DEV, generator=g).bfloat16()[1:].view(bh, s, d)
    k = torch.randn(bh, s, d, device=DEV, generator=g).bfloat16()
    v = torch.randn(bh, s, d, device=DEV, generator=g).bfloat16()
    assert attention.needs_fallback(q, k, v) and not attention.needs_fallback(k, v)
    o = torch.full((bh, s, d), float("nan"), device=DEV, dtype=torch.bfloat16)
    lse = torch.empty(bh, s, device=DEV)
    attention.launch(q, k, v, o, lse)
    torch.cuda.synchronize()
    ref, _ = reference(q, k, v, False)
    assert rel(o, ref) < 5e-3
    with pytest.raises(TensorMapRefused, match="tensor 'Q'"):
        attention.launch(q, k, v, o, lse, **{**attention.policy(d, s, False), "FALLBACK": False})
