"""The benchmarks' shared timer: a function's device time per call, as the median over replays of a CUDA
graph that calls it `reps` times (no launch gaps, no host time), after a warm-up call and one replay.

Inputs that fit in the L2 cache stay there from one call to the next, so a graph that calls one function on one
set of buffers times the cache, not the memory (METHOD.md: rotate among several input sets). `input_sets` says how
many sets make a rotation's footprint at least twice the L2; `graph_seconds` given a list of callables (one per
set) calls them in turn.

`paired_graph_seconds` times ours and a peer replay by replay (each function's graph replayed in turn), so that a
clock drift within the call moves both alike; its ratio is the median of the rounds' peer / ours."""

from __future__ import annotations

import statistics
from functools import partial
from typing import NamedTuple


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
    gr = graph_of(fn, reps)
    return statistics.median([replay_seconds(gr) for _ in range(replays)])


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


# ---- ours and a peer replay by replay ---------------------------------------------------------------------------
# The clock moves within a call (by up to 30% between two rows' timings, NOTES "Closing table, fourth 2026-11-25
# session"), so two functions each timed whole, one after the other, can differ by the drift alone. The paired timer
# builds one graph per function and replays them in turn, replay by replay (the order reversed every other round, so
# that neither always runs first), and gives each function's median beside the median of the rounds' ratios.
# The reversal also makes both replays of a round follow the same graph: a replay leaves a power / clock state that
# moves the next one (H100, fp32 4096^3, benchmarks/NOTES.md H1 call 2: SGEMM 7% and gemm_fp32 4-6% slower after a
# gemm_fp32 replay than after an SGEMM one), so a fixed order (each always after the other) favours the one that
# follows the lighter load (2.50 against the reversed rounds' 2.40 / 2.46 by parity). Where that state moves the
# replays, each function's times fall in two modes and the medians' ratio lands in either; report the pairs' median.


def graph_of(fn, reps: int = 20):
    """(graph, calls): a CUDA graph of `reps` calls of `fn` (a callable or a list called in turn, at least once
    each), after a warm-up call of each and one replay; graph_seconds' graph."""
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
    return graph, reps


def replay_seconds(gr) -> float:
    """Seconds per call of one replay of graph_of's (graph, calls), timed by CUDA events."""
    import torch

    graph, reps = gr
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / reps


def interleave(replayers, replays: int, reverse: bool = True) -> list:
    """Each of `replayers` (callables timing one replay, returning seconds) called once a round for `replays`
    rounds: in the given order in even rounds, reversed in odd ones (`reverse`; else always in the given order).
    Returns one list of times per replayer, the k-th entries all from round k."""
    if replays < 1:
        raise ValueError(f"replays={replays}: expected at least one round")
    times = [[] for _ in replayers]
    order = list(range(len(replayers)))
    for r in range(replays):
        for i in (order[::-1] if reverse and r % 2 else order):
            times[i].append(replayers[i]())
    return times


class Paired(NamedTuple):
    """Two functions timed replay by replay: each one's median seconds per call, and the median of the rounds'
    peer / ours ratios with their spread (min, quartiles, max)."""
    ours: float
    peer: float
    ratio: float
    ratio_min: float
    ratio_q1: float
    ratio_q3: float
    ratio_max: float
    rounds: int


def pair_stats(ours: list, peer: list) -> Paired:
    """Paired from two lists of times taken in the same rounds (entry k of each from round k)."""
    if len(ours) != len(peer) or not ours:
        raise ValueError(f"{len(ours)} and {len(peer)} times: expected the same rounds, at least one")
    ratios = sorted(p / o for o, p in zip(ours, peer))
    q1, _, q3 = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else ratios * 3
    return Paired(statistics.median(ours), statistics.median(peer), statistics.median(ratios), ratios[0], q1, q3,
                  ratios[-1], len(ratios))


def interleaved_graph_seconds(fns, reps: int = 20, replays: int = 30, reverse: bool = True) -> list:
    """Per-replay seconds per call of each of `fns` (each a callable or a list called in turn, as graph_seconds
    takes): one CUDA graph of `reps` calls each, the graphs replayed in turn `replays` rounds (interleave)."""
    graphs = [graph_of(f, reps) for f in fns]
    return interleave([partial(replay_seconds, gr) for gr in graphs], replays, reverse)


def paired_graph_seconds(fn_ours, fn_peer, reps: int = 20, replays: int = 30, reverse: bool = True) -> Paired:
    """Ours and the peer (each a callable or a list of callables on rotated input sets, as graph_seconds takes)
    timed replay by replay: `replays` rounds of one replay of each graph of `reps` calls."""
    return pair_stats(*interleaved_graph_seconds([fn_ours, fn_peer], reps, replays, reverse))
