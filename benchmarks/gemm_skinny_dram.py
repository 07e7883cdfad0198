"""Issue 15, skinny bf16 rows with B streamed from DRAM (G27): the decode / skinny GEMM as a model's step runs it,
its weight B not left in the L2 by the call before. Every figure rotates among input sets (benchmarks/timing.py:
a rotation touches >= 2x the L2), ours and cuBLAS alike; the one-set ("hot") figure is kept beside.

    python benchmarks/gemm_skinny_dram.py --plan 1 [--out DIR] [--name STEM] [--precompile N]
    python benchmarks/gemm_skinny_dram.py --ncu-target   (the kernels ncu is to read, each a few times)

Plan 1: (a) the floor: a plain read of a 4096 x 4096 bf16 B rotated (torch's B.sum in f32, a device copy, cuBLAS
at one row), its TB/s; (b) the policy against cuBLAS at 16-256 rows of N = K = 4096 and the LLM decode shapes;
(c) the pushed cluster split's depth (stages per ring, with and without the one-tile exchange XCH) and BN 128,
each alternated twice with the policy. Times: benchmarks/gemm.py's rule (median of 15 CUDA-graph replays of 20
calls, ours and cuBLAS alternated twice, the better of two medians each); every output checked against float64
before it is timed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import gemm as gb  # noqa: E402  (benchmarks/gemm.py: the row / timing rules, rotated)
import gemm_small_sweep as ss  # noqa: E402  (params_of, the variant forms)
import torch  # noqa: E402
from timing import graph_seconds, input_sets  # noqa: E402

import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402

SQ = 4096


def _pol(**kw):
    return ("policy", kw)


def _twice(tag, spec):
    return [("policy", None), (tag, spec), ("policy_again", None), (tag + "_again", spec)]


TABLE_ROWS = [16, 32, 48, 64, 80, 96, 112, 128, 192, 256]
PLAN1_TABLE = [((m, SQ, SQ), [("policy", None)], ("bf16",)) for m in TABLE_ROWS]
PLAN1_TABLE += [((128, 14336, 4096), [("policy", None)], ("bf16",)), ((128, 4096, 14336), [("policy", None)],
                                                                       ("bf16",)),
                ((32, SQ, SQ), [("policy", None)], ("f32",)), ((128, SQ, SQ), [("policy", None)], ("f32",))]
# the ring's depth with B from DRAM (G23 chose 4 stages per ring on a B the L2 kept: fewer were faster there);
# XCH=1 (one exchange tile) leaves room for one or two stages more at BM 32-96
PLAN1_SWEEP = [
    ((32, SQ, SQ), _twice("s8", _pol(STAGES=8)) + [("s6", _pol(STAGES=6)), ("xch_s9", _pol(STAGES=9, XCH=1)),
                                                   ("bn128_s4", _pol(BN=128))], ("bf16",)),
    ((64, SQ, SQ), _twice("s6", _pol(STAGES=6)) + [("s5", _pol(STAGES=5)), ("xch_s6", _pol(STAGES=6, XCH=1))],
     ("bf16",)),
    ((80, SQ, SQ), _twice("s5", _pol(STAGES=5)) + [("xch_s5", _pol(STAGES=5, XCH=1))], ("bf16",)),
    ((96, SQ, SQ), _twice("xch_s5", _pol(STAGES=5, XCH=1)), ("bf16",)),
    ((128, SQ, SQ), [("policy", None), ("s3", _pol(STAGES=3))], ("bf16",)),     # (the slope of depth at BM 128)
]


def _kw2(bm, stages):
    """Two row tiles of BM rows (the last shifted back to end at M), K_WAYS=2, unsplit: 2 x N / 64 blocks each
    streaming all of K, the second row tile's B from the L2 (cuBLAS's 64 x BM tiles of C^T at 32-256 rows, less
    its 2-block clusters)."""
    import tilepy as tp

    return dict(gemm_hopper.SWAP_KWAYS, BM=bm, STAGES=stages, INSTR=getattr(tp.nv, f"wgmma_m64n{bm}k16_bf16"))


# call 2: two unsplit row tiles at 96-256 rows against the policy (the cluster split to 128 rows; 128 x 128 split 2
# into slots at 129-224; 64 x 128 in 2x1 clusters at 225-256); the 128 x 128 tiles' depth at 128 x 14336 x 4096
PLAN2_TABLE = []
PLAN2_SWEEP = [
    ((192, SQ, SQ), _twice("kw2_96_s5", _kw2(96, 5)) + [("kw2_96_s4", _kw2(96, 4))], ("bf16",)),
    ((256, SQ, SQ), _twice("kw2_128_s4", _kw2(128, 4)), ("bf16",)),
    ((160, SQ, SQ), [("policy", None), ("kw2_80_s5", _kw2(80, 5))], ("bf16",)),
    ((224, SQ, SQ), [("policy", None), ("kw2_112_s4", _kw2(112, 4))], ("bf16",)),
    ((128, SQ, SQ), _twice("kw2_64_s6", _kw2(64, 6)), ("bf16",)),
    ((96, SQ, SQ), [("policy", None), ("kw2_48_s7", _kw2(48, 7)), ("kw2_48_s5", _kw2(48, 5))], ("bf16",)),
    ((112, SQ, SQ), [("policy", None), ("kw2_64_s6", _kw2(64, 6))], ("bf16",)),
    ((128, 14336, 4096), [("policy", None), ("s5", _pol(STAGES=5)), ("s6", _pol(STAGES=6)), ("policy_again", None)],
     ("bf16",)),
    ((192, SQ, SQ), [("policy", None), ("kw2_96_s5", _kw2(96, 5))], ("f32",)),
]
# call 3: the unsplit row tiles with M = 2 x BM (no shift: the shifted store's row mask needs a power-of-two BM),
# alternated twice where call 2 or this call adopts; their K reach at 128 rows (K = 14336), 100 / 120 rows
KW2 = lambda bm, s, **kw: dict(_kw2(bm, s), **kw)     # noqa: E731
PLAN3_TABLE = []
PLAN3_SWEEP = [
    ((192, SQ, SQ), _twice("kw2_96_s5", KW2(96, 5, M_SHIFT=0)) + [("kw2_96_s4", KW2(96, 4, M_SHIFT=0)),
                                                                 ("kw2_128_s4", KW2(128, 4))], ("bf16",)),
    ((160, SQ, SQ), [("policy", None), ("kw2_80_s5", KW2(80, 5, M_SHIFT=0)), ("kw2_128_s4", KW2(128, 4))],
     ("bf16",)),
    ((224, SQ, SQ), [("policy", None), ("kw2_112_s4", KW2(112, 4, M_SHIFT=0)), ("kw2_128_s4", KW2(128, 4))],
     ("bf16",)),
    ((256, SQ, SQ), _twice("kw2_128_s4", KW2(128, 4)), ("bf16",)),
    ((96, SQ, SQ), [("policy", None), ("kw2_48_s7", KW2(48, 7, M_SHIFT=0)), ("kw2_48_s5", KW2(48, 5, M_SHIFT=0))],
     ("bf16",)),
    ((128, SQ, SQ), _twice("kw2_64_s6", KW2(64, 6)) + [("kw2_64_s4", KW2(64, 4))], ("bf16",)),
    ((120, SQ, SQ), [("policy", None), ("kw2_64_s6", KW2(64, 6))], ("bf16",)),
    ((112, SQ, SQ), _twice("kw2_64_s6", KW2(64, 6)), ("bf16",)),
    ((100, SQ, SQ), [("policy", None), ("kw2_64_s6", KW2(64, 6))], ("bf16",)),
    ((128, SQ, 14336), [("policy", None), ("kw2_64_s6", KW2(64, 6))], ("bf16",)),
    ((128, 14336, 4096), _twice("s5", _pol(STAGES=5)), ("bf16",)),
    ((128, SQ, SQ), [("policy", None), ("kw2_64_s6", KW2(64, 6))], ("f32",)),
    ((192, SQ, SQ), [("policy", None), ("kw2_96_s5", KW2(96, 5, M_SHIFT=0))], ("f32",)),
]
# call 4: after the policy change (two unsplit row tiles at 97-256 rows, 5 stages at 128 x 14336 x 4096 bf16): the
# table again, and the new rows against the forms they replaced where call 3 did not measure them (ragged 136 / 200 /
# 250 rows, short K); 96 / 80 rows as two 48-row tiles against the cluster split
I128 = gemm_hopper.SMALL_TILE["INSTR"]
OLD_SPLIT = dict(BM=128, BN=128, STAGES=6, CONSUMERS=2, IN_FLIGHT=1, SPLIT_K=2, FIXUP=3, INSTR=I128)
OLD_CLUSTER = dict(IN_FLIGHT=0, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128, CLUSTER_M=2, EPILOGUE=2)
PLAN4_TABLE = [((m, SQ, SQ), [("policy", None)], ("bf16",)) for m in (16, 32, 64, 96, 112, 128, 160, 192, 224, 256)]
PLAN4_TABLE += [((128, 14336, 4096), [("policy", None)], ("bf16",)), ((128, 4096, 14336), [("policy", None)],
                                                                       ("bf16",)),
                ((128, SQ, SQ), [("policy", None)], ("f32",)), ((192, SQ, SQ), [("policy", None)], ("f32",))]
PLAN4_SWEEP = [
    ((136, SQ, SQ), _twice("before", OLD_SPLIT), ("bf16",)),
    ((200, SQ, SQ), [("policy", None), ("before", OLD_SPLIT)], ("bf16",)),
    ((250, SQ, SQ), [("policy", None), ("before", OLD_CLUSTER)], ("bf16",)),
    ((192, SQ, 1024), [("policy", None), ("before", OLD_SPLIT)], ("bf16",)),
    ((96, SQ, SQ), _twice("kw2_48_s7", KW2(48, 7, M_SHIFT=0)), ("bf16",)),
    ((80, SQ, SQ), [("policy", None), ("kw2_48_s7", KW2(48, 7, M_SHIFT=0))], ("bf16",)),
]
# call 5: 81-96 rows as two 48-row tiles (the policy now) against the forms before (the cluster split from 24 k-tiles,
# SWAP_KWAYS's 64-row tiles below), at 88 / 96 rows and short K
SPLIT96 = ("policy", dict(gemm_hopper.cluster_split(96, SQ, SQ), M_SHIFT=0))
PLAN5_TABLE = []
PLAN5_SWEEP = [
    ((88, SQ, SQ), _twice("before", SPLIT96), ("bf16",)),
    ((96, SQ, SQ), [("policy", None), ("before", SPLIT96)], ("bf16",)),
    ((96, SQ, 1024), [("policy", None), ("before", dict(gemm_hopper.SWAP_KWAYS))], ("bf16",)),
    ((96, SQ, SQ), [("policy", None), ("before", SPLIT96)], ("f32",)),
]
PLANS = {"1": (PLAN1_TABLE, PLAN1_SWEEP), "2": (PLAN2_TABLE, PLAN2_SWEEP), "3": (PLAN3_TABLE, PLAN3_SWEEP),
         "4": (PLAN4_TABLE, PLAN4_SWEEP), "5": (PLAN5_TABLE, PLAN5_SWEEP)}
TRACE_ROWS = (32, 64, 128, 192)


def trace_rows(g, rows=TRACE_ROWS, reps: int = 20) -> dict:
    """Where a rotated call's period goes: a CUDA graph of `reps` calls (the input sets in turn) replayed three times
    under torch.profiler; per kernel of the call its mean duration, and the period (start to next start of the
    GEMM kernel) minus the durations of the call's kernels: the gap between calls (negative: overlapped)."""
    import os
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    out = {}
    for m in rows:
        sets = input_sets(2 * (m * SQ + SQ * SQ + m * SQ))
        abc = [(torch.randn(m, SQ, device="cuda", generator=g).bfloat16(),
                torch.randn(SQ, SQ, device="cuda", generator=g).bfloat16(),
                torch.empty(m, SQ, device="cuda", dtype=torch.bfloat16)) for _ in range(sets)]
        for who, fns in (("ours", [lambda a=a, b=b, c=c: gemm_hopper.launch(a, b, c) for a, b, c in abc]),
                         ("cuBLAS", [lambda a=a, b=b: torch.matmul(a, b) for a, b, _ in abc])):
            for f in fns:
                f()
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for i in range(reps):
                    fns[i % len(fns)]()
            graph.replay()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(3):
                    graph.replay()
                torch.cuda.synchronize()
            fd, path = tempfile.mkstemp(suffix=".json")
            os.close(fd)
            prof.export_chrome_trace(path)
            ev = sorted((e for e in json.loads(Path(path).read_text())["traceEvents"]
                         if e.get("cat") == "kernel"), key=lambda e: e["ts"])
            os.unlink(path)
            names = sorted({e["name"] for e in ev})
            main_name = max(names, key=lambda n: sum(e["dur"] for e in ev if e["name"] == n))
            starts = [e["ts"] for e in ev if e["name"] == main_name]
            periods = [b - a for a, b in zip(starts, starts[1:]) if b - a < 200]   # (within a replay)
            per_call = {n: sum(e["dur"] for e in ev if e["name"] == n) / len(starts) for n in names}
            period = sum(periods) / len(periods)
            out[f"{m}/{who}"] = {"period_us": period, "kernels_us": {n[:80]: d for n, d in per_call.items()},
                                 "gap_us": period - sum(per_call.values()), "input_sets": sets}
            print(f"trace {m:4} rows {who:7} period {period:6.2f} us  kernels " + ", ".join(
                f"{n[:40]} {d:.2f}" for n, d in per_call.items()) + f"  gap {period - sum(per_call.values()):+.2f}",
                flush=True)
    return out


