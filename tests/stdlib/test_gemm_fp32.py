"""TF32 on the CPU interpreter and the fp32-accurate GEMM (stdlib_kernels/gemm_fp32.py): tf32 rounding and
truncation at the bit level, the interpreter's tf32 operand model (the low 13 mantissa bits ignored, as the
tensor cores do) for wgmma and mma.sync, and the 3xTF32 GEMM's error against float64 next to an f32 GEMM's
on ragged shapes, both B layouts, batches and a B shared by every batch. Outputs are poisoned with NaN first."""

import os
import sys

import numpy as np
import pytest

import tilepy as tp
from stdlib_kernels import gemm_fp32
from tilepy.instructions import round_tf32, truncate_tf32

sys.path.insert(0, os.path.dirname(__file__))
from tf32_kernels import mma_sync_tf32, tf32_probe, tf32_probe_rs  # noqa: E402


def _bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


def test_round_tf32_ties_away_and_keeps_specials():
    one = np.float32(1.0)
    ulp = 2.0**-10
    x = np.array([1 + ulp / 2, 1 + ulp / 2 - 2**-23, -(1 + ulp / 2), 1 + 3 * ulp / 2, np.inf, -np.inf, 0.0],
                 np.float32)
    want = np.array([1 + ulp, 1, -(1 + ulp), 1 + 2 * ulp, np.inf, -np.inf, 0.0], np.float32)
    np.testing.assert_array_equal(round_tf32(x), want)
    assert np.isnan(round_tf32(np.float32(np.nan)))
    assert (_bits(round_tf32(np.float32(np.pi))) & 0x1FFF) == 0 and round_tf32(one) == one


def test_truncate_tf32_drops_the_low_bits():
    x = np.array([1 + 2.0**-10 + 2.0**-11, -(1 + 2.0**-11 + 2.0**-20)], np.float32)
    np.testing.assert_array_equal(truncate_tf32(x), np.array([1 + 2.0**-10, -1.0], np.float32))


def test_split_keeps_21_bits():
    x = np.random.default_rng(0).standard_normal(100_000).astype(np.float32) * 1e3
    hi = round_tf32(x)
    lo = round_tf32(x - hi)                     # x - hi is exact in f32
    assert np.array_equal(x - hi + hi, x)
    err = np.abs((hi.astype(np.float64) + lo) - x) / np.abs(x)
    assert err.max() <= 2.0**-21


def test_round_tf32_in_a_kernel():
    @tp.kernel(threads=64)
    def split(X: tp.Tensor[tp.f32, "N"], H: tp.Tensor[tp.f32, "N"], L: tp.Tensor[tp.f32, "N"]):
        x = tp.load(X[0:256])
        h = tp.round_tf32(x)
        tp.store(H[0:256], h)
        tp.store(L[0:256], tp.round_tf32(x - h))

    x = np.random.default_rng(1).standard_normal(200).astype(np.float32)
    h, lo = np.full_like(x, np.nan), np.full_like(x, np.nan)
    split[(1,)](x, h, lo)
    np.testing.assert_array_equal(h, round_tf32(x))
    np.testing.assert_array_equal(lo, round_tf32(x - round_tf32(x)))


def test_round_tf32_of_an_integer_tile_is_a_type_error():
    @tp.kernel(threads=64)
    def bad(X: tp.Tensor[tp.i32, 64]):
        tp.store(X[0:64], tp.round_tf32(tp.load(X[0:64])))

    with pytest.raises(tp.KernelTypeError, match="round_tf32 of an integer"):
        bad.ir()


def _operands():
    rng = np.random.default_rng(2)
    # random low mantissa bits: a tf32 instruction must ignore them (truncation), not round them
    a = (rng.standard_normal((64, 32)) * (1 + rng.integers(0, 2**13, (64, 32)) * 2.0**-23)).astype(np.float32)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    return a, b


def test_wgmma_tf32_reads_truncated_operands():
    a, b = _operands()
    c = np.full((64, 64), np.nan, np.float32)
    tf32_probe[(1,)](a, b, c)
    want = truncate_tf32(a).astype(np.float64) @ truncate_tf32(b).astype(np.float64).T
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)
    assert np.abs(c - a.astype(np.float64) @ b.T.astype(np.float64)).max() > 1e-3   # not an f32 product


