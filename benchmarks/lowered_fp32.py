"""Lowered fp32 matmuls (the agent's programs: `argus_agent.lower`) on gemm_fp32's launch_policy tiles and
swap-AB (at most SWAP_ROWS rows; also as an nn.Linear) against the same programs as the lowering wrote them
before (`policy`: 128 x 128 tiles, split-K; no swap) and against cuBLAS SGEMM (the module in PyTorch, TF32 off),
in one run. Each program's output is checked against float64 first (within twice SGEMM's error on the same
inputs), then timed: median of CUDA-graph replays of the whole lowered forward (its split passes and sums
included), input sets rotated to touch twice the L2 (benchmarks/timing.py), the forms in turn, `--rounds` times.

    python benchmarks/lowered_fp32.py [--shapes M,N,K ...] [--rounds 2] [--out DIR]
"""

from __future__ import annotations

import argparse
import copy
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
          (1000, 1000, 1002), (4096, 4096, 4096), (128, 4096, 4096), (64, 4096, 4096), (16, 4096, 4096),
          (256, 4096, 4096)]
SWAP_ROWS = 256     # rows up to which the skinny forms run (gemm_fp32.SWAP_ROWS): timed as x @ B and as a Linear


class MM(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


class Linear(torch.nn.Module):
    """x @ W.T + b: the weight an (N, K) parameter (split once per state before, read as it is by swap-AB now)."""

    def __init__(self, k, n):
        super().__init__()
        self.fc = torch.nn.Linear(k, n)

    def forward(self, x):
        return self.fc(x)


def _before(nbatch, M, N, K, sms=None):
    """The lowering's tiling before launch_policy: policy's split-K on the preset's 128 x 128 tiles."""
    return gemm_fp32.policy(M, N, K, nbatch, sms).get("KSPLIT", 1), ()


def program(model, inputs, before: bool, tmp: Path, tag: str):
    """(the lowered forward, the kernels it launches); `before`: the tiling and no swap-AB, as before."""
    keep = ops_nn.fp32_tiling, ops_nn.fp32_swap
    if before:
        ops_nn.fp32_tiling, ops_nn.fp32_swap = _before, lambda *a: ()
    try:
        src = render_program(lower_model(model, inputs, "sm_90a"))
    finally:
        ops_nn.fp32_tiling, ops_nn.fp32_swap = keep
    tag = f"{tag}_{'before' if before else 'now'}"
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
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    out = Path(args.out) / f"lowered-fp32-{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    cases = [(M, N, K, "mm") for M, N, K in shapes]
    cases += [(M, N, K, "linear") for M, N, K in shapes if M <= SWAP_ROWS]
    for M, N, K, form in cases:
        torch.manual_seed(M + N + K)
        if form == "linear":
            model = Linear(K, N)
            sets = input_sets(4 * (M * K + M * N))
            xs = [(torch.randn(M, K, device=dev),) for _ in range(sets)]
            lowered = [torch.randn(M, K)]
        else:
            model = MM()
            sets = input_sets(4 * (M * K + K * N + M * N))
            xs = [(torch.randn(M, K, device=dev), torch.randn(K, N, device=dev)) for _ in range(sets)]
            lowered = [torch.randn(M, K), torch.randn(K, N)]
        dmodel = copy.deepcopy(model).to(dev)
        with torch.no_grad():
            ref = copy.deepcopy(dmodel).double()(*[x.double() for x in xs[0]])
            sg_err = (dmodel(*xs[0]).double() - ref).abs().max().item()
        row = {"shape": [M, N, K], "form": form, "input_sets": sets, "sgemm_err": sg_err}
        fns = {"sgemm": lambda *x, m=dmodel: m(*x)}
        for before in (True, False):
            fwd, launched = program(model, lowered, before, tmp, f"{form}_{M}_{N}_{K}")
            key = "before" if before else "now"
            with torch.no_grad():
                y = fwd(dmodel, *xs[0])
            err = (y.double() - ref).abs().max().item()
            row[f"{key}_err"], row[f"{key}_launches"] = err, launched
            if err > 2 * sg_err + 1e-6 * ref.abs().max().item():
                row[f"{key}_wrong"] = True
                print(f"{form} {M}x{N}x{K} {key}: WRONG, error {err:.3g} against SGEMM's {sg_err:.3g}", flush=True)
                continue
            fns[key] = lambda *x, fwd=fwd, m=dmodel: fwd(m, *x)
        for _ in range(args.rounds):
            for key, f in fns.items():
                with torch.no_grad():
                    t = graph_seconds([(lambda f=f, x=x: f(*x)) for x in xs])
                row.setdefault(f"{key}_us", []).append(t * 1e6)
        for key in ("before", "now"):
            if f"{key}_us" in row:
                row[f"{key}_x_sgemm"] = [s / o for s, o in zip(row["sgemm_us"], row[f"{key}_us"])]
        res["rows"].append(row)
        out.write_text(json.dumps(res, indent=1))     # after each row: a cut run keeps what it measured
        fmt = lambda xs, d: "/".join(f"{x:.{d}f}" for x in xs)  # noqa: E731
        print(f"{form} {M}x{N}x{K}: sgemm {fmt(row['sgemm_us'], 1)} us; x sgemm before "
              f"{fmt(row.get('before_x_sgemm', []), 2)} ({row['before_launches']}), now "
              f"{fmt(row.get('now_x_sgemm', []), 2)} ({row['now_launches']}); err now "
              f"{row['now_err']:.2g} sgemm {sg_err:.2g}", flush=True)
    print("wrote", out.relative_to(ROOT) if out.is_relative_to(ROOT) else out)


if __name__ == "__main__":
    main()
