"""Experiment: a ping-pong persistent GEMM (benchmarks/profile/g3_pingpong_kernel.py: two consumer warpgroups on
alternate 128x128 output tiles of one ring, so one's epilogue overlaps the other's MMAs) against gemm_hopper's
policy and cuBLAS, bf16 in/out, median of graph replays. python3 benchmarks/profile/g3_pingpong.py

A negative result (H100, 2026-11-24; x cuBLAS, policy = gemm_hopper's 128x256 s3 TMA-store policy of then, without
register budgets, 0.84-0.87 in the same runs): 128x128 per consumer warpgroup, turn-taking mainloops (two mbarriers:
without them a consumer waiting ahead on a ring stage saw a later phase of the same parity and the kernel failed),
wgmma synchronous per k-tile: 0.54-0.62 (setmaxnreg 40/232: 0.70-0.75); with one wgmma group in flight (IN_FLIGHT=1)
0.41-0.51. One warpgroup issuing at a time leaves the tensor cores idle between its k-tiles; the kernel also spills
(168 registers for two copies of the consumer). Not verified (nested ring loops); kept as the record."""

import os
import sys

sys.path.insert(0, os.getcwd())
sys.path.insert(0, "benchmarks")
sys.path.insert(0, "benchmarks/profile")

import torch  # noqa: E402
from g3_pingpong_kernel import gemm_pingpong_bf16  # noqa: E402
from gemm_cluster import timed_pair  # noqa: E402

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402

SHAPES = [(4096, 4096, 4096), (4096, 14336, 4096), (8192, 8192, 1024), (8192, 8192, 8192)]
VARIANTS = {"pp_s5_wait0_regs": dict(STAGES=5, IN_FLIGHT=0, PRODUCER_REGS=40, CONSUMER_REGS=232),
            "pp_s5": dict(STAGES=5), "pp_s6": dict(STAGES=6),
            "pp_s5_regs": dict(STAGES=5, PRODUCER_REGS=40, CONSUMER_REGS=232),
            "pp_s6_regs": dict(STAGES=6, PRODUCER_REGS=40, CONSUMER_REGS=232),
            "pp_s6_regs_24_240": dict(STAGES=6, PRODUCER_REGS=24, CONSUMER_REGS=240)}


def main():
    g = torch.Generator(device="cuda").manual_seed(0)
    for M, N, K in SHAPES:
        a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
        b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
        ref = a.double() @ b.double()
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        rows = {"policy": lambda a=a, b=b, c=c: gemm_hopper.launch(a, b, c)}
        grid = (min((M // 128) * (N // 128), 132),)
        for name, p in VARIANTS.items():
            rows[name] = lambda a=a, b=b, c=c, p=p, grid=grid: tilepy_hip.launch(gemm_pingpong_bf16, grid, a, b, c, **p)
        for name, fn in rows.items():
            c.fill_(float("nan"))
            try:
                fn()
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                print(f"{M}x{N}x{K} {name:12s} failed {type(e).__name__}: {str(e).splitlines()[0][:100]}")
                continue
            err = float((c.double() - ref).norm() / ref.norm())
            t, tc = timed_pair(fn, lambda a=a, b=b: torch.matmul(a, b), 20)
            print(f"{M}x{N}x{K} {name:12s} {t * 1e6:8.1f} us cuBLAS {tc * 1e6:8.1f} x{tc / t:.3f} err {err:.1e}",
                  flush=True)
        del a, b, ref, c
        torch.cuda.empty_cache()


if __name__ == "__main__":
    _ = tp
    main()
