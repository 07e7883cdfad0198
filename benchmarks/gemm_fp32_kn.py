"""gemm_fp32 (3xTF32, f32 in / out) with B as (K, N) (torch.matmul's layout): the swap-AB form for skinny rows
(`launch_swap(b_layout="kn")`: gemm_fp32_kt reads B as it is, M-major, and loads it transposed into the register
fragments; only x's rows are split by a pass) against the unswapped form through `launch` (SWAP=0: B split and
transposed by a pass on every call, then A_RAW), both against cuBLAS SGEMM (torch.matmul f32, TF32 off) in the same
run. Every form is timed in `--rounds` alternating rounds (the run-to-run spread is the spread between rounds). Every
output is checked against float64 first (NaN-poisoned); times are medians of CUDA-graph replays
(timing.graph_seconds). `--parts` adds where the time goes (the split pass, the GEMM alone, the split-K sum).

    python benchmarks/gemm_fp32_kn.py [--rows 16 32 64 128 256] [--nk 4096,4096] [--extra] [--parts] [--out DIR]
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

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp32  # noqa: E402


def forms(M, N, K, extra: bool) -> dict:
    """name -> launch's constexprs (B is (K, N))."""
    out = {"swap_kn": dict(SWAP=1), "unswapped": dict(SWAP=0)}
    for form in (1, 2):     # each staged form of B's tile at its own widest column tile (KN_BN)
        out[f"swap_kn_form{form}"] = dict(SWAP=1, **{"KSPLIT": 1, **gemm_fp32.swap_params(M, N, K, b_layout="kn",
                                                                                 kn_form=form)})
    if extra:
        sw = gemm_fp32.swap_params(M, N, K, b_layout="kn")
        ks = sw.get("KSPLIT", 1)
        out["swap_kn_ks_x2"] = dict(SWAP=1, KSPLIT=ks * 2)
        if ks > 1:
            out["swap_kn_ks_half"] = dict(SWAP=1, KSPLIT=max(1, ks // 2))
        if sw["BN"] > 32 and M > 32:
            out["swap_kn_bn32"] = dict(SWAP=1, BN=32, INSTR=tp.nv.wgmma_m64n32k8_tf32,
                                       **gemm_fp32.policy(N, M, K, bn=32))
    return out


def kernel_params(M, N, K, kw) -> list:
    """(kernel name, constexprs) that launch builds for these constexprs (for the parallel precompile)."""
    kw = dict(kw)
    if kw.pop("SWAP"):
        return [("gemm_fp32_kt", {**gemm_fp32.swap_params(M, N, K, b_layout="kn"), **kw})]
    pol = {} if gemm_fp32.tile_named(kw) else gemm_fp32.launch_policy(M, N, K)
    return [("gemm_fp32", {**gemm_fp32.PRESETS["sm_90a"], **gemm_fp32.RAW, **pol, **kw})]


def _build(item):
    name, params = item
    try:
        tilepy_hip.compile(getattr(gemm_fp32, name), target="sm_90a", **params)
        return None
    except Exception as e:  # noqa: BLE001 - reported by the caller
        return f"{name}: {type(e).__name__}: {str(e)[:160]}"


def precompile(shapes, extra, workers):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    items = {("split_tf32", ()): ("split_tf32", {}), ("split_tf32_t", ()): ("split_tf32_t", {})}
    for M, N, K in shapes:
        for kw in forms(M, N, K, extra).values():
            for name, p in kernel_params(M, N, K, kw):
                items[(name, tuple(sorted((k, repr(v)) for k, v in p.items())))] = (name, p)
    t = time.time()
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as ex:
        errors = [e for e in ex.map(_build, list(items.values())) if e]
    print(f"precompiled {len(items)} kernels in {time.time() - t:.1f} s; failures: {errors[:4]}", flush=True)


def rel(x, ref):
    return float((x.double() - ref).norm() / ref.norm()) if torch.isfinite(x).all() else float("inf")


def row(M, N, K, g, rounds: int, extra: bool, parts: bool):
    a = torch.randn(M, K, device="cuda", generator=g)
    b = torch.randn(K, N, device="cuda", generator=g)
    ref = a.double() @ b.double()
    e_sgemm = rel(torch.matmul(a, b), ref)
    out = {"shape": [M, N, K], "sgemm_rel_err": e_sgemm, "sgemm_us": [], "forms": {}}
    fs = forms(M, N, K, extra)
    cs = {}
    for name, kw in fs.items():
        c = torch.full((M, N), float("nan"), device="cuda")
        try:
            gemm_fp32.launch(a, b, c, "kn", **kw)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - a form that does not build: say so, go on
            out["forms"][name] = {"error": str(e).splitlines()[0][:200]}
            print(f"{M}x{N}x{K} {name}: {out['forms'][name]['error']}", flush=True)
            continue
        err = rel(c, ref)
        out["forms"][name] = {"constexprs": {k: str(v) for k, v in kw.items()}, "us": [], "ratio": [],
                              "rel_err": err, "error_no_worse": err <= e_sgemm}
        cs[name] = c
    for r in range(rounds):
        t_sgemm = graph_seconds(lambda: torch.matmul(a, b), 20, 15)
        out["sgemm_us"].append(t_sgemm * 1e6)
        for name, c in cs.items():
            kw = fs[name]
            t = graph_seconds(lambda c=c, kw=kw: gemm_fp32.launch(a, b, c, "kn", **kw), 20, 15)
            f = out["forms"][name]
            f["us"].append(t * 1e6)
            f["ratio"].append(t_sgemm / t)
            print(f"r{r} {M}x{N}x{K:<6} {name:18} {t * 1e6:8.1f} us  x SGEMM {t_sgemm / t:5.2f} "
                  f"(SGEMM {t_sgemm * 1e6:7.1f})  err {f['rel_err']:.1e} (SGEMM {e_sgemm:.1e})", flush=True)
    if parts:   # where the swap form's time goes: x's split, the GEMM alone (into the partial products), the sum
        sw = gemm_fp32.swap_params(M, N, K, b_layout="kn")
        ks = sw.get("KSPLIT", 1)
        xh, xl = gemm_fp32.split(a, "nk")
        part = torch.empty(ks, M, N, device="cuda")
        gr = (tp.cdiv(N, sw["BM"]) * tp.cdiv(M, sw["BN"]), 1, ks)
        b3 = b.reshape(1, K, N)
        p = {"split_x": graph_seconds(lambda: gemm_fp32.split(a, "nk"), 20, 15),
             "gemm_kt": graph_seconds(lambda: gemm_fp32.gemm_fp32_kt[gr](b3, b3, xh, xl, part, **sw), 20, 15),
             "sum": graph_seconds(lambda: torch.sum(part, dim=0), 20, 15) if ks > 1 else 0.0,
             "split_b_t": graph_seconds(lambda: gemm_fp32.split(b, "kn"), 20, 15)}
        out["parts_us"] = {k: v * 1e6 for k, v in p.items()}
        out["parts_us"]["KSPLIT"] = ks
        print(f"   parts {M}x{N}x{K}: " + ", ".join(f"{k} {v:.1f}" for k, v in out["parts_us"].items()), flush=True)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="*", type=int, default=[16, 32, 64, 128, 256])
    ap.add_argument("--nk", nargs="*", default=["4096,4096"])
    ap.add_argument("--shapes", nargs="*", default=[], help="more M,N,K shapes (e.g. 1024,1024,1024)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--extra", action="store_true", help="also the split-K / BN variants of the swap form")
    ap.add_argument("--parts", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--tag", default="")
    ap.add_argument("--precompile", type=int, default=0, help="build the kernels first in N processes")
    ap.add_argument("--build-only", action="store_true")
    args = ap.parse_args(argv)
    shapes = [(m, *(int(v) for v in nk.split(","))) for nk in args.nk for m in args.rows]
    shapes += [tuple(int(v) for v in s.split(",")) for s in args.shapes]
    if args.precompile:
        precompile(shapes, args.extra, args.precompile)
    if args.build_only:
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    props = torch.cuda.get_device_properties(0)
    g = torch.Generator(device="cuda").manual_seed(25)
    res = {"device": props.name, "torch": torch.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"), "rounds": args.rounds, "rows": []}
    for M, N, K in shapes:
        res["rows"].append(row(M, N, K, g, args.rounds, args.extra, args.parts))
        torch.cuda.empty_cache()
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / f"gemm-fp32-kn{args.tag}-{name}.json"
    path.write_text(json.dumps(res, indent=1, default=str))
    print("wrote", path)


if __name__ == "__main__":
    main()
