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
          ((32, 64, 112, 112), 7, 1, 3), ((16, 128, 64, 64), 9, 1, 4), ((16, 96, 56, 56), 7, 2, 3),
          ((16, 576, 14, 14), 3, 1, 1), ((16, 960, 7, 7), 3, 1, 1), ((16, 144, 56, 56), 3, 2, 1),
          ((16, 1152, 7, 7), 5, 1, 2), ((16, 32, 112, 112), 3, 1, 1)]


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
        ref = torch.nn.functional.conv2d(x.double(), w.double(), None, s, p, groups=shape[1])
        errs = {}
        for staged in (False, True):
            y.zero_()
            dw.launch(x, w, y, s, (p, p), staged=staged)
            errs[staged] = (y.double() - ref).abs().max().item()

        def ours_call(x=x, w=w, y=y, s=s, p=p):
            dw.launch(x, w, y, s, (p, p), staged=False)

        def staged_call(x=x, w=w, y=y, s=s, p=p):
            dw.launch(x, w, y, s, (p, p), staged=True)

        def torch_call(x=x, w=w, s=s, p=p, c=shape[1]):
            torch.nn.functional.conv2d(x, w, None, s, p, groups=c)

        ours, staged_us, theirs = (1e3 * event_ms(f, 50, 5) for f in (ours_call, staged_call, torch_call))
        gbs = (x.numel() + y.numel()) * 4 / ours / 1e3
        row = dict(shape=shape, k=k, stride=s, ours_us=ours, staged_us=staged_us, torch_us=theirs,
                   ratio=theirs / ours, staged_ratio=theirs / staged_us, gb_s=gbs, max_err=errs[False],
                   staged_max_err=errs[True], staged_tile=dw.staged_tile(shape[1], oh, ow, (k, k), s, 1))
        rows.append(row)
        print(f"{str(shape):22s} k{k} s{s}: ours {ours:7.1f} us  staged {staged_us:7.1f}  torch {theirs:7.1f} us  "
              f"x{theirs / ours:5.2f} / staged x{theirs / staged_us:5.2f}  err {errs[False]:.1e} / {errs[True]:.1e}")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                                              "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
