"""Forward attention (stdlib_kernels/attention.py) and wgmma with A in registers on the CPU interpreter, against
float64 numpy: ragged sequence lengths (partial query and key tiles), causal and not, grouped-query attention,
both head dims; the log-sum-exp output; the verifier's proof of the kernel's operand pairings; register-A
wgmma on its own (exact against numpy, a mislaid fragment caught by the interpreter's numbers and the
verifier), and its rendering. Outputs are poisoned with NaN first."""

import numpy as np
import pytest

import tilepy as tp
from stdlib_kernels import attention
from tilepy.dtypes import round_bf16


def _bf16(rng, shape, scale=1.0):
    return round_bf16((rng.standard_normal(shape) * scale).astype(np.float32))


def _run(bh, bhkv, sq, sk, d, causal, seed, **constexprs):
    rng = np.random.default_rng(seed)
    q, k, v = _bf16(rng, (bh, sq, d)), _bf16(rng, (bhkv, sk, d)), _bf16(rng, (bhkv, sk, d))
    o = np.full((bh, sq, d), np.nan, np.float32)
    lse = np.full((bh, sq), np.nan, np.float32)
    attention.launch(q, k, v, o, lse, causal=causal, **constexprs)
    ref_o, ref_lse = attention.reference(q, k, v, causal)
    assert not np.isnan(o).any() and not np.isnan(lse).any(), "some output element was never written"
    np.testing.assert_array_equal(o, round_bf16(o))  # the epilogue stores bf16
    return o, lse, ref_o, ref_lse


def _rel(x, ref):
    return float(np.linalg.norm(np.asarray(x, np.float64) - ref) / np.linalg.norm(ref))


# bf16 P (the PV operand) and the bf16 output each round at 2^-9 relative: the error sits near 2e-3; fp32
# statistics keep the log-sum-exp within a few fp32 ulps of a sum of SKV terms.
CASES = [
    # bh, bhkv, sq, sk, d, causal, constexprs
    (2, 1, 100, 150, 64, False, dict(BN=64, STAGES=2, CONSUMERS=1)),   # GQA 2:1, ragged tiles, 3 key tiles
    (2, 1, 100, 150, 64, True, dict(BN=64, STAGES=2, CONSUMERS=1)),
    (4, 2, 130, 130, 128, True, dict(BN=64, STAGES=2)),                 # one row past a 128-row block
    (2, 2, 200, 333, 128, False, dict(STAGES=3)),                        # stages reused, keys end mid-tile
    (2, 1, 257, 257, 64, True, {}),                                      # the D=64 preset, diagonal tiles
    (1, 1, 70, 20, 128, True, dict(BN=64)),                              # fewer keys than query rows
    (2, 1, 200, 333, 64, True, dict(attention.THREE_CONSUMERS)),         # 192-row blocks, 512 threads
    (2, 2, 257, 300, 64, False, dict(attention.THREE_CONSUMERS)),
    # PAIRED: row blocks mb_a = m - 1 - pb then mb_b = pb through one ring
    (1, 1, 450, 450, 64, True, dict(PAIRED=True, PIPELINE=False)),          # 4 row blocks: two pairs
    (2, 2, 257, 257, 64, True, dict(PAIRED=True, PIPELINE=False)),          # 3: the middle block alone
    (2, 1, 300, 300, 64, True, dict(PAIRED=True, PIPELINE=False, BN=64, STAGES=2)),   # GQA, parts wrap the ring
    (2, 1, 200, 333, 64, False, dict(PAIRED=True, PIPELINE=False)),
    (1, 1, 200, 100, 64, True, dict(PAIRED=True, PIPELINE=False, BN=64, STAGES=2)),   # fewer keys than rows
    (2, 1, 200, 200, 64, True, dict(attention.THREE_CONSUMERS, PAIRED=True)),
    (2, 2, 130, 140, 128, True, dict(PAIRED=True, PIPELINE=False, STAGES=2)),
]


@pytest.mark.parametrize("bh,bhkv,sq,sk,d,causal,cfg", CASES)
def test_attention_on_the_interpreter(bh, bhkv, sq, sk, d, causal, cfg):
    o, lse, ref_o, ref_lse = _run(bh, bhkv, sq, sk, d, causal, seed=sq * 7 + sk + d, **cfg)
    assert _rel(o, ref_o) < 4e-3
    assert np.abs(lse - ref_lse).max() < 1e-5 * max(1.0, np.abs(ref_lse).max())


