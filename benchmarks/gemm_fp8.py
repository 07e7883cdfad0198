"""The scaled fp8 GEMM (stdlib_kernels/gemm_fp8.py) against torch._scaled_mm, in one run; `benchmarks/gemm.py
--only fp8` runs these rows in its table, this script alone writes benchmarks/results/gemm_fp8-<device>.json.

    python benchmarks/gemm_fp8.py [--shapes 4096,4096,4096 ...] [--sweep] [--out DIR]

Each row: e4m3 a (M, K) and b (N, K) quantized per tensor from random normal data (amax at 448), f32 scales,
bf16 out; ours is `gemm_fp8.launch(a, b, scale_a, scale_b, out)` with the shape's policy, the peer
`torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype=torch.bfloat16)` (cuBLASLt; by default it promotes
the tensor cores' fp8 accumulation into f32 adds, which ours does not), and beside it the like-for-like
`use_fast_accum=True` form, on the same inputs (on a ragged M or N, which _scaled_mm refuses, both peers run on a and
b padded once with zero rows to multiples of 16, the pad not timed: a reference point, said so in the JSON). All
outputs are checked against float64 of the e4m3 values before timing. Ours and both peers are timed replay by replay
(timing.interleaved_graph_seconds: a CUDA graph of 10 calls each, after a warm-up replay, replayed in turn for 90
rounds, the order reversed every other round; the clock drifts under fp8 load): each one's median, and `ratio_pairs`
the median of the rounds' peer / ours (its [min, quartiles, max] beside): GPU time only. `--sweep` adds tile /
stage / wait_group / persistent variants per shape (ours alone, three medians of 30 replays, against the policy
row's peer times).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from timing import graph_seconds, input_sets, interleaved_graph_seconds, pair_stats, paired_graph_seconds  # noqa: E402

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp8  # noqa: E402

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (128, 4096, 4096), (2051, 2045, 1008)]
I128, I64, I32 = tp.nv.wgmma_m64n128k32_e4m3, tp.nv.wgmma_m64n64k32_e4m3, tp.nv.wgmma_m64n32k32_e4m3
SWEEP = {  # constexprs over PRESETS["sm_90a"] (128x256x128, 4 stages, 2 consumers, wait_group 0)
    "128x256_s4_wait1": dict(IN_FLIGHT=1),
    "128x256_s4_wait0_g16": dict(IN_FLIGHT=0, GROUP_M=16),
    "128x256_s4_persistent": dict(PERSISTENT=1),
    "128x256_s4_persistent_g16": dict(PERSISTENT=1, GROUP_M=16),
    "64x128_s6_wait1_1c": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128),
    "64x64_s10_wait1_1c": dict(IN_FLIGHT=1, BM=64, BN=64, STAGES=10, CONSUMERS=1, INSTR=I64),
    "64x32_s12_wait1_1c": dict(IN_FLIGHT=1, BM=64, BN=32, STAGES=12, CONSUMERS=1, INSTR=I32),
}


def median_us(fn, reps: int = 10, runs: int = 30) -> float:
    """Median microseconds per call over `runs` replays of a CUDA graph of `reps` calls, after a warm-up."""
    return graph_seconds(fn, reps, runs) * 1e6


def _scaled(a, b, sa, sb, fast=False):
    return torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast)


def _pad_rows(x, m):
    """x (an e4m3 (R, K) tensor) with zero rows appended up to a multiple of m (a fresh tensor)."""
    r = -(-x.shape[0] // m) * m
    return torch.nn.functional.pad(x.view(torch.uint8), (0, 0, 0, r - x.shape[0])).view(torch.float8_e4m3fn)


def _quantize(x):
    scale = (x.abs().max().float() / 448.0).clamp(min=1e-12)
    return (x / scale).to(torch.float8_e4m3fn), scale.reshape(1)


def _rel(x, ref) -> float:
    x = x.double()
    if not torch.isfinite(x).all():
        return float("inf")
    return float((x - ref).norm() / ref.norm())


def _policy_text(p) -> str:
    keys = ("BM", "BN", "STAGES", "CONSUMERS", "IN_FLIGHT", "GROUP_M", "PERSISTENT")
    return " ".join(f"{k}={p[k]}" for k in keys if k in p)


def inputs(M, N, K, g):
    a, sa = _quantize(torch.randn(M, K, device="cuda", generator=g))
    b, sb = _quantize(torch.randn(N, K, device="cuda", generator=g))
    return a, b, sa, sb


def fp8_row(M, N, K, g, params=None, data=None, t_peer=None) -> dict:
    """One shape: ours under `params` (default: the shape's policy) and torch._scaled_mm, errors against
    float64 and median times."""
    p = params or gemm_fp8.policy(M, N, K)
    a, b, sa, sb = data or inputs(M, N, K, g)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    kernel, kp = gemm_fp8.kernel_of(p)
    ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)

    # where one call's buffers fit in the L2, every timed function rotates among input sets (METHOD.md); the
    # one-set ("hot") figures of ours and the default peer are kept beside
    sets = [(a, b, sa, sb, out)] + [(*inputs(M, N, K, g), torch.empty_like(out))
                                    for _ in range(input_sets(a.numel() + b.numel() + 2 * out.numel()) - 1)]
    ours_all = [partial(gemm_fp8.launch, *x, **p) for x in sets]
    # _scaled_mm takes M and N multiples of 16 only: on a ragged shape the peer runs on operands padded once with zero
    # rows to multiples of 16 (the pad not timed, its output's extra rows / columns not read): a reference point
    peer_sets = [x[:4] if (M % 16, N % 16) == (0, 0) else (_pad_rows(x[0], 16), _pad_rows(x[1], 16), x[2], x[3])
                 for x in sets]
    peer_all = [partial(_scaled, *x) for x in peer_sets]
    fast_all = [partial(_scaled, *x, fast=True) for x in peer_sets]
    ours_all[0]()
    ref = (a.double() @ b.double().t()) * sa.double() * sb.double()
    err, err_peer, err_fast = _rel(out, ref), _rel(peer_all[0]()[:M, :N], ref), _rel(fast_all[0]()[:M, :N], ref)
    # with the peers (t_peer None): ours, _scaled_mm and its fast accumulation replayed in turn, replay by replay
    # (timing.interleaved_graph_seconds: graphs of 10 calls, 90 rounds, the order reversed every other round; the
    # clock drifts under fp8 load), each one's median and the median of the rounds' ratios; given t_peer (a sweep's
    # variant against its base row's peers), ours alone, three medians of 30 replays
    ts, pairs, hot = {"ours": [], "peer": [], "fast": []}, {}, {}
    if t_peer is None:
        rounds = interleaved_graph_seconds([ours_all, peer_all, fast_all], reps=10, replays=90)
        t_ours, t_peer, t_fast = (statistics.median(x) * 1e6 for x in rounds)
        ps, pf = pair_stats(rounds[0], rounds[1]), pair_stats(rounds[0], rounds[2])
        pairs = {"ratio_pairs": ps.ratio, "ratio_pairs_spread": [ps.ratio_min, ps.ratio_q1, ps.ratio_q3, ps.ratio_max],
                 "ratio_pairs_rounds": ps.rounds, "ratio_fast_accum_pairs": pf.ratio,
                 "ratio_fast_accum_pairs_spread": [pf.ratio_min, pf.ratio_q1, pf.ratio_q3, pf.ratio_max]}
        # each one's median over each third of the rounds (as the three rounds before the pairing)
        ts = {k: [statistics.median(x[30 * i:30 * (i + 1)]) * 1e6 for i in range(3)] for k, x in zip(ts, rounds)}
        if len(sets) > 1:
            h = paired_graph_seconds(ours_all[0], peer_all[0], reps=10, replays=60)
            hot = {"us_hot": h.ours * 1e6, "torch_us_hot": h.peer * 1e6, "ratio_hot": h.peer / h.ours,
                   "ratio_hot_pairs": h.ratio, "ratio_hot_pairs_spread": [h.ratio_min, h.ratio_q1, h.ratio_q3,
                                                                          h.ratio_max]}
    else:
        for _ in range(3):
            ts["ours"].append(median_us(ours_all))
        t_ours = statistics.median(ts["ours"])
        t_peer, t_fast = t_peer
    flops = 2 * M * N * K
    return {"shape": [M, N, K], "us": t_ours, "torch_us": t_peer, "ratio": t_peer / t_ours,
            "TFLOPs": flops / t_ours / 1e6, "torch_TFLOPs": flops / t_peer / 1e6, "rel_err": err,
            "torch_rel_err": err_peer, "against": "torch._scaled_mm (bf16 out, default: promoted accumulation)"
            + ("" if peer_sets[0][0] is a else " on a and b padded with zero rows to multiples of 16 (pad not timed)"),
            "fast_accum_us": t_fast, "ratio_fast_accum": t_fast / t_ours, "fast_accum_rel_err": err_fast,
            "times_us": ts, "input_sets": len(sets), **pairs, **hot,
            "shape_class": gemm_fp8.shape_class(M, N, K), "policy": _policy_text(p),
            "registers": ck.resources.get("registers"), "spills": ck.resources.get("spill_stores"),
            "tensor_maps": len(ck.tensor_maps)}


def show(kind, r):
    M, N, K = r["shape"]
    print(f"{kind:8} {f'{M} x {N} x {K}':22} {r['us']:9.1f} {r['torch_us']:9.1f} {r['ratio']:6.2f} "
          f"{r['TFLOPs']:8.1f} {r['rel_err']:9.2e} {r['torch_rel_err']:9.2e}  [{r['shape_class']}: {r['policy']}]"
          f"  fast accum: {r['fast_accum_us']:.1f} us, ratio {r['ratio_fast_accum']:.2f}, err "
          f"{r['fast_accum_rel_err']:.2e}"
          + (f"  (rotated over {r['input_sets']} input sets; one set: {r['us_hot']:.1f} / {r['torch_us_hot']:.1f} us,"
             f" {r['ratio_hot']:.2f})" if "us_hot" in r else ""), flush=True)


def sweep(g, shapes) -> dict:
    out = {}
    for M, N, K in shapes:
        data = inputs(M, N, K, g)
        base = fp8_row(M, N, K, g, data=data)
        row = {"policy": base}
        show("fp8", base)
        for tag, extra in SWEEP.items():
            p = {**gemm_fp8.PRESETS["sm_90a"], **extra}
            if (M <= 256) != (p["BM"] == 64):   # narrow tiles for skinny M only, and only there
                continue
            try:
                r = fp8_row(M, N, K, g, params=p, data=data, t_peer=(base["torch_us"], base["fast_accum_us"]))
            except Exception as e:  # noqa: BLE001 - a variant that does not build or fit: say so, go on
                print(f"  sweep {M}x{N}x{K} {tag:24s} skipped: {type(e).__name__}: {str(e).splitlines()[0][:90]}")
                continue
            row[tag] = r
            print(f"  sweep {M}x{N}x{K} {tag:24s} {r['us']:8.1f} us  x _scaled_mm {r['ratio']:.2f} "
                  f"(fast accum {r['ratio_fast_accum']:.2f})  regs {r['registers']} err {r['rel_err']:.1e}", flush=True)
        out[f"{M}x{N}x{K}"] = row
        torch.cuda.empty_cache()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=None, help="M,N,K triples (default: the issue's fp8 shapes)")
    ap.add_argument("--sweep", action="store_true", help="also tile / stage / wait_group variants per shape")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes] if args.shapes else SHAPES
    props = torch.cuda.get_device_properties(0)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    g = torch.Generator(device="cuda").manual_seed(8)
    res = {"device": props.name, "torch": torch.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"), "fp8": []}
    print(f"{props.name}, torch {torch.__version__}")
    print(f"{'kind':8} {'M x N x K':22} {'ours us':>9} {'torch us':>9} {'ratio':>6} {'TFLOP/s':>8} "
          f"{'rel err':>9} {'torch err':>9}")
    if args.sweep:
        res["sweep"] = sweep(g, shapes)
        res["fp8"] = [row["policy"] for row in res["sweep"].values()]
    else:
        for M, N, K in shapes:
            r = fp8_row(M, N, K, g)
            res["fp8"].append(r)
            show("fp8", r)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / f"gemm_fp8-{name}.json"
    path.write_text(json.dumps(res, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
