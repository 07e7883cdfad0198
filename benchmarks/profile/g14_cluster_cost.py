"""Where the cluster split's ~1.5 us go (G14; benchmarks/NOTES.md): at 32 x 4096 x 4096, f32 out, the same 128 blocks of
gemm_splitk_swap K_WAYS=2 (BM 32, BN 64, 8 stages per ring, 32 k-tiles each) as

    split2        split 2 into FIXUP=3 slots + splitk_sum (no cluster)
    split2_cl     the same kernel launched as (1, 1, 2) clusters (the decorator's cluster patched; no cluster op)
    ck            CLUSTER_K=2 (the policy: rank 1's sum read through distributed shared memory, two cluster barriers)
    ck_relaxed2   CLUSTER_K=2 with its second barrier's arrive .relaxed (no MEMBAR waiting for C's stores; the
                  remote values are consumed before it, so still correct)
    ck_relaxed    both barriers relaxed: NOT correct (no release / acquire for the exchanged tile), timing only

One variant per process (the cluster patch and the renderer patch change what is compiled):
    for v in split2 split2_cl ck ck_relaxed2 ck_relaxed; do python3 benchmarks/profile/g14_cluster_cost.py $v; done
Prints the graph time per call (median of CUDA-graph replays, benchmarks/gemm.py's rule), the GEMM kernel's device
time (torch.profiler, 10 calls) and the error against float64."""

import os
import sys

sys.path.insert(0, os.getcwd())
sys.path.insert(0, "benchmarks")

import gemm as gb  # noqa: E402
import torch  # noqa: E402

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402
from stdlib_kernels import gemm_splitk_swap as gs  # noqa: E402
from tilepy_hip.render import targets as T  # noqa: E402

KW = dict(SWAP_AB=1, K_WAYS=2, CONSUMERS=2, BN=64, BM=32, INSTR=tp.nv.wgmma_m64n32k16_bf16, STAGES=8, IN_FLIGHT=1)
SPECS = {"split2": dict(KW, SPLIT_K=2, FIXUP=3), "split2_cl": dict(KW, SPLIT_K=2, FIXUP=3),
         "ck": dict(KW, SPLIT_K=1, CLUSTER_K=2), "ck_relaxed2": dict(KW, SPLIT_K=1, CLUSTER_K=2),
         "ck_relaxed": dict(KW, SPLIT_K=1, CLUSTER_K=2)}
RELAXED = 'asm volatile("barrier.cluster.arrive.relaxed.aligned;\\nbarrier.cluster.wait.aligned;\\n" ::: "memory");'


def patch(variant):
    if variant == "split2_cl":
        gs.gemm_splitk_swap.cluster = lambda c: (1, 1, 2)
    if variant.startswith("ck_relaxed"):
        orig = T.SM_90A.ops["cluster_sync"]

        def emit(r, call):
            n = getattr(r, "_g14_syncs", 0)
            r._g14_syncs = n + 1
            if variant == "ck_relaxed" or n == 1:
                r.em(RELAXED)
            else:
                orig(r, call)

        T.SM_90A.ops["cluster_sync"] = emit


def main():
    variant = sys.argv[1]
    patch(variant)
    M, N, K = 32, 4096, 4096
    g = torch.Generator(device="cuda").manual_seed(14)
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
    c = torch.full((M, N), float("nan"), device="cuda")
    p = SPECS[variant]
    gemm_hopper.launch(a, b, c, **p)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    err = float((c.double() - ref).norm() / ref.norm())
    t = min(gb.timeit_median(lambda: gemm_hopper.launch(a, b, c, **p)) for _ in range(3)) * 1e6
    mm = gb._mm_f32out()
    peer = min(gb.timeit_median(lambda: mm(a, b)) for _ in range(2)) * 1e6
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            gemm_hopper.launch(a, b, c, **p)
        torch.cuda.synchronize()
    dev = {ev.key[:40]: round((getattr(ev, "device_time_total", 0) or 0) / ev.count, 2)
           for ev in prof.key_averages() if ev.count and "CUDA" in str(ev.device_type)}
    print(f"{variant:12} graph {t:6.2f} us  cuBLAS {peer:6.2f}  x {peer / t:.2f}  device {dev}  err {err:.1e}",
          flush=True)


if __name__ == "__main__":
    main()
