"""fp8 GEMM on skinny rows (decode: M = 16-256 of N = K = 4096, N = 14336 / K = 4096 and N = 4096 / K = 14336):
the swap-AB split-K form (`gemm_fp8.gemm_fp8_swap`, SWAP=1) beside the skinny class's unswapped 64 x 128 tiles, each
against torch._scaled_mm on the same inputs (benchmarks/gemm_fp8.py's row: outputs checked against float64 first,
medians of graph replays, three rounds interleaved with the peer, each timed function rotating among input sets that
touch twice the L2 as gemm_fp8.fp8_row does since the lead's rotation change, so B comes from DRAM; the one-set
figures beside where fp8_row times the peer). Writes gemm_fp8_skinny-<device>.json. G30's rotated sweeps and the
kernels' durations inside the graph: benchmarks/profile/g30_trace.py.

    python benchmarks/gemm_fp8_skinny.py [--rows 16 32 64 128 256] [--nk 4096,4096 14336,4096 4096,14336] [--out DIR]
    python benchmarks/gemm_fp8_skinny.py --cluster --repeat 2 --name NAME ...    (G21: slots against CLUSTER_K)
    python benchmarks/gemm_fp8_skinny.py --kways --repeat 2 --name NAME ...     (G24: K_WAYS=2, exact BM, deeper ring)
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
from gemm_fp8 import fp8_row, inputs  # noqa: E402

import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp8  # noqa: E402


def kways_variants(M, N, K) -> dict:
    """G24: the policy's row; two consumers on one 64-column tile taking alternate k-tiles (K_WAYS=2, the split of 2
    summed in the kernel where the table takes it); BM the rows rounded up to 8 (an e4m3 instruction N: no rows past M
    in A's box) where the policy's BM pads, alone and with K_WAYS=2; the policy's ring at up to 16 stages; the rows
    split over a cluster of 2 sharing B by multicast (CLUSTER_M=2: cm, cm_kw with K_WAYS=2, cm_kw16 its ring at 16
    stages, cm_bn128 over 128-column tiles); policy_g21: the table before the exact-BM rows."""
    pol = gemm_fp8.swap_policy(M, N, K)
    out = {"policy": pol, "kways": gemm_fp8.swap_params(M, N, K, k_ways=2, cluster=2, BM=pol["BM"])}
    exact = -(-min(M, 128) // 8) * 8
    if M > 128 and M % 128:
        exact = next((b for b in (96, 112, 104, 80, 64) if M % b == 0), exact)
    if exact != pol["BM"] and exact in gemm_fp8.SWAP_INSTR:
        cl = 2 if pol["CLUSTER_K"] > 1 else 0
        out["bm_exact"] = gemm_fp8.swap_params(M, N, K, BN=pol["BN"], BM=exact, cluster=cl)
        out["kways_bm_exact"] = gemm_fp8.swap_params(M, N, K, BM=exact, k_ways=2, cluster=2)
    bytes_stage = (pol["BN"] + pol["BM"]) * 128
    recv = (pol["CLUSTER_K"] // 2) * pol["BN"] * pol["BM"] * 4
    deep = min(16, (gemm_fp8.SWAP_SMEM - recv) // bytes_stage)
    if deep > pol["STAGES"]:
        out["stages16"] = {**pol, "STAGES": deep}
    # the rows split over a (2, 1, 1) cluster sharing B's tiles by multicast (CLUSTER_M=2, no K split; cuBLAS's form):
    # one consumer, two on alternate k-tiles (and their ring at up to 16 stages), 128-column tiles
    out["cm"] = gemm_fp8.swap_params(M, N, K, BN=64, cluster_m=2)
    out["cm_kw"] = kw = gemm_fp8.swap_params(M, N, K, k_ways=2, cluster_m=2)
    red = kw["BN"] * kw["BM"] * 4
    deep = min(16, (gemm_fp8.SWAP_SMEM - red) // ((kw["BN"] + kw["BM"]) * 128))
    if deep - deep % 2 > kw["STAGES"]:
        out["cm_kw16"] = {**kw, "STAGES": deep - deep % 2}
    out["cm_bn128"] = gemm_fp8.swap_params(M, N, K, BN=128, cluster_m=2)
    out["policy_g21"] = gemm_fp8.swap_policy(M, N, K, exact=False)     # the table before G24's exact-BM rows
    return out


def variants(M, N, K, cluster=False) -> dict:
    """The swap form's table row, its split halved / doubled, 64-column tiles (one consumer) and the old skinny row.
    With `cluster` (G21): the policy's row, the split into slots (summed by a second kernel; also over 64-column
    tiles from 128 rows), the split summed in the kernel over a cluster (CLUSTER_K = the split, 128- and 64-column
    tiles) and a cluster of 2 where the table's is 4."""
    if cluster:
        out = {"policy": gemm_fp8.swap_policy(M, N, K), "slots": gemm_fp8.swap_params(M, N, K)}
        if M >= 128:
            out["slots_bn64"] = gemm_fp8.swap_params(M, N, K, BN=64)
        for tag, bn in (("cluster", 128), ("cluster_bn64", 64)):
            p = gemm_fp8.swap_params(M, N, K, BN=bn, cluster=4)
            if p["CLUSTER_K"] > 1:
                out[tag] = p
            if bn == 128 and p["CLUSTER_K"] == 4:
                out["cluster2"] = {**p, "CLUSTER_K": 2, "STAGES": gemm_fp8.swap_cluster_stages(p["BM"], bn, 2)}
        return out
    sw = gemm_fp8.swap_params(M, N, K)
    out = {"swap": sw}
    s = sw["SPLIT_K"]
    if s > 1:
        out["swap_split_half"] = {**sw, "SPLIT_K": max(1, s // 2)}
    if s * 2 <= gemm_fp8.SWAP_MAX_SPLIT and -(-K // 128) >= 2 * s * 2:
        out["swap_split_x2"] = {**sw, "SPLIT_K": s * 2}
    n64 = gemm_fp8.swap_params(M, N, K, BN=64)
    out["swap_bn64"] = n64
    if M > 128:
        out["swap_bm64"] = gemm_fp8.swap_params(M, N, K, BM=64)
    out["unswapped_skinny"] = {**gemm_fp8.PRESETS["sm_90a"], **gemm_fp8.POLICIES["skinny"]}
    return out


def build_all(params_list, jobs=16):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    def key(p):
        return repr(sorted(p.items(), key=str))
    uniq = {key(p): p for p in params_list}
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as ex:
        res = list(ex.map(_build, uniq.values()))
    return [e for e in res if e]


def _build(p):
    try:
        kernel, kp = gemm_fp8.kernel_of(p)
        tilepy_hip.compile(kernel, target="sm_90a", **kp)
        return None
    except Exception as e:  # noqa: BLE001 - reported by the caller
        return f"{type(e).__name__}: {str(e)[:200]}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="*", type=int, default=[16, 32, 64, 128, 256])
    ap.add_argument("--nk", nargs="*", default=["4096,4096", "14336,4096", "4096,14336"])
    ap.add_argument("--only", nargs="*", default=None, help="variant names to time (default: all)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--jobs", type=int, default=16, help="processes building the kernels first")
    ap.add_argument("--build-only", action="store_true", help="build the kernels and stop")
    ap.add_argument("--cluster", action="store_true", help="G21's variants: slots against the cluster's in-kernel sum")
    ap.add_argument("--kways", action="store_true", help="G24's variants: K_WAYS=2, exact BM, a deeper ring")
    ap.add_argument("--repeat", type=int, default=1, help="time every shape's variants this many times, alternated")
    ap.add_argument("--name", default="gemm_fp8_skinny", help="the JSON file's stem")
    args = ap.parse_args(argv)
    shapes = [(m, *(int(x) for x in nk.split(","))) for nk in args.nk for m in args.rows]
    table = {s: {k: v for k, v in (kways_variants(*s) if args.kways else variants(*s, cluster=args.cluster)).items()
                 if args.only is None or k in args.only}
             for s in shapes}
    t = time.time()
    fails = build_all([p for row in table.values() for p in row.values()], args.jobs)
    print(f"built in {time.time() - t:.1f} s; failures: {fails}", flush=True)
    if args.build_only:
        return
    props = torch.cuda.get_device_properties(0)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    g = torch.Generator(device="cuda").manual_seed(20)
    res = {"device": props.name, "torch": torch.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"), "rows": {}}
    for M, N, K in shapes:
        data = inputs(M, N, K, g)
        row = {}
        for rep in range(args.repeat):
            peer = None         # the peer timed again in every repetition (its first variant's rounds)
            for tag, p in table[(M, N, K)].items():
                try:
                    r = fp8_row(M, N, K, g, params=p, data=data, t_peer=peer)
                except Exception as e:  # noqa: BLE001 - a variant that does not build or fit: say so, go on
                    print(f"{M}x{N}x{K} {tag:18s} skipped: {type(e).__name__}: {str(e).splitlines()[0][:100]}",
                          flush=True)
                    continue
                peer = peer or (r["torch_us"], r["fast_accum_us"])
                row[tag if args.repeat == 1 else f"{tag}#{rep}"] = r
                _show(M, N, K, tag if args.repeat == 1 else f"{tag}#{rep}", p, r)
        res["rows"][f"{M}x{N}x{K}"] = row
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / f"{args.name}-{name}.json"
    path.write_text(json.dumps(res, indent=1, default=str))
    print("wrote", path)


def _show(M, N, K, tag, p, r):
    pp = {k: p[k] for k in ("BM", "BN", "STAGES", "SPLIT_K", "CLUSTER_K", "K_WAYS", "CLUSTER_M") if k in p}
    print(f"{M}x{N}x{K} {tag:18s} {r['us']:8.2f} us  _scaled_mm {r['torch_us']:7.2f}  x {r['ratio']:.3f} "
          f"(fast accum x {r['ratio_fast_accum']:.3f})  err {r['rel_err']:.1e} / {r['torch_rel_err']:.1e}  "
          f"regs {r['registers']} spills {r['spills']}  {pp}", flush=True)


if __name__ == "__main__":
    main()
