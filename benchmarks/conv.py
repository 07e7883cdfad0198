"""Implicit-GEMM convolution (stdlib conv_igemm) against torch's (cuDNN) at full size on the GPU: fp32 with TF32
(PyTorch's default for convolutions: cuDNN TF32 vs one TF32 pass) and fp32 without (cuDNN fp32 vs 3xTF32).
Median of --runs timed calls after warm-up, random data; JSON into benchmarks/results/ (or --out).

    python benchmarks/conv.py [--runs 20] [--out DIR] [--only NAME...] [--taps] [--tag SUFFIX]

Rows conv_tma takes (`conv_tma.applies`) also time it (tma_ms, tma_ratio: the channels-last copy included).
Strided transposed rows also time the one-GEMM form (PHASED=False: every tap gathered, the stride's holes
masked) beside conv_igemm.launch's phases.
"""

import argparse
import datetime
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from stdlib_kernels import conv_igemm, conv_tma  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from timing import event_ms  # noqa: E402

TAPS = False
PRECISIONS = (True, False)     # cudnn.allow_tf32 on (one TF32 pass) and off (3xTF32); --tf32-only: the first
# conv_tma tile configurations timed beside its policy's: 64-pixel tiles, one consumer warpgroup, 3 stages
# (~100 registers x 256 threads, ~98 KB: two blocks per SM, one's epilogue overlapping the other's main loop)
TMA_ALT = {"b64s3": dict(BM=64, CONSUMERS=1, STAGES=3)}
SHAPES = [  # name, x, w, stride, padding, dilation, groups, transposed, output_padding
    ("l1_090 conv2d 64->128 3x3", (16, 64, 128, 128), (128, 64, 3, 3), 1, 1, 1, 1, False, 0),
    ("l1_095 conv2d 1x1 256->512", (16, 256, 64, 64), (512, 256, 1, 1), 1, 0, 1, 1, False, 0),
    ("l1_092 conv2d 3x7", (8, 64, 128, 256), (64, 64, 3, 7), 1, (1, 3), 1, 1, False, 0),
    ("l2_007 conv2d 32->64 3x3", (64, 32, 128, 128), (64, 32, 3, 3), 1, 0, 1, 1, False, 0),
    ("l1_091 conv2d s2 d2", (16, 32, 256, 256), (64, 32, 3, 3), 2, 2, 2, 1, False, 0),
    ("l1_093 conv2d g4", (16, 128, 64, 64), (256, 32, 3, 3), 1, 1, 1, 4, False, 0),
    ("l1_089 conv1d k5", (32, 64, 16384), (128, 64, 5), 1, 2, 1, 1, False, 0),
    ("l1_096 conv3d", (8, 32, 32, 64, 64), (64, 32, 3, 3, 3), 1, 1, 1, 1, False, 0),
    ("l1_099 convT2d s2", (16, 64, 128, 128), (64, 32, 3, 3), 2, 1, 1, 1, True, 1),
    ("l2_003 convT3d s2", (8, 32, 32, 64, 64), (32, 16, 3, 3, 3), 2, 1, 1, 1, True, 0),
]


def median_ms(fn, runs):
    return event_ms(fn, runs)


