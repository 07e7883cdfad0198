"""Issue 15, the small class (G22): where a small GEMM's fixed cost per launch and its cost per k-tile go, by ablation
of the generated CUDA source. Each variant is one of gemm_hopper's kernels (the small class's policy form,
gemm_cluster's 2x1 form) rendered as `launch` would build it, with text edits applied to the rendered source before
NVRTC compiles it (parts removed or changed: the tensor-map prefetch, the mbarrier-init barriers, the TMA store, the
cluster barriers' release / acquire, the wgmma group kept in flight, the multicast split between the ranks, an
immediate return for the launch floor). The edits are diagnostics only: a form that pays is then written in the
language (gemm_hopper's constexprs) and measured and verified there.

    python benchmarks/gemm_small_fixed.py [--out DIR] [--name STEM] [--only REGEX] [--ks 64,1024,4096] [--plan a|b|c]
                                          [--rotate 1|0]

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
from timing import graph_seconds, input_sets  # noqa: E402

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


def kw_nostore(src):
    """gemm_splitk_swap K_WAYS=2: consumer 0's register stores of C (C^T's tile transposed: 2-byte stores a row
    apart) dropped; the hand-over and the sum stay."""
    return _sub(r"\n\s*if \([^\n]*\) C\[[^\n]*\] = [^\n]*;", "")(src)


def kw_nohand(src):
    """gemm_splitk_swap K_WAYS=2: the hand-over's shared traffic dropped (consumer 1 stores nothing into `red`,
    consumer 0 adds zeros); its mbarrier stays."""
    src = _sub(r"\n\s*red\[[^\n]*\] = [^\n]*;", "")(src)
    return _sub(r"= red\[[^\n]*\];", "= 0.0f;")(src)


def mc_by_ring(src):
    """K_WAYS in clusters of 2: rank 0 multicasts ring 0's tile, rank 1 ring 1's, every pair (instead of rank j % 2
    both)."""
    src = _sub(r"if \(tp_cluster_rank\(\) == \(tp_mod<int>\(j, 2\)\)\) \{(\n\s*tp_tma_load_2d_mc[^\n]*a_s0)",
               r"if (tp_cluster_rank() == 0) {\1", count=1)(src)
    return _sub(r"if \(tp_cluster_rank\(\) == \(tp_mod<int>\(j, 2\)\)\) \{(\n\s*tp_tma_load_2d_mc[^\n]*a_s1)",
                r"if (tp_cluster_rank() == 1) {\1", count=1)(src)


def signed_rt(src):
    """The role-relative thread index as it was rendered before G33: `tp_tid - lo` (signed, negative below the role)
    instead of `(int)((unsigned)(tp_tid - lo) % size)`, so every layout division / remainder of it is signed."""
    return _sub(r"\(int\)\(\(unsigned\)\(tp_tid - (\d+)\) % \d+u\)", r"tp_tid - \1")(src)


EDITS = {"prefetch": prefetch_maps, "onesync": one_init_barrier, "nostore": no_tma_store, "empty": empty_kernel,
         "relax_close": relax_close, "relax_open": relax_open, "mc_split": split_multicast,
         "inflight": cluster_in_flight, "tail_first": tail_first, "no_tail": no_tail, "relax_end": relax_end,
         "kw_nostore": kw_nostore, "kw_nohand": kw_nohand, "mc_by_ring": mc_by_ring, "signed_rt": signed_rt}
EXACT_OFF = {"nostore", "empty", "kw_nostore", "kw_nohand"}          # edits whose output is not the product


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
# G33: where K_WAYS=2's fixed cost goes (the policy's SMALL_KWAYS: 128 x 64 tiles of C, two consumers on alternate
# k-tiles, C^T's tile handed over and stored from the registers), and its cluster forms' cost per k-tile: wait_group 0
# (each stage released as soon as its group retires), the multicast issued per ring
KW = {**gemm_hopper.PRESETS["sm_90a"], **ZERO, **gemm_hopper.SMALL_KWAYS}
KWC = dict(KW, CLUSTER_N=2, RELAXED=1)
VARIANTS_C = [
    ("kw", KW, (), (128, 1024, 4096)),
    ("kw+empty", KW, ("empty",), (128,)),
    ("kw+nostore", KW, ("kw_nostore",), (128, 1024, 4096)),
    ("kw+nohand", KW, ("kw_nohand",), (128, 1024, 4096)),
    ("kw+nostore+nohand", KW, ("kw_nostore", "kw_nohand"), (128, 1024, 4096)),
    ("kw_s3", dict(KW, STAGES=3), (), (128, 1024, 4096)),
    ("kw_w0", dict(KW, IN_FLIGHT=0), (), (1024, 4096)),
    ("kw_cn2_rel", KWC, (), (128, 1024, 4096)),
    ("kw_cn2_rel_w0", dict(KWC, IN_FLIGHT=0), (), (128, 1024, 4096)),
    ("kw_cn2_rel+mc_by_ring", KWC, ("mc_by_ring",), (1024, 4096)),
    ("kw_cn2_rel_w0+mc_by_ring", dict(KWC, IN_FLIGHT=0), ("mc_by_ring",), (1024, 4096)),
    ("kw_cm2_rel_w0", dict(KW, CLUSTER_M=2, RELAXED=1, IN_FLIGHT=0), (), (1024, 4096)),
]
# G33 call 3: the role-relative thread index in [0, size) (tilepy_hip.render.walk.role_tid) against the signed one it
# replaced (`signed_rt`, a source edit back), alternated twice, on K_WAYS (the policy at >= 64 k-tiles) and on the
# small class's relaxed 2x1 cluster (its policy at 16-63 k-tiles); the epilogue's remaining cost (K_WAYS without its
# stores / hand-over) and the A-multicast cluster with the fix
CLB = {**gemm_hopper.PRESETS["sm_90a"], **ZERO, **gemm_hopper.SMALL_CLUSTER_BF16}
VARIANTS_D = [
    ("kw", KW, (), (1024, 4096, 8192)),
    ("kw+signed_rt", KW, ("signed_rt",), (1024, 4096, 8192)),
    ("cluster_bf16", CLB, (), (1024, 2048, 4096)),
    ("cluster_bf16+signed_rt", CLB, ("signed_rt",), (1024, 2048, 4096)),
    ("kw_again", KW, (), (1024, 4096, 8192)),
    ("kw+signed_rt_again", KW, ("signed_rt",), (1024, 4096, 8192)),
    ("cluster_bf16_again", CLB, (), (1024, 2048, 4096)),
    ("cluster_bf16+signed_rt_again", CLB, ("signed_rt",), (1024, 2048, 4096)),
    ("kw+nostore+nohand", KW, ("kw_nostore", "kw_nohand"), (1024, 4096)),
    ("kw_cn2_rel", KWC, (), (1024, 4096)),
]
PLANS = {"a": VARIANTS, "b": VARIANTS_B, "c": VARIANTS_C, "d": VARIANTS_D}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--name", default="gemm-g22-fixed")
    ap.add_argument("--only", default=None)
    ap.add_argument("--ks", default="64,1024,4096")
    ap.add_argument("--plan", default="a", choices=sorted(PLANS))
    ap.add_argument("--rotate", type=int, default=1, help="graph figures over rotated input sets (1) or one set (0)")
    args = ap.parse_args(argv)
    ks = [int(x) for x in args.ks.split(",")]
    props = torch.cuda.get_device_properties(0)
    dev = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    res = {"device": props.name, "torch": torch.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"), "shape": "1024 x 1024 x K, bf16 in and out",
           "timing": "device: torch.profiler, 10 calls after 3, one input set, us per call of the GEMM kernel; graph: "
                     "median of 15 CUDA-graph replays of 20 calls, over rotated input sets (--rotate 1, the default "
                     "since G33) or one set", "rotate": args.rotate, "plan": args.plan, "rows": {}}
    path = Path(args.out) / f"{args.name}-{dev}.json"
    Path(args.out).mkdir(parents=True, exist_ok=True)
    g = torch.Generator(device="cuda").manual_seed(22)
    M = N = 1024
    for K in ks:
        a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
        b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
        ref = a.double() @ b.double()
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        # rotated input sets (METHOD.md), the first set the checked one; graph figures over the rotation, ours and
        # the peer's (`rotate` 0: one set, as G22 measured)
        n_sets = input_sets(2 * (M * K + K * N + M * N)) if args.rotate else 1
        sets = [(a, b, c)] + [(torch.randn(M, K, device="cuda", generator=g).bfloat16(),
                               torch.randn(K, N, device="cuda", generator=g).bfloat16(),
                               torch.empty(M, N, device="cuda", dtype=torch.bfloat16)) for _ in range(n_sets - 1)]
        peers = [(lambda a=x, b=y: torch.matmul(a, b)) for x, y, _ in sets]
        ws1 = torch.zeros(1, 1, device="cuda", dtype=torch.float32)
        locks1 = torch.zeros(1, device="cuda", dtype=torch.int32)
        row = res["rows"].setdefault(f"{M}x{N}x{K}", {})
        peer = (lambda a=a, b=b: torch.matmul(a, b))
        peer_err = float((peer().double() - ref).norm() / ref.norm())
        row["cublas"] = {"device": device_us(peer, "nvjet") or device_us(peer, "gemm"),
                         "graph": round(graph_seconds(peers) * 1e6, 3), "rel_err": peer_err, "input_sets": n_sets}
        print(f"K={K:5d} cuBLAS device {row['cublas']['device']:7.2f} graph {row['cublas']['graph']:7.2f}", flush=True)
        for tag, base, edits, vks in PLANS[args.plan]:
            if K not in vks or (args.only and not re.search(args.only, tag)):
                continue
            try:
                ck, grid = build(base, edits, M, N, K)
                # (gemm_splitk_swap takes gemm_splitk's WS and LOCKS too, unused unsplit: launch's one-element ones)
                extra = (ws1, locks1) if base.get("SWAP_AB") else ()
                prep = prepare(ck, [a, b, c, *extra])
                fn = (lambda prep=prep, grid=grid, args=(a, b, c, *extra): prep.call(grid, list(args)))
                fns = [(lambda prep=prep, grid=grid, args=(*st, *extra): prep.call(grid, list(args))) for st in sets]
                c.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                err = float((c.double() - ref).norm() / ref.norm())
                if not set(edits) & EXACT_OFF and not err < 3e-3:
                    raise AssertionError(f"rel err {err} against float64")
                dus = device_us(fn, ck.name)
                gus = graph_seconds(fns) * 1e6
                gpeer = graph_seconds(peers) * 1e6
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
