"""The benchmarks' shared timer: a function's device time per call, as the median over replays of a CUDA
graph that calls it `reps` times (no launch gaps, no host time), after a warm-up call and one replay."""

from __future__ import annotations

import statistics


def graph_seconds(fn, reps: int = 20, replays: int = 15) -> float:
    """Median seconds per call of `fn` over `replays` replays of a CUDA graph of `reps` calls."""
    import torch

    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / reps)
    return statistics.median(times)


def event_ms(fn, runs: int, warmup: int = 3) -> float:
    """Median milliseconds of `fn` over `runs` calls, each timed alone with CUDA events after `warmup` calls
    (launch gaps and host time included: what one eager call costs)."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
