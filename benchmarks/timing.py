"""The benchmarks' shared timer: a function's device time per call, as the median over replays of a CUDA
graph that calls it `reps` times (no launch gaps, no host time), after a warm-up call and one replay.

Inputs that fit in the L2 cache stay there from one call to the next, so a graph that calls one function on one
set of buffers times the cache, not the memory (METHOD.md: rotate among several input sets). `input_sets` says how
many sets make a rotation's footprint at least twice the L2; `graph_seconds` given a list of callables (one per
set) calls them in turn."""

from __future__ import annotations

import statistics


def l2_bytes() -> int:
    """The device's L2 cache in bytes (50 MB on an H100 SXM)."""
    import torch

    return int(torch.cuda.get_device_properties(0).L2_cache_size)


def input_sets(footprint_bytes: int, cap: int = 64) -> int:
    """How many sets of a call's buffers (`footprint_bytes` each: inputs and output) a rotation needs so that
    the bytes it touches between two calls on one set are at least twice the L2 (1 where one set is; the agent's
    rule, `tilepy_hip.graphs.rotation_count`, with a higher cap)."""
    from tilepy_hip.graphs import rotation_count

    if footprint_bytes <= 0:
        raise ValueError(f"footprint_bytes={footprint_bytes}: expected the bytes a call touches (> 0)")
    return rotation_count(footprint_bytes, l2_bytes(), cap)


def graph_seconds(fn, reps: int = 20, replays: int = 15) -> float:
    """Median seconds per call of `fn` over `replays` replays of a CUDA graph of `reps` calls. `fn` may be a list
    of callables (the same work on different input sets): the graph calls them in turn, at least once each."""
    import torch

    fns = list(fn) if isinstance(fn, (list, tuple)) else [fn]
    reps = max(reps, len(fns))
    for f in fns:
        f()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(reps):
            fns[i % len(fns)]()
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
