"""gemm_cluster (2x1 thread-block clusters, B's tile multicast across the pair) against gemm_hopper's policy and
cuBLAS, bf16 in and bf16 out (against torch.matmul bf16), on the large shapes of issue 15; writes
benchmarks/results/gemm-cluster-<device>.json (or --out DIR).

    python benchmarks/gemm_cluster.py [--shapes 4096,4096,4096 ...] [--variants REGEX] [--out DIR] [--precompile N]
                                      [--precompile-only] [--batches N]

Every output is checked against float64 (on the GPU) before it is timed. A timing is the median over `--batches`
replays of a CUDA graph of 10 calls (GPU time per call), ours and cuBLAS alternating batch by batch on the same
random inputs, after a warm-up; the ratio is cuBLAS time / ours (> 1: faster than cuBLAS).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402

SHAPES = [(4096, 4096, 4096), (4096, 14336, 4096), (8192, 8192, 1024), (8192, 8192, 8192), (4096, 4096, 14336)]
I128 = tp.nv.wgmma_m64n128k16_bf16
VARIANTS = {  # bf16 out; constexprs for gemm_hopper.launch (None: the shape's policy)
    "policy": None,
    "c2_s4": dict(CLUSTER_M=2, STAGES=4, EPILOGUE=0),
    "c2_s3_tma": dict(CLUSTER_M=2, STAGES=3, EPILOGUE=2),
    "c2_s4_regs": dict(CLUSTER_M=2, STAGES=4, EPILOGUE=0, PRODUCER_REGS=40, CONSUMER_REGS=232),
    "c2_s3_tma_regs": dict(CLUSTER_M=2, STAGES=3, EPILOGUE=2, PRODUCER_REGS=40, CONSUMER_REGS=232),
    "s3_tma_regs": dict(STAGES=3, EPILOGUE=2, IN_FLIGHT=0, PRODUCER_REGS=40, CONSUMER_REGS=232),   # no cluster
    "s3_tma_regs64": dict(STAGES=3, EPILOGUE=2, IN_FLIGHT=0, PRODUCER_REGS=64, CONSUMER_REGS=216),
    "c2_128x128_s6": dict(CLUSTER_M=2, STAGES=6, EPILOGUE=0, BN=128, INSTR=I128),
    "persistent": dict(PERSISTENT=1, IN_FLIGHT=0),
}


def _graph(fn, reps=10):
    fn()
    torch.cuda.synchronize()
    gr = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gr):
        for _ in range(reps):
            fn()
    return gr, reps


def timed_pair(fa, fb, batches=30):
    """Median seconds per call of fa and of fb: CUDA-graph replays, alternating, after a warm-up."""
    ga, ra = _graph(fa)
    gb, rb = _graph(fb)
    for _ in range(3):
        ga.replay()
        gb.replay()
    torch.cuda.synchronize()
    ta, tb = [], []
    for _ in range(batches):
        for gr, reps, out in ((ga, ra, ta), (gb, rb, tb)):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            gr.replay()
            e.record()
            e.synchronize()
            out.append(s.elapsed_time(e) / 1e3 / reps)
    return statistics.median(ta), statistics.median(tb)


def _params(M, N, K, p):
    return gemm_hopper.policy(M, N, K, tp.bf16) if p is None else p


def _build(item):
    M, N, K, p = item
    p = _params(M, N, K, p)
    try:
        kernel = gemm_hopper.kernel_for(tp.bf16, False, False, bool(p.get("PERSISTENT")), gemm_hopper.clustered(p))
        full = {**gemm_hopper.policy(M, N, K, tp.bf16), **p}
        if gemm_hopper.clustered(p) or p.get("PERSISTENT"):
            for k in (*gemm_hopper.STEADY_ONLY, "PERSISTENT"):
                if k not in p and not (k == "EPILOGUE" and full.get(k) in (0, 2) and gemm_hopper.clustered(p)):
                    full.pop(k, None)
        tilepy_hip.compile(kernel, target="sm_90a", **gemm_hopper.kernel_params(full))
    except Exception as e:  # noqa: BLE001 - reported by the run
        return f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="*", default=None)
    ap.add_argument("--variants", default=None)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--precompile", type=int, default=0)
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--precompile-only", action="store_true")
    args = ap.parse_args()
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes] if args.shapes else SHAPES
    variants = {k: v for k, v in VARIANTS.items() if not args.variants or re.search(args.variants, k)}
    if args.precompile:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        t = time.time()
        items = [(M, N, K, p) for M, N, K in shapes for p in variants.values()]
        with ProcessPoolExecutor(args.precompile, mp_context=multiprocessing.get_context("spawn")) as ex:
            errs = [e for e in ex.map(_build, items) if e]
        print(f"precompiled {len(items)} in {time.time() - t:.1f} s; {len(errs)} failed {errs[:2]}", flush=True)
    if args.precompile_only:
        return
    dev = torch.cuda.get_device_name()
    result = {"device": dev, "torch": torch.__version__, "cuda": torch.version.cuda,
              "python": platform.python_version(),
              "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "method":
              "median of CUDA-graph replays (10 calls each), ours and cuBLAS alternating, bf16 in/out, random normal "
              "inputs; ratio = cuBLAS us / ours us", "rows": {}}
    g = torch.Generator(device="cuda").manual_seed(0)
    for M, N, K in shapes:
        a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
        b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
        ref = a.double() @ b.double()
        cub = torch.matmul(a, b)
        err_cublas = float((cub.double() - ref).norm() / ref.norm())
        row = {}
        for name, p in variants.items():
            p = _params(M, N, K, p)
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            try:
                gemm_hopper.launch(a, b, c, **p)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                print(f"{M}x{N}x{K} {name:16s} failed: {type(e).__name__}: {str(e).splitlines()[0][:100]}", flush=True)
                continue
            err = float((c.double() - ref).norm() / ref.norm())
            ok = bool(torch.isfinite(c).all()) and err < 1e-2
            t_ours, t_cublas = timed_pair(lambda a=a, b=b, c=c, p=p: gemm_hopper.launch(a, b, c, **p),
                                          lambda a=a, b=b: torch.matmul(a, b), args.batches)
            flops = 2 * M * N * K
            row[name] = {"us": t_ours * 1e6, "cublas_us": t_cublas * 1e6, "ratio": t_cublas / t_ours,
                         "tflops": flops / t_ours / 1e12, "rel_err": err, "cublas_rel_err": err_cublas, "ok": ok,
                         "params": {k: (v.name if hasattr(v, "name") else v) for k, v in p.items()
                                    if not isinstance(v, tp.Swizzle)}}
            print(f"{M}x{N}x{K} {name:16s} {t_ours * 1e6:8.1f} us  cuBLAS {t_cublas * 1e6:8.1f} us  "
                  f"x{t_cublas / t_ours:.3f}  err {err:.1e} (cuBLAS {err_cublas:.1e}) {'ok' if ok else 'WRONG'}",
                  flush=True)
        result["rows"][f"{M}x{N}x{K}"] = row
        del a, b, ref, cub
        torch.cuda.empty_cache()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"gemm-cluster-{re.sub(r'[^A-Za-z0-9]+', '-', dev).strip('-').lower()}.json"
    path.write_text(json.dumps(result, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