def floor_rows(g) -> dict:
    """A plain read of B (K x N bf16, 32 MB at 4096^2) rotated among input sets: B.sum in f32, a device copy into
    a second buffer (read + write), cuBLAS at one row of A (torch.matmul (1, K) @ B)."""
    sets = input_sets(SQ * SQ * 2)
    bs = [torch.randn(SQ, SQ, device="cuda", generator=g).bfloat16() for _ in range(sets)]
    dst = [torch.empty_like(b) for b in bs]
    a1 = [torch.randn(1, SQ, device="cuda", generator=g).bfloat16() for _ in range(sets)]
    a16 = [torch.randn(16, SQ, device="cuda", generator=g).bfloat16() for _ in range(sets)]
    rows = {}
    for tag, fns, nbytes in (
            ("B.sum(f32)", [lambda b=b: b.sum(dtype=torch.float32) for b in bs], SQ * SQ * 2),
            ("copy B", [lambda b=b, d=d: d.copy_(b) for b, d in zip(bs, dst)], 2 * SQ * SQ * 2),
            ("cuBLAS 1 row", [lambda a=a, b=b: torch.matmul(a, b) for a, b in zip(a1, bs)], SQ * SQ * 2),
            ("cuBLAS 16 rows", [lambda a=a, b=b: torch.matmul(a, b) for a, b in zip(a16, bs)], SQ * SQ * 2)):
        t = min(graph_seconds(fns), graph_seconds(fns))
        t_hot = graph_seconds(fns[0])
        rows[tag] = {"us": t * 1e6, "TBps": nbytes / t / 1e12, "us_hot": t_hot * 1e6, "input_sets": sets}
        print(f"floor {tag:16} {t * 1e6:7.2f} us  {nbytes / t / 1e12:5.2f} TB/s  (one set {t_hot * 1e6:.2f} us)",
              flush=True)
    return rows


