"""The launch fast path: a prepared launch per (kernel, argument signature), so a repeated `kernel[grid](...)`
costs a dictionary lookup, filling pointers and one cuLaunchKernel.

The signature key of a call (`signature_key`) holds, per tensor argument, its dtype, shape, device and whether it
is contiguous; per scalar argument its type; the constexprs' values.
Everything `launch.pack_args` checks is a function of that key, so the checks run once per key, on the slow
path, which then builds a `PreparedLaunch`: the CUfunction, block, shared bytes, the symbolic dimensions and the
packed argument buffer (`void *params[]` pointing at one ctypes value per kernel parameter). A later call with
the same key overwrites the pointer and scalar slots and launches. A call with a changed shape, dtype, device or
layout has another key, misses, and takes the slow path, which checks and reports as before.

Tensor maps (bulk tensor copies) depend on the tensors' addresses as well: they are looked up per tuple of
pointers in a small cache of the prepared launch, and their slots in `params` re-pointed when it changes.
"""

from __future__ import annotations

import ctypes

from tilepy.errors import LaunchError
from tilepy.language import TensorSpec
from tilepy.types import ScalarType, TensorType

CUDA_ERROR_INVALID_CONTEXT = 201
_MAP_CACHE_LIMIT = 64
_GRID_CACHE_LIMIT = 256


def signature_key(params):
    """A function `key(target, kwargs, *args)` of a kernel's calls: what the argument checks depend on.

    Per positional tensor parameter its dtype, shape, device index and contiguity; per scalar parameter the
    argument's type; the values of constexprs (by keyword, or by position after the last run-time parameter).
    The function is generated for the kernel's parameter list (`Kernel.params`), so a call costs attribute reads
    only; too few positional arguments raise TypeError, a non-tensor where a tensor belongs AttributeError.
    A constexpr between run-time parameters is keyed by value.
    """
    names, parts = [], []
    last_runtime = max((i for i, (_, spec, _) in enumerate(params) if spec != "constexpr"), default=-1)
    for i, (_, spec, _) in enumerate(params[: last_runtime + 1]):
        a = f"a{i}"
        names.append(a)
        if spec == "constexpr":
            parts.append(a)
        elif isinstance(spec, TensorSpec):
            parts += [f"{a}.dtype", f"{a}.shape", f"{a}.get_device()", f"{a}.is_contiguous()"]
        else:
            parts.append(f"type({a})")
    src = (f"def key(target, kwargs, {''.join(n + ', ' for n in names)}*rest):\n"
           f"    return (target, len(kwargs), *kwargs.items(), {''.join(p + ', ' for p in parts)}rest)\n")
    env: dict = {}
    exec(src, env)  # noqa: S102 - generated from the parameter list above
    return env["key"]


def normalize_grid(grid) -> tuple[int, int, int] | None:
    """(x, y, z) for cuLaunchKernel, None for an empty grid; LaunchError past CUDA's limits."""
    if isinstance(grid, int):
        grid = (grid,)
    grid = tuple(int(g) for g in grid)
    if not 1 <= len(grid) <= 3 or any(g < 0 for g in grid):
        raise LaunchError(f"grid must be 1 to 3 non-negative ints, got {grid}")
    grid = grid + (1,) * (3 - len(grid))
    if any(g == 0 for g in grid):
        return None
    if grid[0] >= 2**31 or grid[1] > 65535 or grid[2] > 65535:
        raise LaunchError(f"grid {grid} is beyond CUDA's limits (x < 2**31, y and z <= 65535)")
    return grid