def bench(shape, d, runs):
    name, xs, ws, s, p, dl, g, tr, op = shape
    x, w = torch.randn(xs, device=d), torch.randn(ws, device=d)
    fn = torch.nn.functional
    nsp = len(xs) - 2
    if tr:
        ref_fn = [fn.conv_transpose1d, fn.conv_transpose2d, fn.conv_transpose3d][nsp - 1]

        def call():
            return ref_fn(x, w, stride=s, padding=p, output_padding=op, groups=g, dilation=dl)
    else:
        ref_fn = [fn.conv1d, fn.conv2d, fn.conv3d][nsp - 1]

        def call():
            return ref_fn(x, w, stride=s, padding=p, dilation=dl, groups=g)
    y = torch.empty_like(call())
    rows = []
    for tf32 in PRECISIONS:
        torch.backends.cudnn.allow_tf32 = tf32
        ref = call()

        def ours(split=not tf32):
            conv_igemm.launch(x, w, y, s, p, dl, g, tr, split=split)
        ours()
        torch.cuda.synchronize()
        err = ((y - ref).abs().max() / ref.abs().max()).item()
        t_ref, t_ours = median_ms(call, runs), median_ms(ours, runs)
        row = dict(name=name, precision="tf32" if tf32 else "fp32 (3xTF32 vs cuDNN fp32)", torch_ms=t_ref,
                   ours_ms=t_ours, ratio=t_ref / t_ours, rel_err=err)
        if TAPS and not (tr and max([s] if isinstance(s, int) else s) > 1):   # taps-major k (TAPS=True) too
            def taps(split=not tf32):
                conv_igemm.launch(x, w, y, s, p, dl, g, tr, split=split, TAPS=True)
            taps()
            torch.cuda.synchronize()
            row.update(taps_ms=median_ms(taps, runs), taps_rel_err=((y - ref).abs().max() / ref.abs().max()).item())
            row["taps_ratio"] = t_ref / row["taps_ms"]
        if conv_tma.applies(xs, ws, s, dl, g, tr):   # the TMA-fed kernel on a channels-last copy
            def tma(split=not tf32):
                conv_tma.launch(x, w, y, s, p, dl, g, split=split)
            y.fill_(float("nan"))
            tma()
            torch.cuda.synchronize()
            row.update(tma_ms=median_ms(tma, runs), tma_rel_err=((y - ref).abs().max() / ref.abs().max()).item())
            row["tma_ratio"] = t_ref / row["tma_ms"]
            for alt, cx in TMA_ALT.items():     # other conv_tma tiles (keys tma_<alt>_ms, tma_<alt>_ratio)
                def tma_alt(split=not tf32, cx=cx):
                    conv_tma.launch(x, w, y, s, p, dl, g, split=split, **cx)
                y.fill_(float("nan"))
                tma_alt()
                torch.cuda.synchronize()
                row[f"tma_{alt}_ms"] = median_ms(tma_alt, runs)
                row[f"tma_{alt}_rel_err"] = ((y - ref).abs().max() / ref.abs().max()).item()
                row[f"tma_{alt}_ratio"] = t_ref / row[f"tma_{alt}_ms"]
        if tr and max([s] if isinstance(s, int) else s) > 1:   # launch runs it PHASED; the one-GEMM form too
            def one_gemm(split=not tf32):
                conv_igemm.launch(x, w, y, s, p, dl, g, tr, split=split, PHASED=False)
            one_gemm()
            torch.cuda.synchronize()
            row.update(one_gemm_ms=median_ms(one_gemm, runs),
                       one_gemm_rel_err=((y - ref).abs().max() / ref.abs().max()).item())
            row["one_gemm_ratio"] = t_ref / row["one_gemm_ms"]
        rows.append(row)
        print(f"{name:28s} {row['precision'][:5]:5s} torch {t_ref:8.3f} ms  ours {t_ours:8.3f} ms  "
              f"{row['ratio']:.2f}x  err {err:.2e}" + (f"  tma {row['tma_ms']:8.3f} ms {row['tma_ratio']:.2f}x "
                                                      f"err {row['tma_rel_err']:.2e}" if "tma_ms" in row else "")
              + "".join(f"  {a} {row[f'tma_{a}_ms']:8.3f} ms {row[f'tma_{a}_ratio']:.2f}x" for a in TMA_ALT
                        if f"tma_{a}_ms" in row),
              flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--only", nargs="*", default=None, help="rows whose name starts with one of these")
    ap.add_argument("--tag", default="", help="suffix of the JSON's name")
    ap.add_argument("--taps", action="store_true", help="also time TAPS=True (taps-major k) on other rows")
    ap.add_argument("--tf32-only", action="store_true", help="only the TF32 rows (PyTorch's default)")
    args = ap.parse_args()
    global TAPS, PRECISIONS
    TAPS = args.taps
    PRECISIONS = (True,) if args.tf32_only else (True, False)
    d = torch.device("cuda")
    rows = []
    for shape in SHAPES:
        if args.only and not any(shape[0].startswith(o) for o in args.only):
            continue
        rows += bench(shape, d, args.runs)
    torch.backends.cudnn.allow_tf32 = True
    dev = torch.cuda.get_device_name().replace(" ", "_")
    out = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, cudnn=torch.backends.cudnn.version(),
               date=datetime.date.today().isoformat(), rows=rows)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"conv{args.tag}-{dev}.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
