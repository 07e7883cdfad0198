"""The scaled fp8 GEMM (stdlib_kernels/gemm_fp8.py) on the CPU interpreter: out = (a @ b.T) * scale_a * scale_b
in bf16 against float64 of the e4m3 inputs, for every class of the policy table and the preset forced onto
ragged M, N and K (K a multiple of 16, not of the 128-wide k-tile), through numpy arrays and through CPU
torch float8_e4m3fn / bfloat16 tensors next to torch._scaled_mm; the launch's shape and dtype errors.
Outputs are poisoned with NaN first."""

import numpy as np
import pytest

import tilepy as tp
from stdlib_kernels import gemm_fp8
from tilepy.dtypes import round_bf16, round_e4m3


def _inputs(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    a = round_e4m3(rng.standard_normal((M, K)).astype(np.float32) * 3)
    b = round_e4m3(rng.standard_normal((N, K)).astype(np.float32) * 3)
    sa = np.array([rng.uniform(0.01, 0.1)], np.float32)
    sb = np.array([rng.uniform(0.5, 2.0)], np.float32)
    return a, b, sa, sb


def _check_bf16_result(out, a, b, sa, sb):
    ref = gemm_fp8.reference(a, b, sa, sb)
    # bf16 rounding of the result (half an ulp: at most 2^-8 relative) plus f32 accumulation of exact products
    mag = (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)).T) * float(sa[0]) * float(sb[0])
    bound = 2.0**-8 * np.abs(ref) + 1e-5 * mag + 1e-30
    assert not np.isnan(out).any()
    assert np.array_equal(out, round_bf16(out))                 # the store rounded to bf16
    worst = np.abs(out.astype(np.float64) - ref) - bound
    assert worst.max() <= 0, f"error over the bound by {worst.max()} at {np.unravel_index(worst.argmax(), ref.shape)}"


