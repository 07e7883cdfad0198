"""G36: gemm_fp32 (3xTF32) tile forms against cuBLAS SGEMM (torch.matmul f32, TF32 off) on the small, skinny and
ragged shapes, every input set rotated out of the L2 (timing.input_sets: ours and the peer alike, each set its own a,
b, c, built once). Each shape's forms and SGEMM are timed in `--rounds` alternating rounds (the form order reversed
every other round); every output is checked against float64 first (NaN-poisoned), beside SGEMM's error on the same
inputs. `--parts` adds where the policy's time goes (the split passes and the GEMM alone, rotated too).

    python benchmarks/profile/g36_fp32.py [--shapes 2051,2045,1000 ...] [--rounds 2] [--parts] [--out DIR] [--tag T]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
from timing import graph_seconds, input_sets  # noqa: E402

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp32  # noqa: E402

NV = tp.nv


def _bn(n: int) -> dict:
    return {"BN": n, "INSTR": {48: NV.wgmma_m64n48k8_tf32, 64: NV.wgmma_m64n64k8_tf32, 80: NV.wgmma_m64n80k8_tf32,
                               96: NV.wgmma_m64n96k8_tf32, 112: NV.wgmma_m64n112k8_tf32,
                               128: NV.wgmma_m64n128k8_tf32, 192: NV.wgmma_m64n192k8_tf32}[n]}


FORMS = {   # name -> launch's constexprs (a tile named keeps the policy out); "policy" is launch's own choice
    "policy": {},
    "bn128": _bn(128),
    "bn112": _bn(112),
    "bn96": _bn(96),
    "bn80": _bn(80),
    "bn64": _bn(64),
    "m64": dict(BM=64, CONSUMERS=1, **_bn(128)),
    "m64bn64": dict(BM=64, CONSUMERS=1, **_bn(64)),
    "m64bn96": dict(BM=64, CONSUMERS=1, **_bn(96)),
    "m64bn64ks2": dict(BM=64, CONSUMERS=1, KSPLIT=2, **_bn(64)),
    "ks2": dict(KSPLIT=2),              # 128 x 128 tiles split 2 / 3 (the policy before G36 at 512^3-768^3)
    "ks3": dict(KSPLIT=3),
    "policy0": dict(TMA_ONLY=0),        # launch's tile with the copies' fallback compiled in (before G36)
}
# the swap form's variants (rows <= SWAP_ROWS): its own constexprs over swap_params
SWAP_FORMS = {
    "policy": {},
    "swap_m64_ks2": dict(SWAP=1, BM=64, CONSUMERS=1, KSPLIT=2),
    "swap_ks3": dict(SWAP=1, KSPLIT=3),
    "swapT0": dict(SWAP=1, TMA_ONLY=0, PRODUCER_REGS=0, CONSUMER_REGS=0),    # the swap form before G36
    "swapT": dict(SWAP=1, TMA_ONLY=1, PRODUCER_REGS=0, CONSUMER_REGS=0),
    "swapTR": dict(SWAP=1, TMA_ONLY=1, PRODUCER_REGS=40, CONSUMER_REGS=232),
}


def kernel_params(M, N, K, kw, layout):
    kw = dict(kw)
    if gemm_fp32.swap_ok(torch.empty(M, K, device="meta"), torch.empty((K, N) if layout == "kn" else (N, K),
                                                                       device="meta"), layout, kw):
        kw.pop("SWAP", None)
        name = "gemm_fp32_kt" if layout == "kn" else "gemm_fp32_ct"
        return name, {**gemm_fp32.swap_params(M, N, K, b_layout=layout), **kw}
    kw.pop("SWAP", None)
    pol = {} if gemm_fp32.tile_named(kw) else gemm_fp32.launch_policy(M, N, K)
    return "gemm_fp32", {**gemm_fp32.PRESETS["sm_90a"], **gemm_fp32.RAW, **pol, **kw}


def _build(item):
    name, params = item
    try:
        ck = tilepy_hip.compile(getattr(gemm_fp32, name), target="sm_90a", **params)
        return f"{name} {params.get('BM')}x{params.get('BN')} s{params.get('STAGES')} c{params.get('CONSUMERS')}: " \
               f"{ck.resources.get('registers')} regs, {ck.resources.get('spill_stores')} spill stores"
    except Exception as e:  # noqa: BLE001 - reported by the caller
        return f"FAILED {name}: {type(e).__name__}: {str(e)[:200]}"


def precompile(jobs, workers):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    items = {"split_tf32": ("split_tf32", {}), "split_tf32_t": ("split_tf32_t", {})}
    for M, N, K, layout, names in jobs:
        for name in names:
            kn, p = kernel_params(M, N, K, _forms(M)[name], layout)
            items[(kn, tuple(sorted((k, repr(v)) for k, v in p.items())))] = (kn, p)
    t = time.time()
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as ex:
        out = list(ex.map(_build, list(items.values())))
    print(f"precompiled {len(items)} kernels in {time.time() - t:.1f} s", flush=True)
    for line in out:
        print("  " + line, flush=True)


class _Forms(dict):
    """A form's name with a trailing "T": the same with TMA_ONLY=1 (no per-element copy fallback compiled in)."""

    def __missing__(self, name):
        if name.endswith("T") and name[:-1] in self:
            return {**self[name[:-1]], "TMA_ONLY": 1}
        raise KeyError(name)


