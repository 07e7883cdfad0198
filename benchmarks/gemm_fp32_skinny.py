"""gemm_fp32 (3xTF32, f32 in/out) on skinny and small shapes: the split-K policy against the unsplit preset and
64-row tiles with one consumer warpgroup, all against cuBLAS SGEMM
(torch.matmul f32, TF32 off) in the same run. Each form is checked against float64 first (NaN-poisoned output),
then timed: the GEMM alone (B split beforehand, A split in registers where K % 4 == 0; split-K's partial sum
included), median of CUDA-graph replays (benchmarks/timing.py graph_seconds).

    python benchmarks/gemm_fp32_skinny.py [--shapes M,N,K ...] [--out DIR]
"""

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
from timing import graph_seconds  # noqa: E402

import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp32  # noqa: E402

SHAPES = [(64, 4096, 4096), (128, 4096, 4096), (256, 4096, 4096), (1024, 1024, 1024)]
BM64 = dict(BM=64, CONSUMERS=1)


def forms(M, N, K):
    """The unsplit preset, the policy, and 64-row tiles (one consumer warpgroup) at the policy's split and twice
    it for M <= 128 (twice the tiles: the split that fills the SMs halves)."""
    pol = gemm_fp32.policy(M, N, K).get("KSPLIT", 1)
    out = {"preset": {"KSPLIT": 1}, "policy": {"KSPLIT": pol}}
    if M <= 128:
        for ks in sorted({max(1, pol // 2), pol}):
            out[f"bm64_ksplit{ks}"] = {**BM64, "KSPLIT": ks}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="*", default=None)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes] if args.shapes else SHAPES
    props = torch.cuda.get_device_properties(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator(device="cuda").manual_seed(17)
    res = {"device": props.name, "torch": torch.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"), "rows": []}
    for M, N, K in shapes:
        a = torch.randn(M, K, device="cuda", generator=g)
        b = torch.randn(K, N, device="cuda", generator=g)
        ref = a.double() @ b.double()
        bh, bl = gemm_fp32.split(b, "kn")
        t_sgemm = graph_seconds(lambda a=a, b=b: torch.matmul(a, b), 20, 15)
        e_sgemm = float((torch.matmul(a, b).double() - ref).norm() / ref.norm())
        row = {"shape": [M, N, K], "sgemm_us": t_sgemm * 1e6, "sgemm_rel_err": e_sgemm,
               "split_b_us": graph_seconds(lambda b=b: gemm_fp32.split(b, "kn"), 20, 15) * 1e6, "forms": {}}
        for name, kw in forms(M, N, K).items():
            c = torch.full((M, N), float("nan"), device="cuda")
            try:
                gemm_fp32.launch_raw(a, (bh, bl), c, **kw)
                torch.cuda.synchronize()
            except Exception as e:  # a form that does not build: say so, keep going
                row["forms"][name] = {"error": str(e).splitlines()[0][:200]}
                print(f"{M}x{N}x{K} {name}: {row['forms'][name]['error']}", flush=True)
                continue
            err = float((c.double() - ref).norm() / ref.norm()) if torch.isfinite(c).all() else float("inf")
            t = graph_seconds(lambda a=a, s=(bh, bl), c=c, kw=kw: gemm_fp32.launch_raw(a, s, c, **kw), 20, 15)
            row["forms"][name] = {"constexprs": kw, "us": t * 1e6, "ratio": t_sgemm / t, "rel_err": err,
                                  "error_no_worse": err <= 2 * e_sgemm}
            print(f"{M}x{N}x{K:<6} {name:14} {t * 1e6:8.1f} us  x SGEMM {t_sgemm / t:5.2f} (SGEMM {t_sgemm * 1e6:7.1f})"
                  f"  err {err:.1e} (SGEMM {e_sgemm:.1e})", flush=True)
        print(f"{M}x{N}x{K:<6} split B alone {row['split_b_us']:.1f} us", flush=True)
        res["rows"].append(row)
        torch.cuda.empty_cache()
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    out = Path(args.out) / f"gemm-fp32-skinny-{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    print("wrote", out)


if __name__ == "__main__":
    main()
