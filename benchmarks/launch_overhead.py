"""Host overhead of launching tilepy kernels through tilepy_hip, next to torch's, on one GPU; the 1024^3 GEMM
30 times back-to-back against cuBLAS, eager and graph-replayed.

    python benchmarks/launch_overhead.py [--paths] [--out DIR] [model_new.py]

* Host time per launch: wall time of 2,000 back-to-back launches of a 256-element vector_add (no
  synchronization inside the loop), median of 9 loops interleaved across the ways, for `kernel[grid](...)`,
  `tilepy_hip.launch`, argus's `runtime.launch` and `torch.add(x, y, out=z)`; also each one's event-to-event
  time of a single launch.
* GEMM 1024^3 (bf16 in; gemm_hopper writes f32, cuBLAS through torch.matmul bf16): 30 launches back-to-back,
  CUDA events around them, median of 20; then the same 30 captured in one CUDA graph and replayed.
* `--paths`: the ways to reach cuLaunchKernel from Python, on the same prepared arguments (ctypes with
  argtypes, ctypes with arguments converted by hand, cuda-bindings, tilepy_hip's C extension), and the parts
  of the fast path (signature key, prepared call without the driver, current-stream lookup).
* With a model_new.py (KernelBench style): Model vs ModelNew, eager and through tilepy_hip.graphs.
Writes <out>/launch_<device>.json (default benchmarks/results/).
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import importlib
import json
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
from argus_agent import runtime  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402
from stdlib_kernels import vector_add as va  # noqa: E402
from tilepy_hip.graphs import GraphedFunction, capture  # noqa: E402

hip_launch = importlib.import_module("tilepy_hip.launch")


def host_us(fn, n=2000, reps=7, warm=200) -> float:
    """Median host microseconds per call over `reps` loops of `n` back-to-back calls (synchronized between
    loops, not inside)."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def interleaved_host_us(ways: dict, n=2000, reps=9, warm=500) -> dict:
    """host_us for several ways at once, their loops interleaved, so drift (clocks, other load) hits all alike."""
    for fn in ways.values():
        for _ in range(warm):
            fn()
    torch.cuda.synchronize()
    times: dict = {name: [] for name in ways}
    for _ in range(reps):
        for name, fn in ways.items():
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            times[name].append((time.perf_counter() - t0) / n * 1e6)
            torch.cuda.synchronize()
    return {name: statistics.median(t) for name, t in times.items()}


def event_us(fn, reps=200, warm=20) -> float:
    """Median event-to-event microseconds of one call (launch latency + kernel)."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return statistics.median(times)


def batch_us(fn, calls=30, reps=20, warm=3) -> float:
    """Median event-timed microseconds per call of `calls` back-to-back calls."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(calls):
            fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3 / calls)
    return statistics.median(times)


