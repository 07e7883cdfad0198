"""gemm_fp32 with A read as plain f32 and split in the consumers' registers (A_RAW) against the split form (a
split pass over A and B, then the GEMM) and cuBLAS SGEMM (torch.matmul f32, TF32 off), on the same random
inputs in one run:

    python3 benchmarks/gemm_fp32_raw.py [--shapes M,N,K[,layout] ...] [--out DIR] [--name STEM]

Times are medians over replays of a CUDA graph of 20 calls after a warm-up (benchmarks/timing.py): "us" counts
every launch a caller makes (the splits included: both operands for the split form, B only for A_RAW), "gemm
us" the GEMM alone (operands split beforehand: a weight split once). Every output is checked against float64
first, and A_RAW's bits against the split form's. Variants: RAW (4 stages, three synchronous wgmma chains a
k-tile), 3 stages, WAIT_ONCE (the three chains as async groups waited once), setmaxnreg 56 / 224. The
resources (registers, spills) and the SASS summary (HGMMA, LDL/STL) of each variant are recorded too.
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

import torch  # noqa: E402
from timing import graph_seconds  # noqa: E402

import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp32  # noqa: E402

SHAPES = [(4096, 4096, 4096, "kn"), (4096, 4096, 4096, "nk"), (50176, 384, 96, "nk"), (50176, 96, 384, "nk"),
          (8192, 8192, 1024, "kn")]
VARIANTS = {   # name: constexprs (over PRESETS["sm_90a"]); "split" is the two-pass form
    "split": dict(A_RAW=0),
    "raw": dict(gemm_fp32.RAW),
    "raw_s3": dict(A_RAW=1, STAGES=3),
    "raw_wait_once": dict(gemm_fp32.RAW, WAIT_ONCE=1),
    "raw_regs": dict(gemm_fp32.RAW, PRODUCER_REGS=56, CONSUMER_REGS=224),
}


def _params(v):
    return {**gemm_fp32.PRESETS["sm_90a"], **v}


def _build(item):
    name, v = item
    t = time.time()
    ck = tilepy_hip.compile(gemm_fp32.gemm_fp32, target="sm_90a", **_params(v))
    sass = ck.sass()
    hg = re.findall(r"HGMMA\.[^;]*", sass)
    return name, {"resources": ck.resources, "build_s": round(time.time() - t, 1), "hgmma": len(hg),
                  "hgmma_first": hg[0].strip() if hg else "", "ldl_stl": len(re.findall(r"\b(?:LDL|STL)\b", sass)),
                  "register_a": sum(bool(re.search(r"TF32\S* R\d+, R\d+, gdesc", h)) for h in hg)}


def rel(x, ref) -> float:
    x = x.double()
    if not torch.isfinite(x).all():
        return float("inf")
    return float((x - ref).norm() / ref.norm())


def row(M, N, K, lay, g, variants) -> dict:
    a = torch.randn(M, K, device="cuda", generator=g)
    b = torch.randn((K, N) if lay == "kn" else (N, K), device="cuda", generator=g)
    bt = b if lay == "kn" else b.t()
    ref = a.double() @ bt.double()
    torch.backends.cuda.matmul.allow_tf32 = False
    out = {"shape": [M, N, K], "b_layout": lay, "sgemm_rel_err": rel(torch.matmul(a, bt), ref)}
    out["sgemm_us"] = graph_seconds(lambda: torch.matmul(a, bt)) * 1e6
    a_split, b_split = gemm_fp32.split(a), gemm_fp32.split(b, lay)
    c = torch.empty(M, N, device="cuda")
    results, first = {}, None
    for name, v in variants.items():
        c.fill_(float("nan"))
        gemm_fp32.launch(a, b, c, lay, **v)
        torch.cuda.synchronize()
        r = {"rel_err": rel(c, ref)}
        if first is None:
            first = c.clone()
        else:
            r["bitwise_as_split"] = bool(torch.equal(c, first))
        r["us"] = graph_seconds(lambda v=v: gemm_fp32.launch(a, b, c, lay, **v)) * 1e6
        if v.get("A_RAW"):
            r["gemm_us"] = graph_seconds(lambda v=v: gemm_fp32.launch_raw(a, b_split, c, **v)) * 1e6
        else:
            kw = {k: x for k, x in v.items() if k != "A_RAW"}
            r["gemm_us"] = graph_seconds(lambda kw=kw: gemm_fp32.launch_split(a_split, b_split, c, **kw)) * 1e6
        r["vs_sgemm"] = out["sgemm_us"] / r["us"]
        r["error_no_worse"] = r["rel_err"] <= out["sgemm_rel_err"] * 1.25 or r["rel_err"] <= 2.0**-22
        results[name] = r
    out["variants"] = results
    del a, b, c, a_split, b_split, ref
    torch.cuda.empty_cache()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=None, help="M,N,K[,kn|nk] (default: SHAPES)")
    ap.add_argument("--variants", default=None, help="comma-separated names among " + ",".join(VARIANTS))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--name", default="gemm-fp32-raw")
    args = ap.parse_args(argv)
    shapes = SHAPES
    if args.shapes:
        shapes = [tuple(int(x) for x in s.split(",")[:3]) + ((s.split(",") + ["kn"])[3],) for s in args.shapes]
    variants = {k: VARIANTS[k] for k in (args.variants.split(",") if args.variants else VARIANTS)}
    props = torch.cuda.get_device_properties(0)
    res = {"device": props.name, "torch": torch.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"), "against": "SGEMM (torch.matmul f32, TF32 off)",
           "timing": "median of 15 replays of a CUDA graph of 20 calls, after a warm-up", "kernels": {}, "rows": []}
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    t = time.time()
    with ProcessPoolExecutor(len(variants), mp_context=multiprocessing.get_context("spawn")) as ex:
        res["kernels"] = dict(ex.map(_build, variants.items()))
    print(f"built {len(variants)} variants in {time.time() - t:.1f} s", flush=True)
    for name, k in res["kernels"].items():
        r = k["resources"]
        print(f"  {name:14} regs {r.get('registers')} spills {r.get('spill_stores')} smem {r.get('dynamic_smem')} "
              f"HGMMA {k['hgmma']} (register A {k['register_a']}) LDL/STL {k['ldl_stl']}  {k['hgmma_first'][:70]}")
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    path = Path(args.out) / f"{args.name}-{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    g = torch.Generator(device="cuda").manual_seed(13)
    print(f"{'M x N x K':20} {'lay':3} {'variant':14} {'us':>8} {'gemm us':>8} {'SGEMM us':>8} {'x SGEMM':>7} "
          f"{'rel err':>9} {'SGEMM err':>9} bits")
    for M, N, K, lay in shapes:
        r = row(M, N, K, lay, g, variants)
        res["rows"].append(r)
        path.write_text(json.dumps(res, indent=1))
        for v, x in r["variants"].items():
            print(f"{f'{M} x {N} x {K}':20} {lay:3} {v:14} {x['us']:8.1f} {x['gemm_us']:8.1f} {r['sgemm_us']:8.1f} "
                  f"{x['vs_sgemm']:7.2f} {x['rel_err']:9.2e} {r['sgemm_rel_err']:9.2e} "
                  f"{x.get('bitwise_as_split', '-')}", flush=True)
    print("wrote", path)


if __name__ == "__main__":
    main()
