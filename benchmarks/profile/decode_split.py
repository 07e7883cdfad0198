"""Where the split-KV decode's extra time goes: the decode kernel, the merge kernel and the gap between them,
from CUPTI kernel timestamps (torch.profiler) over CUDA-graph replays, for a shape that runs with splits
(4 x 32768, D 128: 4 splits + merge) and one that runs without (16 x 8192: one split, no merge), the same work per
block (128 blocks of 64 key tiles). Prints one line per shape: median kernel durations and gaps in us.

    python3 benchmarks/profile/decode_split.py
"""

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from stdlib_kernels import attention  # noqa: E402


def run(b, h, hkv, skv, d=128, reps=20):
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(b * h, 1, d, device="cuda", generator=g).bfloat16()
    k = torch.randn(b * hkv, skv, d, device="cuda", generator=g).bfloat16()
    v = torch.randn(b * hkv, skv, d, device="cuda", generator=g).bfloat16()
    o = torch.empty_like(q)
    lse = torch.empty(b * h, 1, device="cuda")
    attention.decode(q, k, v, o, lse)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            attention.decode(q, k, v, o, lse)
    graph.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        graph.replay()
        torch.cuda.synchronize()
    ev = sorted((e for e in prof.events() if e.device_type.name == "CUDA" and "attention" in e.name),
                key=lambda e: e.time_range.start)
    dur = {}
    for e in ev:
        dur.setdefault(e.name, []).append(e.time_range.end - e.time_range.start)
    gaps = [b_.time_range.start - a.time_range.end for a, b_ in zip(ev, ev[1:])]
    period = (ev[-1].time_range.end - ev[0].time_range.start) / reps
    splits = attention.decode_splits(b * hkv, h // hkv, skv, d)
    print(f"{b}x{skv} splits {splits}: per call {period:.1f} us; " + "; ".join(
        f"{n} {statistics.median(x):.1f} us" for n, x in dur.items())
        + f"; gaps between kernels median {statistics.median(gaps):.1f} us (max {max(gaps):.1f})", flush=True)


run(4, 32, 8, 32768)
run(16, 32, 8, 8192)
run(8, 32, 8, 16384, d=64)