def variant_row(M, N, K, g, out_t, out, spec, mm_f32) -> dict:
    p = ss.params_of(M, N, K, spec, out)
    r0 = gb.f32out_row(M, N, K, g, mm_f32, out=out_t, params=p)
    keys = ("us", "torch_us", "ratio", "rel_err", "torch_rel_err", "registers", "spills", "input_sets", "us_hot",
            "torch_us_hot", "ratio_hot")
    r = {k: r0[k] for k in keys if k in r0}
    r["policy"] = gb._policy_text(p) + "".join(f" {k}={p[k]}" for k in ("SWAP_AB", "K_WAYS", "CLUSTER_K", "PUSH",
                                                                         "XCH", "M_SHIFT") if p.get(k))
    return r


def ncu_target():
    """ours (the policy through launch) and cuBLAS at 32 and 128 rows, then B.sum, each three times on one set
    (ncu flushes the caches before each profiled kernel: B comes from DRAM)."""
    g = torch.Generator(device="cuda").manual_seed(27)
    b = torch.randn(SQ, SQ, device="cuda", generator=g).bfloat16()
    for m in (32, 128):
        a = torch.randn(m, SQ, device="cuda", generator=g).bfloat16()
        c = torch.empty(m, SQ, device="cuda", dtype=torch.bfloat16)
        for _ in range(3):
            gemm_hopper.launch(a, b, c)
        for _ in range(3):
            torch.matmul(a, b)
    for _ in range(3):
        b.sum(dtype=torch.float32)
    torch.cuda.synchronize()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--name", default="gemm-g27-dram")
    ap.add_argument("--plan", default="1")
    ap.add_argument("--precompile", type=int, default=0)
    ap.add_argument("--no-floor", action="store_true")
    ap.add_argument("--trace", action="store_true", help="the period / kernel / gap split of rotated graph calls")
    ap.add_argument("--ncu-target", action="store_true")
    args = ap.parse_args(argv)
    if args.ncu_target:
        ncu_target()
        return
    table, sweep = PLANS[args.plan]
    plan = table + sweep
    if args.precompile:
        ss.precompile(None, args.precompile, plan)
    props = torch.cuda.get_device_properties(0)
    dev = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    mm_f32 = gb._mm_f32out()
    g = torch.Generator(device="cuda").manual_seed(27)
    res = {"device": props.name, "torch": torch.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"), "l2_bytes": props.L2_cache_size,
           "timing": "rotated among input sets (>= 2x L2 a rotation; one-set figures beside as *_hot); median of 15 "
           "graph replays of 20 calls, ours and cuBLAS alternated twice, the better of two medians each",
           "floor": {}, "rows": {}, "cublas_kernels": {}}
    path = Path(args.out) / f"{args.name}-{dev}.json"
    Path(args.out).mkdir(parents=True, exist_ok=True)
    if not args.no_floor:
        res["floor"] = floor_rows(g)
        path.write_text(json.dumps(res, indent=1))
    if args.trace:
        try:
            res["trace"] = trace_rows(g)
        except Exception as e:  # noqa: BLE001 - a side note
            print("trace FAILED", type(e).__name__, str(e)[:200], flush=True)
        path.write_text(json.dumps(res, indent=1))
    for (M, N, K), variants, outs in plan:
        key = f"{M}x{N}x{K}"
        row = res["rows"].setdefault(key, {})
        for o in outs:
            out_t, out = ss.DT[o]
            if f"{key}/{o}" not in res["cublas_kernels"] and variants[0][1] is None and len(variants) == 1:
                try:
                    res["cublas_kernels"][f"{key}/{o}"] = [
                        (x["kernel"][:120], round(x["us_each"], 2)) for x in ss.cublas_kernels(M, N, K, out_t, mm_f32)]
                except Exception as e:  # noqa: BLE001 - a side note
                    res["cublas_kernels"][f"{key}/{o}"] = f"{type(e).__name__}: {e}"[:200]
            for tag, spec in variants:
                name = f"{tag}/{o}"
                try:
                    r = variant_row(M, N, K, g, out_t, out, spec, mm_f32)
                except Exception as e:  # noqa: BLE001 - a variant that fails: say so, go on
                    print(f"{key:16} {name:22} FAILED {type(e).__name__}: {str(e).splitlines()[0][:140]}", flush=True)
                    row[name] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
                    continue
                if name in row:
                    name = f"{tag}_sweep/{o}"
                row[name] = r
                print(f"{key:16} {name:22} {r['us']:7.2f} us  cuBLAS {r['torch_us']:6.2f}  x {r['ratio']:.3f}  "
                      f"[hot {r.get('us_hot', float('nan')):.2f} / {r.get('torch_us_hot', float('nan')):.2f} x "
                      f"{r.get('ratio_hot', float('nan')):.2f}]  err {r['rel_err']:.1e}  "
                      f"{r.get('registers', '')}/{r.get('spills', '')}  {r['policy']}", flush=True)
                torch.cuda.empty_cache()
        path.write_text(json.dumps(res, indent=1))
    for k, v in res["cublas_kernels"].items():
        print("cuBLAS", k, v, flush=True)
    path.write_text(json.dumps(res, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