def test_large_scores_keep_the_softmax_stable():
    """Scores of several hundred: without the running max, exp overflows; with a wrong rescale the rows that
    meet their max late go wrong."""
    rng = np.random.default_rng(4)
    q = _bf16(rng, (1, 64, 64), 4.0)
    k = _bf16(rng, (1, 300, 64), 4.0)
    v = _bf16(rng, (1, 300, 64))
    k[0, 250] = round_bf16(q[0, 5] * 3)  # row 5's maximum arrives in the last key tile
    o = np.full((1, 64, 64), np.nan, np.float32)
    lse = np.full((1, 64), np.nan, np.float32)
    attention.launch(q, k, v, o, lse, BN=64, STAGES=2, CONSUMERS=1)
    ref_o, ref_lse = attention.reference(q, k, v)
    assert ref_lse.max() > 100
    assert _rel(o, ref_o) < 4e-3
    assert np.abs(lse - ref_lse).max() < 1e-5 * np.abs(ref_lse).max()


def test_gqa_heads_read_their_own_kv_head():
    """4 query heads on 2 KV heads: heads 0, 1 read KV 0 and heads 2, 3 read KV 1 (as torch's enable_gqa)."""
    rng = np.random.default_rng(9)
    q = _bf16(rng, (4, 64, 64))
    k, v = _bf16(rng, (2, 64, 64)), _bf16(rng, (2, 64, 64))
    o = np.full((4, 64, 64), np.nan, np.float32)
    lse = np.full((4, 64), np.nan, np.float32)
    attention.launch(q, k, v, o, lse, BN=64, CONSUMERS=1)
    for h in range(4):
        ref, _ = attention.reference(q[h:h + 1], k[h // 2:h // 2 + 1], v[h // 2:h // 2 + 1])
        assert _rel(o[h:h + 1], ref) < 4e-3
        other, _ = attention.reference(q[h:h + 1], k[1 - h // 2:2 - h // 2], v[1 - h // 2:2 - h // 2])
        assert _rel(o[h:h + 1], other) > 0.1


def test_bad_arguments_are_named():
    q = np.zeros((3, 64, 64), np.float32)
    k = np.zeros((2, 64, 64), np.float32)
    with pytest.raises(ValueError, match="multiple of KV heads"):
        attention.launch(q, k, k, q.copy(), np.zeros((3, 64), np.float32))
    with pytest.raises(ValueError, match="PAIRED runs one key tile at a time"):
        attention.launch(k, k, k, k.copy(), np.zeros((2, 64), np.float32), PAIRED=True)
    q96 = np.zeros((2, 64, 96), np.float32)
    with pytest.raises(ValueError, match="head dim 96"):
        attention.launch(q96, q96, q96, q96.copy(), np.zeros((2, 64), np.float32))


@pytest.mark.parametrize("cfg", [dict(attention.PRESETS[128], CAUSAL=False),
                                 dict(attention.PRESETS[64], CAUSAL=True, GROUP=4),
                                 dict(attention.policy(64, 4096, True), GROUP=2),
                                 dict(attention.PRESETS[64], CAUSAL=True, PIPELINE=False, PAIRED=True, GROUP=2),
                                 dict(attention.PRESETS[128], CAUSAL=False, PIPELINE=False, PAIRED=True, STAGES=2)])
def test_verifier_proves_the_operand_pairings(cfg):
    tilepy_verify = pytest.importorskip("tilepy_verify")
    rep = tilepy_verify.verify(attention.attention_fwd, target="sm_90a", **cfg)  # its time: verify_speed.py
    assert not rep.errors, str(rep)
    assert {"tag_assertion", "deadlock", "pipeline_hazard"} <= set(rep.checks)


# --------------------------------------------------------------------------- wgmma with A in registers
RS = tp.nv.wgmma_m64n64k16_bf16_rs
SS = tp.nv.wgmma_m64n64k16_bf16
WRONG_LAYOUT = tp.blocked((64, 32), 128, vec=2)  # 16 values per thread, as the fragment, elsewhere


@tp.kernel(threads=128, target="sm_90a")
def rs_product(A: tp.Tensor[tp.bf16, 64, 32], B: tp.Tensor[tp.bf16, 32, 64], C: tp.Tensor[tp.f32, 64, 64],
               WRONG: tp.constexpr = False):
    b_s = tp.shared((32, 64), tp.bf16, swizzle=tp.Swizzle(3, 3, 3))
    tp.copy(B[0:32, 0:64], b_s)
    tp.barrier()
    a = tp.load(A[0:64, 0:32], layout=WRONG_LAYOUT if WRONG else tp.mma_layout(RS, "a", (64, 32)))
    acc = tp.zeros((64, 64), tp.f32, layout=tp.accumulator(RS, (64, 64)))
    tp.store(C[0:64, 0:64], tp.mma(a, b_s, acc))


@tp.kernel(threads=128, target="sm_90a")
def chained(A: tp.Tensor[tp.bf16, 64, 16], B: tp.Tensor[tp.bf16, 16, 32], D: tp.Tensor[tp.bf16, 32, 64],
            C: tp.Tensor[tp.f32, 64, 64]):
    """(A @ B) cast to bf16 feeds the next product as a register A, with no layout conversion: the
    accumulator's 8-column chunks are the A fragment's registers (the attention P @ V step)."""
    a_s = tp.shared((64, 16), tp.bf16, swizzle=tp.Swizzle(1, 3, 3))
    b_s = tp.shared((16, 32), tp.bf16, swizzle=tp.Swizzle(2, 3, 3))
    d_s = tp.shared((32, 64), tp.bf16, swizzle=tp.Swizzle(3, 3, 3))
    tp.copy(A[0:64, 0:16], a_s)
    tp.copy(B[0:16, 0:32], b_s)
    tp.copy(D[0:32, 0:64], d_s)
    tp.barrier()
    s = tp.mma(a_s, b_s, tp.zeros((64, 32), tp.f32, layout=tp.accumulator(tp.nv.wgmma_m64n32k16_bf16, (64, 32))))
    acc = tp.zeros((64, 64), tp.f32, layout=tp.accumulator(RS, (64, 64)))
    tp.store(C[0:64, 0:64], tp.mma(s.to(tp.bf16), d_s, acc))


def _ints(rng, shape):
    return rng.integers(-4, 5, shape).astype(np.float32)  # exact in bf16 and in every f32 sum here


def test_register_a_wgmma_is_exact():
    rng = np.random.default_rng(0)
    a, b = _ints(rng, (64, 32)), _ints(rng, (32, 64))
    c = np.full((64, 64), np.nan, np.float32)
    rs_product[(1,)](a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.float64) @ b)


def test_accumulator_feeds_register_a_without_conversion():
    rng = np.random.default_rng(1)
    a, b, d = _ints(rng, (64, 16)), _ints(rng, (16, 32)), _ints(rng, (32, 64))
    c = np.full((64, 64), np.nan, np.float32)
    chained[(1,)](a, b, d, c)
    s = a.astype(np.float64) @ b
    np.testing.assert_array_equal(c, round_bf16(s.astype(np.float32)).astype(np.float64) @ d)


def test_mislaid_register_a_gives_wrong_numbers_and_a_finding():
    """A register A in another layout with as many values per thread is reinterpreted as the hardware would:
    the product is wrong, and the verifier's mma_layout check names the slot."""
    rng = np.random.default_rng(2)
    a, b = _ints(rng, (64, 32)), _ints(rng, (32, 64))
    c = np.full((64, 64), np.nan, np.float32)
    rs_product[(1,)](a, b, c, WRONG=True)
    assert np.abs(c - a.astype(np.float64) @ b).max() > 1
    tilepy_verify = pytest.importorskip("tilepy_verify")
    rep = tilepy_verify.verify(rs_product, target="sm_90a", WRONG=True)
    assert any(f.check == "mma_layout" for f in rep.errors), str(rep)
    assert not tilepy_verify.verify(rs_product, target="sm_90a").errors


def test_register_a_needs_the_rs_instruction_and_shared_b():
    @tp.kernel(threads=128, target="sm_90a")
    def ss_with_regs(A: tp.Tensor[tp.bf16, 64, 16], B: tp.Tensor[tp.bf16, 16, 64], C: tp.Tensor[tp.f32, 64, 64]):
        b_s = tp.shared((16, 64), tp.bf16, swizzle=tp.Swizzle(3, 3, 3))
        a = tp.load(A[0:64, 0:16], layout=tp.mma_layout(RS, "a", (64, 16)))
        acc = tp.zeros((64, 64), tp.f32, layout=tp.accumulator(SS, (64, 64)))
        tp.store(C[0:64, 0:64], tp.mma(a, b_s, acc))

    with pytest.raises(tp.KernelTypeError, match="_rs"):
        ss_with_regs.ir()


def test_register_a_renders_as_wgmma_with_a_registers():
    import tilepy_hip

    src = tilepy_hip.render(chained.ir())
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" in src
    line = next(x for x in src.splitlines() if "m64n64k16" in x)
    assert "{%32, %33, %34, %35}, %36" in line  # 32 accumulators, then four A registers, then B's descriptor
    # the fragments are packed before the fence, so the wgmmas of one product issue back to back
    body = src[src.index("tp_wgmma_fence();", src.index("tp_pack2")) - 2000:]
    assert body.index("tp_pack2") < body.index("tp_wgmma_fence();")


# --------------------------------------------------------------------------- split-KV decoding
DECODE_CASES = [
    # bh, bhkv, qlen, skv, d, causal, splits
    (4, 1, 1, 300, 64, False, 3),       # GQA 4:1, one token, keys end mid-tile
    (8, 2, 4, 1000, 128, True, 4),      # 4 new tokens, bottom-right causal
    (2, 1, 16, 1030, 64, True, 9),      # the last split holds keys 1024..1029: positions < 10 see none
    (8, 1, 16, 700, 64, False, None),   # 128 packed rows: two consumer warpgroups; default split count
    (16, 1, 9, 300, 128, True, 2),      # 144 packed rows: two row blocks
    (4, 2, 3, 500, 64, True, 1),        # one split: the kernel writes o and lse itself (no merge)
    (4, 1, 4, 1300, 64, True, 2),       # d 64, one warpgroup: 256-key tiles (decode_ring), the last one ragged
]


@pytest.mark.parametrize("bh,bhkv,qlen,skv,d,causal,splits", DECODE_CASES)
def test_split_kv_decode_on_the_interpreter(bh, bhkv, qlen, skv, d, causal, splits):
    rng = np.random.default_rng(bh * 100 + qlen + skv)
    q, k, v = _bf16(rng, (bh, qlen, d)), _bf16(rng, (bhkv, skv, d)), _bf16(rng, (bhkv, skv, d))
    o = np.full((bh, qlen, d), np.nan, np.float32)
    lse = np.full((bh, qlen), np.nan, np.float32)
    o_parts, lse_parts = attention.decode(q, k, v, o, lse, causal=causal, splits=splits)
    ref_o, ref_lse = attention.reference_decode(q, k, v, causal)
    assert not np.isnan(o).any() and not np.isnan(lse).any()
    assert _rel(o, ref_o) < 4e-3
    assert np.abs(lse - ref_lse).max() < 1e-5 * max(1.0, np.abs(ref_lse).max())
    assert o_parts.shape[0] == (splits or o_parts.shape[0]) and not np.isnan(o_parts).any()
    if skv == 1030:  # position p sees keys <= 1014 + p: none of the last split's below p = 10
        assert np.isneginf(lse_parts[-1, 0, :10]).all() and (o_parts[-1, 0, :10] == 0).all()
        assert np.isfinite(lse_parts[-1, 0, 10:16]).all()


def test_one_split_writes_bf16_output_directly():
    """splits == 1 on bf16 tensors: attention_decode_bf16 stores the normalized output (rounded once to bf16)
    and the LSE straight into o and lse; no partials, no merge. Against float64."""
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(*s, generator=g).bfloat16() for s in ((8, 2, 64), (2, 333, 64), (2, 333, 64)))
    o = torch.full_like(q, float("nan"))
    lse = torch.full((8, 2), float("nan"))
    o_parts, lse_parts = attention.decode(q, k, v, o, lse, causal=True, splits=1)
    assert o_parts.shape == (1, 2, 8, 64) and o_parts.data_ptr() == o.data_ptr()
    ref_o, ref_lse = attention.reference_decode(q.float().numpy(), k.float().numpy(), v.float().numpy(), True)
    assert _rel(o.double().numpy(), ref_o) < 4e-3
    assert np.abs(lse.double().numpy() - ref_lse).max() < 1e-5 * max(1.0, np.abs(ref_lse).max())


def test_decode_refuses_a_strided_output():
    """o is written through a reshaped view: a non-contiguous o would be silently left unwritten, so it is
    refused with the fix named."""
    q, k, v = (np.zeros(s, np.float32) for s in ((4, 1, 64), (1, 128, 64), (1, 128, 64)))
    o = np.zeros((4, 2, 64), np.float32)[:, :1]
    with pytest.raises(ValueError, match="`o` in place.*contiguous"):
        attention.decode(q, k, v, o, np.zeros((4, 1), np.float32), splits=1)


@pytest.mark.parametrize("bhkv,rows,skv,d,want", [
    (128, 4, 8192, 128, 1),      # 16 x 8 KV heads: the heads fill 128 of 132 SMs, one split, no merge
    (32, 4, 32768, 128, 4),      # 4 x 8 KV heads: 4 splits of 64 tiles, 128 blocks in one wave
    (8, 16, 500, 64, 4),         # short cache: no more splits than key tiles
    (200, 4, 8192, 128, 1),      # more heads than SMs: whole heads, no split
    (40, 128, 9000, 64, 3),      # 128 packed rows in one block (two consumer warpgroups): 40 x 3 = 120 blocks
    (40, 144, 9000, 64, 1),      # 144 packed rows: two row blocks a head, 80 blocks: one split
])
def test_decode_splits_fill_one_wave(bhkv, rows, skv, d, want):
    got = attention.decode_splits(bhkv, rows, skv, d, 132)
    m_blocks = -(-rows // (64 * (1 if rows <= 64 else 2)))
    assert bhkv * m_blocks * got <= 132 or got == 1
    assert got <= -(-skv // 128)
    assert got == want


@pytest.mark.parametrize("d,rows,skv,splits,want", [
    (64, 4, 16384, 2, (256, 2)),     # the H100 decode row: 256-key tiles in 2 stages
    (64, 128, 16384, 2, (128, 4)),   # two consumer warpgroups: 128-key tiles
    (64, 16, 1030, 9, (128, 4)),     # fewer 256-key tiles than splits: keep the finer split
    (128, 4, 16384, 2, (128, 3)),    # d 128: 128-key tiles in 3 stages
])
def test_decode_ring(d, rows, skv, splits, want):
    bn, stages = attention.decode_ring(d, rows, skv, splits)
    assert (bn, stages) == want
    assert -(-skv // bn) >= splits or bn == 128


def test_merge_weighs_each_split_by_its_share():
    """Two splits of one row, by hand: O = (e^l0 O0 + e^l1 O1) / (e^l0 + e^l1), lse = log(e^l0 + e^l1)."""
    o_parts = np.zeros((2, 1, 16, 128), np.float32)
    o_parts[0, 0, 0], o_parts[1, 0, 0] = 1.0, 3.0
    lse_parts = np.full((2, 1, 16), -np.inf, np.float32)
    lse_parts[:, 0, 1:] = 0.0
    lse_parts[0, 0, 0], lse_parts[1, 0, 0] = 2.0, 2.0 + np.log(3.0)
    o = np.full((1, 16, 128), np.nan, np.float32)
    lse = np.full((1, 16), np.nan, np.float32)
    attention.attention_merge[(1, 1)](o_parts, lse_parts, o, lse)
    np.testing.assert_allclose(o[0, 0], (1.0 + 3 * 3.0) / 4, rtol=2**-8)
    np.testing.assert_allclose(lse[0, 0], 2.0 + np.log(4.0), rtol=1e-6)
    assert (o[0, 1:] == 0).all() and np.allclose(lse[0, 1:], np.log(2.0))


@pytest.mark.parametrize("splits,rows,d", [(4, 4, 128), (3, 5, 64), (2, 20, 128), (8, 4, 64), (1, 3, 128)])
def test_merge_all_splits_at_once(splits, rows, d):
    """merge_params' form (every split loaded as one (SPLITS, BR, D) tile; splits past NS read as empty) against
    float64 and against the run-time loops, with an empty split, a row whose splits are all empty, ragged rows."""
    rng = np.random.default_rng(splits * 100 + rows)
    bhkv = 3
    o_parts = rng.standard_normal((splits, bhkv, rows, d)).astype(np.float32)
    lse_parts = (rng.standard_normal((splits, bhkv, rows)) * 3).astype(np.float32)
    lse_parts[0, 0, 0] = -np.inf                      # one empty split of one row
    lse_parts[:, 1, rows - 1] = -np.inf               # every split of a row empty: o 0, lse -inf
    mp = attention.merge_params(splits, rows, d)
    assert mp["SPLITS"] >= splits and mp["BR"] * d >= 512
    outs = []
    for grid, cfg in (((bhkv, -(-rows // mp["BR"])), mp), ((bhkv, -(-rows // 16)), dict(HEAD_DIM=d))):
        o = np.full((bhkv, rows, d), np.nan, np.float32)
        lse = np.full((bhkv, rows), np.nan, np.float32)
        attention.attention_merge[grid](o_parts, lse_parts, o, lse, **cfg)
        outs.append((o, lse))
    lp = lse_parts.astype(np.float64)
    m = np.max(lp, axis=0)
    m = np.where(np.isinf(m), 0.0, m)
    w = np.exp(lp - m)
    den = w.sum(0)
    ref = (w[..., None] * o_parts).sum(0) / np.where(den > 0, den, 1.0)[..., None]
    with np.errstate(divide="ignore"):
        ref_lse = m + np.log(den)
    for o, lse in outs:
        assert np.linalg.norm(o - ref) / np.linalg.norm(ref) < 4e-3          # bf16 output
        assert (o[1, rows - 1] == 0).all() and np.isneginf(lse[1, rows - 1])
        np.testing.assert_allclose(lse, ref_lse, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(outs[0][1], outs[1][1])


@pytest.mark.parametrize("kernel,cfg", [(attention.attention_decode, dict(HEAD_DIM=128, STAGES=3, QLEN=4, CAUSAL=True)),
                                        (attention.attention_decode_bf16, dict(HEAD_DIM=128, STAGES=3, QLEN=1)),
                                        (attention.attention_merge, {}),
                                        (attention.attention_merge, attention.merge_params(4, 4, 128)),
                                        (attention.attention_merge, attention.merge_params(3, 20, 64)),
                                        (attention.attention_decode, dict(HEAD_DIM=64, STAGES=6, QLEN=1)),
                                        (attention.attention_decode, dict(HEAD_DIM=64, BN=256, STAGES=2, QLEN=4,
                                                                          CAUSAL=True))])
def test_verifier_proves_decode(kernel, cfg):
    tilepy_verify = pytest.importorskip("tilepy_verify")
    rep = tilepy_verify.verify(kernel, target="sm_90a", **cfg)
    assert not rep.errors, str(rep)


def test_ablation_baseline_computes_attention():
    """The ablation's first step (benchmarks/ablation_attention.py: mma.sync fragments straight from global
    memory) computes the same function on ragged sizes."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import ablation_attention

    rng = np.random.default_rng(12)
    q, k, v = _bf16(rng, (2, 100, 64)), _bf16(rng, (1, 150, 64)), _bf16(rng, (1, 150, 64))
    o = np.full((2, 100, 64), np.nan, np.float32)
    ablation_attention.launch_naive(q, k, v, o)
    assert not np.isnan(o).any()
    assert _rel(o, attention.reference(q, k, v)[0]) < 4e-3


@pytest.mark.parametrize("causal", [False, True])
def test_one_tile_at_a_time_variant(causal):
    """PIPELINE=False without setmaxnreg (the ablation's second step) computes the same function."""
    o, lse, ref_o, ref_lse = _run(2, 1, 150, 200, 128, causal, seed=5, BN=64, PIPELINE=False, STAGES=2,
                                  PRODUCER_REGS=0, CONSUMER_REGS=0)
    assert _rel(o, ref_o) < 4e-3
    assert np.abs(lse - ref_lse).max() < 1e-5 * max(1.0, np.abs(ref_lse).max())


# --------------------------------------------------------------------------- seeded bugs
MUTATIONS = {
    # name: (original text, mutated text, the verifier check that must report it, wrong numbers on the interpreter)
    "k_of_the_query_head": ("tp.copy_bulk(K[kvh, j * BN:(j + 1) * BN, p * 64:(p + 1) * 64]",
                            "tp.copy_bulk(K[bh, j * BN:(j + 1) * BN, p * 64:(p + 1) * 64]", "tag_assertion", True),
    "v_rows_shifted": ("tp.copy_bulk(V[kvh, j * BN:(j + 1) * BN, 0:HEAD_DIM], v_s[j % STAGES], vfull[j % STAGES],",
                       "tp.copy_bulk(V[kvh, j * BN + 1:(j + 1) * BN + 1, 0:HEAD_DIM], v_s[j % STAGES], "
                       "vfull[j % STAGES],", "tag_assertion", True),
    "stage_released_in_flight": (" " * 24 + "tp.mma_wait(0)                                         # P_{j-1}",
                                 " " * 24 + "# (dropped)                                            # P_{j-1}",
                                 "pipeline_hazard", False),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_seeded_bugs_are_caught(name, tmp_path):
    """Each mutation of the shipped kernel is reported by tilepy-verify (with the check that should see it),
    and those that change the numbers do so on the interpreter: the invariants are not vacuous."""
    import importlib.util
    import inspect

    tilepy_verify = pytest.importorskip("tilepy_verify")
    old, new, check, wrong = MUTATIONS[name]
    src = inspect.getsource(attention)
    assert src.count(old) == 1, old
    path = tmp_path / f"attention_{name}.py"
    path.write_text(src.replace(old, new))
    spec = importlib.util.spec_from_file_location(f"attention_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cfg = dict(mod.PRESETS[64], CAUSAL=False, GROUP=2)
    rep = tilepy_verify.verify(mod.attention_fwd, target="sm_90a", **cfg)
    assert any(f.check == check for f in rep.errors), str(rep)
    if wrong:
        rng = np.random.default_rng(3)
        q, k, v = _bf16(rng, (2, 64, 64)), _bf16(rng, (1, 300, 64)), _bf16(rng, (1, 300, 64))
        o = np.full((2, 64, 64), np.nan, np.float32)
        lse = np.full((2, 64), np.nan, np.float32)
        mod.launch(q, k, v, o, lse, **mod.PRESETS[64])  # the pipelined loop, as verified above
        assert _rel(np.nan_to_num(o, nan=1e3), attention.reference(q, k, v)[0]) > 0.05


def test_setmaxnreg_caps_registers_at_entry():
    """With tp.setmaxnreg the kernel is built for one block per multiprocessor (__launch_bounds__(T, 1)), which
    ptxas needs to honour the budgets; without it the launch bounds stay as they were."""
    import tilepy_hip

    src = tilepy_hip.render(attention.attention_fwd.ir(**attention.PRESETS[128]))
    assert "__launch_bounds__(384, 1)" in src
    assert '"setmaxnreg.dec.sync.aligned.u32 %0;\\n" :: "n"(24)' in src
    assert '"setmaxnreg.inc.sync.aligned.u32 %0;\\n" :: "n"(240)' in src
    plain = tilepy_hip.render(attention.attention_fwd.ir(**attention.PRESETS[128], PRODUCER_REGS=0, CONSUMER_REGS=0))
    assert "__launch_bounds__(384)" in plain and "setmaxnreg" not in plain


def test_policy_table_and_launch():
    """launch() runs policy(d, sq, causal) when given no constexprs, PRESETS[d] with the given ones otherwise;
    every class of the table names a head dim the kernel has and a register split that fits 64K registers."""
    for (d, cls, causal), extra in attention.POLICIES.items():
        p = attention.policy(d, 512 if cls == "short" else 4096, causal)
        assert p["HEAD_DIM"] == d and p["CAUSAL"] is causal and all(p[k] == v for k, v in extra.items())
        c = p["CONSUMERS"]
        prod, cons = p.get("PRODUCER_REGS", 24), p.get("CONSUMER_REGS", 240)
        assert 128 * prod + 128 * c * cons <= 65536
        assert not (p.get("PAIRED") and p.get("PIPELINE", True))     # PAIRED runs one key tile at a time
    assert attention.shape_class(1024) == "short" and attention.shape_class(1025) == "long"
    with pytest.raises(ValueError, match="head dim 96"):
        attention.policy(96, 512)


def test_three_consumer_warpgroups_render():
    """BM = 192 (three consumer warpgroups): the row statistics reduce within a quad of lanes (the accumulator's
    one-thread mode across the N warpgroups combines nothing), and the register split is 24 / 160."""
    import tilepy_hip

    src = tilepy_hip.render(attention.attention_fwd.ir(**attention.policy(64, 4096, True)))
    assert "__launch_bounds__(512, 1)" in src
    assert '"setmaxnreg.inc.sync.aligned.u32 %0;\\n" :: "n"(160)' in src
    assert "__shfl_xor" in src and "tp_exp2f" in src
