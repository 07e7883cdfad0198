"""gemm_fp8's swap-AB split-K form (gemm_fp8_swap) for compute-sanitizer: unsplit and split (slots + splitk_sum_bf16;
CLUSTER_K's in-kernel sum over a cluster),
ragged rows / columns / K, BM 16 / 64 / 128, a ring that turns over; each output checked against float64.

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp8_swap.py [g24 | g30 | g32 | g34 | g39]
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_fp8_swap.py [g24 | g30 | g32 | g34 | g39]
(g24: K_WAYS / exact BM / CLUSTER_M only; g30: whole 128-row tiles unsplit and TMA_ONLY only; g32: CLUSTER_M with
TMA_ONLY only; g34: HALF_SUM / STORE_T only; h3: BM 192 / 256 only; h3p: H3's policy rows at full size; h4: H3's
call 3 forms)
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_fp8  # noqa: E402

d = torch.device("cuda")
g = torch.Generator(device="cuda").manual_seed(0)
CASES = [((16, 520, 2064), {}), ((40, 1000, 1040), dict(SPLIT_K=1)),
         ((130, 264, 1552), dict(STAGES=3)), ((100, 300, 528), dict(SPLIT_K=1, STAGES=2)),
         # CLUSTER_K (G21): 4 ranks over ragged K, 2 ranks with a ring turning over, one consumer
         ((16, 520, 2064), dict(CLUSTER_K=4)), ((40, 264, 1040), dict(CLUSTER_K=2, STAGES=2)),
         ((130, 136, 1552), dict(BN=64, CONSUMERS=1, CLUSTER_K=2, STAGES=3))]
# K_WAYS=2 (G24: two consumers on alternate k-tiles, the hand-over tile): the cluster's sum over ragged K, the slots,
# unsplit with a ring of 4 turning over and an odd k-tile count; BM the rows' own e4m3 instruction N (24, 48, 96)
G24 = [((16, 520, 2064), dict(K_WAYS=2, CLUSTER_K=2)), ((40, 1000, 1040), dict(K_WAYS=2, CLUSTER_K=1)),
       ((100, 264, 1168), dict(K_WAYS=2, SPLIT_K=1, STAGES=4)), ((48, 264, 1552), dict(K_WAYS=2, BM=48)),
       ((96, 136, 1040), dict(BM=96, BN=64, CLUSTER_K=2, STAGES=3)), ((24, 200, 528), dict(BM=24, SPLIT_K=1, STAGES=2)),
       # CLUSTER_M=2: the rows over a cluster of 2 sharing B's tiles by multicast (a ring turning over; a row tile
       # wholly past M; two consumers on alternate k-tiles over ragged M, N, K)
       ((16, 520, 2064), dict(CLUSTER_M=2, BN=64)), ((7, 136, 528), dict(CLUSTER_M=2, BN=64, STAGES=2)),
       ((40, 264, 1040), dict(CLUSTER_M=2, K_WAYS=2, STAGES=4))]
# G30: whole 128-row tiles over 64-column tiles, one consumer, no K split (256 rows' policy form): the second row tile
# ragged, a ring of 3 turning over; TMA_ONLY=1
G30 = [((200, 264, 1040), dict(BM=128, BN=64, CONSUMERS=1, SPLIT_K=1, STAGES=3)),
       ((256, 520, 2064), dict(BM=128, BN=64, CONSUMERS=1, SPLIT_K=1)),
       # the copies TMA only (TMA_ONLY=1): the cluster's split over ragged M, N, K with a ring turning over; the slots;
       # the rows over a cluster with B multicast; whole 128-row tiles
       ((40, 264, 1040), dict(CLUSTER_K=2, STAGES=2, TMA_ONLY=1)), ((100, 300, 528), dict(SPLIT_K=2, TMA_ONLY=1)),
       ((16, 520, 2064), dict(CLUSTER_M=2, K_WAYS=2, TMA_ONLY=1)),
       ((200, 264, 1040), dict(BM=128, BN=64, CONSUMERS=1, SPLIT_K=1, STAGES=3, TMA_ONLY=1)),
       # 16 rows' policy form (64-column tiles unsplit, 12 stages turning over, TMA only), 7 rows in it
       ((7, 520, 2064), dict(BM=16, BN=64, CONSUMERS=1, SPLIT_K=1, TMA_ONLY=1))]
# G32: the rows over a cluster of 2 with the copies TMA only and one consumer: BM 16 with a ring of 2 turning over and a
# row tile wholly past M; BM 48 over ragged N and K; the deepest ring (20 stages at BM 16)
G32 = [((7, 264, 528), dict(CLUSTER_M=2, BN=64, STAGES=2, TMA_ONLY=1)),
       ((96, 200, 1040), dict(CLUSTER_M=2, BN=64, BM=48, TMA_ONLY=1)),
       ((32, 520, 4096), dict(CLUSTER_M=2, BN=64, BM=16, STAGES=20, TMA_ONLY=1))]
# G34: HALF_SUM (the cluster's split as a reduce-scatter of C's rows) with a ring turning over and ragged M / N / K, two
# consumers (K_WAYS=2) at BM 96; STORE_T (C's tile by one TMA store) with it, unsplit, and at 200 rows (the second row
# tile ragged)
G34 = [((40, 264, 1040), dict(BN=64, CLUSTER_K=2, HALF_SUM=1, STAGES=2, TMA_ONLY=1)),
       ((96, 136, 1040), dict(BM=96, K_WAYS=2, CLUSTER_K=2, HALF_SUM=1, STORE_T=1, STAGES=4)),
       ((130, 264, 1552), dict(BN=64, CLUSTER_K=2, HALF_SUM=1, STORE_T=1, STAGES=3, TMA_ONLY=1)),
       ((16, 520, 2064), dict(BN=64, SPLIT_K=1, STORE_T=1, TMA_ONLY=1)),
       ((200, 264, 1040), dict(BM=128, BN=64, CONSUMERS=1, SPLIT_K=1, STORE_T=1, STAGES=3, TMA_ONLY=1)),
       # the policy's two row tiles at 129-255 rows: BM 104 / 80, one consumer, unsplit, the second tile ragged, a ring
       # turning over (10 stages, 17 k-tiles) and one deeper than the k-tiles
       ((200, 264, 2064), dict(BM=104, BN=64, CONSUMERS=1, SPLIT_K=1, STAGES=10, TMA_ONLY=1)),
       ((136, 200, 784), dict(BM=80, BN=64, CONSUMERS=1, SPLIT_K=1, STAGES=12, TMA_ONLY=1)),
       # STORE_T on those row tiles (the second ragged; 9 stages turning over)
       ((200, 264, 2064), dict(BM=104, BN=64, CONSUMERS=1, SPLIT_K=1, STAGES=9, STORE_T=1, TMA_ONLY=1)),
       ((40, 200, 784), dict(BM=24, BN=64, CONSUMERS=1, SPLIT_K=1, STORE_T=1, TMA_ONLY=1))]
# G39: the rows over a cluster of 2 with the relaxed coupling (RELAXED=1: relaxed opening barrier, the producer's tail
# instead of the closing barrier): BM 48 over ragged N / K, a ring turning over; a row tile wholly past M, a ring of 2;
# BM 64 at full width with a ring deeper than the k-tiles
G39 = [((96, 200, 2064), dict(CLUSTER_M=2, BN=64, BM=48, STAGES=5, TMA_ONLY=1, RELAXED=1)),
       ((7, 264, 528), dict(CLUSTER_M=2, BN=64, STAGES=2, TMA_ONLY=1, RELAXED=1)),
       ((128, 4096, 784), dict(CLUSTER_M=2, BN=64, BM=64, TMA_ONLY=1, RELAXED=1))]
# H3: one row tile of all the rows (BM 192 / 256, the instruction N past 128): 128 columns over two consumers unsplit
# (rows past M in A's box, a ring of 3 turning over; ragged N / K), 64 columns with the cluster's split as a
# reduce-scatter (HALF_SUM; rows past M, a ring of 3 turning over; the second rank's half wholly past M)
H3 = [((200, 264, 1040), dict(BM=256, BN=128, SPLIT_K=1, STAGES=3, TMA_ONLY=1)),
      ((192, 520, 2064), dict(BM=192, BN=128, SPLIT_K=1, TMA_ONLY=1)),
      ((160, 264, 1552), dict(BM=192, BN=64, CLUSTER_K=2, HALF_SUM=1, STAGES=3, TMA_ONLY=1)),
      ((120, 200, 2064), dict(BM=256, BN=64, CLUSTER_K=2, HALF_SUM=1, TMA_ONLY=1))]
PICK = {"g24": G24, "g30": G30, "g32": G32, "g34": G34, "g39": G39, "h3": H3}
# H3's policy rows at full size through launch with no constexprs (`h3p` alone; racecheck on the persistent grid runs
# long): one row tile of BM 144 at 144 rows x 14336 x 4096 (BM 192 before H4), the persistent 128 x 256 grid at 208 rows
# (the second row tile ragged), two row tiles with STORE_T (BM 80) and BM 192's HALF_SUM at K = 14336
H3_POLICY = [(144, 14336, 4096), (208, 14336, 4096), (144, 4096, 14336), (176, 4096, 14336)]
# H4 (`h4` alone; H3's call 3 forms through launch with their own constexprs): BM 144 over 128 columns unsplit (rows
# past M, ragged N / K, a ring of 3 turning over); swap BM 256 with 64-wide k-tiles (64-byte swizzle, a ring of 8
# turning over, rows past M, K off the k-tile); gemm_fp8 unswapped with one row tile of 256 rows as four consumers
# (rows past M, ragged N / K, a ring of 3 turning over, the registers' store)
H4 = [((130, 520, 1040), dict(SWAP=1, BM=144, BN=128, SPLIT_K=1, CLUSTER_K=1, STAGES=3, TMA_ONLY=1)),
      ((200, 264, 2064), dict(SWAP=1, BM=256, BN=128, BK=64, SWIZZLE=tp.Swizzle(2, 4, 3), STAGES=8, SPLIT_K=1,
                              CLUSTER_K=1, TMA_ONLY=1)),
      ((200, 264, 1040), {**gemm_fp8.PRESETS["sm_90a"], "BM": 256, "BN": 128, "CONSUMERS": 4, "STAGES": 3,
                          "INSTR": gemm_fp8.SWAP_INSTR[128], "EPILOGUE": 0, "IN_FLIGHT": 1, "TMA_ONLY": 1})]
ARG = " ".join(sys.argv[1:])
for (m, n, k), extra in (H4 if ARG == "h4" else []):
    a = torch.randn(m, k, device=d, generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=d, generator=g).to(torch.float8_e4m3fn)
    sa, sb = torch.full((1,), 0.5, device=d), torch.full((1,), 0.25, device=d)
    out = torch.full((m, n), float("nan"), device=d, dtype=torch.bfloat16)
    gemm_fp8.launch(a, b, sa, sb, out, **extra)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().t()) * 0.125
    err = float((out.double() - ref).norm() / ref.norm())
    print("fp8 swap h4", m, n, k, gemm_fp8.kernel_of(gemm_fp8.params_for(m, n, k, **extra))[0].name, "BM", extra["BM"],
          "BK", extra.get("BK", 128), "consumers", extra.get("CONSUMERS", 2), "stages", extra["STAGES"], "rel err", err,
          flush=True)
    assert err < 4e-3, err
for m, n, k in (H3_POLICY if ARG == "h3p" else []):
    a = torch.randn(m, k, device=d, generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=d, generator=g).to(torch.float8_e4m3fn)
    sa, sb = torch.full((1,), 0.5, device=d), torch.full((1,), 0.25, device=d)
    out = torch.full((m, n), float("nan"), device=d, dtype=torch.bfloat16)
    gemm_fp8.launch(a, b, sa, sb, out)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().t()) * 0.125
    err = float((out.double() - ref).norm() / ref.norm())
    print("fp8 swap policy", m, n, k, gemm_fp8.kernel_of(gemm_fp8.policy(m, n, k))[0].name, "rel err", err, flush=True)
    assert err < 4e-3, err
for (m, n, k), extra in ([] if ARG in ("h3p", "h4") else PICK.get(ARG, CASES + G24 + G30 + G32 + G34 + G39 + H3)):
    a = torch.randn(m, k, device=d, generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=d, generator=g).to(torch.float8_e4m3fn)
    sa, sb = torch.full((1,), 0.5, device=d), torch.full((1,), 0.25, device=d)
    out = torch.full((m, n), float("nan"), device=d, dtype=torch.bfloat16)
    p = gemm_fp8.params_for(m, n, k, SWAP=1, **extra)
    gemm_fp8.launch(a, b, sa, sb, out, SWAP=1, **extra)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().t()) * 0.125
    err = float((out.double() - ref).norm() / ref.norm())
    print("fp8 swap", m, n, k, "BM", p["BM"], "BN", p["BN"], "split", p["SPLIT_K"], "cluster", p["CLUSTER_K"],
          "k_ways", p["K_WAYS"], "cluster_m", p["CLUSTER_M"], "stages", p["STAGES"], "rel err", err, flush=True)
    assert err < 4e-3, err
print("ok")
