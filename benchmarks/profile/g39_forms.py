"""G39: forms of gemm_fp8_swap timed against the skinny fp8 policy at 64-192 x 4096 x 4096 (imported by g39_trace.py and
g39_ncu_driver.py). CLUSTER_M=2 (the rows over a (2, 1, 1) cluster sharing B's tiles by TMA multicast, no K split:
cuBLASLt's nvjet ..._1x2 decode form) with the copies TMA only, one consumer: `cm` with the full coupling (cluster
barriers after the mbarriers' initialization and before exit, each with MEMBAR.ALL.GPU), `cm_rel` with G33's relaxed
coupling (RELAXED=1: a relaxed opening barrier and the producer's tail instead of the closing barrier), and
`cm_rel_deep`, the relaxed form with the deepest ring that fits SWAP_SMEM (nvjet runs 13-15 stages here)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from stdlib_kernels import gemm_fp8  # noqa: E402


def cm_forms(M, N, K) -> dict:
    cm = {**gemm_fp8.swap_params(M, N, K, BN=64, cluster_m=2), "TMA_ONLY": 1}
    out = {"cm": cm, "cm_rel": {**cm, "RELAXED": 1}}
    deep = min(20, gemm_fp8.SWAP_SMEM // ((64 + cm["BM"]) * 128))
    if deep > cm["STAGES"]:
        out["cm_rel_deep"] = {**cm, "RELAXED": 1, "STAGES": deep}
    return out


def call1_variants(M, N, K) -> dict:
    """Call 1: the policy against CLUSTER_M=2 with the full and the relaxed coupling."""
    return {"policy": gemm_fp8.swap_policy(M, N, K), **cm_forms(M, N, K)}


def call2_variants(M, N, K) -> dict:
    """Call 2: the policy's own forms with shallower rings (call 1: the deeper ring of CLUSTER_M was 0.2-0.4 us slower;
    G30 call 1: 6 stages took 0.25-0.3 us off the split's kernel at 32 / 64 rows, within the spread then). Skinny rows:
    4 / 6 / 8 / 10 stages under the policy's; mid shapes: one and two stages fewer, and the persistent one-wave row
    with GROUP_M 8."""
    pol = gemm_fp8.policy(M, N, K)
    out = {"policy": pol}
    if pol.get("SWAP"):
        for s in (4, 6, 8, 10):
            if s < pol["STAGES"]:
                out[f"s{s}"] = {**pol, "STAGES": s}
        return out
    for d in (1, 2):
        if pol["STAGES"] - d >= 3:
            out[f"s{pol['STAGES'] - d}"] = {**pol, "STAGES": pol["STAGES"] - d}
    if pol.get("PERSISTENT"):
        out["g8"] = {**pol, "GROUP_M": 8}
    if pol.get("BN") == 128 and pol.get("STAGES") == 5:     # MID_128x128: a sixth stage fits beside C's tile
        out["s6"] = {**pol, "STAGES": 6}
    return out