class PreparedLaunch:
    """One kernel binary with its argument buffer laid out for one argument signature.

    `values` are the ctypes values in kernel-parameter order (as `pack_args` + `launch_values` give them);
    `pointer_slots` / `scalar_slots` name which of them a call overwrites, from which run-time argument.
    `launch_fn` is cuLaunchKernel (ctypes, argtypes set); `stream_fn(index)` gives the current raw stream.
    """

    def __init__(self, ck, func, index: int, values: list, pointer_slots, scalar_slots, meta: dict, maps=None, *,
                 launch_fn, stream_fn, on_error, switch_device=None):
        self.ck = ck
        self.func = func
        self.index = index
        self.threads = ck.num_threads
        self.smem = ck.smem_bytes
        self.values = values
        self.params = (ctypes.c_void_p * max(len(values), 1))(*[ctypes.addressof(v) for v in values])
        self.pointer_slots = tuple((values[j], i) for j, i in pointer_slots)
        self.scalar_slots = tuple((values[j], i) for j, i in scalar_slots)
        self.meta = meta
        self.grids: dict = {}
        # tensor maps: `maps` is (params slot per map, the tp_tma_ok value, per map the index of its tensor's
        # pointer among the pointer slots, per map (spec, argument index)); built maps per tuple of pointers
        self.map_slots, self.map_ok, self.map_source, self.map_specs = maps or ((), None, (), ())
        self.maps: dict = {}
        self.current_maps = None
        self.launch_fn = launch_fn
        self.stream_fn = stream_fn
        self.on_error = on_error
        self.switch_device = switch_device

    def grid_dims(self, grid):
        """The (x, y, z) of `grid` (a tuple, an int, or a callable of the constexprs and dimensions)."""
        if callable(grid):
            grid = grid(dict(self.meta))
        try:
            return self.grids[grid]
        except (KeyError, TypeError):
            pass
        dims = normalize_grid(grid)
        try:
            if len(self.grids) >= _GRID_CACHE_LIMIT:
                self.grids.clear()
            self.grids[grid] = dims
        except TypeError:
            pass  # an unhashable grid (a list) is normalized each time
        return dims

    def fill(self, args):
        """Write the run-time arguments' pointers and scalars into the buffer (and the tensor maps)."""
        if self.map_slots:
            ptrs = []
            for value, i in self.pointer_slots:
                p = args[i].data_ptr()
                value.value = p
                ptrs.append(p)
            self._set_maps(tuple(ptrs), args)
        else:
            for value, i in self.pointer_slots:
                value.value = args[i].data_ptr()
        for value, i in self.scalar_slots:
            value.value = args[i]

    def _set_maps(self, ptrs: tuple, args):
        key = tuple(ptrs[k] for k in self.map_source)
        hit = self.maps.get(key)
        if hit is None:
            from .tensor_map import tensor_map

            built = [tensor_map(spec, args[i]) for spec, i in self.map_specs]
            addrs = tuple(ctypes.addressof(buf) for buf, _ in built)
            ok = sum(int(good) << k for k, (_, good) in enumerate(built))
            hit = (addrs, ok, built)  # `built` keeps the buffers alive
            if len(self.maps) >= _MAP_CACHE_LIMIT:
                self.maps.clear()
            self.maps[key] = hit
        if hit is not self.current_maps:
            params = self.params
            for j, addr in zip(self.map_slots, hit[0]):
                params[j] = addr
            self.map_ok.value = hit[1]
            self.current_maps = hit

    def __call__(self, grid, args, stream=None):
        """Launch on `grid` with `args` (the run-time arguments, positional, of this signature)."""
        dims = self.grid_dims(grid)
        if dims is None:
            return self.ck  # an empty grid launches nothing
        self.fill(args)
        if self.switch_device is not None:
            return self.switch_device(self, dims, stream)
        if stream is None:
            stream = self.stream_fn(self.index)
        rc = self.launch_fn(self.func, dims[0], dims[1], dims[2], self.threads, 1, 1, self.smem, stream,
                            self.params, None)
        if rc:
            self.on_error(self, rc, dims, stream)
        return self.ck

    def launch_dims(self, dims, stream):
        """cuLaunchKernel on already filled arguments (the device switch and the error retry use it)."""
        if stream is None:
            stream = self.stream_fn(self.index)
        return self.launch_fn(self.func, dims[0], dims[1], dims[2], self.threads, 1, 1, self.smem, stream,
                              self.params, None)


def layout(ck, args, values: list) -> tuple[list, list, dict]:
    """Which of `values` (pack_args's, in parameter order) are tensor pointers and scalars, and from which
    run-time argument: ([(slot, arg index)], [(slot, arg index)], {symbolic dim: value})."""
    pointer_slots, scalar_slots, dims = [], [], {}
    j = 0
    for i, (p, a) in enumerate(zip(ck.params, args)):
        t = p.type
        if isinstance(t, TensorType):
            pointer_slots.append((j, i))
            j += 1
            for d, n in zip(t.shape, a.shape):
                if not isinstance(d, int):
                    dims.setdefault(d, int(n))
                    j += 1
        elif isinstance(t, ScalarType):
            scalar_slots.append((j, i))
            j += 1
    return pointer_slots, scalar_slots, dims


def build_prepared(ck, runtime: list, values: list, func, index: int, positions=None, **hooks) -> PreparedLaunch:
    """A PreparedLaunch for `ck` from the values `pack_args` + `launch_values` gave for `runtime` (the run-time
    arguments in parameter order). `positions[i]` is where run-time argument i will sit in the calls' argument
    tuples (default: the same order)."""
    pointer_slots, scalar_slots, dims = layout(ck, runtime, values)
    pos = list(range(len(runtime))) if positions is None else list(positions)
    meta = {**dict(ck.kir.constexprs), **dims}
    maps = None
    if ck.tensor_maps:
        first = len(values) - len(ck.tensor_maps) - 1
        by_name = {p.name: i for i, p in enumerate(ck.params)}
        pointer_of = {i: k for k, (_, i) in enumerate(pointer_slots)}
        source = tuple(pointer_of[by_name[spec.param]] for spec in ck.tensor_maps)
        specs = tuple((spec, pos[by_name[spec.param]]) for spec in ck.tensor_maps)
        maps = (tuple(range(first, first + len(ck.tensor_maps))), values[-1], source, specs)
    return PreparedLaunch(ck, func, index, values, [(j, pos[i]) for j, i in pointer_slots],
                          [(j, pos[i]) for j, i in scalar_slots], meta, maps, **hooks)
