"""Where a lowered problem's GPU time goes, kernel by kernel, beside eager PyTorch's kernels.

    python benchmarks/profile_lowered.py tests/problems/level3/009_vit_encoder.py [...] [--top 10] [--json F]

For each problem file: lower it for sm_90a at its own sizes (as benchmarks/suite.py does), check the output
against eager at the lowering's tolerance, then run eager and the lowered program `--iters` times each under
torch.profiler and print, for each side, the device time per call summed over all kernels and the `--top`
kernels by device time (name, calls per forward, microseconds per forward, share).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
warnings.filterwarnings("ignore")


def kernel_times(fn, iters: int) -> dict:
    """{kernel name: (calls, device microseconds)} per call of `fn`."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    out = collections.defaultdict(lambda: [0, 0.0])
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA and ev.device_time_total > 0:
            out[ev.name][0] += 1
            out[ev.name][1] += ev.device_time_total
    return {k: (c / iters, us / iters) for k, (c, us) in out.items()}


def show(label: str, times: dict, top: int) -> list:
    total = sum(us for _, us in times.values())
    print(f"  {label}: {total:9.1f} us per forward, {sum(c for c, _ in times.values()):.0f} kernels")
    rows = sorted(times.items(), key=lambda kv: -kv[1][1])
    for name, (calls, us) in rows[:top]:
        print(f"    {us:9.1f} us {100 * us / max(total, 1e-9):5.1f}%  x{calls:<4.0f} {name[:110]}")
    return [dict(name=n, calls=c, us=u) for n, (c, u) in rows]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("problems", nargs="+")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import torch

    from argus_agent.lower.candidate import lower_problem
    from argus_agent.problem import load_problem
    from benchmarks.suite import _load_source

    result = []
    for path in args.problems:
        print(path)
        try:
            problem = load_problem(path, cpu=False)
            first = lower_problem(problem, "sm_90a")
            mod = _load_source(first.source, Path(path).stem)
            model = problem.make_model().cuda()
            inputs = problem.draw_inputs(problem.shapes(1)[0], torch.Generator().manual_seed(7), "cuda")
            with torch.no_grad():
                ref, out = model(*inputs), mod.argus_forward(model, *inputs)
                refs, outs = (ref if isinstance(ref, tuple) else (ref,)), (out if isinstance(out, tuple) else (out,))
                ok = all(torch.allclose(o.double(), r.double(), atol=first.tol, rtol=first.tol, equal_nan=True)
                         for o, r in zip(outs, refs))
                print(f"  correct {ok} (tol {first.tol}, {len(first.program.kernels)} lowered kernels)")
                eager = kernel_times(lambda m=model, xs=inputs: m(*xs), args.iters)
                ours = kernel_times(lambda f=mod.argus_forward, m=model, xs=inputs: f(m, *xs), args.iters)
        except Exception as e:   # noqa: BLE001 - one problem's failure is a line, not the end of the run
            print(f"  error: {type(e).__name__}: {str(e)[:300]}")
            continue
        result.append(dict(problem=path, correct=ok, eager=show("eager", eager, args.top),
                           ours=show("ours", ours, args.top)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, rows=result), f, indent=1)


if __name__ == "__main__":
    main()
