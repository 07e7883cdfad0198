"""CUDA graphs of host programs: capture a function of tensors once per input signature, replay it after.

A host program that only allocates, reshapes and launches (no data-dependent shapes, no reads of device values
on the host) is static: its launches depend on the inputs' shapes alone. Capturing it into a CUDA graph turns
each later call into copies of the inputs into the graph's own buffers and one `cudaGraphLaunch`, however many
kernels it holds.

    fwd = tilepy_hip.graphs.GraphedFunction(lambda x, w: argus_forward(model, x, w))
    out = fwd(x, w)          # first call with these shapes: runs eagerly once (loads modules), then captures
    out = fwd(x2, w2)        # same shapes: copies x2, w2 in and replays; `out` is overwritten by the next replay

A function whose capture fails (it synchronizes, reads a device value with .item(), or does something else a
capture forbids) raises `GraphCaptureError` naming why; `GraphedFunction` then runs it eagerly (`.why` says why).
"""

from __future__ import annotations

from dataclasses import dataclass


class GraphCaptureError(RuntimeError):
    """The function cannot be captured into a CUDA graph (the message says why)."""


def input_key(inputs) -> tuple:
    """What a captured graph depends on: per tensor its shape, dtype, device and strides; other values as is."""
    import torch

    return tuple(
        (tuple(x.shape), x.dtype, x.device, x.stride()) if isinstance(x, torch.Tensor) else ("value", x)
        for x in inputs
    )


@dataclass
class CapturedGraph:
    """One capture: the graph, its input buffers (write new inputs into them, or pass them to `__call__`) and the
    outputs its replays write."""

    graph: object
    inputs: list
    outputs: object

    def replay(self):
        """Run the captured kernels on what the input buffers hold now; returns the outputs."""
        self.graph.replay()
        return self.outputs

    def __call__(self, *inputs):
        """Copy `inputs` into the graph's input buffers (tensors of the captured shapes) and replay."""
        import torch

        if len(inputs) != len(self.inputs):
            raise ValueError(f"the graph was captured with {len(self.inputs)} inputs, got {len(inputs)}")
        for buf, x in zip(self.inputs, inputs):
            if isinstance(buf, torch.Tensor):
                if buf.shape != x.shape or buf.dtype != x.dtype:
                    raise ValueError(f"the graph was captured for {tuple(buf.shape)} {buf.dtype}, got "
                                     f"{tuple(x.shape)} {x.dtype}")
                if buf.data_ptr() != x.data_ptr():
                    buf.copy_(x)
        self.graph.replay()
        return self.outputs


def capture(fn, *inputs, warmup: int = 1) -> CapturedGraph:
    """Capture `fn(*inputs)` into a CUDA graph on copies of `inputs` (after `warmup` eager calls on a side
    stream, so modules load and the allocator settles outside the capture)."""
    import torch

    static = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    try:
        with torch.cuda.stream(side):
            for _ in range(warmup):
                fn(*static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = fn(*static)
    except Exception as exc:  # noqa: BLE001 - any failure inside the capture means "not capturable"
        _after_failed_capture()
        raise GraphCaptureError(f"capturing {getattr(fn, '__name__', 'the function')} failed: "
                                f"{type(exc).__name__}: {exc}") from exc
    return CapturedGraph(graph, static, outputs)


def _after_failed_capture():
    """Leave torch as a failed capture should: a capture that ends in an error skips the end of capture for
    torch's CUDA random generators, which then refuse every later random draw ("Offset increment outside graph
    capture"); an empty capture that succeeds resets them."""
    import torch

    try:
        torch.cuda.synchronize()
    except RuntimeError:
        pass  # the failed capture's own error, already reported
    with torch.cuda.graph(torch.cuda.CUDAGraph()):
        pass


class GraphedFunction:
    """`fn` captured once per input signature (`input_key`) and replayed after; eager where it cannot be
    captured. The returned outputs belong to the graph: the next call with the same signature overwrites them
    (clone what must outlive it)."""

    def __init__(self, fn, warmup: int = 1, limit: int = 16):
        self.fn = fn
        self.warmup = warmup
        self.limit = limit
        self.graphs: dict = {}
        self.why = ""  # why the last capture failed ("" when none did)

    def __call__(self, *inputs):
        try:
            key = input_key(inputs)
            entry = self.graphs.get(key)
        except TypeError:  # an unhashable non-tensor input: no graph for it
            return self.fn(*inputs)
        if entry is None:
            if len(self.graphs) >= self.limit:
                self.graphs.clear()
            try:
                entry = capture(self.fn, *inputs, warmup=self.warmup)
            except GraphCaptureError as exc:
                self.why = str(exc)
                entry = False
            self.graphs[key] = entry
        if entry is False:
            return self.fn(*inputs)
        return entry(*inputs)


def _same(a, b) -> bool:
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and torch.allclose(a.double(), b.double(), rtol=1e-3, atol=1e-5, equal_nan=True)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b)


def rotation_count(size: int, l2: int, cap: int = 16) -> int:
    """How many input sets of `size` bytes each a timing rotates over so that the bytes it touches between two calls
    on one set are at least twice the `l2` cache (1 where one set already is, or where either size is unknown), at
    most `cap`: the rule of the agent's timers (`rotate=` here) and of the benchmarks (benchmarks/timing.py)."""
    if size <= 0 or l2 <= 0 or size >= 2 * l2:
        return 1
    return max(1, min(cap, -(-2 * l2 // size)))


def replay_ms(fn, inputs, warmup: int = 20, runs: int = 100, rotate=()) -> tuple[float | None, str]:
    """Milliseconds per replay of `fn(*inputs)` captured in a CUDA graph (CUDA events around `runs` replays
    after `warmup`), or (None, why not): the capture failed, or the replay's output differs from an eager
    call's on the same inputs (what a host program that is not static gives). `rotate`: more input sets of the
    same shapes, each captured into its own graph; the replays take the graphs in turn (inputs that would stay
    in the L2 between replays of one graph are then read from memory, as in a model's run)."""
    import torch

    with torch.no_grad():
        graphs = []
        try:
            for xs in [inputs, *rotate]:
                graphs.append(capture(fn, *xs))
        except GraphCaptureError as exc:
            return None, str(exc)
        eager = fn(*inputs)
        if not _same(graphs[0].replay(), eager):
            return None, "the graph's replay differs from an eager call on the same inputs (not a static program)"
        for i in range(warmup):
            graphs[i % len(graphs)].replay()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(runs):
            graphs[i % len(graphs)].replay()
        end.record()
        torch.cuda.synchronize()
    return start.elapsed_time(end) / runs, ""
