"""The fp8 GEMM's small and mid shapes (issue 15: fp8 >= 0.95x torch._scaled_mm): candidate tile / ring / epilogue
forms of stdlib_kernels/gemm_fp8.py against the policy and torch._scaled_mm, alternated in one run.

    python benchmarks/gemm_fp8_small.py [--shapes 1024,1024,4096 ...] [--forms NAME ...] [--rounds 3] [--out DIR]

Each shape: e4m3 a (M, K) and b (N, K) quantized per tensor from random normal data (amax at 448), f32 scales, bf16
out. Every form's output is checked against float64 of the e4m3 values first (relative error <= 2^-8; a form that does
not build, fit or pass is reported and skipped). Then `--rounds` rounds, each timing the peer
(`torch._scaled_mm(a, b.t(), sa, sb, out_dtype=bf16)`, its default promoted accumulation) and every form in turn:
the median of CUDA-graph replays of 20 calls that rotate among input sets whose footprint is >= 2x the L2 (METHOD.md;
each set its own a, b, scales and out). A form's figure is its median over the rounds; its ratio is the peer's
median over its own. The one-set ("hot") time of the peer and of the policy are kept beside. cuBLASLt's kernel name
per shape (nvjet_..._<tile>_<cluster>) comes from torch.profiler. Forms are built first, in parallel, with their
registers, spills and SASS facts (QGMMA e4m3, UTMASTG, local memory).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_fp8  # noqa: E402

I128, I64, I32 = tp.nv.wgmma_m64n128k32_e4m3, tp.nv.wgmma_m64n64k32_e4m3, tp.nv.wgmma_m64n32k32_e4m3
BASE = dict(gemm_fp8.PRESETS["sm_90a"], PRODUCER_REGS=0, CONSUMER_REGS=0, GROUP_M=8)
# every form spelled out over BASE (nothing inherited from a class row); smem = STAGES * (BM + BN) * 128 + c_s;
# TMA_ONLY=1: the operands' copies without their per-element fallback (58-90 registers a thread instead of 250-255)
FORMS = {
    "64x128_s8_w1": dict(BM=64, BN=128, STAGES=8, CONSUMERS=1, INSTR=I128, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "64x128_s8_w0": dict(BM=64, BN=128, STAGES=8, CONSUMERS=1, INSTR=I128, IN_FLIGHT=0, EPILOGUE=2, TMA_ONLY=1),
    # (s4 / s6: two blocks an SM)
    "64x128_s4_w1": dict(BM=64, BN=128, STAGES=4, CONSUMERS=1, INSTR=I128, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "64x64_s6_w1": dict(BM=64, BN=64, STAGES=6, CONSUMERS=1, INSTR=I64, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "64x64_s8_w1": dict(BM=64, BN=64, STAGES=8, CONSUMERS=1, INSTR=I64, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "64x64_s12_w1": dict(BM=64, BN=64, STAGES=12, CONSUMERS=1, INSTR=I64, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    # the copies' per-element fallback compiled in (ptxas sizes the block's registers for it: 252 a thread)
    "64x128_s8_w1_fb": dict(BM=64, BN=128, STAGES=8, CONSUMERS=1, INSTR=I128, IN_FLIGHT=1, EPILOGUE=2),
    "128x128_s5_w1": dict(BM=128, BN=128, STAGES=5, CONSUMERS=2, INSTR=I128, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "128x128_s5_w0": dict(BM=128, BN=128, STAGES=5, CONSUMERS=2, INSTR=I128, IN_FLIGHT=0, EPILOGUE=2, TMA_ONLY=1),
    "128x128_s6_w0": dict(BM=128, BN=128, STAGES=6, CONSUMERS=2, INSTR=I128, IN_FLIGHT=0, EPILOGUE=2, TMA_ONLY=1),
    # the large class's persistent form on 128 x 128 tiles (the store in two 64-column pieces)
    "p128x128_s6": dict(BM=128, BN=128, STAGES=6, CONSUMERS=2, INSTR=I128, PERSISTENT=1, STORE_N=64),
    # call 3 (after call 2's sweep): narrower / shallower / deeper neighbours of the winners, the registers' store
    # (EPILOGUE=0) where C's rows are off 16 bytes (the TMA store's per-element fallback), the large row with
    # TMA_ONLY, and gemm_fp8_persistent (the registers' store) on 128 x 128 tiles
    "64x32_s6_w1": dict(BM=64, BN=32, STAGES=6, CONSUMERS=1, INSTR=I32, IN_FLIGHT=1, EPILOGUE=0, TMA_ONLY=1),
    "64x64_s4_w1": dict(BM=64, BN=64, STAGES=4, CONSUMERS=1, INSTR=I64, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "64x128_s6_w1": dict(BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "128x128_s6_w1": dict(BM=128, BN=128, STAGES=6, CONSUMERS=2, INSTR=I128, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "64x128_s8_w1_ep0": dict(BM=64, BN=128, STAGES=8, CONSUMERS=1, INSTR=I128, IN_FLIGHT=1, EPILOGUE=0, TMA_ONLY=1),
    "64x128_s4_w1_ep0": dict(BM=64, BN=128, STAGES=4, CONSUMERS=1, INSTR=I128, IN_FLIGHT=1, EPILOGUE=0, TMA_ONLY=1),
    "128x128_s6_w1_ep0": dict(BM=128, BN=128, STAGES=6, CONSUMERS=2, INSTR=I128, IN_FLIGHT=1, EPILOGUE=0,
                              TMA_ONLY=1),
    "large_tma_only": dict(gemm_fp8.POLICIES["large"], TMA_ONLY=1),
    "pr128x128_s6": dict(BM=128, BN=128, STAGES=6, CONSUMERS=2, INSTR=I128, PERSISTENT=1),
    # call 5: the policy's forms on 2x1 clusters, B multicast (gemm_fp8_cluster, wait_group 0; the wait_group 1
    # forms call 5 timed lost more and are gone)
    "c64x128_s8_w0": dict(gemm_fp8.SMALL_64x128, IN_FLIGHT=0, CLUSTER_M=2),
    "c64x64_s6_w0": dict(gemm_fp8.SMALL_64x64, IN_FLIGHT=0, CLUSTER_M=2),
    "c128x128_s5_w0": dict(gemm_fp8.MID_128x128, IN_FLIGHT=0, CLUSTER_M=2),
}
SHAPES = [(512, 512, 512), (768, 768, 768), (1024, 1024, 1024), (1024, 1024, 4096), (2048, 1024, 4096),
          (2048, 2048, 2048), (4096, 1024, 1024), (2051, 2045, 1008)]
MORE_SHAPES = [(640, 640, 640), (512, 2048, 4096), (1536, 1536, 1536), (2048, 512, 2048), (1024, 2048, 2048),
               (1000, 1000, 1024)]


def params_of(name: str) -> dict:
    p = {**BASE, **FORMS[name]}
    if p.get("PERSISTENT"):
        p.pop("IN_FLIGHT", None)
        p.pop("EPILOGUE", None)
    return p


def build(p: dict) -> dict:
    """Compile one form (into the build cache); its registers, spills and SASS facts."""
    import tilepy_hip

    try:
        kernel, kp = gemm_fp8.kernel_of(p)
        ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
        sass = ck.sass()
        return {"kernel": kernel.__name__, "registers": ck.resources.get("registers"),
                "spills": ck.resources.get("spill_stores"), "smem": ck.resources.get("dynamic_smem"),
                "qgmma": sorted(set(re.findall(r"\bQGMMA\.[\w.]+", sass))), "utmastg": sass.count("UTMASTG"),
                "local_memory": bool(re.search(r"\b(?:LDL|STL)\b", sass))}
    except Exception as e:  # noqa: BLE001 - a form that does not build: say so
        return {"error": f"{type(e).__name__}: {str(e)[:300]}"}


def _quantize(x):
    import torch

    scale = (x.abs().max().float() / 448.0).clamp(min=1e-12)
    return (x / scale).to(torch.float8_e4m3fn), scale.reshape(1)


def shape_row(M, N, K, names, built, rounds, g) -> dict:
    """One shape: every form checked against float64, then `rounds` alternated rounds of the peer and the forms."""
    import torch
    from timing import graph_seconds, input_sets

    def data():
        a, sa = _quantize(torch.randn(M, K, device="cuda", generator=g))
        b, sb = _quantize(torch.randn(N, K, device="cuda", generator=g))
        return a, b, sa, sb, torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)

    first = data()
    nsets = input_sets(M * K + N * K + 2 * M * N)
    sets = [first] + [data() for _ in range(nsets - 1)]
    a, b, sa, sb, out = first
    ref = (a.double() @ b.double().t()) * sa.double() * sb.double()

    def rel(x):
        x = x.double()
        return float((x - ref).norm() / ref.norm()) if torch.isfinite(x).all() else float("inf")

    aligned = M % 16 == 0 and N % 16 == 0 and K % 16 == 0
    fns, errs, row = {}, {}, {"shape": [M, N, K], "input_sets": nsets, "forms": {}}
    if aligned:
        fns["peer"] = [lambda x=x: torch._scaled_mm(x[0], x[1].t(), x[2], x[3], out_dtype=torch.bfloat16)
                       for x in sets]
        errs["peer"] = rel(fns["peer"][0]())
        # cuBLASLt's kernel for the shape
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fns["peer"][0]()
            torch.cuda.synchronize()
        row["peer_kernels"] = sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})
    else:
        # _scaled_mm takes multiples of 16 only: the same product on operands padded once to them (the pad not
        # timed) as a point of reference, not the bar
        mp, np_ = -(-M // 16) * 16, -(-N // 16) * 16
        pads = [(torch.nn.functional.pad(x[0].view(torch.uint8), (0, 0, 0, mp - M)).view(torch.float8_e4m3fn),
                 torch.nn.functional.pad(x[1].view(torch.uint8), (0, 0, 0, np_ - N)).view(torch.float8_e4m3fn),
                 x[2], x[3]) for x in sets]
        fns["peer_padded"] = [lambda x=x: torch._scaled_mm(x[0], x[1].t(), x[2], x[3], out_dtype=torch.bfloat16)
                              for x in pads]
        errs["peer_padded"] = rel(fns["peer_padded"][0]()[:M, :N])
    pol = gemm_fp8.policy(M, N, K)
    fns["policy"] = [lambda x=x: gemm_fp8.launch(*x, **pol) for x in sets]
    row["policy"] = {k: (v.name if hasattr(v, "name") else v) for k, v in pol.items() if k != "SWIZZLE"}
    for n in names:
        if "error" in built[n]:
            continue
        p = params_of(n)
        if p.get("STORE_N") and N % 8:
            row["forms"][n] = {"skipped": "TMA-only store needs N % 8 == 0"}
            continue
        kernel, kp = gemm_fp8.kernel_of(p)
        grid = gemm_fp8.grid_of(M, N, p)
        fns[n] = [lambda x=x, kernel=kernel, kp=kp, grid=grid: kernel[grid](*x, target="sm_90a", **kp)
                  for x in sets]
    for n in list(fns):
        if n.startswith("peer"):
            continue
        out.fill_(float("nan"))
        try:
            fns[n][0]()
            torch.cuda.synchronize()
            errs[n] = rel(out)
        except Exception as e:  # noqa: BLE001 - a form that does not launch: say so, go on
            row["forms"][n] = {"skipped": f"{type(e).__name__}: {str(e)[:200]}"}
            del fns[n]
            continue
        if not errs[n] <= 2.0**-8:
            row["forms"][n] = {"skipped": f"rel err {errs[n]:.3e} over 2^-8"}
            del fns[n]
    times = {n: [] for n in fns}
    for _ in range(rounds):
        for n in fns:
            times[n].append(graph_seconds(fns[n], 20, 15) * 1e6)
    med = {n: statistics.median(v) for n, v in times.items()}
    hot = {}
    for n in ("peer", "peer_padded", "policy"):
        if n in fns:
            hot[n] = graph_seconds(fns[n][0], 20, 15) * 1e6
    row["hot_us"] = hot
    peer = med.get("peer")
    row["peer_us"], row["peer_times_us"], row["peer_rel_err"] = peer, times.get("peer"), errs.get("peer")
    if "peer_padded" in med:
        row["peer_padded_us"], row["peer_padded_times_us"] = med["peer_padded"], times["peer_padded"]
        peer = med["peer_padded"]    # (ratios against the padded product: a reference point only)
        row["ratio_against"] = "torch._scaled_mm on operands padded to multiples of 16 (pad not timed)"
    for n in fns:
        if n.startswith("peer"):
            continue
        row["forms"][n] = {"us": med[n], "times_us": times[n], "rel_err": errs[n],
                           "ratio": (peer / med[n]) if peer else None,
                           "grid": list(gemm_fp8.grid_of(M, N, pol if n == "policy" else params_of(n)))}
    best = sorted(((v["us"], k) for k, v in row["forms"].items() if "us" in v))
    print(f"{M} x {N} x {K} ({nsets} sets): peer{' (padded)' if 'peer_padded' in med else ''} "
          f"{peer if peer is None else round(peer, 2)} us "
          f"{row.get('peer_kernels', '')}  hot {({k: round(v, 2) for k, v in hot.items()})}", flush=True)
    for us, k in best:
        f = row["forms"][k]
        r = f"{f['ratio']:.3f}" if f["ratio"] else "-"
        print(f"    {k:16s} {us:8.2f} us  x peer {r}  runs {[round(t, 2) for t in f['times_us']]}  "
              f"err {f['rel_err']:.2e}", flush=True)
    for k, v in row["forms"].items():
        if "skipped" in v:
            print(f"    {k:16s} skipped: {v['skipped']}", flush=True)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=None, help="M,N,K triples")
    ap.add_argument("--forms", nargs="*", default=None, help="names of FORMS (default: all)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--more", action="store_true", help="also MORE_SHAPES")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes] if args.shapes else SHAPES
    if args.more:
        shapes += MORE_SHAPES
    names = [] if args.forms == ["none"] else (args.forms or list(FORMS))    # ("none": the policy alone)

    t0 = time.time()
    with ProcessPoolExecutor(max(1, min(16, len(names))), mp_context=multiprocessing.get_context("fork")) as ex:
        built = dict(zip(names, ex.map(build, [params_of(n) for n in names])))
    print(f"built {len(names)} forms in {time.time() - t0:.1f} s", flush=True)
    for n, b in built.items():
        print(f"  {n:16s} {b}", flush=True)

    import torch

    import tilepy_hip

    props = torch.cuda.get_device_properties(0)
    dev_name = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    res = {"device": props.name, "torch": torch.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"), "rounds": args.rounds,
           "forms": {n: {**{k: (v.name if hasattr(v, "name") else v) for k, v in params_of(n).items()
                            if k != "SWIZZLE"}, **built[n]} for n in names},
           "against": "torch._scaled_mm(a, b.t(), sa, sb, out_dtype=bf16), default (promoted) accumulation",
           "rows": []}
    print(f"{props.name}, torch {torch.__version__}", flush=True)
    g = torch.Generator(device="cuda").manual_seed(28)
    for M, N, K in shapes:
        res["rows"].append(shape_row(M, N, K, names, built, args.rounds, g))
        torch.cuda.empty_cache()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / f"gemm-fp8-small{args.tag}-{dev_name}.json"
    path.write_text(json.dumps(res, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
