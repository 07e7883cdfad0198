"""The paper's ablation, measured: each step adds one policy to the one before, on the same inputs, in one run.

    python benchmarks/ablation.py [--shape 4096,4096,4096] [--out DIR]

GEMM (bf16 in, f32 accumulate and out; cuBLAS = torch.matmul bf16 in the same run, the ceiling):
  1. naive               stdlib gemm, mma.sync 64x64 tile (2x2 warps), cp.async double buffer, no swizzle
  2. + swizzle           the conflict-free shared-memory swizzles (XOR of the 16-byte chunk with the row)
  3. + pipelining        4 cp.async stages in flight
  4. + wgmma             warpgroup MMA from shared-memory descriptors (64x64, 4 stages; not specialized)
  5. + warp specialization   gemm_hopper: a TMA producer warpgroup, two wgmma consumer warpgroups, 128x256 tile,
                         4-stage mbarrier ring (wait_group 0 after every k-tile)
  6. + wait_group 1      one wgmma group in flight, the stage released one k-tile later
  7. + setmaxnreg        producer 64 registers, consumers 216
  8. + policy table      gemm_hopper.policy's choice for the shape (tile / split-K per shape class)
Persistence (a persistent grid with a tile scheduler) is not a step: the language does not say it yet.

Each row: time (median of CUDA-graph replays), TFLOP/s, fraction of cuBLAS, the step's speed-up over the
previous row, and the error against float64 (every step is checked before it is timed). Sections are
pluggable: a module `benchmarks/ablation_attention.py` with `section(args) -> dict` (rows as here) is run and
printed after the GEMM's when it exists. Results: benchmarks/results/ablation-<device>.json.
"""

from __future__ import annotations

import argparse
import importlib
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
from stdlib_kernels import gemm, gemm_hopper  # noqa: E402
from tilepy_hip.launch import launch_compiled  # noqa: E402

NO_SWIZZLE = tp.Swizzle(0, 3, 3)
MMA_SYNC = dict(BM=64, BN=64, BK=32, INSTR=tp.nv.mma_m16n8k16_bf16, WARPS=(2, 2))


def gemm_steps():
    """[(name, kernel, constexprs, grid function)] in order; each adds one policy."""
    g2 = lambda p: lambda M, N: (tp.cdiv(M, p["BM"]), tp.cdiv(N, p["BN"]))  # noqa: E731
    hp = gemm_hopper.PRESETS["sm_90a"]
    steps = [
        ("naive", gemm.gemm, dict(MMA_SYNC, STAGES=2, SWIZZLE_A=NO_SWIZZLE, SWIZZLE_B=NO_SWIZZLE)),
        ("+ swizzle", gemm.gemm, dict(MMA_SYNC, STAGES=2)),
        ("+ pipelining (4 stages)", gemm.gemm, dict(MMA_SYNC, STAGES=4)),
        ("+ wgmma (64x64, not specialized)", gemm.gemm, dict(gemm.PRESETS["sm_90a"], STAGES=4)),
        ("+ warp specialization (TMA, 128x256)", gemm_hopper.gemm_hopper, dict(hp, IN_FLIGHT=0)),
        ("+ wait_group 1", gemm_hopper.gemm_hopper, dict(hp, IN_FLIGHT=1)),
        ("+ setmaxnreg (64 / 216)", gemm_hopper.gemm_hopper,
         dict(hp, IN_FLIGHT=1, PRODUCER_REGS=64, CONSUMER_REGS=216)),
    ]
    return [(n, k, p, g2(p)) for n, k, p in steps]


def timeit(fn, reps: int = 10, batches: int = 7) -> float:
    return graph_seconds(fn, reps, batches)


def gemm_section(args) -> dict:
    M, N, K = args.shape
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
    c = torch.full((M, N), float("nan"), device="cuda")
    ref = a.double() @ b.double()
    flops = 2 * M * N * K
    t_cublas = timeit(lambda: torch.matmul(a, b))
    rows, prev = [], None
    steps = gemm_steps()
    pol = gemm_hopper.policy(M, N, K)
    for name, kernel, p, grid_fn in steps + [("+ policy table", None, pol, None)]:
        if kernel is None:  # the policy table's choice, split-K included (its zeroing is timed with it)
            grid = gemm_hopper.grid_of(M, N, p)
            ck = tilepy_hip.compile(gemm_hopper.gemm_hopper, target="sm_90a", **p)
            split = p.get("SPLIT_K", 1) > 1

            def fn(ck=ck, grid=grid, split=split):
                if split:
                    c.zero_()
                launch_compiled(ck, grid, [a, b, c])
        else:
            ck = tilepy_hip.compile(kernel, target="sm_90a", **p)
            grid = grid_fn(M, N)
            fn = lambda ck=ck, grid=grid: launch_compiled(ck, grid, [a, b, c])  # noqa: E731
        c.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        err = float((c.double() - ref).norm() / ref.norm()) if torch.isfinite(c).all() else float("inf")
        t = timeit(fn)
        row = {"step": name, "us": t * 1e6, "TFLOPs": flops / t / 1e12, "of_cublas": t_cublas / t,
               "speedup": (prev / t) if prev else 1.0, "rel_err": err, "registers": ck.resources.get("registers"),
               "spills": ck.resources.get("spill_stores"), "constexprs": _show(p)}
        rows.append(row)
        prev = t
    return {"title": f"GEMM {M}x{N}x{K}, bf16 in, f32 out", "ceiling": {"name": "cuBLAS (torch.matmul bf16)",
            "us": t_cublas * 1e6, "TFLOPs": flops / t_cublas / 1e12}, "rows": rows}


def _show(p) -> str:
    out = []
    for k, v in p.items():
        if k in ("INSTR",):
            out.append(f"{k}={v.name}")
        elif k.startswith("SWIZZLE"):
            out.append(f"{k}={v}")
        else:
            out.append(f"{k}={v}")
    return " ".join(out)


def print_section(sec: dict):
    ce = sec["ceiling"]
    print(f"\n{sec['title']}   (ceiling: {ce['name']} {ce['us']:.1f} us, {ce['TFLOPs']:.0f} TFLOP/s)")
    print(f"  {'step':42s} {'us':>9s} {'TFLOP/s':>8s} {'of ceil':>8s} {'step x':>7s} {'rel err':>9s} {'regs':>5s}")
    for r in sec["rows"]:
        print(f"  {r['step']:42s} {r['us']:9.1f} {r['TFLOPs']:8.1f} {r['of_cublas']:8.2f} {r['speedup']:7.2f} "
              f"{r['rel_err']:9.1e} {r.get('registers') or '':>5}", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="4096,4096,4096", type=lambda s: tuple(int(x) for x in s.split(",")))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    props = torch.cuda.get_device_properties(0)
    res = {"device": props.name, "torch": torch.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"), "sections": {}}
    sections = {"gemm": gemm_section}
    try:  # another section (attention) plugs in as a module with section(args) -> dict
        sections["attention"] = importlib.import_module("ablation_attention").section
    except ModuleNotFoundError:
        pass
    for key, fn in sections.items():
        sec = fn(args)
        res["sections"][key] = sec
        print_section(sec)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / f"ablation-{name}.json"
    path.write_text(json.dumps(res, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
