"""Ablation of gemm_cluster at 4096^3 (bf16 out, 128x256, 3 stages, TMA-store epilogue) on the GPU: gemm_hopper,
gemm_hopper launched as 2x1 clusters (no cluster ops), gemm_cluster with and without the B multicast, its remote
releases with .release.cluster or the default (.release.cta) semantics. Each against cuBLAS in the same run
(median of graph replays). python3 benchmarks/profile/g3_cluster_ablation.py

H100 80GB HBM3, 2026-11-24 (cuBLAS 178-192 us in the same run): gemm_hopper 214.0 us (0.86x), with
__cluster_dims__(2,1,1) and nothing else 220.5 (0.85x); gemm_cluster with .release.cluster releases 436.5 (0.41x),
with the default .release.cta 223.9 (0.86x); without the multicast (own B per block, cluster-wide releases)
460.3 / 223.1. The cluster-scope release cost 2x; the multicast itself neither pays nor costs at this shape."""

import os
import sys

sys.path.insert(0, os.getcwd())
sys.path.insert(0, "benchmarks")

import torch  # noqa: E402
from gemm_cluster import timed_pair  # noqa: E402

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_hopper as g  # noqa: E402
from tilepy_hip.render import sm90a  # noqa: E402
from tilepy_hip.render import targets as T  # noqa: E402

_orig = sm90a.emit_mbarrier_arrive
MODE = {"v": ""}


def patched(r, call):
    n = len(r.em.lines)
    _orig(r, call)
    if MODE["v"] == "sc":   # the remote releases with .release.cluster
        r.em.lines[n:] = [s.replace("tp_mbar_arrive_cluster(", "tp_mbar_arrive_cluster_sc(") for s in r.em.lines[n:]]


T.SM_90A.ops["mbarrier_arrive"] = patched


def main():
    M = N = K = 4096
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", generator=gen).bfloat16()
    b = torch.randn(K, N, device="cuda", generator=gen).bfloat16()
    ref = a.double() @ b.double()
    P = dict(BM=128, BN=256, BK=64, STAGES=3, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n256k16_bf16, EPILOGUE=2)
    rows = [("hopper", g.gemm_hopper_bf16, {}, ""), ("hopper+clusterdims", g.gemm_hopper_bf16, {}, ""),
            ("c2_mc_rel.cluster", g.gemm_cluster_bf16, {}, "sc"), ("c2_mc_rel.cta", g.gemm_cluster_bf16, {}, ""),
            ("c2_nomc_rel.cluster", g.gemm_cluster_bf16, dict(MULTICAST=False), "sc"),
            ("c2_nomc_rel.cta", g.gemm_cluster_bf16, dict(MULTICAST=False), "")]
    for name, k, extra, mode in rows:
        MODE["v"] = mode
        k = k.retyped()   # a fresh kernel object: its own IR, build memo and launch caches
        if name == "hopper+clusterdims":
            k.cluster = (2, 1, 1)
        p = {**P, **extra}
        ck = tilepy_hip.compile(k, target="sm_90a", **p)
        assert (mode != "sc") or "arrive_cluster_sc(" in ck.source
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        grid = (M // 128, N // 256)

        def fn(k=k, c=c, p=p, grid=grid):
            tilepy_hip.launch(k, grid, a, b, c, **p)

        fn()
        torch.cuda.synchronize()
        err = float((c.double() - ref).norm() / ref.norm())
        t, tc = timed_pair(fn, lambda: torch.matmul(a, b), 20)
        print(f"{name:22s} {t * 1e6:8.1f} us cuBLAS {tc * 1e6:7.1f} x{tc / t:.3f} err {err:.1e} "
              f"regs {ck.resources.get('registers')}", flush=True)


if __name__ == "__main__":
    main()