CASES = [
    ((200, 300, 272), {}),                                    # small class: 64x64 tiles, registers' store (G28)
    ((136, 260, 144), dict(gemm_fp8.PRESETS["sm_90a"])),      # the large preset (128x256, 2 consumers) forced
    ((40, 200, 160), {}),                                     # skinny class: swap-AB (BM 64, unsplit)
    ((40, 200, 160), dict(STAGES=4)),                         # a caller's constexprs: the 64x128 row under them
    ((300, 130, 400), dict(gemm_fp8.PRESETS["sm_90a"], STAGES=2, IN_FLIGHT=1)),   # ring turns over, in flight
    ((300, 520, 400), dict(PERSISTENT=1, NUM_SMS=3, STAGES=2)),   # persistent: 3 blocks over 6 tiles, ragged
    # the TMA-store epilogue (consumers -> c_s -> the producer's bulk tensor store) with the register budgets
    ((136, 260, 400), dict(gemm_fp8.PRESETS["sm_90a"], STAGES=3, EPILOGUE=2, PRODUCER_REGS=96, CONSUMER_REGS=200)),
    ((300, 130, 400), dict(gemm_fp8.PRESETS["sm_90a"], STAGES=2, EPILOGUE=2, IN_FLIGHT=1)),
    ((200, 300, 272), dict(EPILOGUE=2, GROUP_M=2)),              # small class (128x128 tiles), short last group
    # gemm_fp8_persistent_tma: the TMA store in 64-column pieces overlapped with the next tile (3 blocks over 3 x 3
    # tiles of 4 pieces; 4 blocks over 3 x 3 tiles of 2 pieces, ring of 2 stages turning over within a tile)
    ((300, 600, 400), dict(gemm_fp8.PRESETS["sm_90a"], PERSISTENT=1, NUM_SMS=3, STAGES=3, STORE_N=64, GROUP_M=2)),
    ((260, 264, 272), dict(gemm_fp8.PRESETS["sm_90a"], PERSISTENT=1, NUM_SMS=4, STAGES=2, STORE_N=64, BN=128,
                           INSTR=tp.nv.wgmma_m64n128k32_e4m3, GROUP_M=1)),
    # gemm_fp8_swap (skinny rows, C^T = B @ A^T): unsplit BM 16; split 2 over ragged K (slots + splitk_sum_bf16);
    # two 128-row tiles, split 2, a ring of 2 stages turning over; BM 32 split 4; one consumer of 64 columns, 7 rows
    ((16, 256, 512), dict(SWAP=1)),
    ((40, 200, 1040), dict(SWAP=1)),
    ((130, 200, 1040), dict(SWAP=1, STAGES=2)),
    ((24, 300, 2048), dict(SWAP=1, BM=32, STAGES=3)),
    ((7, 136, 1552), dict(SWAP=1, BN=64, CONSUMERS=1, SPLIT_K=3)),
    # CLUSTER_K (G21): the split summed in the kernel by st.async butterfly rounds over a (1, 1, 2 / 4) cluster, each
    # rank storing its share of the columns: 4 ranks over ragged K (the last share reads zeros past K); 2 ranks over
    # ragged M and N with a ring of 2 stages turning over; 4 ranks at BM 32 / BN 64 (16 columns a rank, one warp); two
    # 128-row tiles of one consumer, 2 ranks
    ((16, 256, 1040), dict(SWAP=1, CLUSTER_K=4)),
    ((40, 200, 1040), dict(SWAP=1, CLUSTER_K=2, STAGES=2)),
    ((24, 136, 2048), dict(SWAP=1, BM=32, BN=64, CONSUMERS=1, CLUSTER_K=4, STAGES=3)),
    ((130, 136, 784), dict(SWAP=1, BN=64, CONSUMERS=1, CLUSTER_K=2, STAGES=2)),
    # K_WAYS=2 (G24): two consumers on one 64-column tile taking alternate k-tiles of one ring, consumer 1's sum handed
    # over in shared memory: the cluster's sum over ragged K; the slots; unsplit over an odd k-tile count with a ring of
    # 4 turning over. BM the rows' own e4m3 instruction N (n24 / n48 / n96: no rows past M in A's box)
    ((16, 256, 1040), dict(SWAP=1, K_WAYS=2)),
    ((40, 200, 1296), dict(SWAP=1, K_WAYS=2, CLUSTER_K=1)),
    ((100, 136, 1040), dict(SWAP=1, K_WAYS=2, SPLIT_K=1, STAGES=4)),
    ((24, 136, 512), dict(SWAP=1, BM=24, BN=64)),
    ((48, 200, 1040), dict(SWAP=1, BM=48, K_WAYS=2)),
    ((96, 136, 784), dict(SWAP=1, BM=96, BN=64, CLUSTER_K=2, STAGES=3)),
    # CLUSTER_M=2 (G24): the rows split over a (2, 1, 1) cluster, B's tiles multicast into both blocks (the ranks taking
    # turns), no K split: BM 8 (n8); a second row tile wholly past M with a ring of 2 turning over; two consumers on
    # alternate k-tiles over ragged M, N, K; 128-column tiles (two consumers of 64 columns)
    ((16, 136, 1040), dict(SWAP=1, CLUSTER_M=2, BN=64)),
    ((7, 136, 528), dict(SWAP=1, CLUSTER_M=2, BN=64, STAGES=2)),
    ((100, 200, 1040), dict(SWAP=1, CLUSTER_M=2, K_WAYS=2, STAGES=4)),
    ((40, 260, 784), dict(SWAP=1, CLUSTER_M=2, BN=128, STAGES=3)),
    # G30: 256 rows' policy form, whole 128-row tiles over 64-column tiles with one consumer and no K split: the second
    # row tile ragged (72 of 128 rows), ragged N and K, a ring of 3 turning over
    ((200, 136, 784), dict(SWAP=1, BM=128, BN=64, CONSUMERS=1, SPLIT_K=1, STAGES=3)),
    # G30: the copies TMA only (TMA_ONLY=1, no per-element fallback): the cluster's split over ragged M, N, K; the rows
    # over a cluster with B multicast
    ((40, 200, 1040), dict(SWAP=1, CLUSTER_K=2, STAGES=2, TMA_ONLY=1)),
    ((16, 136, 1040), dict(SWAP=1, CLUSTER_M=2, BN=64, TMA_ONLY=1)),
    # G32: the rows over a cluster with the copies TMA only, one consumer: a row tile wholly past M with a ring of 2
    # turning over; BM 24 (n24) over ragged N and K with a ring deeper than the k-tiles (20 stages, 7 k-tiles)
    ((7, 136, 528), dict(SWAP=1, CLUSTER_M=2, BN=64, STAGES=2, TMA_ONLY=1)),
    ((48, 200, 784), dict(SWAP=1, CLUSTER_M=2, BN=64, BM=24, INSTR=gemm_fp8.SWAP_INSTR[24], STAGES=20, TMA_ONLY=1)),
    # G34: HALF_SUM (the cluster's split as a reduce-scatter of C's rows: each rank pushes the half its partner stores):
    # two consumers of 64 columns over ragged M / N / K with a ring of 2 (rank 1's rows 32-63 partly past M); one
    # consumer, two 128-row tiles (the second's halves 2 and 0 rows), with STORE_T (the half's TMA store); K_WAYS=2 at
    # BM 96. STORE_T unsplit: one consumer over ragged M / N; K_WAYS=2 over 100 rows of a 128-row tile
    ((40, 200, 1040), dict(SWAP=1, CLUSTER_K=2, STAGES=2, HALF_SUM=1)),
    ((130, 136, 784), dict(SWAP=1, BN=64, CONSUMERS=1, CLUSTER_K=2, STAGES=2, HALF_SUM=1, STORE_T=1, TMA_ONLY=1)),
    ((96, 136, 784), dict(SWAP=1, BM=96, BN=64, K_WAYS=2, CLUSTER_K=2, STAGES=4, HALF_SUM=1)),
    ((40, 200, 528), dict(SWAP=1, BN=64, CONSUMERS=1, SPLIT_K=1, STAGES=3, STORE_T=1)),
    ((100, 136, 1040), dict(SWAP=1, K_WAYS=2, SPLIT_K=1, STAGES=4, STORE_T=1)),
    # G34's policy rows at 129-255: two unsplit row tiles of BM 104 (n104), one consumer, the second ragged (96 rows)
    ((200, 136, 784), dict(SWAP=1, BM=104, BN=64, CONSUMERS=1, SPLIT_K=1, STAGES=3, TMA_ONLY=1)),
    # ... and with STORE_T: BM 104 (the second tile's 96 rows clipped by the bulk store), BM 24 over 40 rows
    ((200, 136, 784), dict(SWAP=1, BM=104, BN=64, CONSUMERS=1, SPLIT_K=1, STAGES=3, STORE_T=1)),
    ((40, 200, 528), dict(SWAP=1, BM=24, BN=64, CONSUMERS=1, SPLIT_K=1, STAGES=3, STORE_T=1)),
    # G39: CLUSTER_M=2 with RELAXED=1 (a relaxed opening barrier, the producer's tail waiting for every release into
    # its block instead of the closing barrier): BM 48 over 96 rows, ragged N / K, a ring of 3 turning over; a second
    # row tile wholly past M with a ring of 2; BM 64 over 100 rows (the second tile 36 of 64), a ring deeper than the
    # k-tiles (12 stages, 7 k-tiles)
    ((96, 200, 1040), dict(SWAP=1, CLUSTER_M=2, BN=64, BM=48, INSTR=gemm_fp8.SWAP_INSTR[48], STAGES=3, TMA_ONLY=1,
                           RELAXED=1)),
    ((7, 136, 528), dict(SWAP=1, CLUSTER_M=2, BN=64, STAGES=2, RELAXED=1)),
    ((100, 136, 784), dict(SWAP=1, CLUSTER_M=2, BN=64, BM=64, INSTR=gemm_fp8.SWAP_INSTR[64], STAGES=12, TMA_ONLY=1,
                           RELAXED=1)),
]


@pytest.mark.parametrize("shape,constexprs", CASES, ids=[f"{m}x{n}x{k}" for (m, n, k), _ in CASES])
def test_gemm_fp8_against_float64(shape, constexprs):
    M, N, K = shape
    a, b, sa, sb = _inputs(M, N, K, seed=M + N + K)
    out = np.full((M, N), np.nan, np.float32)
    gemm_fp8.launch(a, b, sa, sb, out, **constexprs)
    _check_bf16_result(out, a, b, sa, sb)


def test_torch_cpu_tensors_next_to_scaled_mm():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    M, N, K = 72, 136, 208
    a, b, sa, sb = _inputs(M, N, K, seed=7)
    ta = torch.from_numpy(a).to(torch.float8_e4m3fn)
    tb = torch.from_numpy(b).to(torch.float8_e4m3fn)
    tsa, tsb = torch.from_numpy(sa), torch.from_numpy(sb)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    gemm_fp8.launch(ta, tb, tsa, tsb, out)
    got = out.to(torch.float32).numpy()
    _check_bf16_result(got, a, b, sa, sb)
    theirs = torch._scaled_mm(ta, tb.t(), tsa, tsb, out_dtype=torch.bfloat16).to(torch.float32).numpy()
    _check_bf16_result(theirs, a, b, sa, sb)        # the same contract holds for the peer
    ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(theirs), 1e-30))) - 7)
    assert np.all(np.abs(got - theirs) <= ulp)      # at most one bf16 ulp apart (different summation order)