def _forms(M):
    return _Forms(SWAP_FORMS if M <= gemm_fp32.SWAP_ROWS else FORMS)


def rel(x, ref):
    return float((x.double() - ref).norm() / ref.norm()) if torch.isfinite(x).all() else float("inf")


def row(M, N, K, layout, names, g, rounds, parts):
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(M, K, device="cuda", generator=g)
    b = torch.randn((K, N) if layout == "kn" else (N, K), device="cuda", generator=g)
    bb = (lambda y: y) if layout == "kn" else (lambda y: y.t())
    nsets = input_sets(4 * (M * K + K * N + M * N))
    sets = [(a, b)] + [(torch.randn_like(a), torch.randn_like(b)) for _ in range(nsets - 1)]
    ref = a.double() @ bb(b).double()
    e_sgemm = rel(torch.matmul(a, bb(b)), ref)
    out = {"shape": [M, N, K], "b_layout": layout, "input_sets": nsets, "sgemm_rel_err": e_sgemm, "sgemm_us": [],
           "forms": {}}
    fns = {}
    for name in names:
        kw = _forms(M)[name]
        cs = [torch.full((M, N), float("nan"), device="cuda") for _ in sets]
        try:
            gemm_fp32.launch(a, b, cs[0], layout, **kw)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - a form that does not build: say so, go on
            out["forms"][name] = {"error": str(e).splitlines()[0][:200]}
            print(f"{M}x{N}x{K} {name}: {out['forms'][name]['error']}", flush=True)
            continue
        err = rel(cs[0], ref)
        kn, p = kernel_params(M, N, K, kw, layout)
        out["forms"][name] = {"kernel": kn, "constexprs": {k: str(v) for k, v in p.items()}, "us": [], "ratio": [],
                              "rel_err": err, "error_no_worse": err <= e_sgemm}
        fns[name] = [lambda x=x, y=y, c=c, kw=kw: gemm_fp32.launch(x, y, c, layout, **kw)
                     for (x, y), c in zip(sets, cs)]
    sgemm = [lambda x=x, y=y: torch.matmul(x, bb(y)) for x, y in sets]
    order = list(fns)
    for r in range(rounds):
        t_sgemm = graph_seconds(sgemm)
        out["sgemm_us"].append(t_sgemm * 1e6)
        for name in (order if r % 2 == 0 else order[::-1]):
            t = graph_seconds(fns[name])
            f = out["forms"][name]
            f["us"].append(t * 1e6)
            f["ratio"].append(t_sgemm / t)
            print(f"r{r} {M}x{N}x{K:<5} {layout} {name:14} {t * 1e6:8.1f} us  x SGEMM {t_sgemm / t:5.2f} "
                  f"(SGEMM {t_sgemm * 1e6:7.1f}, {nsets} sets)  err {f['rel_err']:.1e} (SGEMM {e_sgemm:.1e})",
                  flush=True)
    if parts and M > gemm_fp32.SWAP_ROWS:   # the unswapped policy's launches, each rotated
        pol = gemm_fp32.launch_policy(M, N, K)
        splits = [gemm_fp32.split(y, layout) for _, y in sets]
        cs = [torch.empty(M, N, device="cuda") for _ in sets]
        kw = {k: v for k, v in pol.items()}
        p = {"split_b": graph_seconds([lambda y=y: gemm_fp32.split(y, layout) for _, y in sets]),
             "gemm": graph_seconds([lambda x=x, s=s, c=c: gemm_fp32.launch_raw(x, s, c, **kw)
                                    for (x, _), s, c in zip(sets, splits, cs)])}
        out["parts_us"] = {k: v * 1e6 for k, v in p.items()}
        print(f"   parts {M}x{N}x{K} ({pol}): " + ", ".join(f"{k} {v * 1e6:.1f} us" for k, v in p.items()), flush=True)
    elif parts:
        sw = gemm_fp32.swap_params(M, N, K, b_layout=layout)
        ks = sw.get("KSPLIT", 1)
        xs = [gemm_fp32.split(x, "nk") for x, _ in sets]
        part = [torch.empty(ks, M, N, device="cuda") for _ in sets]
        gr = (tp.cdiv(N, sw["BM"]) * tp.cdiv(M, sw["BN"]), 1, ks)
        kern = gemm_fp32.gemm_fp32_kt if layout == "kn" else gemm_fp32.gemm_fp32_ct
        p = {"split_x": graph_seconds([lambda x=x: gemm_fp32.split(x, "nk") for x, _ in sets]),
             "gemm": graph_seconds([lambda y=y[None], h=h, w=w: kern[gr](y, y, h[0], h[1], w, **sw)
                                    for (_, y), h, w in zip(sets, xs, part)]),
             "sum": graph_seconds([lambda w=w: torch.sum(w, dim=0) for w in part]) if ks > 1 else 0.0}
        out["parts_us"] = {k: v * 1e6 for k, v in p.items()}
        print(f"   parts {M}x{N}x{K} swap KSPLIT {ks}: " + ", ".join(f"{k} {v * 1e6:.1f} us" for k, v in p.items()),
              flush=True)
    return out


