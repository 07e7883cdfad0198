"""Issue 15, the small class (G22): where a small GEMM's fixed cost per launch and its cost per k-tile go, by ablation
of the generated CUDA source. Each variant is one of gemm_hopper's kernels (the small class's policy form,
gemm_cluster's 2x1 form) rendered as `launch` would build it, with text edits applied to the rendered source before
NVRTC compiles it (parts removed or changed: the tensor-map prefetch, the mbarrier-init barriers, the TMA store, the
cluster barriers' release / acquire, the wgmma group kept in flight, the multicast split between the ranks, an
immediate return for the launch floor). The edits are diagnostics only: a form that pays is then written in the
language (gemm_hopper's constexprs) and measured and verified there.

    python benchmarks/gemm_small_fixed.py [--out DIR] [--name STEM] [--only REGEX] [--ks 64,1024,4096]

Per variant and K (1024 x 1024 x K, bf16 out, cuBLAS's torch.matmul beside it): device us per call (torch.profiler,
10 calls after 3, this kernel alone) and the graph time (median of 15 CUDA-graph replays of 20 calls); outputs that
should be exact are checked against float64 first (not those of edits that drop the store or the work).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
from timing import graph_seconds  # noqa: E402

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402
from tilepy_hip.launch import prepare  # noqa: E402
from tilepy_hip.render import get_render_target  # noqa: E402
from tilepy_hip.toolchains import nvidia_compiler  # noqa: E402

I128 = tp.nv.wgmma_m64n128k16_bf16
ZERO = dict(SPLIT_K=1, EPILOGUE=0, FIXUP=0, MIN_BLOCKS=0)
POLICY = dict(BM=64, BN=128, BK=64, STAGES=6, CONSUMERS=1, INSTR=I128, IN_FLIGHT=1, EPILOGUE=2)
CLUSTER = {**gemm_hopper.PRESETS["sm_90a"], **ZERO,
           **dict(BM=64, BN=128, CONSUMERS=1, INSTR=I128, IN_FLIGHT=0, STAGES=6, CLUSTER_M=2, EPILOGUE=2)}


# ------------------------------------------------------------------------------------------------ the edits
def _sub(pattern, repl, count=0, flags=re.S):
    def edit(src):
        out, n = re.subn(pattern, repl, src, count=count, flags=flags)
        if n == 0:
            raise ValueError(f"edit found nothing to change: {pattern[:80]!r}")
        return out
    return edit


def prefetch_maps(src):
    """prefetch.tensormap of every tensor map (thread 0, at the kernel's start, where its bit of tp_tma_ok says the
    map is valid)."""
    maps = sorted(set(re.findall(r"tp_tmap(\d+)\b", src)), key=int)
    if not maps:
        raise ValueError("no tensor maps")
    lines = "".join(f"    if (tp_tma_ok & {1 << int(i)}u) asm volatile(\"prefetch.tensormap [%0];\" :: "
                    f"\"l\"(&tp_tmap{i}) : \"memory\");\n" for i in maps)
    return _sub(r"(\(void\)tp_lane; \(void\)tp_warp;\n)", r"\1  if (tp_tid == 0) {\n" + lines.replace("\\", "\\\\")
                + "  }\n", count=1)(src)


def one_init_barrier(src):
    """The mbarrier initializations (each by its own threads, distinct addresses) behind ONE __syncthreads."""
    head, sep, tail = src.partition("k_tiles = ")
    n = head.count("__syncthreads();")
    if n < 2:
        raise ValueError("fewer than two init barriers")
    head = head.replace("__syncthreads();", "", n - 1)
    return head + sep + tail


def no_tma_store(src):
    """The TMA store of C dropped (the consumers still stage c_s; the producer still waits for it)."""
    return _sub(r"asm volatile\(\"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group"
                r"[^;]*;\\n\"[^;]*;\n", "")(src)


def empty_kernel(src):
    """Return at once: the launch floor of the same grid, threads, cluster and shared memory."""
    return _sub(r"(extern __shared__[^\n]*\n)", r"\1  if (hipThreadIdx_x < 100000) return;\n", count=1)(src)


def relax_close(src):
    """The closing cluster barrier without release / acquire (no MEMBAR.ALL.GPU waiting for C's stores)."""
    i = src.rindex("tp_cluster_sync();")
    return src[:i] + "tp_cluster_sync_relaxed();" + src[i + len("tp_cluster_sync();"):]


def relax_open(src):
    """The opening cluster barrier without release / acquire (the inits are fenced at cluster scope already)."""
    return src.replace("tp_cluster_sync();", "tp_cluster_sync_relaxed();", 1)


def split_multicast(src):
    """B's tile multicast in halves: rank 0 issues its first 64-column block, rank 1 its second, every k-tile (instead
    of rank k % 2 issuing both)."""
    pat = (r"if \(tp_cluster_rank\(\) == \(tp_mod<int>\(k, 2\)\)\) \{\n(\s*tp_tma_load_2d_mc[^\n]*\n)"
           r"(\s*tp_tma_load_2d_mc[^\n]*\n)(\s*)\}")
    return _sub(pat, r"if (tp_cluster_rank() == 0) {\n\1\3} else {\n\2\3}", count=1)(src)


def cluster_in_flight(src):
    """gemm_cluster's consumer with one wgmma group in flight: wait_group 1, and tile k - 1's stage released (to both
    ranks) after tile k's group is issued; wait_group 0 after the loop."""
    rel = r"\s*// tilepy[^\n]*\n\s*__syncwarp\(\);\n\s*if \(tp_lane == 0\) tp_mbar_arrive_cluster\(\(empty_p \+ "
    pat = (r"tp_wgmma_commit\(\);\n(\s*)tp_wgmma_wait0\(\);\n(\s*)\}\n"
           r"(" + rel + r"\(tp_mod<int>\(k, 6\)\)\), 0\);\n" + rel + r"\(tp_mod<int>\(k, 6\)\)\), 1\);\n)"
           r"(\s*)\}\n(\s*)\}\n")

    def repl(m):
        rel = m.group(3).replace("tp_mod<int>(k, 6)", "tp_mod<int>(k + 5, 6)")
        wait1 = "asm volatile(\"wgmma.wait_group.sync.aligned 1;\\n\" ::: \"memory\");"
        return (f"tp_wgmma_commit();\n{m.group(1)}{wait1}\n"
                f"{m.group(2)}}}\n{m.group(2)}if (k > 0) {{\n{rel}{m.group(2)}}}\n{m.group(4)}}}\n{m.group(5)}}}\n"
                f"{m.group(5)}tp_wgmma_wait0();\n")
    out, n = re.subn(pat, repl, src, count=1)
    if n == 0:
        raise ValueError("cluster_in_flight: the consumer loop was not found")
    return out


def _tail_block(src):
    """(start, end) of gemm_cluster RELAXED=1's producer tail (the loop over k_tiles + STAGES) in the source."""
    m = re.search(r"\n    // tilepy[^\n]*\n    \{\n      const int tp_end\d+ = \(k_tiles \+ \d+\);\n", src)
    if m is None:
        raise ValueError("no producer tail (RELAXED=1) in the source")
    end = src.index("\n    }\n", src.index("\n      }\n", m.end())) + len("\n    }\n")
    return m.start() + 1, end


def tail_first(src):
    """RELAXED=1's tail moved before the producer's epilogue (it waits while the consumers stage c_s)."""
    i, j = _tail_block(src)
    tail, rest = src[i:j], src[:i] + src[j:]
    k = rest.index("    tp_mbar_wait(staged_p, (0) & 1);")
    k = rest.rindex("\n", 0, rest.rindex("\n", 0, k)) + 1     # before its `// tilepy` line
    return rest[:k] + tail + rest[k:]


def no_tail(src):
    """RELAXED=1's tail removed (with relax_end: a relaxed closing barrier instead)."""
    i, j = _tail_block(src)
    return src[:i] + src[j:]


def relax_end(src):
    """A relaxed cluster barrier as the kernel's last statement."""
    k = src.rstrip().rindex("}")
    return src[:k] + "  tp_cluster_sync_relaxed();\n" + src[k:]


EDITS = {"prefetch": prefetch_maps, "onesync": one_init_barrier, "nostore": no_tma_store, "empty": empty_kernel,
         "relax_close": relax_close, "relax_open": relax_open, "mc_split": split_multicast,
         "inflight": cluster_in_flight, "tail_first": tail_first, "no_tail": no_tail, "relax_end": relax_end}
EXACT_OFF = {"nostore", "empty"}          # edits whose output is not the product


# ------------------------------------------------------------------------------------------------ building
def build(params, edits, M, N, K):
    """(CompiledKernel, grid) of `launch`'s kernel for these constexprs, its source edited."""
    kernel, kp = gemm_hopper.plan_kernel(M, N, tp.bf16, params, K)
    ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
    grid = gemm_hopper.grid_of(M, N, params)
    if not edits:
        return ck, grid
    src = ck.source
    for e in edits:
        src = EDITS[e](src)
    rt = get_render_target("sm_90a")
    tmp = Path(tempfile.mkdtemp(prefix="g22-")) / f"{ck.name}-{'-'.join(edits)}.cu"
    tmp.write_text(src)
    built = nvidia_compiler().compile(src, tmp, rt, ())
    res = tilepy_hip.build.parse_nvidia_resources(built.log)
    ck2 = dataclasses.replace(ck, source=src, binary=built.binary, key=ck.key + "+" + "+".join(edits),
                              resources={**ck.resources, **res}, path=str(tmp))
    return ck2, grid


def device_us(fn, name_hint):
    """Device us per call of the kernels whose name contains `name_hint` (torch.profiler, 10 calls after 3)."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
    tot = 0.0
    for ev in prof.key_averages():
        if ev.device_type is not None and "CUDA" in str(ev.device_type) and ev.count and name_hint in ev.key:
            tot += (getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)) / 10
    return round(tot, 3)


VARIANTS = [  # (tag, base constexprs, edits, Ks)
    ("policy", POLICY, (), (64, 1024, 4096)),
    ("policy+empty", POLICY, ("empty",), (64,)),
    ("policy+prefetch", POLICY, ("prefetch",), (64, 1024, 4096)),
    ("policy+onesync", POLICY, ("onesync",), (64,)),
    ("policy+nostore", POLICY, ("nostore",), (64, 1024)),
    ("policy+prefetch+onesync", POLICY, ("prefetch", "onesync"), (64, 1024)),
    ("policy_s2", dict(POLICY, STAGES=2), (), (64,)),
    ("policy_s8", dict(POLICY, STAGES=8), (), (1024, 4096)),
    ("cluster", CLUSTER, (), (64, 1024, 4096)),
    ("cluster+empty", CLUSTER, ("empty",), (64,)),
    ("cluster+relax_close", CLUSTER, ("relax_close",), (64, 1024)),
    ("cluster+relax_both", CLUSTER, ("relax_open", "relax_close"), (64, 1024, 4096)),
    ("cluster+relax_both+prefetch", CLUSTER, ("relax_open", "relax_close", "prefetch"), (64, 1024, 4096)),
    ("cluster_nomc", dict(CLUSTER, MULTICAST=False), (), (64, 1024)),
    ("cluster+mc_split", CLUSTER, ("mc_split",), (1024, 4096)),
    ("cluster+inflight", CLUSTER, ("inflight",), (64, 1024, 4096)),
    ("cluster+all", CLUSTER, ("relax_open", "relax_close", "prefetch", "mc_split", "inflight"), (64, 1024, 4096)),
]


# call 3: RELAXED=1's producer tail against a relaxed closing barrier (call 1's relax_both), and where the tail sits
REL8 = {**CLUSTER, "RELAXED": 1, "STAGES": 8}
VARIANTS_B = [
    ("policy", dict(POLICY, STAGES=8), (), (64, 1024, 4096)),
    ("rel8", REL8, (), (64, 1024, 4096)),
    ("rel8+tail_first", REL8, ("tail_first",), (64, 1024, 4096)),
    ("rel8+no_tail+relax_end", REL8, ("no_tail", "relax_end"), (64, 1024, 4096)),
    ("rel8+relax_end", REL8, ("relax_end",), (64, 1024)),
    ("cluster_s8+relax_both", dict(CLUSTER, STAGES=8), ("relax_open", "relax_close"), (64, 1024, 4096)),
]
PLANS = {"a": VARIANTS, "b": VARIANTS_B}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--name", default="gemm-g22-fixed")
    ap.add_argument("--only", default=None)
    ap.add_argument("--ks", default="64,1024,4096")
    ap.add_argument("--plan", default="a", choices=sorted(PLANS))
    args = ap.parse_args(argv)
    ks = [int(x) for x in args.ks.split(",")]
    props = torch.cuda.get_device_properties(0)
    dev = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    res = {"device": props.name, "torch": torch.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"), "shape": "1024 x 1024 x K, bf16 in and out",
           "timing": "device: torch.profiler, 10 calls after 3, us per call of the GEMM kernel; graph: median of 15 "
                     "CUDA-graph replays of 20 calls", "rows": {}}
    path = Path(args.out) / f"{args.name}-{dev}.json"
    Path(args.out).mkdir(parents=True, exist_ok=True)
    g = torch.Generator(device="cuda").manual_seed(22)
    M = N = 1024
    for K in ks:
        a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
        b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
        ref = a.double() @ b.double()
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        row = res["rows"].setdefault(f"{M}x{N}x{K}", {})
        peer = (lambda a=a, b=b: torch.matmul(a, b))
        peer_err = float((peer().double() - ref).norm() / ref.norm())
        row["cublas"] = {"device": device_us(peer, "nvjet") or device_us(peer, "gemm"),
                         "graph": round(graph_seconds(peer) * 1e6, 3), "rel_err": peer_err}
        print(f"K={K:5d} cuBLAS device {row['cublas']['device']:7.2f} graph {row['cublas']['graph']:7.2f}", flush=True)
        for tag, base, edits, vks in PLANS[args.plan]:
            if K not in vks or (args.only and not re.search(args.only, tag)):
                continue
            try:
                ck, grid = build(base, edits, M, N, K)
                prep = prepare(ck, [a, b, c])
                fn = (lambda prep=prep, grid=grid, args=(a, b, c): prep.call(grid, list(args)))
                c.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                err = float((c.double() - ref).norm() / ref.norm())
                if not set(edits) & EXACT_OFF and not err < 3e-3:
                    raise AssertionError(f"rel err {err} against float64")
                dus = device_us(fn, ck.name)
                gus = graph_seconds(fn) * 1e6
                gpeer = graph_seconds(peer) * 1e6
                r = {"device": dus, "graph": round(gus, 3), "cublas_graph_beside": round(gpeer, 3),
                     "rel_err": err, "registers": ck.resources.get("registers"),
                     "spills": ck.resources.get("spill_stores"), "edits": list(edits)}
                row[tag] = r
                print(f"K={K:5d} {tag:34} device {dus:7.2f} (cuBLAS {row['cublas']['device']:6.2f})  graph {gus:7.2f} "
                      f"(cuBLAS {gpeer:6.2f}, x {gpeer / gus:.3f})  err {err:.1e}  regs {r['registers']}", flush=True)
            except Exception as e:  # noqa: BLE001 - a variant that fails: say so, go on
                row[tag] = {"error": f"{type(e).__name__}: {str(e)[:400]}"}
                print(f"K={K:5d} {tag:34} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
                traceback.print_exc(limit=3)
            path.write_text(json.dumps(res, indent=1))
    path.write_text(json.dumps(res, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
