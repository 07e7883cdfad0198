"""G38 lever 2 on the GPU (NOT RUN YET): the one-launch prototype (benchmarks/profile/g38_bkn.py: B read as it is, split
by the consumers in shared memory, in line or a tile ahead with AHEAD) against gemm_fp32.launch (split_tf32_t pass +
the A_RAW GEMM) and cuBLAS SGEMM (torch.matmul f32, TF32 off), rotated input sets, `--rounds` alternating rounds; every
output checked first (bit for bit launch's at the same tile width, and against float64 next to SGEMM's error), then
SASS (registers, LDL / STL).

    python benchmarks/profile/g38_bkn_bench.py [--shapes 1024,1024,1024:64 ...] [--rounds 2] [--out DIR] [--tag T]
"""

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "benchmarks" / "profile"))

import g38_bkn  # noqa: E402
import torch  # noqa: E402
from timing import graph_seconds, input_sets  # noqa: E402

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp32  # noqa: E402


def rel(x, ref):
    return float((x.double() - ref).norm() / ref.norm()) if torch.isfinite(x).all() else float("inf")


def row(M, N, K, bn, g, rounds):
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(M, K, device="cuda", generator=g)
    b = torch.randn(K, N, device="cuda", generator=g)
    nsets = input_sets(4 * (M * K + K * N + M * N))
    sets = [(a, b)] + [(torch.randn_like(a), torch.randn_like(b)) for _ in range(nsets - 1)]
    ref = a.double() @ b.double()
    p = g38_bkn.params(bn)
    instr = {64: tp.nv.wgmma_m64n64k8_tf32, 128: tp.nv.wgmma_m64n128k8_tf32}[bn]
    c, c0, c1 = (torch.full((M, N), float("nan"), device="cuda") for _ in range(3))
    g38_bkn.launch_bkn(a, b, c, **p)
    g38_bkn.launch_bkn(a, b, c1, **p, AHEAD=1)
    gemm_fp32.launch(a, b, c0, "kn", BN=bn, INSTR=instr, SWAP=0, **({"TMA_ONLY": 1} if bn == 64 else {}))
    torch.cuda.synchronize()
    out = {"shape": [M, N, K], "bn": bn, "input_sets": nsets, "policy": {k: str(v) for k, v in
                                                                         gemm_fp32.launch_policy(M, N, K).items()},
           "bitwise_launch": bool(torch.equal(c, c0) and torch.equal(c1, c0)), "rel_err": rel(c, ref),
           "sgemm_rel_err": rel(torch.matmul(a, b), ref), "us": {}}
    ck = tilepy_hip.compile(g38_bkn.gemm_fp32_bkn, target="sm_90a", **p)
    out["resources"] = dict(ck.resources)
    out["ldl_stl"] = len(re.findall(r"\b(?:LDL|STL)\b", ck.sass()))
    ck1 = tilepy_hip.compile(g38_bkn.gemm_fp32_bkn, target="sm_90a", **p, AHEAD=1)
    out["resources_ahead"] = dict(ck1.resources)
    out["ldl_stl_ahead"] = len(re.findall(r"\b(?:LDL|STL)\b", ck1.sass()))
    cs = [torch.empty(M, N, device="cuda") for _ in sets]
    fns = {"sgemm": [lambda x=x, y=y: torch.matmul(x, y) for x, y in sets],
           "launch": [lambda x=x, y=y, c=c: gemm_fp32.launch(x, y, c, "kn") for (x, y), c in zip(sets, cs)],
           "bkn": [lambda x=x, y=y, c=c: g38_bkn.launch_bkn(x, y, c, **p) for (x, y), c in zip(sets, cs)],
           "bkn_ahead": [lambda x=x, y=y, c=c: g38_bkn.launch_bkn(x, y, c, **p, AHEAD=1)
                         for (x, y), c in zip(sets, cs)]}
    order = list(fns)
    for r in range(rounds):
        for name in (order if r % 2 == 0 else order[::-1]):
            out["us"].setdefault(name, []).append(graph_seconds(fns[name]) * 1e6)
    for w in ("launch", "bkn", "bkn_ahead"):
        out[f"ratio_{w}"] = [s / x for s, x in zip(out["us"]["sgemm"], out["us"][w])]
    print(f"{M}x{N}x{K} BN {bn} ({nsets} sets): " + ", ".join(f"{k} {'/'.join(f'{t:.1f}' for t in v)}"
                                                          for k, v in out["us"].items())
          + "; x SGEMM " + ", ".join(f"{w} {'/'.join(f'{x:.3f}' for x in out[f'ratio_{w}'])}"
                                     for w in ("launch", "bkn", "bkn_ahead"))
          + f"; bitwise {out['bitwise_launch']}, err "
          f"{out['rel_err']:.2e} (SGEMM {out['sgemm_rel_err']:.2e}); {out['resources']}, LDL/STL {out['ldl_stl']}",
          flush=True)
    return out


def build():
    """Every kernel the sanitizer script and the bench run, built in parallel (nvcc runs in subprocesses)."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(g38_bkn.gemm_fp32_bkn, {**g38_bkn.params(bn), "STAGES": st, "AHEAD": ah})
            for bn in (64, 128) for st in (2, 3, 4) for ah in (0, 1)]
    base = {**gemm_fp32.PRESETS["sm_90a"], **gemm_fp32.RAW}
    for bn, instr in ((64, tp.nv.wgmma_m64n64k8_tf32), (128, tp.nv.wgmma_m64n128k8_tf32)):
        for st in (2, 3, 4):
            jobs.append((gemm_fp32.gemm_fp32, {**base, "BN": bn, "INSTR": instr, "STAGES": st}))
        jobs.append((gemm_fp32.gemm_fp32, {**base, "BN": bn, "INSTR": instr, "TMA_ONLY": 1}))
    for M, N, K in ((1024, 1024, 1024), (1536, 1536, 1536), (2048, 2048, 2048), (4096, 4096, 4096)):
        jobs.append((gemm_fp32.gemm_fp32, {**base, **gemm_fp32.launch_policy(M, N, K)}))
    jobs.append((gemm_fp32.split_tf32_t, {}))

    def one(job):
        try:
            return tilepy_hip.compile(job[0], target="sm_90a", **job[1]).resources
        except Exception as e:  # noqa: BLE001 - reported, the run goes on
            return f"FAILED {type(e).__name__}: {str(e)[:200]}"

    with ThreadPoolExecutor(12) as ex:
        for r in ex.map(one, jobs):
            print("built", r, flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=["1024,1024,1024:64", "1536,1536,1536:64", "2048,2048,2048:128",
                                                    "4096,4096,4096:128"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--tag", default="")
    ap.add_argument("--build-only", action="store_true")
    args = ap.parse_args(argv)
    if args.build_only:
        build()
        return
    name = torch.cuda.get_device_name(0)
    res = {"device": name, "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
           "against": "gemm_fp32.launch and SGEMM (torch.matmul f32, TF32 off); rotated, alternating rounds",
           "rows": []}
    g = torch.Generator(device="cuda")
    g.manual_seed(0)
    for s in args.shapes:
        shape, bn = s.split(":")
        M, N, K = (int(v) for v in shape.split(","))
        res["rows"].append(row(M, N, K, int(bn), g, args.rounds))
        torch.cuda.empty_cache()
        path = Path(args.out) / f"gemm-fp32-g38-bkn{args.tag}-{name.replace(' ', '_')}.json"
        path.write_text(json.dumps(res, indent=1, default=str))
    print(f"wrote {path}", flush=True)


if __name__ == "__main__":
    main()
