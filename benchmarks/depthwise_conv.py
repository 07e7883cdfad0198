"""stdlib depthwise_conv2d against torch's depthwise conv2d (cuDNN / ATen, fp32) on the H100: median of CUDA-event
timings after warm-up, both on the same random inputs, outputs checked against float64 first.

    python benchmarks/depthwise_conv.py [--out benchmarks/results/depthwise-<device>.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

SHAPES = [((16, 96, 56, 56), 7, 1, 3), ((16, 192, 28, 28), 7, 1, 3), ((16, 384, 14, 14), 7, 1, 3),
          ((32, 64, 112, 112), 7, 1, 3), ((16, 128, 64, 64), 9, 1, 4), ((16, 96, 56, 56), 7, 2, 3)]


def main():
    import torch
    from timing import event_ms

    from stdlib_kernels import depthwise_conv as dw

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    for shape, k, s, p in SHAPES:
        x = torch.randn(shape, device="cuda")
        w = torch.randn(shape[1], 1, k, k, device="cuda")
        oh = dw.out_size(shape[2], k, s, p)
        ow = dw.out_size(shape[3], k, s, p)
        y = torch.empty(shape[0], shape[1], oh, ow, device="cuda")
        dw.launch(x, w, y, s, (p, p))
        ref = torch.nn.functional.conv2d(x.double(), w.double(), None, s, p, groups=shape[1])
        err = (y.double() - ref).abs().max().item()
        def ours_call(x=x, w=w, y=y, s=s, p=p):
            dw.launch(x, w, y, s, (p, p))

        def torch_call(x=x, w=w, s=s, p=p, c=shape[1]):
            torch.nn.functional.conv2d(x, w, None, s, p, groups=c)

        ours, theirs = (1e3 * event_ms(f, 50, 5) for f in (ours_call, torch_call))
        gbs = (x.numel() + y.numel()) * 4 / ours / 1e3
        row = dict(shape=shape, k=k, stride=s, ours_us=ours, torch_us=theirs, ratio=theirs / ours, gb_s=gbs,
                   max_err=err)
        rows.append(row)
        print(f"{str(shape):22s} k{k} s{s}: ours {ours:8.1f} us  torch {theirs:8.1f} us  x{theirs / ours:5.2f}  "
              f"{gbs:6.0f} GB/s  err {err:.1e}")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                                              "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
