"""H2: the unsigned role index (`@tp.kernel(unsigned_role_index=True)`, G37) on gemm_fp8_swap's policy forms and on
gemm_splitk_swap's bf16 swap forms, each shape's policy with the option off and on (a clone of the kernel object with
the flag set; the two renders are checked to differ), alternated `--rounds` times (off, on, off, on), ours paired with
the peer replay by replay (torch._scaled_mm for fp8, torch.matmul for bf16): `--replays` replays of a graph of 20
calls rotating over input sets whose footprint is >= 2x the L2 (tilepy_hip.graphs.rotation_count), each of ours
followed by one of the peer's; ratio = the median of the pairs' peer / ours. Every arm's output is checked against
float64 before it is timed (NaN-poisoned first).

    python benchmarks/profile/h2_bench.py [--fp8-rows 16 32 ...] [--nk 4096,4096 ...] [--bf16-rows 16 32 96]
                                          [--rounds 2] [--replays 25] [--precompile 14] [--out DIR]
    python benchmarks/profile/h2_bench.py --build-only     (every kernel both arms, in parallel; no GPU needed)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp8, gemm_hopper  # noqa: E402

FP8_SWAP = gemm_fp8.gemm_fp8_swap                      # the module's own objects, as imported
BF16_SWAP = gemm_hopper.SWAP_KERNELS["gemm_splitk_swap"]


def _clone(kernel, on: bool):
    if kernel.unsigned_role_index == on:
        return kernel
    k = kernel.retyped()
    k.unsigned_role_index = on
    return k


# off / on: the option forced for every form; adopted: the kernel as the tree declares it (gemm_fp8_swap: per form)
ARMS = {(kind, name): (_clone(base, name == "on") if name != "adopted" else base)
        for kind, base in (("fp8", FP8_SWAP), ("bf16", BF16_SWAP)) for name in ("off", "on", "adopted")}


@contextlib.contextmanager
def arm(kind: str, on: str):
    """gemm_fp8.launch / gemm_hopper.launch run the swap kernel of arm `on` (off / on / adopted) inside the block."""
    if kind == "fp8":
        gemm_fp8.gemm_fp8_swap = ARMS[kind, on]
        try:
            yield
        finally:
            gemm_fp8.gemm_fp8_swap = FP8_SWAP
    else:
        gemm_hopper.SWAP_KERNELS["gemm_splitk_swap"] = ARMS[kind, on]
        gemm_hopper._VARIANTS.clear()
        gemm_hopper._PLANS.clear()
        try:
            yield
        finally:
            gemm_hopper.SWAP_KERNELS["gemm_splitk_swap"] = BF16_SWAP
            gemm_hopper._VARIANTS.clear()
            gemm_hopper._PLANS.clear()


def planned(kind, M, N, K):
    """(kernel, constexprs) the policy runs for the shape with the current arm."""
    if kind == "fp8":
        return gemm_fp8.kernel_of(gemm_fp8.policy(M, N, K))
    return gemm_hopper.plan_kernel(M, N, tp.bf16, gemm_hopper.policy(M, N, K, tp.bf16, fixup=True), K)


def short(kp) -> str:
    keys = ("BM", "BN", "STAGES", "CONSUMERS", "SPLIT_K", "CLUSTER_K", "K_WAYS", "CLUSTER_M", "HALF_SUM", "STORE_T",
            "TMA_ONLY")
    return " ".join(f"{k}={kp[k]}" for k in keys if k in kp)


def shapes_of(a):
    nks = [tuple(int(x) for x in s.split(",")) for s in a.nk]
    out = [("fp8", M, N, K) for N, K in nks for M in a.fp8_rows]
    return out + [("bf16", M, 4096, 4096) for M in a.bf16_rows]


def build(shapes, workers: int, arms=("off", "on")):
    """Every (shape, arm)'s kernel compiled in parallel (NVRTC releases the GIL); off / on renders checked to differ
    (an adopted arm may render as the other: then that shape's pair is a control, two runs of one kernel)."""
    from concurrent.futures import ThreadPoolExecutor

    jobs, seen = [], set()
    for kind, M, N, K in shapes:
        srcs = []
        for on in arms:
            with arm(kind, on):
                kernel, kp = planned(kind, M, N, K)
            srcs.append(tilepy_hip.render(kernel.ir("sm_90a", **kp), "sm_90a"))
            key = (id(kernel), tuple(sorted((k, repr(v)) for k, v in kp.items())))
            if key not in seen:
                seen.add(key)
                jobs.append((kernel, kp))
        if srcs[0] == srcs[1] and "adopted" not in arms:
            raise SystemExit(f"h2_bench: {kind} {M}x{N}x{K}: the option does not change the render")

    def one(job):
        try:
            r = tilepy_hip.compile(job[0], target="sm_90a", **job[1]).resources
            uri = job[0].ir("sm_90a", **job[1]).unsigned_role_index
            return f"{job[0].name} unsigned={uri} {short(job[1])}: regs {r.get('registers')}"
        except Exception as e:  # noqa: BLE001 - reported, the run goes on
            return f"FAILED {type(e).__name__}: {str(e)[:200]}"

    with ThreadPoolExecutor(workers) as ex:
        for r in ex.map(one, jobs):
            print("built", r, flush=True)


REPS = 20


def _graph(fns):
    import torch

    for f in fns:
        f()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    n = max(REPS, len(fns))
    with torch.cuda.graph(graph):
        for i in range(n):
            fns[i % len(fns)]()
    graph.replay()
    torch.cuda.synchronize()
    return graph, n


def _replay(gr) -> float:
    import torch

    graph, n = gr
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    graph.replay()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / 1e3 / n


def _rel(x, ref) -> float:
    x = x.double()
    if not bool(x.isfinite().all()):
        return float("inf")
    return float((x - ref).norm() / ref.norm())


def _quantize(x):
    import torch

    scale = (x.abs().max().float() / 448.0).clamp(min=1e-12)
    return (x / scale).to(torch.float8_e4m3fn), scale.reshape(1)


def _sets(kind, M, N, K, g, l2):
    """[(ours_fn_args, peer_fn)] input sets, rotation >= 2x the L2."""
    import torch

    from tilepy_hip.graphs import rotation_count

    def one():
        if kind == "fp8":
            a, sa = _quantize(torch.randn(M, K, device="cuda", generator=g))
            b, sb = _quantize(torch.randn(N, K, device="cuda", generator=g))
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            return (a, b, sa, sb, c)
        a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
        b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        return (a, b, c)

    first = one()
    size = sum(t.numel() * t.element_size() for t in first if t.numel() > 1)
    return [first] + [one() for _ in range(rotation_count(size, l2, 64) - 1)]


def _ours(kind, s):
    if kind == "fp8":
        return partial(gemm_fp8.launch, *s)
    return partial(gemm_hopper.launch, *s)


def _peer(kind, s):
    import torch

    if kind == "fp8":
        a, b, sa, sb, _ = s
        return partial(torch._scaled_mm, a, b.t(), sa, sb, out_dtype=torch.bfloat16)
    a, b, _ = s
    return partial(torch.matmul, a, b)


def _ref(kind, s):
    if kind == "fp8":
        a, b, sa, sb, _ = s
        return (a.double() @ b.double().t()) * (sa.double() * sb.double())
    a, b, _ = s
    return a.double() @ b.double()


def row(kind, M, N, K, g, l2, rounds, replays, arms=("off", "on")):
    import torch

    sets = _sets(kind, M, N, K, g, l2)
    s0 = sets[0]
    ref = _ref(kind, s0)
    err_peer = _rel(_peer(kind, s0)(), ref)
    tol = 2.0**-8   # C is bf16 either way: its rounding bounds the relative error (ours and the peer's ~1.7e-3)
    out = {"kind": kind, "shape": [M, N, K], "input_sets": len(sets), "peer_rel_err": err_peer, "arms": {}}
    graphs, srcs = {}, []
    for name in arms:
        with arm(kind, name):
            kernel, kp = planned(kind, M, N, K)
            c = s0[-1]
            c.fill_(float("nan"))
            _ours(kind, s0)()
            torch.cuda.synchronize()
            err = _rel(c, ref)
            res = tilepy_hip.compile(kernel, target="sm_90a", **kp).resources
            kir = kernel.ir("sm_90a", **kp)
            srcs.append(tilepy_hip.render(kir, "sm_90a"))
            graphs[name] = _graph([_ours(kind, s) for s in sets])
        ok = err < tol
        out["arms"][name] = {"kernel": kernel.name, "unsigned_role_index": kir.unsigned_role_index,
                             "form": short(kp), "rel_err": err, "ok": ok, "registers": res.get("registers"),
                             "spill_stores": res.get("spill_stores", 0), "us": [], "peer_us": [], "ratio": []}
        print(f"{kind} {M}x{N}x{K} {name:3} {kernel.name} unsigned={kir.unsigned_role_index} {short(kp)} err {err:.2e}"
              f" (peer {err_peer:.2e}) {'ok' if ok else 'WRONG'} regs {res.get('registers')}", flush=True)
        if not ok:
            return out
    out["same_render"] = srcs[0] == srcs[-1]
    del ref
    peer = _graph([_peer(kind, s) for s in sets])
    for r in range(rounds):
        for name in arms:
            ts, ps = [], []
            for _ in range(replays):
                ts.append(_replay(graphs[name]))
                ps.append(_replay(peer))
            a = out["arms"][name]
            a["us"].append(statistics.median(ts) * 1e6)
            a["peer_us"].append(statistics.median(ps) * 1e6)
            a["ratio"].append(statistics.median(p / t for p, t in zip(ps, ts)))
            print(f"{kind} {M}x{N}x{K} round {r} {name:3} {a['us'][-1]:8.2f} us  peer {a['peer_us'][-1]:8.2f} us  "
                  f"x{a['ratio'][-1]:.3f}", flush=True)
    del graphs, peer, sets
    torch.cuda.empty_cache()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fp8-rows", type=int, nargs="*", default=[16, 32, 64, 96, 128, 192, 256])
    ap.add_argument("--nk", nargs="*", default=["4096,4096", "4096,14336", "14336,4096"])
    ap.add_argument("--bf16-rows", type=int, nargs="*", default=[16, 32, 64, 96, 128])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--replays", type=int, default=25)
    ap.add_argument("--arms", nargs=2, default=["off", "on"], help="two of off, on, adopted")
    ap.add_argument("--precompile", type=int, default=0, help="build every kernel first with this many threads")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    a = ap.parse_args(argv)
    shapes = shapes_of(a)
    t0 = time.time()
    if a.build_only or a.precompile:
        build(shapes, a.precompile or 8, a.arms)
        print(f"built in {time.time() - t0:.1f} s", flush=True)
        if a.build_only:
            return
    import torch

    dev = torch.cuda.get_device_name(0)
    l2 = int(torch.cuda.get_device_properties(0).L2_cache_size)
    g = torch.Generator(device="cuda").manual_seed(0)
    path = Path(a.out) / f"h2-role-index{a.tag}-{dev.replace(' ', '_')}.json"
    res = {"device": dev, "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
           "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
           "timing": f"median of {a.replays} replays of a graph of {REPS} calls rotated over input sets (>= 2x L2), "
                     "ours and the peer alternating replay by replay, ratio the median of the pairs' peer / ours; "
                     f"arms {a.arms[0]}, {a.arms[1]} alternated {a.rounds} times", "arms": a.arms,
           "peer": {"fp8": "torch._scaled_mm(a, b.t(), sa, sb, out_dtype=bf16)", "bf16": "torch.matmul"},
           "rows": []}
    for kind, M, N, K in shapes:
        try:
            res["rows"].append(row(kind, M, N, K, g, l2, a.rounds, a.replays, a.arms))
        except Exception as e:  # noqa: BLE001 - reported, the run goes on
            print(f"{kind} {M}x{N}x{K} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
            res["rows"].append({"kind": kind, "shape": [M, N, K], "failed": f"{type(e).__name__}: {str(e)[:300]}"})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(res, indent=1))
    x, y = a.arms
    print(f"\n{'shape':22} {'form':60} {x + ' us':>15} {y + ' us':>15} {'x peer ' + x:>14} {'x peer ' + y:>14}")
    for r in res["rows"]:
        if "arms" not in r or not r["arms"].get(y, {}).get("us"):
            print(r["kind"], r["shape"], "no timing")
            continue
        p, q = r["arms"][x], r["arms"][y]
        sh = f"{r['kind']} {'x'.join(map(str, r['shape']))}"
        same = " (same render)" if r.get("same_render") else ""
        print(f"{sh:22} {q['form'] + same:60} {' / '.join(f'{v:.2f}' for v in p['us']):>15} "
              f"{' / '.join(f'{v:.2f}' for v in q['us']):>15} {' / '.join(f'{v:.3f}' for v in p['ratio']):>14} "
              f"{' / '.join(f'{v:.3f}' for v in q['ratio']):>14}")
    print(f"wrote {path} in {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