def parse_jobs(specs):
    """'M,N,K[:kn|nk][:form+form...]' -> (M, N, K, layout, form names)."""
    jobs = []
    for s in specs:
        bits = s.split(":")
        M, N, K = (int(v) for v in bits[0].split(","))
        layout = bits[1] if len(bits) > 1 and bits[1] else "kn"
        names = bits[2].split("+") if len(bits) > 2 else list(_forms(M))
        jobs.append((M, N, K, layout, names))
    return jobs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=["2051,2045,1000", "1024,1024,1024", "128,4096,4096"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--parts", action="store_true")
    ap.add_argument("--precompile", type=int, default=0)
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    jobs = parse_jobs(args.shapes)
    if args.precompile:
        precompile(jobs, args.precompile)
    if args.build_only:
        return
    g = torch.Generator(device="cuda")
    g.manual_seed(0)
    name = torch.cuda.get_device_name(0)
    res = {"device": name, "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
           "against": "SGEMM (torch.matmul f32, TF32 off), rotated input sets, alternating rounds", "rows": []}
    for M, N, K, layout, names in jobs:
        res["rows"].append(row(M, N, K, layout, names, g, args.rounds, args.parts))
        torch.cuda.empty_cache()
    path = Path(args.out) / f"gemm-fp32-g36{args.tag}-{name.replace(' ', '_')}.json"
    path.write_text(json.dumps(res, indent=1))
    print(f"wrote {path}", flush=True)


if __name__ == "__main__":
    main()
