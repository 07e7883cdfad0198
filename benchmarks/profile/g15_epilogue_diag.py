"""Where gemm_persistent's per-tile time goes (G15, issue 15): diagnostic copies of its policy form (STORE_N=64, two
16 KB store buffers, a store warp, 4 stages, 64 / 216 registers) with parts of the tile transition taken out, timed
against torch.matmul bf16 in the same run. NOT kernels to use: DIAG 1-3 compute or store wrong results on purpose
(the output is not checked); they bound what removing that part could gain.

    DIAG=0  the policy's form as written (a check that this copy times as gemm_persistent does)
    DIAG=1  the consumers never wait for c_free inside a tile (pieces 2 and 3 overwrite buffers whose TMA store may
            not have read them yet: a race, timing only): the cost of the store's round trip
    DIAG=3  the accumulator zeroed once before the tile loop, not per tile (wrong sums): the cost of the zeroing
    DIAG=2  as 3, and no epilogue: the consumers neither write c_s nor arrive, the store warp stores nothing; the
            last accumulator is written into c_s once after the loop (else ptxas drops the dead wgmma)

    python benchmarks/profile/g15_epilogue_diag.py [--shapes M,N,K ...] [--out DIR]
"""

# ruff: noqa: UP037
import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import tilepy as tp  # noqa: E402
from stdlib_kernels.gemm_hopper import _threads, b_layout  # noqa: E402