def test_wgmma_tf32_register_a_fragments():
    """wgmma .tf32 with A in registers: the PTX fragment (a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8,
    t + 4) in warp w's rows 16w..) holds each element once, and the product reads them truncated."""
    instr = tp.nv.wgmma_m64n64k8_tf32_rs
    L = tp.mma_layout(instr, "a", (64, 8), (1, 1))
    rows, cols = L.coords
    assert sorted(zip(rows.ravel().tolist(), cols.ravel().tolist())) == [(i, k) for i in range(64) for k in range(8)]
    lane, warp = 4 * 3 + 1, 2                    # thread 77: g = 3, t = 1 in warp 2
    t = lane + 32 * warp
    assert [(int(rows[t, v]), int(cols[t, v])) for v in range(4)] == [(35, 1), (43, 1), (35, 5), (43, 5)]
    a, b = _operands()
    c = np.full((64, 64), np.nan, np.float32)
    tf32_probe_rs[(1,)](a, b, c)
    want = truncate_tf32(a).astype(np.float64) @ truncate_tf32(b).astype(np.float64).T
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


def test_mma_sync_tf32_fragments():
    a, b = _operands()
    a, b = a[:32, :16].copy(), b[:16, :16].T.copy()   # A (32, 16), B (16, 16): (K, N)
    c = np.full((32, 16), np.nan, np.float32)
    mma_sync_tf32[(1,)](a, b, c)
    want = truncate_tf32(a).astype(np.float64) @ truncate_tf32(b).astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


def _rel(out, ref):
    out = np.asarray(out, np.float64)
    assert not np.isnan(out).any(), "some output element was never written"
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("b_layout", ["nk", "kn"])
@pytest.mark.parametrize("shape,params", [
    ((130, 70, 100), dict(STAGES=2)),     # 4 k-tiles through 2 stages, M and N partial
    ((64, 129, 40), dict(STAGES=3, BN=64, INSTR=tp.nv.wgmma_m64n64k8_tf32)),   # 2 k-tiles, 3 stages
])
def test_gemm_fp32_matches_f32_accuracy(b_layout, shape, params):
    m, n, k = shape
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n) if b_layout == "kn" else (n, k)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    gemm_fp32.launch(a, b, c, b_layout=b_layout, **params)
    ref = gemm_fp32.reference(a, b, b_layout)
    f32 = (a @ (b if b_layout == "kn" else b.T)).astype(np.float32)
    assert _rel(c, ref) <= 1.5 * _rel(f32, ref)
    assert _rel(c, ref) < 3e-7      # a single TF32 product is ~1e-3 off


def test_gemm_fp32_batched_with_a_shared_b():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 70, 64)).astype(np.float32)
    b = rng.standard_normal((1, 40, 64)).astype(np.float32)   # one (N, K) weight for both batches
    c = np.full((2, 70, 40), np.nan, np.float32)
    gemm_fp32.launch(a, b, c, b_layout="nk", STAGES=2)
    assert _rel(c, gemm_fp32.reference(a, b, "nk")) < 3e-7


def test_gemm_fp32_launch_checks_shapes():
    a = np.zeros((8, 16), np.float32)
    with pytest.raises(ValueError, match="shapes do not agree"):
        gemm_fp32.launch(a, np.zeros((12, 8), np.float32), np.zeros((8, 8), np.float32), b_layout="kn")
    with pytest.raises(ValueError, match="b_layout"):
        gemm_fp32.launch(a, a, a, b_layout="tn")


