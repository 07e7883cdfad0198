"""G30 call 1: where a rotated skinny fp8 call's time goes. For M x 4096 x 4096 (B 16 MB e4m3, rotated over input
sets so B comes from DRAM, METHOD.md), each function is timed as benchmarks/timing.graph_seconds times it (a CUDA
graph of 20 calls, the sets in turn; median of 3 x 15 replays) and then traced: torch.profiler over three replays of
that graph gives every kernel's start and duration inside the graph, so a call's period splits into the kernel's own
duration and the gap before the next kernel (negative: the next kernel started before this one ended, e.g. a
programmatic dependent launch). Functions: ours (gemm_fp8.launch under the policy, and variants), the peer
torch._scaled_mm (default and fast accumulation), and floors that read B and nothing else: stream_b (g30_stream.py,
gemm_fp8_swap's TMA ring without the wgmma, box variants) and torch's int32 max over B. Outputs checked against
float64 first. Writes g30-trace-<device>.json.

    python benchmarks/profile/g30_trace.py [--rows 16 32 64 128] [--out DIR] [--name NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "benchmarks" / "profile"))

import torch  # noqa: E402
from g30_stream import stream_b  # noqa: E402
from gemm_fp8 import _rel, _scaled, inputs  # noqa: E402
from timing import graph_seconds, input_sets  # noqa: E402

import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp8  # noqa: E402

REPS = 20
STREAMS2 = {    # call 2: 16 KB boxes over fewer blocks
    "stream_64x128_s12_split2": (64, 128, 12, 2, 0),
    "stream_128x128_s6_split4": (128, 128, 6, 4, 0),
    "stream_128x128_s10_split2": (128, 128, 10, 2, 0),    # 64 blocks (the 128-column tiles' cluster of 2)
    "stream_128x128_s4_split2": (128, 128, 4, 2, 0),      # the same with 128 rows' 4 stages
    "stream_128x128_s12_split1": (128, 128, 12, 1, 0),    # 32 blocks
}
STREAMS4 = {    # call 4: the copies TMA only (a sixth field: TMA_ONLY)
    "stream_64x128_s12_split2": (64, 128, 12, 2, 0),
    "stream_64x128_s12_split2_tma": (64, 128, 12, 2, 0, 1),
    "stream_64x128_s12_split1_tma": (64, 128, 12, 1, 0, 1),
}
STREAMS = {     # stream_b variants: (BN, BK, STAGES, SPLIT, WIDE); grid (1, N / BN, SPLIT)
    "stream_64x128_s12_split2": (64, 128, 12, 2, 0),      # the policy's ring at 16-64 rows (128 blocks)
    "stream_64x128_s12_split1": (64, 128, 12, 1, 0),      # 64 blocks, the whole K each
    "stream_64x256w_s6_split2": (64, 256, 6, 2, 1),       # 256-byte rows a request, unswizzled
    "stream_64x128_s6_split4": (64, 128, 6, 4, 0),        # 256 blocks, two an SM
    "stream_128x128_s6_split4": (128, 128, 6, 4, 0),      # 128 blocks of 128-row boxes
}


def us(fns) -> float:
    return statistics.median(graph_seconds(fns, REPS, 15) for _ in range(3)) * 1e6


def trace(fns) -> dict:
    """Kernel durations and gaps inside a graph of REPS calls (the sets in turn), three replays traced."""
    fns = list(fns)
    for f in fns:
        f()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(REPS):
            fns[i % len(fns)]()
    graph.replay()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            graph.replay()
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    prof.export_chrome_trace(path)
    evs = [e for e in json.loads(Path(path).read_text())["traceEvents"] if e.get("cat") == "kernel"]
    os.unlink(path)
    evs.sort(key=lambda e: float(e["ts"]))
    if not evs or len(evs) % 3:
        return {"kernels_traced": len(evs)}
    per = len(evs) // 3
    names, gaps, periods = {}, [], []
    for r in range(3):
        run = evs[r * per:(r + 1) * per]
        periods.append((float(run[-1]["ts"]) + float(run[-1]["dur"]) - float(run[0]["ts"])) / REPS)
        for i, e in enumerate(run):
            names.setdefault(e["name"], []).append(float(e["dur"]))
            if i + 1 < len(run):
                gaps.append(float(run[i + 1]["ts"]) - float(e["ts"]) - float(e["dur"]))
    first = {}
    for e in evs:
        first.setdefault(e["name"], {k: e.get("args", {}).get(k) for k in
                                     ("grid", "block", "shared memory", "registers per thread")})
    return {"kernels_per_call": per / REPS, "period_us": statistics.median(periods),
            "gap_us_median": statistics.median(gaps), "gap_us_min": min(gaps), "gap_us_max": max(gaps),
            "kernels": {n[:160]: {"dur_us_median": statistics.median(d), "dur_us_min": min(d), "count": len(d),
                                  **first[n]} for n, d in names.items()}}


def row(tag, fns, out, check=None):
    r = {"us": us(fns), **trace(fns)}
    if check is not None:
        r["rel_err"] = check
    out[tag] = r
    ks = "; ".join(f"{n[:60]} {k['dur_us_median']:.2f} us grid {k['grid']} smem {k['shared memory']}"
                   for n, k in r.get("kernels", {}).items())
    print(f"  {tag:28s} {r['us']:7.2f} us/call  period {r.get('period_us', 0):6.2f}  gap med "
          f"{r.get('gap_us_median', 0):5.2f} min {r.get('gap_us_min', 0):5.2f}  | {ks}", flush=True)
    return r


def ours_variants(M, N, K) -> dict:
    pol = gemm_fp8.swap_policy(M, N, K)
    out = {"policy": pol}
    bm = pol["BM"]
    out["slots2_bn64"] = gemm_fp8.swap_params(M, N, K, BN=64, BM=bm)       # 128 blocks (split 2), no cluster
    out["slots2_bn64"].update(SPLIT_K=2, STAGES=gemm_fp8.swap_stages(bm, 64))
    q = dict(out["slots2_bn64"])
    q.update(SPLIT_K=4, STAGES=min(6, gemm_fp8.swap_stages(bm, 64)))      # 256 blocks, two an SM
    out["slots4_bn64_s6"] = q
    if pol["CLUSTER_K"] == 2 and pol["STAGES"] > 6:
        out["policy_s6"] = {**pol, "STAGES": 6}
    return out


def call2_variants(M, N, K) -> dict:
    """Call 2: B's boxes of 16 KB (128 rows x 128 bytes) instead of 8 KB: 128-column tiles (two consumers) with the
    split of 2 in the cluster (64 blocks), the same over two row tiles of half the rows (128 blocks, B's second read
    from the L2), a cluster of 4 (128 blocks), the slots of 4 (128 blocks and the sum's kernel)."""
    pol = gemm_fp8.swap_policy(M, N, K)
    out = {"policy": pol}

    def form(**kw):
        return gemm_fp8.params_for(M, N, K, SWAP=1, BN=128, CONSUMERS=2, K_WAYS=1, **kw)
    out["bn128_ck2"] = form(CLUSTER_K=2)
    half = next(n for n in sorted(gemm_fp8.SWAP_INSTR) if n >= -(-M // 2))
    out["bn128_half_ck2"] = form(CLUSTER_K=2, BM=half, INSTR=gemm_fp8.SWAP_INSTR[half])
    if M <= 64:
        out["bn128_ck4"] = form(CLUSTER_K=4)
    sl = gemm_fp8.swap_params(M, N, K, BN=128)
    out["bn128_slots4"] = {**sl, "SPLIT_K": 4}
    return {k: v for k, v in out.items() if k == "policy" or v["STAGES"] >= 3}


def call3_variants(M, N, K) -> dict:
    """Call 3: no K split (the stream floor pulls as much through 64 blocks as through 128, and the split's exchange is
    what grows with the rows): 64-column tiles unsplit with one consumer or two on alternate k-tiles (K_WAYS=2), the
    same over two row tiles of half the rows (128 blocks, B's second read from the L2), and G24's rows over a cluster
    of 2 sharing B by multicast (CLUSTER_M=2, K_WAYS=2)."""
    pol = gemm_fp8.swap_policy(M, N, K)
    out = {"policy": pol}

    def form(**kw):
        return gemm_fp8.params_for(M, N, K, SWAP=1, BN=64, SPLIT_K=1, CLUSTER_K=1, **kw)
    bm = pol["BM"] if M <= 128 else 128
    half = next(n for n in sorted(gemm_fp8.SWAP_INSTR) if n >= -(-min(M, 256) // 2))
    out["unsplit"] = form(BM=bm, INSTR=gemm_fp8.SWAP_INSTR[bm], CONSUMERS=1, K_WAYS=1)
    out["unsplit_kw"] = form(BM=bm, INSTR=gemm_fp8.SWAP_INSTR[bm], CONSUMERS=2, K_WAYS=2)
    if half <= 128:
        out["unsplit_half"] = form(BM=half, INSTR=gemm_fp8.SWAP_INSTR[half], CONSUMERS=1, K_WAYS=1)
        out["unsplit_half_kw"] = form(BM=half, INSTR=gemm_fp8.SWAP_INSTR[half], CONSUMERS=2, K_WAYS=2)
    out["cm_kw"] = gemm_fp8.swap_params(M, N, K, k_ways=2, cluster_m=2)
    seen, uniq = set(), {}
    for tag, p in out.items():      # (above 128 rows the half is the whole BM: one of each)
        key = repr(sorted((k, str(v)) for k, v in p.items()))
        if key not in seen:
            seen.add(key)
            uniq[tag] = p
    return uniq


def call4_variants(M, N, K) -> dict:
    """Call 4: the operands' copies TMA only (TMA_ONLY=1: no per-element fallback compiled in beside them; 34-101
    registers a thread where the policy's forms took 135-245) on the policy's forms; at 16-32 rows the unsplit forms
    again with it (is their per-k-tile chain the fallback's registers?); at 256 rows G21's table (whole=False) beside
    the adopted row."""
    pol = gemm_fp8.swap_policy(M, N, K)
    out = {"policy": pol, "policy_tma": {**pol, "TMA_ONLY": 1}}
    if M <= 32:
        for tag, p in call3_variants(M, N, K).items():
            if tag in ("unsplit", "unsplit_half_kw"):
                out[tag + "_tma"] = {**p, "TMA_ONLY": 1}
    if M == 256:
        g21 = gemm_fp8.swap_policy(M, N, K, whole=False)
        out["g21"], out["g21_tma"] = g21, {**g21, "TMA_ONLY": 1}
    return out


def call5_variants(M, N, K) -> dict:
    """Call 5: the adopted policy (TMA_ONLY everywhere, 16 rows unsplit, 256 rows whole tiles) against the table
    before G30 (G21 / G24's rows, the fallback compiled in)."""
    return {"policy": gemm_fp8.swap_policy(M, N, K),
            "before_g30": gemm_fp8.swap_policy(M, N, K, whole=False, unsplit=False, tma_only=False)}


PLANS = {"call1": ours_variants, "call2": call2_variants, "call3": call3_variants, "call4": call4_variants,
         "call5": call5_variants}


def _stream_kw(v):
    bn, bk, st, sp, w = v[:5]
    return dict(BN=bn, BK=bk, STAGES=st, SPLIT=sp, WIDE=w, TMA_ONLY=v[5] if len(v) > 5 else 0)


def _build(job):
    kind, kw = job
    try:
        if kind == "stream":
            tilepy_hip.compile(stream_b, target="sm_90a", **kw)
        else:
            kernel, kp = gemm_fp8.kernel_of(kw)
            tilepy_hip.compile(kernel, target="sm_90a", **kp)
        return None
    except Exception as e:  # noqa: BLE001 - reported by the caller
        return f"{type(e).__name__}: {str(e)[:200]}"


def prebuild(rows, N, K, jobs=12, plan=ours_variants, streams=None):
    """Every kernel this run times, built in parallel processes first (the cache keeps them)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    work = [("ours", p) for M in rows for p in plan(M, N, K).values()]
    work += [("stream", _stream_kw(v)) for v in (streams or STREAMS).values()]
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as ex:
        return [e for e in ex.map(_build, work) if e]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="*", type=int, default=[16, 32, 64, 128])
    ap.add_argument("--nk", default="4096,4096")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--name", default="g30-trace")
    ap.add_argument("--plan", default="call1", choices=sorted(PLANS))
    ap.add_argument("--repeat", type=int, default=1, help="every shape's functions this many times, alternated")
    args = ap.parse_args(argv)
    N, K = (int(x) for x in args.nk.split(","))
    t = time.time()
    plan, streams = PLANS[args.plan], {"call2": STREAMS2, "call4": STREAMS4, "call5": {}}.get(args.plan, STREAMS)
    fails = prebuild(args.rows, N, K, plan=plan, streams=streams)
    print(f"built in {time.time() - t:.1f} s; failures: {fails}", flush=True)
    props = torch.cuda.get_device_properties(0)
    res = {"device": props.name, "torch": torch.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"), "reps": REPS, "rows": {}}
    g = torch.Generator(device="cuda").manual_seed(30)
    for M in args.rows:
        torch.cuda.empty_cache()
        nsets = input_sets(M * K + N * K + 4 * M * N)
        sets = [(*inputs(M, N, K, g), torch.empty(M, N, device="cuda", dtype=torch.bfloat16)) for _ in range(nsets)]
        print(f"{M} x {N} x {K}: {nsets} input sets", flush=True)
        a, b, sa, sb, o = sets[0]
        ref = (a.double() @ b.double().t()) * sa.double() * sb.double()
        out = {}
        table, fns_of, errs = plan(M, N, K), {}, {}
        for tag, p in table.items():
            fns = [partial(gemm_fp8.launch, *x, **p) for x in sets]
            o.fill_(float("nan"))
            fns[0]()
            torch.cuda.synchronize()
            errs[tag] = err = _rel(o, ref)
            if not err < 2e-2:
                print(f"  {tag}: wrong, rel err {err:.2e}; not timed", flush=True)
                continue
            fns_of[tag] = fns
        fns_of["scaled_mm"] = [partial(_scaled, *x[:4]) for x in sets]
        errs["scaled_mm"] = _rel(_scaled(*sets[0][:4]), ref)
        fns_of["scaled_mm_fast"] = [partial(_scaled, *x[:4], fast=True) for x in sets]
        errs["scaled_mm_fast"] = _rel(_scaled(*sets[0][:4], fast=True), ref)
        for rep in range(args.repeat):      # every function in turn, `repeat` times
            for tag, fns in fns_of.items():
                name = tag if args.repeat == 1 else f"{tag}#{rep}"
                row(name, fns, out, errs[tag])
                if tag in table:
                    out[name]["params"] = {k: v for k, v in table[tag].items() if k not in ("INSTR", "SWIZZLE")}
        if M == args.rows[0]:       # the floors read B only: once
            sink = torch.empty(4 * N // 64, 128, device="cuda", dtype=torch.float32)
            for rep in range(args.repeat):
                for tag, v in streams.items():
                    try:
                        kw = _stream_kw(v)
                        grid = (1, -(-N // kw["BN"]), kw["SPLIT"])
                        fns = [partial(stream_b[grid], x[1], sink, **kw) for x in sets]
                        row(tag if args.repeat == 1 else f"{tag}#{rep}", fns, out)
                    except Exception as e:  # noqa: BLE001 - a variant that does not build: say so, go on
                        print(f"  {tag}: skipped: {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)
            if args.plan == "call1":
                row("torch_int32_max", [partial(torch.amax, x[1].view(torch.int32)) for x in sets], out)
        res["rows"][f"{M}x{N}x{K}"] = out
        Path(args.out).mkdir(parents=True, exist_ok=True)
        dev = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
        (Path(args.out) / f"{args.name}-{dev}.json").write_text(json.dumps(res, indent=1, default=str))
    print("done", flush=True)


if __name__ == "__main__":
    main()
