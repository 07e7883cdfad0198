"""Lowered fp32 matmuls (the agent's programs: `argus_agent.lower`) on gemm_fp32's launch_policy tiles against
the same programs on the tiling the lowering used before (`policy`: 128 x 128 tiles, split-K) and against cuBLAS
SGEMM (torch.matmul f32, TF32 off), in one run. Each program's output is checked against float64 first (within
twice SGEMM's error on the same inputs), then timed: median of CUDA-graph replays of the whole lowered forward
(its split passes and sums included), input sets rotated to touch twice the L2 (benchmarks/timing.py), the forms
in turn, `--rounds` times.

    python benchmarks/lowered_fp32.py [--shapes M,N,K ...] [--rounds 2] [--out DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
from timing import graph_seconds, input_sets  # noqa: E402

import tilepy_hip  # noqa: E402
from argus_agent.lower import lower_model, ops_nn, render_program  # noqa: E402
from stdlib_kernels import gemm_fp32  # noqa: E402

SHAPES = [(1024, 1024, 1024), (2051, 2045, 1000), (1536, 1536, 1536), (512, 512, 512), (768, 768, 768),
          (1000, 1000, 1002), (4096, 4096, 4096)]


class MM(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


def _before(nbatch, M, N, K, sms=None):
    """The lowering's tiling before launch_policy: policy's split-K on the preset's 128 x 128 tiles."""
    return gemm_fp32.policy(M, N, K, nbatch, sms).get("KSPLIT", 1), ()


def program(M, N, K, before: bool, tmp: Path):
    """(the lowered forward, the GEMM kernels it launches)."""
    a, b = torch.randn(M, K), torch.randn(K, N)
    keep = ops_nn.fp32_tiling
    if before:
        ops_nn.fp32_tiling = _before
    try:
        src = render_program(lower_model(MM(), [a, b], "sm_90a"))
    finally:
        ops_nn.fp32_tiling = keep
    tag = f"{M}_{N}_{K}_{'before' if before else 'now'}"
    p = tmp / f"lowered_fp32_{tag}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(f"lowered_fp32_{tag}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.argus_forward, re.findall(r"launch\((\w+),", src)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=None, help="M,N,K triples")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes] if args.shapes else SHAPES
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    res = {"device": props.name, "torch": torch.__version__, "tilepy_hip": tilepy_hip.__version__,
           "toolchain": tilepy_hip.toolchain_info()["nvidia"], "time": time.strftime("%Y-%m-%d %H:%M:%S"),
           "against": "torch.matmul fp32, TF32 off (cuBLAS SGEMM)", "rows": []}
    tmp = Path(tempfile.mkdtemp(prefix="lowered_fp32_"))
    for M, N, K in shapes:
        sets = input_sets(4 * (M * K + K * N + M * N))
        ab = [(torch.randn(M, K, device=dev), torch.randn(K, N, device=dev)) for _ in range(sets)]
        ref = ab[0][0].double() @ ab[0][1].double()
        sg_err = (torch.matmul(*ab[0]).double() - ref).abs().max().item()
        row = {"shape": [M, N, K], "input_sets": sets, "sgemm_err": sg_err}
        fns = {"sgemm": lambda a, b: torch.matmul(a, b)}
        for before in (True, False):
            fwd, launched = program(M, N, K, before, tmp)
            key = "before" if before else "now"
            with torch.no_grad():
                out = fwd(None, *ab[0])
            err = (out.double() - ref).abs().max().item()
            row[f"{key}_err"], row[f"{key}_launches"] = err, launched
            if err > 2 * sg_err + 1e-6 * ref.abs().max().item():
                row[f"{key}_wrong"] = True
                print(f"{M}x{N}x{K} {key}: WRONG, error {err:.3g} against SGEMM's {sg_err:.3g}", flush=True)
                continue
            fns[key] = lambda a, b, fwd=fwd: fwd(None, a, b)
        for _ in range(args.rounds):
            for key, f in fns.items():
                with torch.no_grad():
                    t = graph_seconds([(lambda f=f, a=a, b=b: f(a, b)) for a, b in ab])
                row.setdefault(f"{key}_us", []).append(t * 1e6)
        for key in ("before", "now"):
            if f"{key}_us" in row:
                row[f"{key}_x_sgemm"] = [s / o for s, o in zip(row["sgemm_us"], row[f"{key}_us"])]
        res["rows"].append(row)
        fmt = lambda xs, d: "/".join(f"{x:.{d}f}" for x in xs)  # noqa: E731
        print(f"{M}x{N}x{K}: sgemm {fmt(row['sgemm_us'], 1)} us; x sgemm before "
              f"{fmt(row.get('before_x_sgemm', []), 2)} ({row['before_launches']}), now "
              f"{fmt(row.get('now_x_sgemm', []), 2)} ({row['now_launches']}); err now "
              f"{row['now_err']:.2g} sgemm {sg_err:.2g}", flush=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    out = Path(args.out) / f"lowered-fp32-{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    print("wrote", out.relative_to(ROOT) if out.is_relative_to(ROOT) else out)


if __name__ == "__main__":
    main()
