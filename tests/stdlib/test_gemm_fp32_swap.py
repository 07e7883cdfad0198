"""gemm_fp32's swap-AB form for skinny rows of an (N, K) weight (`launch_swap`, gemm_fp32_ct with A_RAW and C_T=1:
out^T = W @ x.T, the weight read as it is and split in the consumers' registers, only x's rows split by a pass) and
of a (K, N) B (gemm_fp32_kt, A_KN=1: out^T = B.T @ x.T, B read M-major and loaded transposed into the fragments) on
the CPU interpreter: against float64 next to an f32 GEMM's error, over the table's column tiles (16-128 rows of x),
ragged M / N / K, split-K by the policy; which calls swap, and what it refuses. Outputs are poisoned with NaN."""

import numpy as np
import pytest

import tilepy as tp
from stdlib_kernels import gemm_fp32


def _rel(x, ref):
    return float(np.linalg.norm(x.astype(np.float64) - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("M,N,K,sms", [(16, 200, 96, None), (40, 130, 264, None), (100, 300, 1032, 12),
                                       (130, 72, 520, None), (7, 136, 1552, 20)])
def test_swap_matches_float64_at_f32_accuracy(monkeypatch, M, N, K, sms):
    if sms:                             # a smaller GPU: the policy splits K more (KSPLIT partial products, summed)
        monkeypatch.setattr(gemm_fp32, "SMS", sms)
    calls = []
    real = gemm_fp32.split
    monkeypatch.setattr(gemm_fp32, "split", lambda x, b_layout="nk": calls.append(tuple(x.shape)) or real(x, b_layout))
    rng = np.random.default_rng(M * N + K)
    a = (rng.standard_normal((M, K)) * 10.0 ** rng.integers(-3, 4, (M, 1))).astype(np.float32)
    w = rng.standard_normal((N, K)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    p = gemm_fp32.swap_params(M, N, K)
    assert p["BN"] >= min(M, 128) and p["INSTR"].n == p["BN"] and p["C_T"] == 1 and p["A_RAW"] == 1
    assert p.get("KSPLIT", 1) == gemm_fp32.policy(N, M, K).get("KSPLIT", 1)   # (the kernel's rows are W's)
    gemm_fp32.launch(a, w, c, b_layout="nk")
    assert calls == [(1, M, K)]                 # x alone was split; the weight was read as it is
    ref = gemm_fp32.reference(a, w, "nk")
    f32 = (a @ w.T).astype(np.float32)
    assert _rel(c, ref) <= 1.5 * _rel(f32, ref) and _rel(c, ref) < 3e-7


def test_which_calls_swap():
    a, w = np.zeros((64, 96), np.float32), np.zeros((80, 96), np.float32)
    assert gemm_fp32.swap_ok(a, w, "nk", {})
    assert gemm_fp32.swap_ok(a, w.T, "kn", {})                                  # a (K, N) b, N % 4 == 0
    assert not gemm_fp32.swap_ok(a, np.zeros((96, 78), np.float32), "kn", {})    # its rows not 16-byte multiples
    assert gemm_fp32.swap_ok(np.zeros((64, 98), np.float32), np.zeros((98, 80), np.float32), "kn", {})  # any K
    assert not gemm_fp32.swap_ok(np.zeros((300, 96), np.float32), w, "nk", {})  # past SWAP_ROWS
    assert not gemm_fp32.swap_ok(np.zeros((64, 98), np.float32), np.zeros((80, 98), np.float32), "nk", {})  # K % 4
    assert not gemm_fp32.swap_ok(np.zeros((2, 64, 96), np.float32), w, "nk", {})   # batched
    for named in (dict(BM=64), dict(A_RAW=1), dict(PASSES=1), dict(SWAP=0)):
        assert not gemm_fp32.swap_ok(a, w, "nk", named)
    assert gemm_fp32.swap_ok(np.zeros((300, 96), np.float32), w, "nk", dict(SWAP=1))


def test_swap_refusals_say_what_to_do():
    a, w, c = np.zeros((8, 96), np.float32), np.zeros((16, 96), np.float32), np.zeros((8, 16), np.float32)
    with pytest.raises(ValueError, match="N % 4 == 0"):
        gemm_fp32.launch(a, np.zeros((96, 18), np.float32), np.zeros((8, 18), np.float32), b_layout="kn", SWAP=1)
    with pytest.raises(ValueError, match="K % 4 == 0"):
        gemm_fp32.launch(np.zeros((8, 98), np.float32), np.zeros((16, 98), np.float32), c, b_layout="nk", SWAP=1)
    with pytest.raises(ValueError, match="SWAP=0"):
        gemm_fp32.launch(a, w, c, b_layout="nk", SWAP=1, PASSES=1)


@pytest.mark.parametrize("shape", [(16, 4096, 4096), (128, 4096, 4096), (64, 1024, 96)])
def test_swap_verifies_clean(shape):
    """gemm_fp32_ct under the swap table (register-A split of the weight's tile, x's halves from shared memory,
    the transposed store, split-K partial products in their own slices): clean."""
    import tilepy_verify as tv

    report = tv.verify(gemm_fp32.gemm_fp32_ct, target="sm_90a", **gemm_fp32.swap_params(*shape))
    assert report.ok and not report.findings, str(report)


def test_kn_swap_table():
    """The kn swap's policy (H100, benchmarks/results/gemm-fp32-kn-g25-call2-*): B's tile row-major (KN_FORM 2) at
    column tiles up to 128 (form 1's swizzled blocks stop at 64: 128 x 4096 x 4096 1.41 -> 1.88 x SGEMM)."""
    assert gemm_fp32.KN_FORM == 2 and gemm_fp32.KN_BN == {1: 64, 2: 128}
    p = gemm_fp32.swap_params(128, 4096, 4096, b_layout="kn")
    assert (p["A_KN"], p["BN"], p["KSPLIT"], p["C_T"]) == (2, 128, 4, 1)
    # G36: TMA_ONLY, and at 128 columns register budgets (ptxas spilled in the k-loop without them)
    assert (p["TMA_ONLY"], p["PRODUCER_REGS"], p["CONSUMER_REGS"]) == (1, 40, 232)
    p64 = gemm_fp32.swap_params(64, 4096, 4096, b_layout="kn")
    assert p64["TMA_ONLY"] == 1 and "CONSUMER_REGS" not in p64
    nk = gemm_fp32.swap_params(128, 4096, 4096)         # the nk swap at 128 columns too (G36 call 2)
    assert (nk["TMA_ONLY"], nk["PRODUCER_REGS"], nk["CONSUMER_REGS"]) == (1, 40, 232)
    assert "TMA_ONLY" not in gemm_fp32.swap_params(64, 4096, 4096)
    assert gemm_fp32.swap_params(256, 4096, 4096, b_layout="kn")["KSPLIT"] == 2
    p1 = gemm_fp32.swap_params(128, 4096, 4096, b_layout="kn", kn_form=1)
    assert (p1["A_KN"], p1["BN"], p1["KSPLIT"]) == (1, 64, 2)
    assert "A_KN" not in gemm_fp32.swap_params(128, 4096, 4096)      # "nk": gemm_fp32_ct


@pytest.mark.parametrize("form", [1, 2])
@pytest.mark.parametrize("M,N,K,sms,extra", [(16, 200, 96, None, {}), (40, 132, 262, None, {}),
                                             (100, 300, 1030, 12, {}), (130, 72, 520, None, {}),
                                             (7, 136, 1552, 20, {}), (64, 96, 200, None, dict(STAGES=2)),
                                             (33, 128, 1000, None, dict(BN=32, INSTR=tp.nv.wgmma_m64n32k8_tf32))])
def test_swap_kn_matches_float64_at_f32_accuracy(monkeypatch, M, N, K, sms, extra, form):
    """out = x @ B for a (K, N) B: B is read as it is (never split), x's rows alone are split; any K (B's rows past
    K read as zeros, x's halves padded with zeros), ragged M / N, split-K by the policy, column tiles <= KN_BN, both
    staged forms of B's tile (KN_FORM 1: swizzled 32-column blocks, 2: row-major)."""
    monkeypatch.setattr(gemm_fp32, "KN_FORM", form)
    if sms:
        monkeypatch.setattr(gemm_fp32, "SMS", sms)
    calls = []
    real = gemm_fp32.split
    monkeypatch.setattr(gemm_fp32, "split", lambda x, b_layout="nk": calls.append(tuple(x.shape)) or real(x, b_layout))
    rng = np.random.default_rng(M * N + K)
    a = (rng.standard_normal((M, K)) * 10.0 ** rng.integers(-3, 4, (M, 1))).astype(np.float32)
    b = (rng.standard_normal((K, N)) * 10.0 ** rng.integers(-2, 3, (1, N))).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    p = gemm_fp32.swap_params(M, N, K, b_layout="kn")
    assert p["BN"] >= min(M, gemm_fp32.KN_BN[form]) and p["BN"] <= gemm_fp32.KN_BN[form] and p["INSTR"].n == p["BN"]
    assert p["A_KN"] == form and p["C_T"] == 1 and p["A_RAW"] == 1
    gemm_fp32.launch(a, b, c, b_layout="kn", **({"SWAP": 1, **extra} if extra else {}))
    assert calls == [(1, M, K)]                 # x alone was split; B was read as it is
    ref = gemm_fp32.reference(a, b)
    f32 = (a @ b).astype(np.float32)
    assert _rel(c, ref) <= 1.5 * _rel(f32, ref) and _rel(c, ref) < 3e-7
    c0 = np.full((M, N), np.nan, np.float32)
    gemm_fp32.launch(a, b, c0, b_layout="kn", SWAP=0)            # the unswapped form: the same three products
    assert _rel(c, ref) <= 1.5 * _rel(c0, ref) + 2.0 ** -24


@pytest.mark.parametrize("form,degree", [(1, 2), (2, 4)])
@pytest.mark.parametrize("shape", [(16, 4096, 4096), (128, 4096, 4096), (64, 1024, 96), (1024, 1024, 1024)])
def test_swap_kn_verifies_clean(shape, form, degree):
    """gemm_fp32_kt under the kn swap table (B's (BK, BM) tile read transposed into the register fragments): no
    errors; the one performance finding is the transposed read's bank conflict: 2-way in swizzled 32-column blocks
    (the 128-byte swizzle spreads the fragment's 8 rows x 4 k over 4 of its 8 granules), 4-way row-major (the 4 k
    rows of a warp's load are 128 words apart)."""
    import tilepy_verify as tv

    report = tv.verify(gemm_fp32.gemm_fp32_kt, target="sm_90a",
                       **gemm_fp32.swap_params(*shape, b_layout="kn", kn_form=form))
    assert report.ok, str(report)
    assert [(f.check, f.severity, f.counterexample.get("degree")) for f in report.findings] == [
        ("bank_conflict", "performance", degree)], str(report)
