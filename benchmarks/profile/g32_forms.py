"""G32: the forms of gemm_fp8_swap timed against the skinny policy at 32-192 rows (imported by g32_trace.py and by
g32_sass.py). CLUSTER_M=2 (G24: the rows split over a (2, 1, 1) cluster sharing B's tiles by TMA multicast, no K
split: cuBLASLt's nvjet ..._1x2 decode form) with the copies TMA only (TMA_ONLY=1, G30): over 64-column tiles with
one consumer (`cm`), with two consumers on alternate k-tiles (`cm_kw`, 384 threads as nvjet), and one consumer with the
deepest ring that fits (`cm_deep`: nvjet runs 13-16 stages of 128 bytes of K)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from stdlib_kernels import gemm_fp8  # noqa: E402

SMEM = 220 * 1024
DEEP_MAX = 20


def deep_stages(BM: int, BN: int = 64) -> int:
    return min(DEEP_MAX, SMEM // ((BN + BM) * 128))


def call1_variants(M, N, K) -> dict:
    """Call 1: the policy against CLUSTER_M=2 + TMA_ONLY forms."""
    pol = gemm_fp8.swap_policy(M, N, K)
    out = {"policy": pol}
    cm = {**gemm_fp8.swap_params(M, N, K, BN=64, cluster_m=2), "TMA_ONLY": 1}
    out["cm"] = cm
    out["cm_kw"] = {**gemm_fp8.swap_params(M, N, K, k_ways=2, cluster_m=2), "TMA_ONLY": 1}
    deep = deep_stages(cm["BM"])
    if deep > cm["STAGES"]:
        out["cm_deep"] = {**cm, "STAGES": deep}
    return out
