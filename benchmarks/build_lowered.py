"""Build (NVRTC, no GPU needed) every kernel the lowered programs launch, with the constexprs they launch with:
the generated host program runs on meta tensors with `launch` replaced by a recorder that compiles the kernel
for sm_90a and reports registers, spills and HGMMA counts. Catches what only the renderer sees (layout
conversions inside warp roles, resource limits) before a GPU is at hand.

    python benchmarks/build_lowered.py tests/problems/level2/007_*.py ... [--jobs 8] [--only-templates]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import re
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def build_problem(args) -> dict:
    path, only_templates = args
    warnings.filterwarnings("ignore")
    import torch

    import tilepy_hip
    from argus_agent.lower.candidate import lower_problem
    from argus_agent.problem import load_problem

    row = {"name": f"{Path(path).parent.name}/{Path(path).stem}", "kernels": [], "error": None}
    try:
        problem = load_problem(path, cpu=False)
        first = lower_problem(problem, "sm_90a")
        import importlib.util
        import tempfile

        src = Path(tempfile.mkdtemp(prefix="argus-build-")) / f"cand_{Path(path).stem}.py"
        src.write_text(first.source)
        spec = importlib.util.spec_from_file_location(src.stem, src)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        ns = vars(mod)

        def launch(kernel, grid, *args, **constexprs):
            if only_templates and not kernel.name.startswith(("conv_igemm", "gemm_fp32")):
                return
            ck = tilepy_hip.compile(kernel, "sm_90a", **constexprs)
            sass = ck.sass()
            row["kernels"].append({"kernel": kernel.name, "registers": ck.resources.get("registers"),
                                   "spill_stores": ck.resources.get("spill_stores"),
                                   "hgmma": len(re.findall(r"\bHGMMA", sass)),
                                   "ldl": len(re.findall(r"\bLDL\b", sass))})

        ns["launch"] = launch
        model = problem.make_model().to("meta")
        inputs = [torch.empty(x.shape, dtype=x.dtype, device="meta") if isinstance(x, torch.Tensor) else x
                  for x in problem.base_inputs]
        ns["argus_forward"](model, *inputs)
    except Exception as e:  # a problem that fails is a row with its error
        row["error"] = f"{type(e).__name__}: {str(e).strip()[:400]}"
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--only-templates", action="store_true", help="build only the GEMM / convolution templates")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        rows = pool.map(build_problem, [(p, args.only_templates) for p in args.paths])
    for r in rows:
        ks = ", ".join(f"{k['kernel']} r{k['registers']} spill{k['spill_stores']} hgmma{k['hgmma']}"
                       for k in r["kernels"])
        print(f"{r['name']:50s} {'ERROR ' + r['error'] if r['error'] else ks}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
