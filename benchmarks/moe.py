"""The tilepy MoE layer (stdlib_kernels/moe.py) against its peers in one run, bf16:

* `grouped_mm`: torch routing (softmax, topk, renormalize), argsort permutation, torch._grouped_mm for gate/up,
  SiLU-and-mul, torch._grouped_mm for down, weighted index_add combine;
* `loop`: the same routing and permutation, then a per-expert torch.matmul loop (counts read on the host).

    python benchmarks/moe.py [--quick] [--out DIR]

Shapes: Mixtral-like (8 experts, top-2, hidden 4096, ffn 14336) and fine-grained (64 experts, top-6, hidden
2048, ffn 1408), 16 to 16384 tokens, random router logits. Every method starts from the router logits and ends
with the combined (T, H) output. Figures: median time of CUDA-event-timed batches after a warm-up, TFLOP/s of
the expert GEMMs (6 T k H F flops), the ratio to the best peer in the same run, our GEMM rows wasted on
capacity padding. Outputs are checked against a float64 reference (small token counts) and against each other.
Writes <out>/moe-<device>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tilepy_hip  # noqa: E402
from stdlib_kernels import moe  # noqa: E402

CONFIGS = {"mixtral": dict(e=8, k=2, h=4096, f=14336), "fine": dict(e=64, k=6, h=2048, f=1408)}
TOKENS = [16, 128, 1024, 4096, 16384]


def timed(fn, target_s: float = 0.04, batches: int = 5) -> float:
    """Median seconds per call; each batch runs about `target_s` of calls, after a warm-up."""
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    reps = max(1, min(50, int(target_s / max(time.perf_counter() - t0, 1e-6))))
    times = []
    for _ in range(batches):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / reps)
    return statistics.median(times)


def rel(a, b) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


def _route(logits, k):
    p = torch.softmax(logits.float(), dim=1)
    w, ids = torch.topk(p, k, dim=1)
    return w / w.sum(dim=1, keepdim=True), ids


def _permute(ids, k):
    flat = ids.flatten()
    order = torch.argsort(flat, stable=True)
    return flat, order, order // k


def peer_grouped(x, logits, w13, w2, k):
    t, h = x.shape
    e, f = w2.shape[0], w2.shape[1]
    w, ids = _route(logits, k)
    flat, order, tok = _permute(ids, k)
    offs = torch.cumsum(torch.bincount(flat, minlength=e), 0).to(torch.int32)
    hh = torch._grouped_mm(x[tok], w13, offs=offs)
    y = torch._grouped_mm(F.silu(hh[:, :f]) * hh[:, f:], w2, offs=offs)
    out = torch.zeros(t, h, dtype=torch.float32, device=x.device)
    out.index_add_(0, tok, y.float() * w.flatten()[order, None])
    return out.to(x.dtype)


def peer_loop(x, logits, w13, w2, k):
    t, h = x.shape
    e, f = w2.shape[0], w2.shape[1]
    w, ids = _route(logits, k)
    flat, order, tok = _permute(ids, k)
    counts = torch.bincount(flat, minlength=e).tolist()
    xs = x[tok]
    ys = torch.empty_like(xs)
    s = 0
    for ex, n in enumerate(counts):
        if n:
            hh = xs[s:s + n] @ w13[ex]
            ys[s:s + n] = (F.silu(hh[:, :f]) * hh[:, f:]) @ w2[ex]
        s += n
    out = torch.zeros(t, h, dtype=torch.float32, device=x.device)
    out.index_add_(0, tok, ys.float() * w.flatten()[order, None])
    return out.to(x.dtype)


def col_major(w):
    return w.transpose(-2, -1).contiguous().transpose(-2, -1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="three token counts")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--tokens", default="", help="comma list of token counts (default: TOKENS, or --quick's)")
    ap.add_argument("--suffix", default="", help="the JSON's name: moe-<device>-<suffix>.json")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    res = {"device": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
           "tilepy_hip": tilepy_hip.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"), "presets": {k: {n: repr(v) for n, v in p.items()}
                                                                   for k, p in moe.PRESETS.items()},
           "results": {}}
    g = torch.Generator(device=dev).manual_seed(int.from_bytes(os.urandom(4), "little"))
    tokens = [16, 1024, 16384] if args.quick else TOKENS
    if args.tokens:
        tokens = [int(x) for x in args.tokens.split(",")]
    for cname, c in CONFIGS.items():
        e, k, h, f = c["e"], c["k"], c["h"], c["f"]
        w13 = (torch.randn(e, h, 2 * f, device=dev, generator=g) / h ** 0.5).bfloat16()
        w2 = (torch.randn(e, f, h, device=dev, generator=g) / f ** 0.5).bfloat16()
        cm = {}                                     # column-major weight copies, if the grouped_mm peer needs them
        for t in tokens:
            x = torch.randn(t, h, device=dev, generator=g).bfloat16()
            logits = torch.randn(t, e, device=dev, generator=g)
            ours, parts = moe.moe(x, logits, w13, w2, k, return_parts=True)
            row = {"config": cname, **c, "tokens": t, "capacity": parts["capacity"], "waste": parts["waste"]}
            if t <= 1024:
                ref, _, _ = moe.reference(x, logits, w13, w2, k)
                row["rel_err_vs_f64"] = rel(ours, ref)
            flops = 6 * t * k * h * f
            a = (x, logits, w13, w2, k)
            peers = {}
            for pname, fn in (("grouped_mm", peer_grouped), ("loop", peer_loop)):
                args_ = a
                try:
                    try:
                        row[f"rel_diff_vs_{pname}"] = rel(ours, fn(*args_))
                    except RuntimeError:
                        if pname != "grouped_mm":
                            raise
                        # torch._grouped_mm may want B column-major: the weights laid out once, outside timing
                        if not cm:
                            cm.update(w13=col_major(w13), w2=col_major(w2))
                        args_ = (x, logits, cm["w13"], cm["w2"], k)
                        row[f"rel_diff_vs_{pname}"] = rel(ours, fn(*args_))
                        row["grouped_mm_weights"] = "column-major copies"
                    peers[pname] = timed(lambda fn=fn, a=args_: fn(*a))
                except Exception as ex:  # a peer that cannot run this shape is reported, not hidden
                    row[f"{pname}_error"] = f"{type(ex).__name__}: {ex}"[:300]
            t_ours = timed(lambda a=a: moe.moe(*a))
            row.update(seconds=t_ours, TFLOPs=flops / t_ours / 1e12)
            for pname, tp_ in peers.items():
                row[f"{pname}_seconds"] = tp_
                row[f"{pname}_TFLOPs"] = flops / tp_ / 1e12
            if peers:
                best = min(peers, key=peers.get)
                row.update(best_peer=best, ratio_to_best_peer=peers[best] / t_ours)
            res["results"][f"{cname}_T{t}"] = row
            print(f"{cname:8s} T={t:6d} ours {t_ours * 1e3:8.3f} ms {row['TFLOPs']:6.1f} TF | "
                  + " | ".join(f"{p} {s * 1e3:8.3f} ms" for p, s in peers.items())
                  + f" | vs best {row.get('ratio_to_best_peer', float('nan')):.2f}x, waste {row['waste']:.1%}"
                  + (f", err {row['rel_err_vs_f64']:.1e}" if "rel_err_vs_f64" in row else ""), flush=True)
        del w13, w2, cm
    Path(args.out).mkdir(parents=True, exist_ok=True)
    suffix = args.suffix or ("quick" if args.quick else "")
    path = Path(args.out) / f"moe-{name}{'-' + suffix if suffix else ''}.json"
    path.write_text(json.dumps(res, indent=1))
    print("results in", path)
    return res


if __name__ == "__main__":
    main()
