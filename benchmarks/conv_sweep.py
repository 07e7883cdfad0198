"""conv_igemm tile configurations against cuDNN at full size (benchmarks/conv.py's shapes), one run: each
configuration's median time (random data, after warm-up) and its ratio to cuDNN at the same precision.

    python benchmarks/conv_sweep.py [--runs 20] [--out DIR] [--prev MODULE] [--ncu]

--prev names a module holding an earlier conv_igemm (timed as "prev", the same way); --ncu launches each
configuration once on the first shape only (for `ncu -k regex:conv_igemm`)."""

# ruff: noqa: B023  (the closures are timed inside the loop iteration that defines them)
import argparse
import datetime
import importlib
import json
import multiprocessing as mp
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from conv import SHAPES, median_ms  # noqa: E402

import tilepy as tp  # noqa: E402

CONFIGS = {
    "128x32s3": dict(),
    "128x16s4": dict(BK=16, STAGES=4, SWIZZLE=tp.Swizzle(2, 2, 3)),
    "64x16s4": dict(BM=64, CONSUMERS=1, BK=16, STAGES=4, SWIZZLE=tp.Swizzle(2, 2, 3)),
    "64x32s3": dict(BM=64, CONSUMERS=1),
}


def _out_shape(shape):
    name, xs, ws, s, p, dl, g, tr, op = shape
    x, w = torch.empty(xs, device="meta"), torch.empty(ws, device="meta")
    fn = torch.nn.functional
    nsp = len(xs) - 2
    if tr:
        return tuple([fn.conv_transpose1d, fn.conv_transpose2d, fn.conv_transpose3d][nsp - 1](
            x, w, stride=s, padding=p, output_padding=op, groups=g, dilation=dl).shape)
    return tuple([fn.conv1d, fn.conv2d, fn.conv3d][nsp - 1](x, w, stride=s, padding=p, dilation=dl,
                                                            groups=g).shape)


def _params(mod, shape, cfg, split):
    name, xs, ws, s, p, dl, g, tr, op = shape
    cog = ws[1] if tr else ws[0] // g
    return {**mod.PRESETS["sm_90a"], **mod.tile_n(cog),
            **mod.geometry(xs, ws, _out_shape(shape), s, p, dl, g, tr), "SPLIT": split, **cfg}


def _build(job):
    modname, i, cfg, split = job
    import tilepy_hip
    mod = importlib.import_module(modname)
    try:
        tilepy_hip.compile(mod.conv_igemm, target="sm_90a", **_params(mod, SHAPES[i], cfg, split))
        return ""
    except Exception as e:
        return f"{type(e).__name__}: {str(e)[:300]}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--prev", default=None)
    ap.add_argument("--ncu", action="store_true")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    args = ap.parse_args()
    configs = [("stdlib_kernels.conv_igemm", c, CONFIGS[c]) for c in args.configs.split(",")]
    if args.prev:
        configs.insert(0, (args.prev, "prev", {}))
    shapes = range(1 if args.ncu else len(SHAPES))
    jobs = [(m, i, cfg, split) for i in shapes for m, _, cfg in configs for split in (False, True)
            if not args.ncu or not split]
    with mp.get_context("spawn").Pool(min(14, len(jobs))) as pool:
        errs = dict(zip([(j[0], j[1], str(j[2]), j[3]) for j in jobs], pool.map(_build, jobs, chunksize=1)))
    d = torch.device("cuda")
    rows = []
    for i in shapes:
        shape = SHAPES[i]
        name, xs, ws, s, p, dl, g, tr, op = shape
        torch.manual_seed(i)
        x, w = torch.randn(xs, device=d), torch.randn(ws, device=d)
        y = torch.empty(_out_shape(shape), device=d)
        fn = torch.nn.functional
        nsp = len(xs) - 2
        if tr:
            f = [fn.conv_transpose1d, fn.conv_transpose2d, fn.conv_transpose3d][nsp - 1]

            def call():
                return f(x, w, stride=s, padding=p, output_padding=op, groups=g, dilation=dl)
        else:
            f = [fn.conv1d, fn.conv2d, fn.conv3d][nsp - 1]

            def call():
                return f(x, w, stride=s, padding=p, dilation=dl, groups=g)
        ref64 = None if args.ncu else call_double(shape, x, w)
        for split in ((False,) if args.ncu else (False, True)):
            torch.backends.cudnn.allow_tf32 = not split
            t_ref = None if args.ncu else median_ms(call, args.runs)
            for modname, cname, cfg in configs:
                err = errs.get((modname, i, str(cfg), split))
                row = dict(name=name, config=cname, precision="fp32 (3xTF32)" if split else "tf32",
                           cudnn_ms=t_ref)
                if err:
                    row["error"] = err
                    rows.append(row)
                    print(f"{name:28s} {cname:9s} {row['precision'][:5]:5s} {err[:100]}", flush=True)
                    continue
                mod = importlib.import_module(modname)

                def ours():
                    mod.launch(x, w, y, s, p, dl, g, tr, split=split, **cfg)
                ours()
                torch.cuda.synchronize()
                if args.ncu:
                    continue
                rel = ((y.double() - ref64).abs().max() / ref64.abs().max()).item()
                t = median_ms(ours, args.runs)
                row.update(ours_ms=t, vs_cudnn=t_ref / t, rel_err=rel)
                rows.append(row)
                print(f"{name:28s} {cname:9s} {row['precision'][:5]:5s} cudnn {t_ref:8.3f} ms ours {t:8.3f} ms "
                      f"{t_ref / t:5.2f}x err {rel:.1e}", flush=True)
    if args.ncu:
        return
    torch.backends.cudnn.allow_tf32 = True
    dev = torch.cuda.get_device_name().replace(" ", "_")
    out = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, cudnn=torch.backends.cudnn.version(),
               date=datetime.date.today().isoformat(), runs=args.runs, rows=rows)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"conv-sweep-{dev}.json"), "w") as fh:
        json.dump(out, fh, indent=1)


def call_double(shape, x, w):
    name, xs, ws, s, p, dl, g, tr, op = shape
    fn = torch.nn.functional
    nsp = len(xs) - 2
    x, w = x.double(), w.double()
    if tr:
        return [fn.conv_transpose1d, fn.conv_transpose2d, fn.conv_transpose3d][nsp - 1](
            x, w, stride=s, padding=p, output_padding=op, groups=g, dilation=dl)
    return [fn.conv1d, fn.conv2d, fn.conv3d][nsp - 1](x, w, stride=s, padding=p, dilation=dl, groups=g)


if __name__ == "__main__":
    main()