def graph_us(fn, calls=30, reps=20) -> float:
    """Like batch_us, with the `calls` calls captured in one CUDA graph and replayed."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    return batch_us(g.replay, calls=1, reps=reps) / calls


def launch_overhead() -> dict:
    x = torch.randn(256, device="cuda")
    y, z = torch.randn_like(x), torch.empty_like(x)
    k = va.vector_add
    ways = {
        "kernel[grid](...)": lambda: k[(1,)](x, y, z, BLOCK=256),
        "tilepy_hip.launch": lambda: tilepy_hip.launch(k, (1,), x, y, z, BLOCK=256),
        "argus runtime.launch": lambda: runtime.launch(k, lambda m: (tp.cdiv(m["N"], m["BLOCK"]),), x, y, z,
                                                       BLOCK=256),
        "torch.add(out=)": lambda: torch.add(x, y, out=z),
    }
    k[(1,)](x, y, z, BLOCK=256)
    torch.cuda.synchronize()
    assert torch.equal(z, x + y), "vector_add is wrong"
    host = interleaved_host_us(ways)
    out = {name: {"host_us": host[name], "event_us": event_us(fn)} for name, fn in ways.items()}
    torch_host = out["torch.add(out=)"]["host_us"]
    for r in out.values():
        r["host_ratio_to_torch"] = r["host_us"] / torch_host
    return out


def gemm_1024(only=None) -> dict:
    m = n = kk = 1024
    g = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(m, kk, generator=g).to(torch.bfloat16).cuda()
    b = torch.randn(kk, n, generator=g).to(torch.bfloat16).cuda()
    c = torch.full((m, n), float("nan"), device="cuda")
    ref = a.double() @ b.double()
    cublas = {"eager_us": batch_us(lambda: torch.matmul(a, b)), "graph_us": graph_us(lambda: torch.matmul(a, b))}
    out = {"shape": [m, n, kk], "calls": 30, "cublas": cublas}
    variants = {  # the preset, and tiles that give 1024^2 outputs more CTAs (64 and 128 of 132 SMs)
        "128x256_s4": {},
        "128x128_s4": gemm_hopper.SMALL_TILE,
        "128x64_s4": dict(BN=64, INSTR=tp.nv.wgmma_m64n64k16_bf16),
        "128x64_s3": dict(BN=64, STAGES=3, INSTR=tp.nv.wgmma_m64n64k16_bf16),
        "64x128_s4_1consumer": dict(BM=64, BN=128, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n128k16_bf16),
        "64x64_s4_1consumer": dict(BM=64, BN=64, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n64k16_bf16),
    }
    variants["policy"] = None  # what gemm_hopper.policy() picks for the shape (the lowering's choice)
    for tag, extra in variants.items():
        if only and tag not in only:
            continue
        p = gemm_hopper.policy(m, n, kk) if extra is None else {**gemm_hopper.PRESETS["sm_90a"], **extra}
        grid = gemm_hopper.grid_of(m, n, p)
        fn = lambda p=p, grid=grid: gemm_hopper.gemm_hopper[grid](a, b, c, **p)  # noqa: E731
        fn()
        torch.cuda.synchronize()
        err = float((c.double() - ref).norm() / ref.norm())
        r = {"eager_us": batch_us(fn), "graph_us": graph_us(fn), "rel_err": err}
        r["eager_ratio_to_cublas"] = r["eager_us"] / cublas["eager_us"]
        r["graph_ratio_to_cublas"] = r["graph_us"] / cublas["graph_us"]
        out[f"gemm_hopper_{tag}"] = r
    return out


def launch_paths() -> dict:
    """The same prepared vector_add launch through each way of calling cuLaunchKernel, and the fast path's
    parts."""
    from tilepy_hip import native

    x = torch.randn(256, device="cuda")
    y, z = torch.randn_like(x), torch.empty_like(x)
    k = va.vector_add
    ck = k[(1,)](x, y, z, BLOCK=256)
    prep = hip_launch.prepare(ck, [x, y, z])
    prep.call((1,), (x, y, z))
    func, addr, threads, smem = prep.func, prep.params_addr, prep.threads, prep.smem
    raw_stream = hip_launch._raw_stream_fn()
    out = {}
    typed = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
    typed.argtypes = [ctypes.c_void_p, *([ctypes.c_uint] * 7), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    out["ctypes, argtypes"] = lambda: typed(func, 1, 1, 1, threads, 1, 1, smem, raw_stream(0), addr, None)
    by_hand = native._ctypes_launch()
    out["ctypes, converted by hand (fallback)"] = lambda: by_hand(func, 1, 1, 1, threads, smem, raw_stream(0), addr)
    try:
        from cuda.bindings import driver as cu

        cfunc = cu.CUfunction(func)
        out["cuda-bindings"] = lambda: cu.cuLaunchKernel(cfunc, 1, 1, 1, threads, 1, 1, smem,
                                                         cu.CUstream(raw_stream(0)), addr, 0)
    except Exception as exc:  # noqa: BLE001 - reported, not fatal
        out["cuda-bindings"] = f"unavailable: {type(exc).__name__}: {exc}"
    launch_fn, what = native.launcher()
    if what == "C extension":
        out["C extension (used)"] = lambda: launch_fn(func, 1, 1, 1, threads, smem, raw_stream(0), addr)
    else:
        out["C extension (used)"] = f"unavailable: {what}"
    out["raw stream lookup only"] = lambda: raw_stream(0)
    table = hip_launch._PREPARED[k]
    out["signature key only"] = lambda: table.key(None, {"BLOCK": 256}, (x, y, z))
    noop = hip_launch.build_prepared(ck, [x, y, z], prep.values, func, 0, launch_fn=lambda *a: 0,
                                     stream_fn=raw_stream, on_error=None)
    out["prepared call, no-op launch"] = lambda: noop.call((1,), (x, y, z))
    res = {}
    for name, fn in out.items():
        if isinstance(fn, str):
            res[name] = fn
            continue
        try:
            if name.startswith(("ctypes", "cuda-b", "C ext")):
                z.fill_(float("nan"))
                r = fn()
                rc = r[0] if isinstance(r, tuple) else r
                torch.cuda.synchronize()
                if int(rc) != 0 or not torch.equal(z, x + y):
                    raise RuntimeError(f"rc {rc} or a wrong result")
            res[name] = host_us(fn)
        except Exception as exc:  # noqa: BLE001 - one way failing should not hide the others
            res[name] = f"failed: {type(exc).__name__}: {exc}"
    return res


def model_new(path: str) -> dict:
    import runpy

    mod = runpy.run_path(path)
    torch.manual_seed(0)
    model = mod["Model"](*mod["get_init_inputs"]()).cuda()
    torch.manual_seed(0)
    new = mod["ModelNew"](*mod["get_init_inputs"]()).cuda()
    inputs = [t.cuda() for t in mod["get_inputs"]()]
    with torch.no_grad():
        r = {"model_eager_us": batch_us(lambda: model(*inputs), calls=10),
             "new_eager_us": batch_us(lambda: new(*inputs), calls=10)}
        gm, gn = capture(model, *inputs), capture(new, *inputs)
        r["model_graph_us"] = batch_us(gm.replay, calls=10)
        r["new_graph_us"] = batch_us(gn.replay, calls=10)
        fn = GraphedFunction(new)
        out, ref = fn(*inputs).double(), model(*inputs).double()
    r["rel_err"] = float((out - ref).norm() / ref.norm())
    return r


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_new", nargs="?")
    ap.add_argument("--paths", action="store_true", help="compare the ways of calling cuLaunchKernel")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--gemm", default="", help="comma-separated GEMM variants to run (default: all; e.g. policy)")
    args = ap.parse_args(argv)
    props = torch.cuda.get_device_properties(0)
    res = {
        "device": props.name,
        "torch": torch.__version__,
        "tilepy_hip": tilepy_hip.__version__,
        "driver": _driver_version(),
        "python": sys.version.split()[0],
        "launcher": tilepy_hip.native.launcher()[1],
        "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "launch": launch_overhead(),
    }
    if args.paths:
        res["paths_host_us"] = launch_paths()
    res["gemm_1024"] = gemm_1024([v for v in args.gemm.split(",") if v])
    if args.model_new:
        res["model_new"] = {args.model_new: model_new(args.model_new)}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / f"launch_{re.sub(r'[^A-Za-z0-9]+', '_', props.name)}.json"
    path.write_text(json.dumps(res, indent=1))
    _print(res, path)
    return res


def _driver_version() -> str:
    v = ctypes.c_int()
    hip_launch._driver().cuDriverGetVersion(ctypes.byref(v))
    return f"{v.value // 1000}.{v.value % 1000 // 10}"


def _print(res: dict, path: Path):
    print(f"device: {res['device']}; torch {res['torch']}; CUDA driver {res['driver']}; results in {path}")
    print(f"{'launch (256-element add)':28s} {'host us':>8s} {'x torch':>8s} {'event us':>9s}")
    for name, r in res["launch"].items():
        print(f"{name:28s} {r['host_us']:8.2f} {r['host_ratio_to_torch']:8.2f} {r['event_us']:9.2f}")
    for name, v in res.get("paths_host_us", {}).items():
        print(f"  path {name:32s} " + (f"{v:6.2f} us" if isinstance(v, float) else v))
    g = res["gemm_1024"]
    print(f"GEMM 1024^3 x30 (us per call)   eager   graph   (cuBLAS {g['cublas']['eager_us']:.1f} / "
          f"{g['cublas']['graph_us']:.1f})")
    for name, r in g.items():
        if name.startswith("gemm_hopper"):
            print(f"  {name:28s} {r['eager_us']:6.1f} {r['graph_us']:6.1f}   x cuBLAS {r['eager_ratio_to_cublas']:.2f}"
                  f" / {r['graph_ratio_to_cublas']:.2f}   rel err {r['rel_err']:.1e}")
    for name, r in res.get("model_new", {}).items():
        print(f"{name}: Model {r['model_eager_us']:.1f} / {r['model_graph_us']:.1f} us, ModelNew "
              f"{r['new_eager_us']:.1f} / {r['new_graph_us']:.1f} us (eager / graph), rel err {r['rel_err']:.1e}")


if __name__ == "__main__":
    main()
