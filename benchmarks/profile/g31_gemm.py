"""G31: benchmarks/gemm.py's rotated table (bf16 out against torch.matmul, f32 out against torch.mm(out_dtype=f32))
with gemm_hopper.launch's TMA_ONLY forms on and off, alternated in one process (`--order on,off,on`): each run a
JSON of its own (<name>-<variant><i>-<device>.json). The kernels of both variants are built first in parallel
processes (the policy with and without TMA_ONLY).

python3 benchmarks/profile/g31_gemm.py --order on,off,on --name gemm-g31 --out DIR --shapes 512,512,512 ...
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import gemm as bench  # noqa: E402  (benchmarks/gemm.py)
import torch  # noqa: E402

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--order", default="on,off,on")
    ap.add_argument("--shapes", nargs="+", required=True)
    ap.add_argument("--only", default="bf16out,f32out")
    ap.add_argument("--name", default="gemm-g31")
    ap.add_argument("--out", required=True)
    ap.add_argument("--precompile", type=int, default=14)
    args = ap.parse_args()
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes]
    if args.precompile:
        items = {}
        for M, N, K in shapes:
            for o in (tp.bf16, tp.f32):
                p = gemm_hopper.policy(M, N, K, o, fixup=True)
                for v in ((p, {k: x for k, x in p.items() if k != "TMA_ONLY"}) if "TMA_ONLY" in p else (p,)):
                    kernel, kp = gemm_hopper.plan_kernel(M, N, o, v, K)
                    items[(id(kernel), tuple(sorted((k, repr(x)) for k, x in kp.items())))] = (M, N, K, o, v)
        bench.build_all(list(items.values()), args.precompile)
    for i, variant in enumerate(args.order.split(",")):
        gemm_hopper.LAUNCH_TMA_ONLY = variant == "on"
        print(f"=== {variant} (run {i}): LAUNCH_TMA_ONLY={gemm_hopper.LAUNCH_TMA_ONLY}", flush=True)
        bench.main(["--only", args.only, "--name", f"{args.name}-{variant}{i}", "--out", args.out,
                    "--shapes", *args.shapes])
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
