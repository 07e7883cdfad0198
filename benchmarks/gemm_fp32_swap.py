"""gemm_fp32 (3xTF32, f32 in / out) on skinny rows of an (N, K) weight, out = x @ W.T (F.linear): the swap-AB form
(`launch_swap`: the weight read as it is and split in registers, x's rows split by a pass) against the unswapped
form through `launch` (SWAP=0: the weight split into TF32 halves on every call) and its GEMM alone (the weight split
once beforehand, what the lowering's cached split runs), all against cuBLAS SGEMM (F.linear f32, TF32 off) in the
same run; plus a tile / split sweep of the small and ragged shapes' "kn" product through `launch`. Every output is
checked against float64 first (NaN-poisoned); times are medians of CUDA-graph replays (timing.graph_seconds).

    python benchmarks/gemm_fp32_swap.py [--rows 16 32 64 128 256] [--nk 4096,4096 ...] [--small] [--out DIR]
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
import torch.nn.functional as F  # noqa: E402
from timing import graph_seconds  # noqa: E402

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp32  # noqa: E402

SMALL = {  # "kn" (torch.matmul) shapes toward 2x SGEMM: constexprs through launch (B split every call)
    (1024, 1024, 1024): {"policy": {}, "ks1": dict(KSPLIT=1), "ks4": dict(KSPLIT=4),
                         "bn64_ks1": dict(BN=64, INSTR=tp.nv.wgmma_m64n64k8_tf32, KSPLIT=1),
                         "bn64_ks2": dict(BN=64, INSTR=tp.nv.wgmma_m64n64k8_tf32, KSPLIT=2),
                         "bm64_1c_ks2": dict(BM=64, CONSUMERS=1, KSPLIT=2)},
    (2051, 2045, 1000): {"policy": {}, "bm64_1c": dict(BM=64, CONSUMERS=1, KSPLIT=1),
                         "bn256_s2": dict(BN=256, STAGES=2, INSTR=tp.nv.wgmma_m64n256k8_tf32, KSPLIT=1),
                         "bn64": dict(BN=64, INSTR=tp.nv.wgmma_m64n64k8_tf32, KSPLIT=1),
                         "s3": dict(STAGES=3)},
}
# --confirm: launch's own choice ("launch": launch_policy, 64-wide unsplit tiles at these shapes) against the split-K
# policy it replaced there ("split_policy")
CONFIRM = {shape: {"launch": {}, "split_policy": gemm_fp32.policy(*shape)}
           for shape in ((1024, 1024, 1024), (256, 4096, 4096), (512, 2048, 2048))}


def _swap_forms(M, N, K) -> dict:
    """name -> (kernel name, its constexprs) of the swap rows' kernels (what launch / launch_raw run)."""
    sw = gemm_fp32.swap_params(M, N, K)
    ks = sw.get("KSPLIT", 1)
    unswapped = {**gemm_fp32.PRESETS["sm_90a"], **gemm_fp32.RAW, **gemm_fp32.policy(M, N, K)}
    out = {"swap": ("gemm_fp32_ct", sw), "unswapped": ("gemm_fp32", unswapped),
           "swap_ks_x2": ("gemm_fp32_ct", {**sw, "KSPLIT": ks * 2})}
    if sw["BN"] != 128:
        out["swap_bn128"] = ("gemm_fp32_ct", {**sw, "BN": 128, "INSTR": tp.nv.wgmma_m64n128k8_tf32})
    if ks > 1:
        out["swap_ks_half"] = ("gemm_fp32_ct", {**sw, "KSPLIT": max(1, ks // 2)})
    return out


def _small_params(M, N, K, kw) -> dict:
    pol = {} if gemm_fp32.tile_named(kw) else gemm_fp32.launch_policy(M, N, K)
    return {**gemm_fp32.PRESETS["sm_90a"], **gemm_fp32.RAW, **pol, **kw}


def _build(item):
    name, params = item
    try:
        tilepy_hip.compile(getattr(gemm_fp32, name), target="sm_90a", **params)
        return None
    except Exception as e:  # noqa: BLE001 - reported by the caller
        return f"{name}: {type(e).__name__}: {str(e)[:160]}"


def precompile(shapes, small, workers: int = 16):
    """Build every kernel the rows launch, in parallel processes (the rows then find them cached)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    items = {}
    for M, N, K in shapes:
        for name, p in _swap_forms(M, N, K).values():
            items[(name, tuple(sorted((k, repr(v)) for k, v in p.items())))] = (name, p)
    if small:
        for (M, N, K), forms in small.items():
            for kw in forms.values():
                p = _small_params(M, N, K, kw)
                items[("gemm_fp32", tuple(sorted((k, repr(v)) for k, v in p.items())))] = ("gemm_fp32", p)
    items[("split_tf32", ())] = ("split_tf32", {})
    items[("split_tf32_t", ())] = ("split_tf32_t", {})
    t = time.time()
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as ex:
        errors = [e for e in ex.map(_build, list(items.values())) if e]
    print(f"precompiled {len(items)} kernels in {time.time() - t:.1f} s; failures: {errors[:4]}", flush=True)


def rel(x, ref):
    return float((x.double() - ref).norm() / ref.norm()) if torch.isfinite(x).all() else float("inf")


def swap_rows(shapes, g):
    rows = []
    for M, N, K in shapes:
        rows.append(swap_row(M, N, K, g))
        torch.cuda.empty_cache()
    return rows


def swap_row(M, N, K, g):
    x = torch.randn(M, K, device="cuda", generator=g)
    w = torch.randn(N, K, device="cuda", generator=g)
    ref = x.double() @ w.double().t()
    t_sgemm = graph_seconds(lambda: F.linear(x, w), 20, 15)
    e_sgemm = rel(F.linear(x, w), ref)
    row = {"shape": [M, N, K], "sgemm_us": t_sgemm * 1e6, "sgemm_rel_err": e_sgemm, "forms": {}}
    sw = gemm_fp32.swap_params(M, N, K)
    ks = sw.get("KSPLIT", 1)
    wh, wl = gemm_fp32.split(w, "nk")
    forms = {"swap": lambda c: gemm_fp32.launch(x, w, c, "nk"),
             "unswapped_launch": lambda c: gemm_fp32.launch(x, w, c, "nk", SWAP=0),
             "unswapped_gemm_alone": lambda c: gemm_fp32.launch_raw(x, (wh, wl), c, **gemm_fp32.policy(M, N, K))}
    for name, (_, p) in _swap_forms(M, N, K).items():
        if name.startswith("swap_"):
            forms[name] = lambda c, p=p: gemm_fp32.launch_swap(x, w, c, **p)
    for name, fn in forms.items():
        c = torch.full((M, N), float("nan"), device="cuda")
        try:
            fn(c)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - a form that does not build: say so, go on
            row["forms"][name] = {"error": str(e).splitlines()[0][:200]}
            print(f"{M}x{N}x{K} {name}: {row['forms'][name]['error']}", flush=True)
            continue
        err = rel(c, ref)
        t = graph_seconds(lambda fn=fn, c=c: fn(c), 20, 15)
        row["forms"][name] = {"us": t * 1e6, "ratio": t_sgemm / t, "rel_err": err, "error_no_worse": err <= e_sgemm}
        print(f"{M}x{N}x{K:<6} {name:22} {t * 1e6:8.1f} us  x SGEMM {t_sgemm / t:5.2f} (SGEMM {t_sgemm * 1e6:7.1f})"
              f"  err {err:.1e} (SGEMM {e_sgemm:.1e})  [BN {sw['BN']} KSPLIT {ks}]", flush=True)
    return row


def small_rows(g, table=None):
    return [small_row(M, N, K, forms, g) for (M, N, K), forms in (table or SMALL).items()]


def small_row(M, N, K, forms, g):
    a = torch.randn(M, K, device="cuda", generator=g)
    b = torch.randn(K, N, device="cuda", generator=g)
    ref = a.double() @ b.double()
    t_sgemm = graph_seconds(lambda: torch.matmul(a, b), 20, 15)
    e_sgemm = rel(torch.matmul(a, b), ref)
    row = {"shape": [M, N, K], "sgemm_us": t_sgemm * 1e6, "sgemm_rel_err": e_sgemm, "forms": {}}
    for name, kw in forms.items():
        c = torch.full((M, N), float("nan"), device="cuda")
        try:
            gemm_fp32.launch(a, b, c, "kn", **kw)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            row["forms"][name] = {"error": str(e).splitlines()[0][:200]}
            print(f"{M}x{N}x{K} {name}: {row['forms'][name]['error']}", flush=True)
            continue
        err = rel(c, ref)
        t = graph_seconds(lambda c=c, kw=kw: gemm_fp32.launch(a, b, c, "kn", **kw), 20, 15)
        row["forms"][name] = {"constexprs": {k: str(v) for k, v in kw.items()}, "us": t * 1e6,
                              "ratio": t_sgemm / t, "rel_err": err, "error_no_worse": err <= e_sgemm}
        print(f"{M}x{N}x{K:<6} {name:22} {t * 1e6:8.1f} us  x SGEMM {t_sgemm / t:5.2f} (SGEMM {t_sgemm * 1e6:7.1f})"
              f"  err {err:.1e} (SGEMM {e_sgemm:.1e})", flush=True)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="*", type=int, default=[16, 32, 64, 128, 256])
    ap.add_argument("--nk", nargs="*", default=["4096,4096", "14336,4096"])
    ap.add_argument("--small", action="store_true", help="also the small / ragged kn sweep")
    ap.add_argument("--confirm", action="store_true", help="instead of the sweep: launch's choice against split-K")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--precompile", type=int, default=0, help="build the kernels first in N processes")
    ap.add_argument("--build-only", action="store_true", help="with --precompile: build and stop")
    args = ap.parse_args(argv)
    shapes = [(m, *(int(v) for v in nk.split(","))) for nk in args.nk for m in args.rows]
    if args.precompile:
        precompile(shapes, CONFIRM if args.confirm else SMALL if args.small else None, args.precompile)
    if args.build_only:
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    props = torch.cuda.get_device_properties(0)
    g = torch.Generator(device="cuda").manual_seed(20)
    res = {"device": props.name, "torch": torch.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"),
           "swap": swap_rows(shapes, g)}
    if args.small or args.confirm:
        res["small"] = small_rows(g, CONFIRM if args.confirm else SMALL)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / f"gemm_fp32_swap-{name}.json"
    path.write_text(json.dumps(res, indent=1, default=str))
    print("wrote", path)


if __name__ == "__main__":
    main()
