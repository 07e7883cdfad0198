"""The lowering's whole-row kernels (softmax, log_softmax, LayerNorm, RMSNorm: `render_rows.render_row_fused`)
against eager PyTorch and a device copy of the same bytes, with the block size as the variable.

    python benchmarks/row_kernels.py [--threads 128,256,512,1024] [--json FILE]

Each case is lowered as the agent lowers it (`lower_model` -> `render_program`), then the kernel's
`@tp.kernel(threads=...)` is replaced by each block size tried (`default` is the lowering's own choice). Every
output is checked against eager in float64 before it is timed (median of CUDA-graph replays, benchmarks/timing.py).
Prints GB/s (one read of the input, one write of the output) and the ratio to eager and to the copy.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import re
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from argus_agent.lower import lower_model, render_program  # noqa: E402
from benchmarks.timing import graph_seconds  # noqa: E402


class LogSoftmax(torch.nn.Module):
    def forward(self, x):
        return torch.log_softmax(x, dim=1)


class Softmax(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


class Norm(torch.nn.Module):
    def __init__(self, n, dtype, rms=False):
        super().__init__()
        self.norm = (torch.nn.RMSNorm(n) if rms else torch.nn.LayerNorm(n)).to(dtype)

    def forward(self, x):
        return self.norm(x)


def cases():
    bf, f32 = torch.bfloat16, torch.float32
    return [
        ("log_softmax bf16 4096x16384", LogSoftmax(), (4096, 16384), bf),
        ("softmax f32 4096x16384", Softmax(), (4096, 16384), f32),
        ("softmax bf16 8192x4096", Softmax(), (8192, 4096), bf),
        ("layernorm bf16 8192x4096", Norm(4096, bf), (8192, 4096), bf),
        ("layernorm f32 8192x4096", Norm(4096, f32), (8192, 4096), f32),
        ("rmsnorm bf16 8192x4096", Norm(4096, bf, rms=True), (8192, 4096), bf),
        ("layernorm bf16 16384x1024", Norm(1024, bf), (16384, 1024), bf),
        ("softmax f32 32768x512", Softmax(), (32768, 512), f32),
    ]


def load(src: str, name: str):
    path = os.path.join(tempfile.mkdtemp(), f"{name}.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="default,128,256,512,1024")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import tilepy_hip

    rows = []
    torch.manual_seed(0)
    for label, model, shape, dtype in cases():
        x = torch.randn(*shape, dtype=dtype)
        try:
            src = render_program(lower_model(model, [x], "sm_90a"))
        except Exception as e:     # noqa: BLE001 - a case the lowering does not take is a line of the table
            print(f"{label}: not lowered: {type(e).__name__}: {str(e)[:160]}")
            continue
        xc, mc = x.cuda(), model.cuda()
        with torch.no_grad():
            ref = mc(xc)
            eager = graph_seconds(lambda mc=mc, xc=xc: mc(xc))
        copy = graph_seconds(lambda xc=xc: xc.clone())
        nbytes = 2 * x.numel() * x.element_size()
        print(f"{label}: eager {eager * 1e6:.1f} us ({nbytes / eager / 1e9:.0f} GB/s), copy {copy * 1e6:.1f} us")
        for t in args.threads.split(","):
            s = src if t == "default" else re.sub(r"@tp\.kernel\(threads=\d+", f"@tp.kernel(threads={t}", src)
            try:
                mod = load(s, "rowk_" + re.sub(r"\W", "_", label) + "_" + t)
                with torch.no_grad():
                    out = mod.argus_forward(mc, xc)
                    torch.cuda.synchronize()
                    err = float((out.double() - ref.double()).abs().max())
                    ours = graph_seconds(lambda mod=mod, mc=mc, xc=xc: mod.argus_forward(mc, xc))
                kern = [v for k, v in vars(mod).items() if k.startswith("k0") and hasattr(v, "ir")]
                res = tilepy_hip.compile(kern[0], target="sm_90a").resources if kern else {}
            except Exception as e:     # noqa: BLE001 - a block size the kernel cannot take is a row of the table
                print(f"  threads {t}: {type(e).__name__}: {str(e)[:160]}")
                continue
            row = dict(case=label, threads=t, us=ours * 1e6, gbs=nbytes / ours / 1e9, x_eager=eager / ours,
                       x_copy=copy / ours, err=err, regs=res.get("registers"), spills=res.get("spill_stores"),
                       eager_us=eager * 1e6, copy_us=copy * 1e6)
            rows.append(row)
            print(f"  threads {t:>7}: {ours * 1e6:7.1f} us {row['gbs']:6.0f} GB/s  x eager {row['x_eager']:.2f}  "
                  f"x copy {row['x_copy']:.2f}  regs {row['regs']} spills {row['spills']}  err {err:.2e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                           date=datetime.datetime.now(datetime.timezone.utc).isoformat(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