@tp.kernel(threads=_threads, target="sm_90a")
def diag_persistent(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.bf16, "M", "N"],
                    BM: tp.constexpr = 128, BN: tp.constexpr = 256, BK: tp.constexpr = 64, STAGES: tp.constexpr = 4,
                    CONSUMERS: tp.constexpr = 2, INSTR: tp.constexpr = tp.nv.wgmma_m64n256k16_bf16,
                    SWIZZLE: tp.constexpr = tp.Swizzle(3, 3, 3), PRODUCER_REGS: tp.constexpr = 64,
                    CONSUMER_REGS: tp.constexpr = 216, GROUP_M: tp.constexpr = 8, STORE_N: tp.constexpr = 64,
                    DIAG: tp.constexpr = 0):
    a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
    b_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=SWIZZLE, layout=b_layout(BK, BN))
    c_s = tp.shared((BM, STORE_N), C.dtype, stages=2, swizzle=tp.Swizzle(3, 3, 3), layout=b_layout(BM, STORE_N, 64))
    staged = tp.mbarrier(1, stages=2)
    c_free = tp.mbarrier(1, stages=2)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    n_m = tp.cdiv(C.shape[0], BM)
    n_n = tp.cdiv(C.shape[1], BN)
    in_group = GROUP_M * n_n
    k_tiles = tp.cdiv(A.shape[1], BK)
    rounds = tp.cdiv(k_tiles, STAGES)
    first = tp.block_id(0)
    step = tp.num_blocks(0)
    if tp.warpgroup_id() == 0:
        tp.setmaxnreg(PRODUCER_REGS)
        if tp.warp_id() < 3:
            for t in range(first, n_m * n_n, step):
                first_m = (t // in_group) * GROUP_M
                group_m = tp.minimum(n_m - first_m, GROUP_M)
                m0 = (first_m + (t % in_group) % group_m) * BM
                n0 = ((t % in_group) // group_m) * BN
                turn = ((t - first) // step) * rounds
                for k in range(rounds * STAGES):
                    tp.mbarrier_wait(empty[k % STAGES], turn + k // STAGES)
                    if k < k_tiles:
                        tp.copy_bulk(A[m0:m0 + BM, k * BK:k * BK + BK], a_s[k % STAGES], full[k % STAGES],
                                     fallback=False)
                        tp.copy_bulk(B[k * BK:k * BK + BK, n0:n0 + BN], b_s[k % STAGES], full[k % STAGES],
                                     fallback=False)
                    tp.mbarrier_arrive(full[k % STAGES])
        elif DIAG != 2:
            for t in range(first, n_m * n_n, step):
                first_m = (t // in_group) * GROUP_M
                group_m = tp.minimum(n_m - first_m, GROUP_M)
                m0 = (first_m + (t % in_group) % group_m) * BM
                n0 = ((t % in_group) // group_m) * BN
                it = (t - first) // step
                for p in tp.static_range(BN // STORE_N):
                    tp.mbarrier_wait(staged[p % 2], it * (BN // (2 * STORE_N)) + p // 2)
                    tp.store_bulk(c_s[p % 2], C[m0:m0 + BM, n0 + p * STORE_N:n0 + p * STORE_N + STORE_N],
                                  fallback=False)
                    tp.store_bulk_wait(c_s[p % 2])
                    tp.mbarrier_arrive(c_free[p % 2])
    else:
        tp.setmaxnreg(CONSUMER_REGS)
        for s in tp.static_range(STAGES):
            tp.mbarrier_arrive(empty[s])
        acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
        for t in range(first, n_m * n_n, step):
            turn = ((t - first) // step) * rounds
            if DIAG < 2:
                acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
            for k in range(rounds * STAGES):
                tp.mbarrier_wait(full[k % STAGES], turn + k // STAGES)
                if k < k_tiles:
                    acc = tp.mma(a_s[k % STAGES], b_s[k % STAGES], acc)
                tp.mbarrier_arrive(empty[k % STAGES])
            if DIAG != 2:
                it = (t - first) // step
                for p in tp.static_range(BN // STORE_N):
                    if p >= 2:
                        if DIAG != 1:
                            tp.mbarrier_wait(c_free[p % 2], it * (BN // (2 * STORE_N)) + p // 2 - 1)
                    elif it > 0:
                        tp.mbarrier_wait(c_free[p % 2], it * (BN // (2 * STORE_N)) - 1)
                    tp.store(c_s[p % 2], acc[:, p * STORE_N:p * STORE_N + STORE_N])
                    tp.mbarrier_arrive(staged[p % 2])
        if DIAG == 2:
            tp.store(c_s[0], acc[:, 0:STORE_N])


def main():
    import torch
    from gemm_large_sweep import timed_pair

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=["8192,8192,1024", "4096,14336,4096"])
    ap.add_argument("--batches", type=int, default=15)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args()
    g = torch.Generator(device="cuda").manual_seed(0)
    rows = {}
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "python": platform.python_version(),
           "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "rows": rows,
           "rule": "median of CUDA-graph replays of 10 calls, ours and torch.matmul bf16 alternating; DIAG 1-3 are "
                   "wrong on purpose (timing only)"}
    for s in args.shapes:
        M, N, K = map(int, s.split(","))
        a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
        b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
        ref = torch.matmul(a, b)
        grid = (min(132, -(-M // 128) * -(-N // 256)),)
        row = rows[s] = {}
        for d in (0, 1, 2, 3):
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            try:
                diag_persistent[grid](a, b, c, DIAG=d)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                row[f"diag{d}"] = {"failed": f"{type(e).__name__}: {str(e)[:200]}"}
                print(s, d, "failed", e, flush=True)
                continue
            err = float(((c.double() - ref.double()).norm() / ref.double().norm()).item())
            t, tp_ = timed_pair(lambda a=a, b=b, c=c, d=d, g=grid: diag_persistent[g](a, b, c, DIAG=d),
                                lambda a=a, b=b: torch.matmul(a, b),
                                args.batches)
            row[f"diag{d}"] = {"us": t * 1e6, "peer_us": tp_ * 1e6, "ratio": tp_ / t, "rel_err_vs_cublas": err}
            print(f"{s} DIAG={d} {t * 1e6:8.1f} us cuBLAS {tp_ * 1e6:8.1f} us x{tp_ / t:.3f} err {err:.1e}", flush=True)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        dev = torch.cuda.get_device_name().replace(" ", "_")
        (Path(args.out) / f"gemm-large-g15-diag-{dev}.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