@pytest.mark.parametrize("b_layout", ["nk", "kn"])
def test_split_pads_k_and_transposes(b_layout):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 37, 23)).astype(np.float32)     # K = 23 (nk) or 37 (kn): padded to 24 / 40
    hi, lo = gemm_fp32.split(x, b_layout)
    xk = x if b_layout == "nk" else np.swapaxes(x, 1, 2)          # the K-major view
    K = xk.shape[2]
    assert hi.shape == (2, xk.shape[1], -(-K // 4) * 4)
    np.testing.assert_array_equal(hi[..., :K], round_tf32(xk))
    np.testing.assert_array_equal(lo[..., :K], round_tf32(xk - round_tf32(xk)))
    assert not hi[..., K:].any() and not lo[..., K:].any()


@pytest.mark.parametrize("z,k,n", [(1, 70, 45), (2, 33, 130), (1, 100, 257), (1, 32, 128)])
def test_split_tw_is_split_t_bit_for_bit(z, k, n):
    """split_tf32_tw (32 x 128 tiles transposed in registers) writes split_tf32_t's halves: the tails of every tile
    (K past a multiple of 32, N past 128), K padded to 4 with zeros, a batch."""
    rng = np.random.default_rng(k * n)
    x = rng.standard_normal((z, k, n)).astype(np.float32)
    kp = -(-k // 4) * 4
    h0, l0, h1, l1 = (np.full((z, n, kp), np.nan, np.float32) for _ in range(4))
    gemm_fp32.split_tf32_t[(-(-kp // 32), -(-n // 32), z)](x, h0, l0)
    gemm_fp32.split_tf32_tw[(-(-kp // 32), -(-n // 128), z)](x, h1, l1)
    np.testing.assert_array_equal(h1, h0)
    np.testing.assert_array_equal(l1, l0)
    np.testing.assert_array_equal(h1[..., :k], round_tf32(np.swapaxes(x, 1, 2)))
    assert not h1[..., k:].any() and not l1[..., k:].any()


def test_split_kn_runs_the_wide_pass_when_asked(monkeypatch):
    monkeypatch.setattr(gemm_fp32, "KN_SPLIT_WIDE", True)
    seen = []
    real = gemm_fp32.split_tf32_tw
    monkeypatch.setattr(gemm_fp32, "split_tf32_tw", type("Spy", (), {"__getitem__": lambda _, g: (
        seen.append(g) or real[g])})())
    x = np.random.default_rng(1).standard_normal((37, 150)).astype(np.float32)
    hi, _ = gemm_fp32.split(x, "kn")
    assert seen == [(2, 2, 1)]
    np.testing.assert_array_equal(hi[0, :, :37], round_tf32(x.T))


def test_gemm_fp32_single_accumulator_is_also_right_on_the_interpreter():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 96)).astype(np.float32)
    b = rng.standard_normal((40, 96)).astype(np.float32)
    c = np.full((64, 40), np.nan, np.float32)
    gemm_fp32.launch(a, b, c, b_layout="nk", STAGES=2, PROMOTE=False)   # (A_RAW always promotes: the split form)
    assert _rel(c, gemm_fp32.reference(a, b, "nk")) < 3e-7


@pytest.mark.parametrize("group_m", [1, 2, 3])
def test_gemm_fp32_grouped_tile_order_covers_every_tile(group_m):
    rng = np.random.default_rng(6)
    a = rng.standard_normal((5 * 64 - 3, 40)).astype(np.float32)   # 5 row tiles: a partial last group
    b = rng.standard_normal((3 * 64 - 1, 40)).astype(np.float32)
    c = np.full((a.shape[0], b.shape[0]), np.nan, np.float32)
    gemm_fp32.launch(a, b, c, b_layout="nk", BM=64, BN=64, CONSUMERS=1, STAGES=2, GROUP_M=group_m,
                     INSTR=tp.nv.wgmma_m64n64k8_tf32)
    assert _rel(c, gemm_fp32.reference(a, b, "nk")) < 3e-7


def test_gemm_fp32_two_dimensional_grid_also_covers_every_tile():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((1, 200, 40)).astype(np.float32)
    b = rng.standard_normal((1, 130, 40)).astype(np.float32)
    c = np.full((1, 200, 130), np.nan, np.float32)
    (ah, al), (bh, bl) = gemm_fp32.split(a), gemm_fp32.split(b)
    p = dict(BM=64, BN=64, CONSUMERS=1, STAGES=2, GROUP_M=2, INSTR=tp.nv.wgmma_m64n64k8_tf32)
    gemm_fp32.gemm_fp32[(4, 3, 1)](ah, al, bh, bl, c, **p)     # (row tiles, column tiles, batch)
    assert _rel(c, gemm_fp32.reference(a, b, "nk")) < 3e-7


@pytest.mark.parametrize("ksplit,k", [(3, 300), (4, 70)])   # 10 k-tiles in shares of 4; 3 tiles: one empty share
def test_gemm_fp32_split_k(ksplit, k):
    """Split-K: the partial products over shares of K add up to the fp32-accurate product (a share with no
    k-tiles contributes zeros)."""
    rng = np.random.default_rng(k)
    a = rng.standard_normal((2, 40, k)).astype(np.float32)
    b = rng.standard_normal((k, 24)).astype(np.float32)
    c = np.full((2, 40, 24), np.nan, np.float32)
    gemm_fp32.launch(a, b, c, b_layout="kn", STAGES=2, BN=64, INSTR=tp.nv.wgmma_m64n64k8_tf32, KSPLIT=ksplit)
    assert _rel(c, gemm_fp32.reference(a, b)) < 3e-7


@pytest.mark.parametrize("b_layout", ["nk", "kn"])
def test_gemm_fp32_one_pass_is_the_tf32_product(b_layout):
    """PASSES=1 (--precision tf32): one TF32 product of the rounded heads, f32 accumulation: the float64
    product of round_tf32(a) and round_tf32(b) to f32 accuracy, and TF32's distance from the exact product."""
    m, n, k = 130, 70, 100
    rng = np.random.default_rng(11)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n) if b_layout == "kn" else (n, k)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    gemm_fp32.launch(a, b, c, b_layout=b_layout, STAGES=2, PASSES=1)
    heads = gemm_fp32.reference(round_tf32(a), round_tf32(b), b_layout)
    assert _rel(c, heads) < 3e-7
    assert _rel(c, gemm_fp32.reference(a, b, b_layout)) > 1e-5     # not the 3xTF32 result


def _raw_and_split(a, b, b_layout, **params):
    c_raw = np.full((*a.shape[:-1], b.shape[-1] if b_layout == "kn" else b.shape[-2]), np.nan, np.float32)
    c_split = c_raw.copy()
    gemm_fp32.launch(a, b, c_raw, b_layout=b_layout, A_RAW=1, **params)
    gemm_fp32.launch(a, b, c_split, b_layout=b_layout, A_RAW=0, **params)
    return c_raw, c_split


@pytest.mark.parametrize("b_layout", ["nk", "kn"])
@pytest.mark.parametrize("shape,params", [
    ((130, 70, 100), dict(STAGES=2)),                       # ragged M, N; K a multiple of 4, not of BK
    ((64, 129, 40), dict(STAGES=3, BN=64, INSTR=tp.nv.wgmma_m64n64k8_tf32)),
    ((200, 72, 136), dict(WAIT_ONCE=0)),                    # RAW's 4 stages, a wait after each chain
    ((70, 40, 300), dict(STAGES=2, BN=64, INSTR=tp.nv.wgmma_m64n64k8_tf32, KSPLIT=3)),
    ((130, 70, 100), dict(STAGES=2, PASSES=1)),             # TF32: the head alone
])
def test_a_raw_is_bitwise_the_split_form(b_layout, shape, params):
    """A split in the consumers' registers (A_RAW) gives the bits the split pass + GEMM give (the same
    round_tf32 head and tail, the same products in the same order), and fp32 accuracy against float64."""
    m, n, k = shape
    rng = np.random.default_rng(m * n + k)
    a = (rng.standard_normal((m, k)) * 10.0 ** rng.integers(-3, 4, (m, 1))).astype(np.float32)
    b = rng.standard_normal((k, n) if b_layout == "kn" else (n, k)).astype(np.float32)
    c_raw, c_split = _raw_and_split(a, b, b_layout, **params)
    np.testing.assert_array_equal(c_raw, c_split)
    ref = gemm_fp32.reference(a, b, b_layout)
    if params.get("PASSES", 3) == 3:
        f32 = (a @ (b if b_layout == "kn" else b.T)).astype(np.float32)
        assert _rel(c_raw, ref) <= 1.5 * _rel(f32, ref) and _rel(c_raw, ref) < 3e-7
    else:
        assert _rel(c_raw, gemm_fp32.reference(round_tf32(a), round_tf32(b), b_layout)) < 3e-7


def test_a_raw_batched_with_a_shared_b():
    rng = np.random.default_rng(12)
    a = rng.standard_normal((3, 70, 64)).astype(np.float32)
    b = rng.standard_normal((1, 40, 64)).astype(np.float32)   # one (N, K) weight for every batch
    c_raw, c_split = _raw_and_split(a, b, "nk", STAGES=2)
    np.testing.assert_array_equal(c_raw, c_split)
    assert _rel(c_raw, gemm_fp32.reference(a, b, "nk")) < 3e-7


@pytest.mark.parametrize("k,splits,params", [(100, 1, {}), (99, 2, {}), (100, 2, dict(PROMOTE=False)),
                                             (100, 2, dict(A_RAW=0))])
def test_launch_splits_a_only_where_it_cannot_read_it_raw(monkeypatch, k, splits, params):
    """launch reads A as it is when its rows are 16-byte multiples (K % 4 == 0): only B goes through a split
    pass; otherwise A is split (and K padded) first, as it is for one accumulator or when A_RAW=0 is named."""
    calls = []
    real = gemm_fp32.split
    monkeypatch.setattr(gemm_fp32, "split", lambda x, b_layout="nk": calls.append(x.shape) or real(x, b_layout))
    rng = np.random.default_rng(k)
    a = rng.standard_normal((70, k)).astype(np.float32)
    b = rng.standard_normal((k, 40)).astype(np.float32)
    c = np.full((70, 40), np.nan, np.float32)
    gemm_fp32.launch(a, b, c, STAGES=2, SWAP=0, **params)     # (70 rows of a (K, N) b would swap)
    assert len(calls) == splits and calls[-1] == b.shape
    assert _rel(c, gemm_fp32.reference(a, b)) < 3e-7


def test_a_raw_with_unaligned_k_or_one_accumulator_says_what_to_do():
    a = np.zeros((8, 99), np.float32)
    with pytest.raises(ValueError, match="multiple of 4"):
        gemm_fp32.launch(a, np.zeros((99, 8), np.float32), np.zeros((8, 8), np.float32), A_RAW=1)
    a = np.zeros((8, 96), np.float32)
    with pytest.raises(ValueError, match="PROMOTE"):
        gemm_fp32.launch(a, np.zeros((96, 8), np.float32), np.zeros((8, 8), np.float32), A_RAW=1, PROMOTE=False)


@pytest.mark.parametrize("params", [dict(), dict(WAIT_ONCE=0), dict(PASSES=1), dict(KSPLIT=2), dict(KSPLIT=4),
                                    dict(PRODUCER_REGS=56, CONSUMER_REGS=224)])
def test_a_raw_verifies_clean(params):
    import tilepy_verify as tv

    report = tv.verify(gemm_fp32.gemm_fp32, target="sm_90a", **{**gemm_fp32.PRESETS["sm_90a"], **gemm_fp32.RAW,
                                                                 **params})
    assert not report.findings, [f.message for f in report.findings]


@pytest.mark.parametrize("operand", ["al, b_hi", "ah, b_lo", "ah, b_hi"])
def test_a_raw_tag_assertion_catches_a_stale_stage(tmp_path, monkeypatch, operand):
    """The A_RAW chain's tag assertion is not vacuous: a product that reads the next stage's B (whose tag
    carries another k) fails it, for the head's and the tail's products alike."""
    import importlib
    from pathlib import Path

    import tilepy_verify as tv

    src = Path(gemm_fp32.__file__).read_text()
    x, y = operand.split(", ")
    good = f"({x}, {y}[s].T, part, instr=RS)"
    assert src.count(good) == 2                 # the chains waited once (RAW) and waited each
    (tmp_path / "gemm_fp32_bug.py").write_text(src.replace(good, good.replace("[s]", "[(s + 1) % STAGES]")))
    monkeypatch.syspath_prepend(str(tmp_path))
    bug = importlib.import_module("gemm_fp32_bug")
    for wait_once in (1, 0):
        report = tv.verify(bug.gemm_fp32, target="sm_90a", **{**bug.PRESETS["sm_90a"], **bug.RAW,
                                                                "WAIT_ONCE": wait_once})
        assert "tag_assertion" in {f.check for f in report.findings}, wait_once
    sys.modules.pop("gemm_fp32_bug", None)


def test_a_raw_renders_register_a_wgmma_and_three_tensor_maps():
    from tilepy_hip.render import render_kernel

    src, _, maps = render_kernel(gemm_fp32.gemm_fp32.ir("sm_90a", **{**gemm_fp32.PRESETS["sm_90a"], **gemm_fp32.RAW}))
    assert len(maps) == 3                       # A, B's head, B's tail: no tail of A
    assert "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {%0" in src
    assert "}, {%64, %65, %66, %67}, %68, p, 1, 1;" in src     # A from four registers, B through a descriptor
    assert "__float_as_uint(" in src and "tp_pack2" not in src
