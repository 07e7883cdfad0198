"""Where a lowered problem's time goes, kernel by kernel, on the GPU: the lowered program and eager PyTorch,
each run under torch.profiler after warm-up, the CUDA kernels' summed times printed (and written as JSON).

    python benchmarks/conv_profile.py tests/problems/level1/186_conv2d_same_reflect_padding.py [...] --out DIR

Used to read what a slow convolution problem spends outside the GEMM (padding copies, the channels-last
copy, weight reordering); the figures are per call, summed over --runs profiled calls / runs.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
warnings.filterwarnings("ignore")


def kernel_times(fn, runs: int) -> dict:
    """{kernel name: microseconds per call} of the CUDA kernels `fn` launches."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            fn()
        torch.cuda.synchronize()
    out = collections.defaultdict(float)
    for e in prof.events():
        if e.device_type.name == "CUDA":
            out[e.name[:90]] += e.device_time / runs
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def main():
    import torch
    from suite import _load_source

    from argus_agent.lower.candidate import lower_problem
    from argus_agent.problem import load_problem

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    for f in args.files:
        path = Path(f)
        problem = load_problem(path, cpu=False)
        first = lower_problem(problem, "sm_90a", None)
        mod = _load_source(first.source, path.stem)
        model = problem.make_model().cuda()
        inputs = problem.draw_inputs(problem.shapes(1)[0], torch.Generator().manual_seed(7), "cuda")
        with torch.no_grad():
            ours = kernel_times(lambda m=mod, f=model, xs=inputs: m.argus_forward(f, *xs), args.runs)
            eager = kernel_times(lambda f=model, xs=inputs: f(*xs), args.runs)
        row = {"name": f"{path.parent.name}/{path.stem}", "ours_us": ours, "eager_us": eager,
               "ours_total_us": sum(ours.values()), "eager_total_us": sum(eager.values())}
        rows.append(row)
        print(f"== {row['name']}: ours {row['ours_total_us']:.0f} us, eager {row['eager_total_us']:.0f} us")
        for k, v in list(ours.items())[:8]:
            print(f"   ours  {v:9.1f}  {k}")
        for k, v in list(eager.items())[:4]:
            print(f"   eager {v:9.1f}  {k}")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                              "date": datetime.date.today().isoformat(),
                                              "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