def test_policy_table_classes():
    assert gemm_fp8.shape_class(128, 4096, 4096) == "skinny"
    assert gemm_fp8.shape_class(1024, 1024, 1024) == "small"
    assert gemm_fp8.shape_class(4096, 14336, 4096) == "large"
    p = gemm_fp8.policy(4096, 4096, 4096)
    assert (p["BM"], p["BN"], p["BK"], p["INSTR"]) == (128, 256, 128, tp.nv.wgmma_m64n256k32_e4m3)
    assert gemm_fp8.policy(128, 4096, 4096) == gemm_fp8.swap_policy(128, 4096, 4096)     # skinny: swap-AB
    for shape in ((128, 4096, 4096), (1024, 1024, 1024), (4096, 4096, 4096)):
        p = gemm_fp8.policy(*shape, forms=False)
        assert p["INSTR"].n == p["BN"] and p["BM"] == 64 * p["CONSUMERS"] and p["BK"] == 128
        smem = p["STAGES"] * (p["BM"] + p["BN"]) * p["BK"]
        assert smem <= 227 * 1024


def test_swap_params_and_refusals():
    """The swap form's table: BM the rows rounded up to an instruction N (16-128), the ring as deep as fits,
    split-K filling at most one wave with >= 4 k-tiles a share; constexprs it does not take, or a tile that is not
    C^T's, are refused with what to change."""
    for (M, N, K), (bm, split) in {(16, 4096, 4096): (16, 4), (128, 4096, 4096): (128, 4), (16, 14336, 4096): (16, 1),
                                   (256, 4096, 14336): (128, 2), (40, 4096, 512): (64, 1)}.items():
        p = gemm_fp8.swap_params(M, N, K)
        assert (p["BM"], p["SPLIT_K"], p["INSTR"].n, p["CONSUMERS"]) == (bm, split, bm, 2), (M, N, K, p)
        assert p["STAGES"] * (p["BM"] + p["BN"]) * p["BK"] <= gemm_fp8.SWAP_SMEM and p["STAGES"] >= 4
        tiles = -(-M // bm) * -(-N // 128)
        assert tiles * split <= gemm_fp8.NUM_SMS or split == 1
    a, b, sa, sb = _inputs(32, 128, 256)
    out = np.zeros((32, 128), np.float32)
    with pytest.raises(ValueError, match="drop.*IN_FLIGHT"):
        gemm_fp8.launch(a, b, sa, sb, out, SWAP=1, IN_FLIGHT=1)
    with pytest.raises(ValueError, match="BN = 64 \\* CONSUMERS"):
        gemm_fp8.launch(a, b, sa, sb, out, SWAP=1, CONSUMERS=1)   # BN 128 over one consumer
    with pytest.raises(ValueError, match="cluster of 2 or 4 blocks"):
        gemm_fp8.launch(a, b, sa, sb, out, SWAP=1, CLUSTER_K=3)
    with pytest.raises(ValueError, match="cluster of 2 or 4 blocks"):
        gemm_fp8.launch(a, b, sa, sb, out, SWAP=1, CLUSTER_K=2, SPLIT_K=2)
    with pytest.raises(ValueError, match="even STAGES >= 4"):
        gemm_fp8.launch(a, b, sa, sb, out, SWAP=1, K_WAYS=2, STAGES=5)
    with pytest.raises(ValueError, match="BN = 64 \\* CONSUMERS / K_WAYS"):
        gemm_fp8.launch(a, b, sa, sb, out, SWAP=1, K_WAYS=2, BN=128)
    with pytest.raises(ValueError, match="without a K split"):
        gemm_fp8.launch(a, b, sa, sb, out, SWAP=1, CLUSTER_M=2, SPLIT_K=2)
    with pytest.raises(ValueError, match="RELAXED=1 .*CLUSTER_M=1, K_WAYS=1"):     # (G39) no rows' cluster
        gemm_fp8.launch(a, b, sa, sb, out, SWAP=1, RELAXED=1)
    with pytest.raises(ValueError, match="RELAXED=1 .*CLUSTER_M=2, K_WAYS=2"):     # its tail is for one consumer
        gemm_fp8.launch(a, b, sa, sb, out, SWAP=1, CLUSTER_M=2, K_WAYS=2, RELAXED=1)


def test_swap_cluster_params(monkeypatch):
    """CLUSTER_K's table: a split of 2 or 4 becomes the cluster where its receive tiles (CLUSTER_K / 2 f32 (BN, BM)
    tiles) leave at least SWAP_CLUSTER_MIN_STAGES stages in SWAP_SMEM; a caller's CLUSTER_K gets the ring that fits
    beside them, a caller's SPLIT_K (or CLUSTER_K=1) the slots. (The table before G34's rows, which
    test_g34_policy checks over it.)"""
    monkeypatch.setattr(gemm_fp8, "_swap_g34", lambda M, N, K, p: p)
    monkeypatch.setattr(gemm_fp8, "_swap_h3", lambda M, N, K, p: p)       # (H3's rows: test_h3_policy)
    monkeypatch.setattr(gemm_fp8, "skinny_persistent", lambda M, N, K: False)
    for (M, N, K, bn, most), (ck, split) in {(16, 4096, 4096, 128, 4): (4, 1), (16, 4096, 4096, 128, 2): (1, 4),
                                             (64, 4096, 4096, 128, 4): (4, 1), (128, 4096, 4096, 128, 4): (1, 4),
                                             (128, 4096, 4096, 64, 2): (2, 1), (16, 14336, 4096, 128, 2): (1, 1),
                                             (256, 4096, 4096, 128, 2): (2, 1),
                                             (256, 4096, 4096, 128, 0): (1, 2)}.items():
        p = gemm_fp8.swap_params(M, N, K, BN=bn, cluster=most)
        assert (p["CLUSTER_K"], p["SPLIT_K"]) == (ck, split), (M, N, K, bn, p)
        recv = (p["CLUSTER_K"] // 2) * p["BN"] * p["BM"] * 4
        assert p["STAGES"] * (p["BM"] + p["BN"]) * p["BK"] + recv <= gemm_fp8.SWAP_SMEM and p["STAGES"] >= 4
        assert gemm_fp8.grid_of(M, N, p)[2] == max(ck, split)
    # the policy: a split of 2 in the kernel, over 128-column tiles where theirs is 2, else over 64-column tiles
    for (M, N, K), (bn, ck, split) in {(16, 4096, 4096): (64, 2, 1), (128, 4096, 4096): (64, 2, 1),
                                       (256, 4096, 4096): (128, 2, 1), (16, 14336, 4096): (128, 1, 1),
                                       (16, 4096, 14336): (64, 2, 1), (96, 4096, 14336): (64, 2, 1),
                                       (192, 4096, 14336): (128, 1, 2)}.items():
        p = gemm_fp8.swap_policy(M, N, K, whole=False, unsplit=False)    # (G30's rows aside: below)
        assert (p["BN"], p["CONSUMERS"], p["CLUSTER_K"], p["SPLIT_K"]) == (bn, bn // 64, ck, split), (M, N, K, p)
        assert p["K_WAYS"] == 1 and p == gemm_fp8.swap_policy(M, N, K, exact=False, whole=False, unsplit=False)
        assert p == gemm_fp8.policy(M, N, K) or (M, N, K) in ((256, 4096, 4096), (16, 4096, 4096))
    # G24: rows the table's BM pads, at K = 4096, where it splits K: BM the rows' own instruction N and two consumers
    # on alternate k-tiles (K_WAYS=2) over 64-column tiles, the split of 2 in the kernel or unsplit (one full wave)
    for (M, N, K), (bm, ck, stages) in {(24, 4096, 4096): (24, 2, 12), (48, 4096, 4096): (48, 2, 12),
                                        (40, 4096, 4096): (48, 2, 12), (96, 4096, 4096): (96, 2, 8),
                                        (192, 4096, 4096): (96, 1, 8)}.items():
        p = gemm_fp8.policy(M, N, K)
        assert (p["BM"], p["BN"], p["CONSUMERS"], p["K_WAYS"], p["CLUSTER_K"], p["SPLIT_K"], p["STAGES"]) == (
            bm, 64, 2, 2, ck, 1, stages), (M, N, K, p)
        assert p["INSTR"].n == bm and p != gemm_fp8.swap_policy(M, N, K, exact=False)
    # not where the table's BM is the rows' own (16, 32, 64, 128), not at 16 rows or fewer, not past the measured K,
    # not where the table does not split K (N = 14336), not with fewer than 8 stages (112 rows)
    for M, N, K in ((16, 4096, 4096), (32, 4096, 4096), (64, 4096, 4096), (128, 4096, 4096), (8, 4096, 4096),
                    (96, 4096, 14336), (24, 4096, 2048), (96, 14336, 4096), (112, 4096, 4096)):
        assert gemm_fp8.policy(M, N, K) == gemm_fp8.swap_policy(M, N, K, exact=False), (M, N, K)
    # G30: whole 128-row tiles past 128 rows (256) at K = 4096, where the table splits K: 64-column tiles, one
    # consumer, unsplit, one full wave (2 x 64 = 128 blocks) with the ring that fits (9 stages); not at K = 14336, not
    # where the unsplit tiles are short of a wave (N = 2048), not for rows the 128-row tiles pad (240), not at <= 128
    p = gemm_fp8.policy(256, 4096, 4096)
    assert (p["BM"], p["BN"], p["CONSUMERS"], p["K_WAYS"], p["CLUSTER_K"], p["SPLIT_K"], p["STAGES"]) == (
        128, 64, 1, 1, 1, 1, 9), p
    assert p["INSTR"].n == 128 and gemm_fp8.grid_of(256, 4096, p) == (2, 64, 1)
    assert p["STAGES"] * (p["BM"] + p["BN"]) * p["BK"] <= gemm_fp8.SWAP_SMEM
    for M, N, K in ((256, 4096, 14336), (256, 2048, 4096), (240, 4096, 4096), (128, 4096, 4096), (256, 14336, 4096)):
        assert gemm_fp8.policy(M, N, K) == gemm_fp8.swap_policy(M, N, K, whole=False), (M, N, K)
    # G30: at most 16 rows at K = 4096 where 64-column tiles are about half a wave (N = 4096): those tiles unsplit, one
    # consumer, 12 stages; not at K = 14336, not at 17 rows, not where the tiles are a whole wave or a quarter of one
    for M in (1, 8, 16):
        p = gemm_fp8.policy(M, 4096, 4096)
        assert (p["BM"], p["BN"], p["CONSUMERS"], p["K_WAYS"], p["CLUSTER_K"], p["SPLIT_K"], p["STAGES"]) == (
            16, 64, 1, 1, 1, 1, 12), (M, p)
        assert gemm_fp8.grid_of(M, 4096, p) == (1, 64, 1)
        assert gemm_fp8.swap_policy(M, 4096, 4096, unsplit=False)["CLUSTER_K"] == 2
    for M, N, K in ((16, 4096, 14336), (17, 4096, 4096), (16, 8192, 4096), (16, 2048, 4096), (16, 14336, 4096)):
        assert gemm_fp8.policy(M, N, K) == gemm_fp8.swap_policy(M, N, K, unsplit=False), (M, N, K)
    # every row of the policy copies TMA only (G30); tma_only=False is the table without it
    for M, N, K in ((1, 4096, 4096), (32, 4096, 4096), (96, 4096, 4096), (192, 4096, 4096), (256, 4096, 4096),
                    (16, 14336, 4096), (128, 4096, 14336), (40, 1000, 2064)):
        p = gemm_fp8.policy(M, N, K)
        q = gemm_fp8.swap_policy(M, N, K, tma_only=False)
        assert p["TMA_ONLY"] == 1 and "TMA_ONLY" not in q and p == {**q, "TMA_ONLY": 1}, (M, N, K)
        assert gemm_fp8.kernel_of(p)[1]["TMA_ONLY"] == 1 and gemm_fp8.kernel_of(q)[1]["TMA_ONLY"] == 0
    assert [gemm_fp8.swap_exact_bm(m) for m in (1, 17, 24, 40, 100, 128, 144, 192, 224, 256)] == [
        8, 24, 24, 48, 104, 128, None, 96, 112, None]
    p = gemm_fp8.params_for(16, 4096, 4096, SWAP=1, SPLIT_K=2)
    assert (p["SPLIT_K"], p["CLUSTER_K"]) == (2, 1)
    p = gemm_fp8.params_for(256, 4096, 4096, SWAP=1, CLUSTER_K=1)
    assert (p["SPLIT_K"], p["CLUSTER_K"], p["STAGES"]) == (2, 1, gemm_fp8.swap_params(256, 4096, 4096)["STAGES"])
    p = gemm_fp8.params_for(16, 4096, 4096, SWAP=1, CLUSTER_K=1)
    assert (p["SPLIT_K"], p["CLUSTER_K"]) == (4, 1)
    p = gemm_fp8.params_for(128, 4096, 4096, SWAP=1, CLUSTER_K=2)
    assert (p["SPLIT_K"], p["CLUSTER_K"], p["STAGES"]) == (1, 2, gemm_fp8.swap_cluster_stages(128, 128, 2))


@pytest.mark.parametrize("shape,cluster", [((16, 4096, 4096), False), ((128, 4096, 4096), False),
                                           ((64, 14336, 4096), False), ((16, 4096, 4096), True),
                                           ((64, 4096, 4096), True), ((256, 4096, 4096), True),
                                           ((32, 4096, 4096), "policy"), ((128, 4096, 4096), "policy"),
                                           ((16, 4096, 4096), "kways"), ((128, 4096, 4096), "kways"),
                                           ((192, 4096, 4096), "kways96"), ((96, 4096, 4096), "bm96"),
                                           ((16, 4096, 4096), "cm"), ((128, 4096, 4096), "cm_kw"),
                                           ((24, 4096, 4096), "policy"), ((96, 4096, 4096), "policy"),
                                           ((256, 4096, 4096), "policy_whole"), ((16, 4096, 4096), "policy_unsplit"),
                                           ((32, 4096, 4096), "policy_fallback"),
                                           ((32, 4096, 4096), "cm_tma"), ((128, 4096, 4096), "cm_kw_tma"),
                                           ((64, 4096, 4096), "cm_deep_tma")])
def test_swap_verifies_clean(shape, cluster):
    """gemm_fp8_swap: the ring's pre-released stages, wait_group 1 with tile k - 1's stage released after it, the
    split's slots (disjoint per block) and the transposed store; CLUSTER_K's pushes (each receive tile waited on before
    it is read and before the block exits) and the ranks' disjoint column shares; K_WAYS=2's two consumers on
    alternate k-tiles of one ring (each releasing its own stages, tile k - 2's after wait_group 1) and the hand-over
    tile (over a cluster of 2, and unsplit at BM 96); BM 96 (n96) over a cluster; CLUSTER_M=2's multicast ring (each
    stage refilled after both blocks' consumers released it, cluster barriers after the mbarriers and before exit),
    one and two consumers: clean."""
    import tilepy_verify as tv

    if cluster in ("policy", "policy_whole", "policy_unsplit"):    # (the policy's copies are TMA only: G30)
        p = gemm_fp8.swap_policy(*shape)
    elif cluster == "policy_fallback":
        p = gemm_fp8.swap_policy(*shape, tma_only=False)
    elif cluster == "kways":
        p = gemm_fp8.swap_params(*shape, k_ways=2, cluster=2)
    elif cluster == "kways96":
        p = gemm_fp8.swap_params(*shape, BM=96, k_ways=2, cluster=2)
    elif cluster == "bm96":
        p = gemm_fp8.swap_params(*shape, BM=96, BN=64, cluster=2)
    elif cluster in ("cm", "cm_kw"):
        p = gemm_fp8.swap_params(*shape, BN=64, cluster_m=2, k_ways=2 if cluster == "cm_kw" else 1)
    elif isinstance(cluster, str) and cluster.startswith("cm_"):   # G32: CLUSTER_M=2, TMA only (deep: 18 stages)
        p = {**gemm_fp8.swap_params(*shape, BN=64, cluster_m=2, k_ways=2 if "kw" in cluster else 1), "TMA_ONLY": 1}
        if "deep" in cluster:
            p["STAGES"] = 18
    else:
        p = gemm_fp8.swap_params(*shape, cluster=4 * cluster)
    kernel, kp = gemm_fp8.kernel_of(p)
    rows2 = cluster in ("policy", "policy_fallback") and any(lo <= shape[0] <= hi for lo, hi in gemm_fp8.SWAP_ROWS2)
    assert (kp["CLUSTER_K"] > 1) == (bool(cluster) and not rows2 and cluster not in (
        "kways96", "cm", "cm_kw", "policy_whole", "policy_unsplit", "cm_tma", "cm_kw_tma", "cm_deep_tma"))
    assert kernel is gemm_fp8.gemm_fp8_swap
    report = tv.verify(kernel, target="sm_90a", **kp)
    assert report.ok and not report.findings, str(report)


@pytest.mark.parametrize("shape,extra", [((128, 4096, 4096), dict(BN=64, CLUSTER_K=2, HALF_SUM=1, TMA_ONLY=1)),
                                         ((128, 4096, 4096), dict(BN=64, CLUSTER_K=2, HALF_SUM=1, STORE_T=1)),
                                         ((96, 4096, 4096), dict(BM=96, K_WAYS=2, CLUSTER_K=2, HALF_SUM=1, STORE_T=1)),
                                         ((32, 4096, 4096), dict(BN=64, CLUSTER_K=2, HALF_SUM=1, TMA_ONLY=1)),
                                         ((40, 200, 1040), dict(CLUSTER_K=2, HALF_SUM=1)),
                                         ((16, 4096, 4096), dict(BN=64, SPLIT_K=1, STORE_T=1, TMA_ONLY=1)),
                                         ((256, 4096, 4096), dict(BN=64, SPLIT_K=1, STORE_T=1, TMA_ONLY=1))])
def test_g34_forms_verify_clean(shape, extra):
    """G34: HALF_SUM's push of the partner's half (one st.async exchange, the receive tile waited on before it is read)
    and the ranks' disjoint halves of C's rows; STORE_T's staged tile (written by the consumer, arrived on, stored by
    the producer's thread, its read waited for before exit): clean."""
    import tilepy_verify as tv

    p = gemm_fp8.params_for(*shape, SWAP=1, **extra)
    kernel, kp = gemm_fp8.kernel_of(p)
    assert kernel is gemm_fp8.gemm_fp8_swap and all(kp[k] == v for k, v in extra.items())
    report = tv.verify(kernel, target="sm_90a", **kp)
    assert report.ok and not report.findings, str(report)


@pytest.mark.parametrize("shape,extra", [((96, 4096, 4096), dict(BN=64, BM=48, CLUSTER_M=2, TMA_ONLY=1, RELAXED=1)),
                                         ((128, 4096, 4096), dict(BN=64, BM=64, CLUSTER_M=2, TMA_ONLY=1, RELAXED=1)),
                                         ((7, 136, 528), dict(BN=64, CLUSTER_M=2, STAGES=2, RELAXED=1))])
def test_g39_relaxed_rows_cluster_verifies_clean(shape, extra):
    """G39: CLUSTER_M=2 with RELAXED=1: the opening cluster barrier relaxed and, instead of the closing one, the
    producer's tail waiting for the releases k_tiles .. k_tiles + STAGES - 2 of every block's consumer (the only remote
    arrivals into its block): clean (no block exits while the other still arrives on its mbarriers)."""
    import tilepy_verify as tv

    p = gemm_fp8.params_for(*shape, SWAP=1, **extra)
    kernel, kp = gemm_fp8.kernel_of(p)
    assert kernel is gemm_fp8.gemm_fp8_swap and all(kp[k] == v for k, v in extra.items() if k != "BM")
    report = tv.verify(kernel, target="sm_90a", **kp)
    assert report.ok and not report.findings, str(report)


def test_g34_policy(monkeypatch):
    """G34's rows over the table (swap_policy(g34=False)): two unsplit row tiles of half the rows (BM the e4m3
    instruction N holding them), one consumer over 64-column tiles (128 blocks, no cluster) at SWAP_ROWS2's rows
    (17-48, 81-96, 129-255) at K = 4096 where 2 x N / 64 blocks fill 0.9-1 wave; HALF_SUM on the table's other
    CLUSTER_K=2 rows of 64-column tiles with BM >= 32 in whole 8-row halves (not BM 16 or 24; not 128-column tiles);
    STORE_T on the row tiles of BM 80 / 112 / 128 and on whole 128-row tiles unsplit (256 rows); each ring re-sized,
    in SWAP_SMEM."""
    # (and C's tile by one TMA store at BM 80 / 112 / 128: SWAP_ROWS2_STORE_T, call 4)
    monkeypatch.setattr(gemm_fp8, "_swap_h3", lambda M, N, K, p: p)       # (H3's rows: test_h3_policy)
    for M, bm, stages in ((17, 16, 12), (24, 16, 12), (32, 16, 12), (40, 24, 12), (48, 24, 12), (81, 48, 12),
                          (96, 48, 12), (129, 80, 11), (136, 80, 11), (160, 80, 11), (192, 96, 11), (200, 104, 10),
                          (224, 112, 9), (255, 128, 8)):
        p = gemm_fp8.policy(M, 4096, 4096)
        assert (p["BM"], p["BN"], p["CONSUMERS"], p["K_WAYS"], p["CLUSTER_K"], p["SPLIT_K"], p["STAGES"]) == (
            bm, 64, 1, 1, 1, 1, stages), (M, p)
        assert gemm_fp8.grid_of(M, 4096, p) == (2, 64, 1) and p["INSTR"].n == bm and p["TMA_ONLY"] == 1
        assert p.get("STORE_T", 0) == (bm in (80, 112, 128)), (M, p)
        assert p["STAGES"] * (64 + bm) * 128 + p.get("STORE_T", 0) * bm * 64 * 2 <= gemm_fp8.SWAP_SMEM
    assert "STORE_T" not in gemm_fp8.policy(136, 4100, 4096)      # (C's rows off 16 bytes: no tensor map)
    # one row tile: not past the measured K, not where the tiles miss a wave, not at 49-80 / 97-128 rows
    for M, N, K in ((32, 4096, 14336), (96, 4096, 14336), (32, 14336, 4096), (96, 2048, 4096), (64, 4096, 4096),
                    (80, 4096, 4096), (112, 4096, 4096), (16, 4096, 4096)):
        assert gemm_fp8.grid_of(M, N, gemm_fp8.policy(M, N, K))[0] == 1, (M, N, K)
    for M, N, K in ((64, 4096, 4096), (80, 4096, 4096), (112, 4096, 4096), (128, 4096, 4096), (32, 4096, 14336),
                    (64, 4096, 14336), (128, 4096, 14336)):
        p, q = gemm_fp8.policy(M, N, K), gemm_fp8.swap_policy(M, N, K, g34=False)
        assert q["CLUSTER_K"] == 2 and q["BN"] == 64 and p.get("HALF_SUM") == 1, (M, N, K, p)
        assert p == {**q, "TMA_ONLY": 1, "HALF_SUM": 1, "STAGES": p["STAGES"]} and p["STAGES"] >= q["STAGES"]
        recv = p["BN"] * p["BM"] * 2 + (p["K_WAYS"] == 2) * p["BN"] * p["BM"] * 4
        assert p["STAGES"] * (p["BN"] + p["BM"]) * 128 + recv <= gemm_fp8.SWAP_SMEM, p
        assert gemm_fp8.kernel_of(p)[1]["HALF_SUM"] == 1
    for M, N, K in ((16, 4096, 14336), (256, 4096, 14336), (16, 4096, 4096), (192, 4096, 4096)):
        assert "HALF_SUM" not in gemm_fp8.policy(M, N, K), (M, N, K)
    p = gemm_fp8.policy(256, 4096, 4096)
    assert p == {**gemm_fp8.swap_policy(256, 4096, 4096, g34=False), "TMA_ONLY": 1, "STORE_T": 1, "STAGES": 8}
    assert p["STAGES"] * (64 + 128) * 128 + 128 * 64 * 2 <= gemm_fp8.SWAP_SMEM
    for M, N, K in ((256, 4096, 14336), (192, 4096, 4096), (16, 4096, 4096), (256, 14336, 4096), (200, 4096, 4096)):
        assert "STORE_T" not in gemm_fp8.policy(M, N, K), (M, N, K)


def test_g34_refusals_and_stages():
    """HALF_SUM runs over a cluster of 2 with whole 8-row halves; STORE_T without slots (and, over a cluster, with
    HALF_SUM); the ring re-sized beside the half receive tile and C's staged tile."""
    a, b, sa, sb = _inputs(24, 136, 512)
    out = np.zeros((24, 136), np.float32)
    for bad in (dict(HALF_SUM=1, CLUSTER_K=1), dict(HALF_SUM=1, BM=24, CLUSTER_K=2), dict(STORE_T=1, SPLIT_K=2),
                dict(STORE_T=1, CLUSTER_K=2)):
        with pytest.raises(ValueError, match="HALF_SUM|STORE_T"):
            gemm_fp8.launch(a, b, sa, sb, out, SWAP=1, **bad)
    assert gemm_fp8.swap_stages(128, 64, 2) == 7 and gemm_fp8.swap_stages(128, 64, 2, half_sum=1) == 8
    assert gemm_fp8.swap_stages(128, 64, 1) == 9 and gemm_fp8.swap_stages(128, 64, 1, store_t=1) == 8
    for M, extra in ((128, dict(BN=64, CLUSTER_K=2, HALF_SUM=1, STORE_T=1)), (256, dict(BN=64, SPLIT_K=1, STORE_T=1))):
        p = gemm_fp8.params_for(M, 4096, 4096, SWAP=1, **extra)
        side = p["BN"] * p["BM"] * (4 * (p["CLUSTER_K"] // 2) + 2) // (1 + p.get("HALF_SUM", 0))
        assert p["STAGES"] * (p["BN"] + p["BM"]) * 128 + side <= gemm_fp8.SWAP_SMEM, p


def test_h3_policy():
    """H3's rows (swap_policy(h3=False) is the table without them): 129-192 rows x 14336 x 4096, one row tile of BM 192
    (128 columns over two consumers, unsplit, 5 stages: 112 blocks), BM 144 at 129-144 rows (6 stages; H4); 193-256
    rows there, the large class's persistent 128 x 256 form (gemm_fp8_persistent_tma, 112 tiles); 129-256 rows x 4096
    x 14336, two unsplit row tiles of half the rows with STORE_T where that BM is 80 / 112 / 128 (128 blocks), one row
    tile of BM 192 over the cluster's split as HALF_SUM at 161-192 rows (BM 96's), the table at 193-208 rows (BM 104);
    not outside the measured (N, K)."""
    for M, bm, stages in ((129, 144, 6), (136, 144, 6), (144, 144, 6), (145, 192, 5), (160, 192, 5), (176, 192, 5),
                          (192, 192, 5)):
        p = gemm_fp8.policy(M, 14336, 4096)
        assert (p["BM"], p["BN"], p["CONSUMERS"], p["K_WAYS"], p["CLUSTER_K"], p["SPLIT_K"], p["STAGES"]) == (
            bm, 128, 2, 1, 1, 1, stages), (M, p)
        assert p["INSTR"] is gemm_fp8.SWAP_INSTR[bm] and p["INSTR"].n == bm
        assert p["TMA_ONLY"] == 1 and "STORE_T" not in p
        assert gemm_fp8.grid_of(M, 14336, p) == (1, 112, 1) and gemm_fp8.kernel_of(p)[0] is gemm_fp8.gemm_fp8_swap
        assert p["STAGES"] * (bm + 128) * 128 <= gemm_fp8.SWAP_SMEM < (p["STAGES"] + 1) * (bm + 128) * 128
        assert gemm_fp8.swap_policy(M, 14336, 4096, h3=False)["BM"] == 128
    for M in (193, 224, 256):
        p = gemm_fp8.policy(M, 14336, 4096)
        assert p == {**gemm_fp8.PRESETS["sm_90a"], **gemm_fp8.LARGE_PERSISTENT}, (M, p)
        kernel, kp = gemm_fp8.kernel_of(p)
        assert kernel is gemm_fp8.gemm_fp8_persistent_tma and gemm_fp8.grid_of(M, 14336, p) == (112,)
    for M, bm, stages in ((129, 80, 11), (160, 80, 11), (209, 112, 9), (224, 112, 9), (225, 128, 8), (256, 128, 8)):
        p = gemm_fp8.policy(M, 4096, 14336)
        assert (p["BM"], p["BN"], p["CONSUMERS"], p["CLUSTER_K"], p["SPLIT_K"], p["STAGES"], p["STORE_T"]) == (
            bm, 64, 1, 1, 1, stages, 1), (M, p)
        assert gemm_fp8.grid_of(M, 4096, p) == (2, 64, 1) and p["INSTR"].n == bm and p["TMA_ONLY"] == 1
        assert p["STAGES"] * (64 + bm) * 128 + bm * 64 * 2 <= gemm_fp8.SWAP_SMEM
    for M in (161, 192):
        p = gemm_fp8.policy(M, 4096, 14336)
        assert (p["BM"], p["BN"], p["CONSUMERS"], p["CLUSTER_K"], p["SPLIT_K"], p["HALF_SUM"], p["STAGES"]) == (
            192, 64, 1, 2, 1, 1, 6), (M, p)
        assert gemm_fp8.grid_of(M, 4096, p) == (1, 64, 2) and "STORE_T" not in p
        assert p["STAGES"] * (64 + 192) * 128 + 64 * 96 * 4 <= gemm_fp8.SWAP_SMEM
    # the table: at 193-208 rows x 4096 x 14336 (BM 104), at 128 rows, past the measured K or N, C's rows off 16 bytes
    for M, N, K in ((200, 4096, 14336), (128, 14336, 4096), (128, 4096, 14336), (192, 14336, 8192),
                    (192, 14336, 2048), (256, 14336, 14336), (192, 8192, 4096), (256, 8192, 4096), (192, 4096, 8192),
                    (256, 2048, 14336), (256, 14340, 4096), (160, 4100, 14336)):
        assert gemm_fp8.policy(M, N, K) == gemm_fp8.swap_policy(M, N, K, h3=False), (M, N, K)
        assert not gemm_fp8.skinny_persistent(M, N, K)
    for M in (192, 256):    # (G34's rows at K = 4096 stay)
        assert gemm_fp8.policy(M, 4096, 4096) == gemm_fp8.swap_policy(M, 4096, 4096, h3=False)


@pytest.mark.parametrize("shape,extra", [((144, 14336, 4096), None), ((160, 14336, 4096), None),
                                         ((256, 14336, 4096), None),
                                         ((192, 4096, 14336), None), ((224, 4096, 14336), None),
                                         ((256, 14336, 4096), dict(BM=256, BN=128, SPLIT_K=1, TMA_ONLY=1)),
                                         ((256, 4096, 14336), dict(BM=256, BN=64, CLUSTER_K=2, HALF_SUM=1))])
def test_h3_forms_verify_clean(shape, extra):
    """H3's policy rows (one row tile of BM 144 (H4) or 192; the persistent 128 x 256 grid at 256 rows; BM 192 over
    the cluster's split as HALF_SUM; two row tiles with STORE_T) and BM 256 (n256) over 128 columns unsplit and over
    HALF_SUM: clean."""
    import tilepy_verify as tv

    p = gemm_fp8.policy(*shape) if extra is None else gemm_fp8.params_for(*shape, SWAP=1, **extra)
    kernel, kp = gemm_fp8.kernel_of(p)
    report = tv.verify(kernel, target="sm_90a", **kp)
    assert report.ok and not report.findings, str(report)


def test_launch_refuses_bad_shapes_and_dtypes():
    a, b, sa, sb = _inputs(32, 48, 64)
    out = np.zeros((32, 48), np.float32)
    with pytest.raises(ValueError, match="multiple of 16"):
        gemm_fp8.launch(a[:, :40].copy(), b[:, :40].copy(), sa, sb, out)
    with pytest.raises(ValueError, match=r"b is \(N, K\)"):
        gemm_fp8.launch(a, b.T.copy(), sa, sb, out)
    with pytest.raises(ValueError, match="must be float32"):
        gemm_fp8.launch(a.astype(np.float64), b, sa, sb, out)
    with pytest.raises(ValueError, match="one element"):
        gemm_fp8.launch(a, b, np.ones(2, np.float32), sb, out)
    with pytest.raises(ValueError, match=r"out is bf16 \(32, 48\)"):
        gemm_fp8.launch(a, b, sa, sb, np.zeros((48, 32), np.float32))
    with pytest.raises(ValueError, match="contiguous"):
        gemm_fp8.launch(np.asfortranarray(a), b, sa, sb, out)


@pytest.mark.parametrize("params", [
    dict(gemm_fp8.PRESETS["sm_90a"], STAGES=3, EPILOGUE=2, PRODUCER_REGS=96, CONSUMER_REGS=200),
    dict(gemm_fp8.PRESETS["sm_90a"], STAGES=3, EPILOGUE=2, IN_FLIGHT=1, GROUP_M=16),
    dict(gemm_fp8.policy(1024, 1024, 1024), STAGES=4, EPILOGUE=2),
])
def test_tma_store_epilogue_verifies_clean(params):
    """The consumers' c_s write is ordered before the producer's bulk store by the `staged` mbarrier, the store's
    read ends at store_bulk_wait before the block exits, and the scaled tile's 8 rows per store land in distinct
    banks (the 128-byte swizzle): no race, no pipeline hazard, no bank conflict."""
    import tilepy_verify as tv

    report = tv.verify_ir(gemm_fp8.gemm_fp8.ir("sm_90a", **params))
    assert not report.findings, str(report)


@pytest.mark.parametrize("params", [
    dict(gemm_fp8.PRESETS["sm_90a"], STAGES=4, STORE_N=64, PRODUCER_REGS=96, CONSUMER_REGS=200),
    dict(gemm_fp8.PRESETS["sm_90a"], STAGES=2, STORE_N=64, BN=128, INSTR=tp.nv.wgmma_m64n128k32_e4m3, GROUP_M=2),
])
def test_persistent_tma_pieces_verify_clean(params):
    """gemm_fp8_persistent_tma: the ring's per-tile turns, the two store buffers' handshakes with the store warp
    (phase = the buffer's use count in the block, across tiles) and the TMA store's reads: clean."""
    import tilepy_verify as tv

    report = tv.verify(gemm_fp8.gemm_fp8_persistent_tma, target="sm_90a", **params)
    assert report.ok and not report.findings, str(report)


def test_persistent_tma_pieces_through_launch():
    """PERSISTENT=1 with STORE_N picks gemm_fp8_persistent_tma (the policy's TMA-store entries yield to the preset
    unless named); an odd number of pieces or another EPILOGUE is refused with the reason."""
    p = gemm_fp8.params_for(4096, 14336, 4096, PERSISTENT=1, STORE_N=64, PRODUCER_REGS=96, CONSUMER_REGS=200)
    kernel, kp = gemm_fp8.kernel_of(p)
    assert kernel is gemm_fp8.gemm_fp8_persistent_tma
    assert (kp["STAGES"], kp["STORE_N"], kp["PRODUCER_REGS"]) == (4, 64, 96) and "EPILOGUE" not in kp
    with pytest.raises(ValueError, match="even number of column pieces"):
        gemm_fp8.kernel_of({**p, "STORE_N": 128, "BN": 128})
    with pytest.raises(ValueError, match="even number of column pieces"):
        gemm_fp8.kernel_of({**p, "EPILOGUE": 0})


def test_persistent_refuses_the_tma_store_epilogue():
    with pytest.raises(ValueError, match="EPILOGUE"):
        gemm_fp8.kernel_of({**gemm_fp8.PRESETS["sm_90a"], "PERSISTENT": 1, "EPILOGUE": 2})
    kernel, kp = gemm_fp8.kernel_of({**gemm_fp8.PRESETS["sm_90a"], "PERSISTENT": 1, "EPILOGUE": 0})
    assert kernel is gemm_fp8.gemm_fp8_persistent and "EPILOGUE" not in kp


@pytest.mark.parametrize("shape", [(2051, 2045, 1008), (4096, 4096, 4096)])
def test_persistent_through_launch_on_the_large_class(shape):
    """PERSISTENT=1 through `launch` on a large-class shape (whose policy is the TMA-store epilogue): the policy's
    EPILOGUE, its 3 stages and register budgets yield to the preset (they were a ValueError on the H100: the GPU
    test's two persistent cases); what the caller names is kept, and a caller's EPILOGUE=2 is still refused."""
    pol = gemm_fp8.policy(*shape, forms=False)       # what a caller's own constexprs lie over
    assert pol["EPILOGUE"] == 2
    p = gemm_fp8.params_for(*shape, PERSISTENT=1, GROUP_M=16)
    kernel, kp = gemm_fp8.kernel_of(p)
    assert kernel is gemm_fp8.gemm_fp8_persistent
    assert kp["STAGES"] == gemm_fp8.PRESETS["sm_90a"]["STAGES"] and kp["GROUP_M"] == 16
    assert not {"EPILOGUE", "PRODUCER_REGS", "CONSUMER_REGS", "IN_FLIGHT"} & set(kp)
    kp = gemm_fp8.kernel_of(gemm_fp8.params_for(*shape, PERSISTENT=1, STAGES=3, PRODUCER_REGS=96,
                                                CONSUMER_REGS=200))[1]
    assert (kp["STAGES"], kp["PRODUCER_REGS"], kp["CONSUMER_REGS"]) == (3, 96, 200)
    with pytest.raises(ValueError, match="EPILOGUE"):
        gemm_fp8.kernel_of(gemm_fp8.params_for(*shape, PERSISTENT=1, EPILOGUE=2))
    assert gemm_fp8.params_for(*shape) == gemm_fp8.policy(*shape)      # no constexprs: the policy as it is


def test_persistent_through_launch_runs_on_a_large_class_shape():
    """The same on the interpreter, end to end: a large-class shape (M N K > 1024^3) through `launch` with
    PERSISTENT=1 (3 blocks over its 128 x 256 tiles, ragged M and N) against float64."""
    M, N, K = 1032, 1000, 1056
    assert gemm_fp8.shape_class(M, N, K) == "large"
    a, b, sa, sb = _inputs(M, N, K, seed=3)
    out = np.full((M, N), np.nan, np.float32)
    gemm_fp8.launch(a, b, sa, sb, out, PERSISTENT=1, NUM_SMS=3)
    _check_bf16_result(out, a, b, sa, sb)


def test_large_policy_is_the_persistent_tma_pieces_where_measured():
    """The large class with more 128 x 256 tiles than SMs and N % 8 == 0 runs gemm_fp8_persistent_tma (96 / 200,
    GROUP_M 16, 4 stages); N off 8 (the TMA-only store cannot write its rows), few tiles, and a caller's own
    constexprs keep gemm_fp8 with the TMA store."""
    for shape in ((4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (4096, 4096, 14336)):
        p = gemm_fp8.policy(*shape)
        assert {k: p[k] for k in gemm_fp8.LARGE_PERSISTENT} == gemm_fp8.LARGE_PERSISTENT
        kernel, kp = gemm_fp8.kernel_of(gemm_fp8.params_for(*shape))
        assert kernel is gemm_fp8.gemm_fp8_persistent_tma and gemm_fp8.grid_of(shape[0], shape[1], p) == (132,)
        smem = kp["STAGES"] * (kp["BM"] + kp["BN"]) * kp["BK"] + 2 * kp["BM"] * kp["STORE_N"] * 2
        assert smem <= 227 * 1024
    for shape in ((2051, 2045, 1008), (1024, 1024, 2048)):
        assert gemm_fp8.kernel_of(gemm_fp8.params_for(*shape))[0] is gemm_fp8.gemm_fp8
    assert gemm_fp8.kernel_of(gemm_fp8.params_for(4096, 4096, 4096, GROUP_M=8))[0] is gemm_fp8.gemm_fp8
