"""G34: the forms of gemm_fp8_swap timed against the skinny fp8 policy (imported by g34_trace.py and g34_sass.py).
HALF_SUM=1 (the K split's exchange as a reduce-scatter: each rank pushes only the half of C's rows its partner stores,
then stores its own half unmasked) on the policy's CLUSTER_K=2 rows, with the ring re-sized beside the half receive
tile; STORE_T=1 (C's tile through shared memory and one TMA store instead of two-byte stores of the transposed
accumulator) on the policy's unsplit rows and with HALF_SUM; and G30's unsplit forms with the copies TMA only at
32-128 rows (two row tiles, 128 blocks, B's second read from the L2; one row tile with two consumers on alternate
k-tiles, 64 blocks), which G30 timed there only with the fallback compiled in."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from stdlib_kernels import gemm_fp8  # noqa: E402


def _stages(p, half_sum=0, store_t=0):
    return gemm_fp8.swap_stages(p["BM"], p["BN"], p["CLUSTER_K"], p["K_WAYS"], half_sum, store_t)


def call1_variants(M, N, K) -> dict:
    """Call 1: the policy against HALF_SUM / HALF_SUM + STORE_T (CLUSTER_K=2 rows), STORE_T (unsplit rows), and the
    unsplit two-row-tile forms with TMA_ONLY (64-128 rows)."""
    pol = gemm_fp8.swap_policy(M, N, K)
    out = {"policy": pol}
    if pol["CLUSTER_K"] == 2 and pol["BM"] % 16 == 0:
        out["half"] = {**pol, "HALF_SUM": 1, "STAGES": _stages(pol, 1)}
        if N % 8 == 0:
            out["half_st"] = {**pol, "HALF_SUM": 1, "STORE_T": 1, "STAGES": _stages(pol, 1, 1)}
    if pol["CLUSTER_K"] == 1 and pol["SPLIT_K"] == 1 and N % 8 == 0:
        out["st"] = {**pol, "STORE_T": 1, "STAGES": _stages(pol, 0, 1)}
    if 32 <= M <= 128 and K == 4096:
        half = next(n for n in sorted(gemm_fp8.SWAP_INSTR) if n >= -(-M // 2))

        def form(bm, **kw):
            return gemm_fp8.params_for(M, N, K, SWAP=1, BN=64, SPLIT_K=1, CLUSTER_K=1, TMA_ONLY=1, BM=bm,
                                       INSTR=gemm_fp8.SWAP_INSTR[bm], **kw)
        out["rows2"] = form(half, CONSUMERS=1, K_WAYS=1)
        out["rows2_kw"] = form(half, CONSUMERS=2, K_WAYS=2)
        # one row tile over the whole K (64 blocks, no cluster), two consumers on alternate k-tiles: each consumer's
        # chain of wgmma groups half the k-tiles, as the split's (G30 call 3 timed it only with the fallback)
        out["unsplit_kw"] = form(pol["BM"], CONSUMERS=2, K_WAYS=2)
    return out


def call2_variants(M, N, K) -> dict:
    """Call 2: the G34 policy (swap_policy: two row tiles at SWAP_ROWS2's rows, HALF_SUM on the cluster's split,
    STORE_T on whole 128-row tiles) against the table before it (g34=False); two unsplit row tiles of half the rows
    at the rows where the policy does not take them (17-128 rows; one consumer at 129-255 rows, where the table runs
    two consumers on alternate k-tiles or the slots), to place SWAP_ROWS2's bounds; HALF_SUM on the table where the
    policy takes the row tiles instead."""
    pol = gemm_fp8.swap_policy(M, N, K)
    before = gemm_fp8.swap_policy(M, N, K, g34=False)
    out = {"before": before, "policy": pol}
    if K == 4096 and 17 <= M < 256:
        half = next(n for n in sorted(gemm_fp8.SWAP_INSTR) if n >= -(-M // 2))
        rows2 = gemm_fp8.params_for(M, N, K, SWAP=1, BN=64, SPLIT_K=1, CLUSTER_K=1, TMA_ONLY=1, BM=half,
                                    INSTR=gemm_fp8.SWAP_INSTR[half], CONSUMERS=1, K_WAYS=1)
        if rows2 != pol:
            out["rows2"] = rows2
    if pol["BM"] < M <= 128 and before["CLUSTER_K"] == 2 and before["BM"] % 16 == 0:
        out["half"] = {**before, "HALF_SUM": 1, "STAGES": _stages(before, 1)}
    return out


def call3_variants(M, N, K) -> dict:
    """Call 3: call 2's plan again on the final policy (SWAP_ROWS2 17-48 / 81-96 / 129-255, HALF_SUM at BM >= 32) and
    with the renderer's role-relative thread index as unsigned (G33's f33002c, which took 0.8-1.3 us off bf16's
    K_WAYS=2 forms): the table before G34 (two consumers on alternate k-tiles at 24-48 / 96 / 160-224 rows), the
    policy, and the other of rows2 / HALF_SUM."""
    return call2_variants(M, N, K)


def call4_variants(M, N, K) -> dict:
    """Call 4: STORE_T on the policy's two unsplit row tiles (one consumer; call 1 measured it only on 16 rows, where
    it lost, on two consumers at 192 rows, where it lost, and on whole 128-row tiles, where it won 0.5 us)."""
    pol = gemm_fp8.swap_policy(M, N, K)
    out = {"policy": pol}
    if (pol["CLUSTER_K"] == 1 and pol["SPLIT_K"] == 1 and pol["K_WAYS"] == 1 and pol["BN"] == 64 and N % 8 == 0
            and not pol.get("STORE_T")):
        out["policy_st"] = {**pol, "STORE_T": 1, "STAGES": _stages(pol, 0, 1)}
    return out
