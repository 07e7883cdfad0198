"""Benchmark tilepy_hip kernels against torch on this machine's GPU; writes benchmarks/results/<device>.json.

    python benchmarks/run.py [--quick] [--out DIR]

Measures, in one run: device-to-device copy bandwidth (the ceiling for memory-bound kernels, bytes read +
written), vector add / softmax / RMSNorm (achieved bandwidth, its fraction of the copy's, torch's), and the
GEMM (TFLOP/s, ratio to cuBLAS through torch.matmul). Inputs are random (never zeros); each timing is the
median of several CUDA-event-timed batches after a warm-up; every kernel's output is checked first.
"""

from __future__ import annotations

import argparse
import json
import os
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
from stdlib_kernels import gemm, gemm_hopper, rmsnorm, softmax, vector_add  # noqa: E402
from tilepy_hip.launch import launch_compiled  # noqa: E402


def timeit(fn, reps: int = 20, batches: int = 7) -> float:
    """Median seconds per call: `batches` event-timed batches of `reps` calls, after a warm-up."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(batches):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / reps)
    return statistics.median(times)


def rel(a, b) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke test)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    scale = 8 if args.quick else 1
    res = {
        "device": props.name,
        "sms": props.multi_processor_count,
        "torch": torch.__version__,
        "tilepy_hip": tilepy_hip.__version__,
        "toolchain": tilepy_hip.toolchain_info()["nvidia"],
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "results": {},
    }
    out = res["results"]
    g = torch.Generator(device=dev).manual_seed(int.from_bytes(os.urandom(4), "little"))

    # ---- device-to-device copy: the bandwidth ceiling
    n = (1 << 28) // scale  # 1 GiB of f32
    src = torch.randn(n, device=dev, generator=g)
    dst = torch.empty_like(src)
    t = timeit(lambda: dst.copy_(src))
    copy_bw = 2 * n * 4 / t
    out["d2d_copy"] = {"bytes": 2 * n * 4, "seconds": t, "GBps": copy_bw / 1e9}
    del dst

    def memory_bound(key, bytes_moved, ours, theirs, check):
        err = check()
        t_ours, t_torch = timeit(ours), timeit(theirs)
        bw = bytes_moved / t_ours
        out[key] = {
            "bytes": bytes_moved,
            "seconds": t_ours,
            "GBps": bw / 1e9,
            "fraction_of_copy": bw / copy_bw,
            "torch_seconds": t_torch,
            "torch_GBps": bytes_moved / t_torch / 1e9,
            "speedup_vs_torch": t_torch / t_ours,
            "rel_err": err,
            "meets_80pct": bw / copy_bw >= 0.8,
        }

    # ---- vector add
    x, y = src, torch.randn(n, device=dev, generator=g)
    z = torch.empty_like(x)
    ck = tilepy_hip.compile(vector_add.vector_add, target="sm_90a", BLOCK=1024)
    grid = (tp.cdiv(n, 1024),)

    def va_check():
        z.fill_(float("nan"))
        launch_compiled(ck, grid, [x, y, z])
        return rel(z, x + y)

    memory_bound(
        "vector_add",
        3 * n * 4,
        lambda: launch_compiled(ck, grid, [x, y, z]),
        lambda: torch.add(x, y, out=z),
        va_check,
    )
    del x, y, z, src

    # ---- softmax and RMSNorm: rows of 4096 f32
    m, k = 32768 // scale, 4096
    xs = torch.randn(m, k, device=dev, generator=g)
    ys = torch.empty_like(xs)
    cks = tilepy_hip.compile(softmax.softmax, target="sm_90a", BLOCK_N=k)

    def sm_check():
        ys.fill_(float("nan"))
        launch_compiled(cks, (m,), [xs, ys])
        return rel(ys, torch.softmax(xs.double(), dim=1))

    memory_bound(
        "softmax",
        2 * m * k * 4,
        lambda: launch_compiled(cks, (m,), [xs, ys]),
        lambda: torch.softmax(xs, dim=1),
        sm_check,
    )
    w = torch.randn(k, device=dev, generator=g)
    ckr = tilepy_hip.compile(rmsnorm.rmsnorm, target="sm_90a", BLOCK_N=k)

    def rms_check():
        ys.fill_(float("nan"))
        launch_compiled(ckr, (m,), [xs, w, ys, 1e-6])
        xd = xs.double()
        return rel(ys, xd / torch.sqrt((xd * xd).mean(1, keepdim=True) + 1e-6) * w.double())

    memory_bound(
        "rmsnorm",
        2 * m * k * 4 + k * 4,
        lambda: launch_compiled(ckr, (m,), [xs, w, ys, 1e-6]),
        lambda: torch.nn.functional.rms_norm(xs, (k,), w, 1e-6),
        rms_check,
    )
    del xs, ys

    # ---- GEMM: bf16 in, f32 out, against cuBLAS (torch.matmul, bf16 out)
    M = N = K = 4096 // (2 if args.quick else 1)
    a = torch.randn(M, K, device=dev, generator=g).to(torch.bfloat16)
    b = torch.randn(K, N, device=dev, generator=g).to(torch.bfloat16)
    c = torch.empty(M, N, device=dev)
    def gemm_row(kernel, p):
        """Build `kernel` with constexprs `p`, check it against float64, time it and cuBLAS in the same run."""
        ckg = tilepy_hip.compile(kernel, target="sm_90a", **p)
        gg = (tp.cdiv(M, p["BM"]), tp.cdiv(N, p["BN"]))
        c.fill_(float("nan"))
        launch_compiled(ckg, gg, [a, b, c])
        err = rel(c, a.double() @ b.double())
        t_ours = timeit(lambda: launch_compiled(ckg, gg, [a, b, c]), reps=10, batches=5)
        t_blas = timeit(lambda: torch.matmul(a, b), reps=10, batches=5)
        flops = 2 * M * N * K
        return {
            "instr": p["INSTR"].name,
            "shape": [M, N, K],
            "seconds": t_ours,
            "TFLOPs": flops / t_ours / 1e12,
            "cublas_seconds": t_blas,
            "cublas_TFLOPs": flops / t_blas / 1e12,
            "ratio_to_cublas": t_blas / t_ours,
            "rel_err": err,
            "registers": ckg.resources.get("registers"),
            "spills": ckg.resources.get("spill_stores"),
            "tensor_maps": len(ckg.tensor_maps),
        }

    for preset in ("sm_90a", "sm_80"):
        out[f"gemm_{preset}_preset"] = gemm_row(gemm.gemm, gemm.PRESETS[preset])

    # ---- the warp-specialized Hopper GEMM (TMA producer warpgroup, wgmma consumer warpgroups)
    hopper = {
        "128x128_s4": gemm_hopper.SMALL_TILE,
        "128x256_s3": dict(BN=256, STAGES=3, INSTR=tp.nv.wgmma_m64n256k16_bf16),
        "128x256_s4": dict(BN=256, STAGES=4, INSTR=tp.nv.wgmma_m64n256k16_bf16),
    }
    for tag, extra in hopper.items():
        p = {**gemm_hopper.PRESETS["sm_90a"], **extra}
        out[f"gemm_hopper_{tag}"] = {
            **gemm_row(gemm_hopper.gemm_hopper, p), "tile": [p["BM"], p["BN"], p["BK"]], "stages": p["STAGES"]}

    # ---- fused LLM ops (vs torch eager and torch.compile), the MoE layer (vs torch._grouped_mm and a
    # per-expert loop) and attention (vs the SDPA flash and cuDNN backends): their own scripts, same timing;
    # their tables print as they run, their rows land here too
    from benchmarks import attention as attention_bench
    from benchmarks import llm_ops as llm_bench
    from benchmarks import moe as moe_bench

    sub = ["--out", args.out] + (["--quick"] if args.quick else [])
    res["llm_ops"] = llm_bench.main(sub)["results"]
    res["moe"] = moe_bench.main(sub)["results"]
    res["attention"] = {k: v for k, v in attention_bench.main(sub).items() if k in ("rows", "decode", "kernels")}

    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / f"{name}{'-quick' if args.quick else ''}.json"
    path.write_text(json.dumps(res, indent=1))
    print(f"device: {props.name}; copy bandwidth {copy_bw / 1e9:.0f} GB/s; results in {path}")
    print(
        f"{'kernel':24s} {'time (us)':>10s} {'GB/s or TF':>11s} {'of copy':>8s} {'torch (us)':>11s} {'rel err':>9s}"
    )
    for key, r in out.items():
        if key == "d2d_copy":
            continue
        if "GBps" in r:
            print(
                f"{key:24s} {r['seconds'] * 1e6:10.1f} {r['GBps']:11.0f} {r['fraction_of_copy']:8.1%} "
                f"{r['torch_seconds'] * 1e6:11.1f} {r['rel_err']:9.1e}"
            )
        else:
            print(
                f"{key:24s} {r['seconds'] * 1e6:10.1f} {r['TFLOPs']:11.1f} {r['ratio_to_cublas']:8.1%} "
                f"{r['cublas_seconds'] * 1e6:11.1f} {r['rel_err']:9.1e}"
            )
    return res


if __name__ == "__main__":
    main()
