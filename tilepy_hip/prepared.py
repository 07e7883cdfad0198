"""The launch fast path: a prepared launch per (kernel, argument signature), so a repeated `kernel[grid](...)`
costs a dictionary lookup, filling pointers and one cuLaunchKernel.

The signature key of a call (`signature_key`) holds the target, the constexprs passed by keyword, per tensor
argument its dtype, shape, device and whether it is contiguous, per scalar argument its type, and any
positional arguments past the last run-time parameter (constexprs) by value. Everything `launch.pack_args`
checks is a function of that key, so the checks run once per key, on the slow path, which then builds a
`PreparedLaunch`: the CUfunction, block, shared bytes, the symbolic dimensions and the packed argument buffer
(`void *params[]` pointing at one ctypes value per kernel parameter). A later call with the same key overwrites
the pointer and scalar slots and launches. A call with a changed shape, dtype, device or layout has another key,
misses, and takes the slow path, which checks and reports as before.

Both the per-kernel lookup (`fast_path`) and each prepared launch's call are generated Python functions, with
one line per argument, so no loop or attribute lookup runs that the signature does not need.

Tensor maps (bulk tensor copies) depend on the tensors' addresses as well: they are looked up per tuple of
pointers in a small cache of the prepared launch, and their slots in `params` re-pointed when it changes.
"""

from __future__ import annotations

import ctypes
import functools
import struct
import threading

from tilepy.errors import LaunchError
from tilepy.language import TensorSpec
from tilepy.types import ScalarType, TensorType

CUDA_ERROR_INVALID_CONTEXT = 201
_MAP_CACHE_LIMIT = 64
_GRID_CACHE_LIMIT = 256
_MISSES = (TypeError, AttributeError, IndexError)  # unhashable, not a tensor, too few arguments: the slow path


def _key_source(params) -> tuple[list[str], str]:
    """(lines binding a0, a1, ... from `args`, the key expression) for a kernel's parameter list."""
    last = max((i for i, (_, spec, _) in enumerate(params) if spec != "constexpr"), default=-1)
    binds, parts = [], []
    for i, (_, spec, _) in enumerate(params[: last + 1]):
        binds.append(f"a{i} = args[{i}]")
        if spec == "constexpr":
            parts.append(f"a{i}")
        elif isinstance(spec, TensorSpec):
            parts += [f"a{i}.dtype", f"a{i}.shape", f"a{i}.get_device()", f"a{i}.is_contiguous()"]
        else:
            parts.append(f"type(a{i})")
    key = f"(target, len(kwargs), *kwargs.items(), {''.join(p + ', ' for p in parts)}args[{last + 1}:])"
    return binds, key


def _define(src: str, env: dict, name: str):
    exec(src, env)  # noqa: S102 - generated from a kernel's own parameter list
    return env[name]


def signature_key(params):
    """`key(target, kwargs, args)`: the signature key of a call of a kernel with these parameters (`Kernel.params`).
    Too few positional arguments raise IndexError, a non-tensor where a tensor belongs AttributeError, an
    unhashable value TypeError (when the key is hashed)."""
    binds, key = _key_source(params)
    body = "".join(f"    {b}\n" for b in binds)
    return _define(f"def key(target, kwargs, args):\n{body}    return {key}\n", {}, "key")


def kinds(params) -> bytes:
    """Per positional parameter up to the last run-time one: b"t" tensor, b"s" scalar, b"c" constexpr (what the
    C fast path keys on; the same key as `signature_key`)."""
    last = max((i for i, (_, spec, _) in enumerate(params) if spec != "constexpr"), default=-1)
    return bytes(ord("c") if spec == "constexpr" else ord("t") if isinstance(spec, TensorSpec) else ord("s")
                 for _, spec, _ in params[: last + 1])


def fast_path(params, entries: dict, package, own, native_fast=None):
    """`fast(grid, target, kwargs, args, stream=None)`: the prepared launch of this call's signature run, or None
    (no entry, or `package.launch` is not `own`: someone wrapped tilepy_hip.launch and must see every call).
    `entries` maps signature keys to `PreparedLaunch.record()`s; `native_fast` is the C extension's `fast` (the
    same lookup, and the launch itself for simple entries: `bound_fast`, which checks `package.launch` too), else
    the lookup is generated Python."""
    if native_fast is not None:  # one C call: functools.partial has a vectorcall, no Python frame runs
        return functools.partial(native_fast, package, own, entries, kinds(params))
    binds, key = _key_source(params)
    body = "".join(f"        {b}\n" for b in binds)
    src = (
        "def fast(grid, target, kwargs, args, stream=None):\n"
        "    if package.launch is not own:\n"
        "        return None\n"
        "    try:\n"
        f"{body}"
        f"        entry = entries.get({key})\n"
        "    except MISSES:\n"
        "        return None\n"
        "    if entry is None:\n"
        "        return None\n"
        "    return entry[0](grid, args, stream)\n"
    )
    return _define(src, {"entries": entries, "package": package, "own": own, "MISSES": _MISSES}, "fast")


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
    `pointer_slots` / `scalar_slots` are (slot, argument position) pairs a call overwrites. `launch_fn` is
    `native.launcher()`'s (func, gx, gy, gz, block, smem, stream, params) -> CUresult; `stream_fn(index)` the
    current raw stream; `on_error(prep, rc, dims, stream)` raises (or retries); `current_device()`, when given
    (machines of several GPUs), is checked against the launch's device and `switch_device(prep, dims, stream)`
    launches on it. `prep.call(grid, args, stream)` launches.
    """

    def __init__(self, ck, func: int, index: int, values: list, pointer_slots, scalar_slots, meta: dict, maps=None,
                 *, launch_fn, stream_fn, on_error, current_device=None, switch_device=None):
        self.ck = ck
        self.func = func.value if isinstance(func, ctypes.c_void_p) else int(func)
        self.index = index
        self.threads = ck.num_threads
        self.smem = ck.smem_bytes
        self.values = values
        self.params = (ctypes.c_void_p * max(len(values), 1))(*[ctypes.addressof(v) for v in values])
        self.params_addr = ctypes.addressof(self.params)
        self.pointer_slots = tuple(pointer_slots)
        self.scalar_slots = tuple(scalar_slots)
        self.meta = meta
        self.grids: dict = {}
        # tensor maps: `maps` is (params slot per map, the tp_tma_ok value, per map the index of its tensor's
        # pointer among the pointer slots, per map (spec, argument position)); built maps per tuple of pointers
        self.map_slots, self.map_ok, self.map_source, self.map_specs = maps or ((), None, (), ())
        self.maps: dict = {}
        self.current_maps = None
        self.launch_fn = launch_fn
        self.stream_fn = stream_fn
        self.on_error = on_error
        self.switches = current_device is not None
        self.lock = threading.Lock()
        self.call = self._generate(current_device, switch_device)

    def _generate(self, current_device, switch_device):
        env = {"prep": self, "ck": self.ck, "meta": self.meta, "grids": self.grids, "resolve": self.grid_dims,
               "launch": self.launch_fn, "raw_stream": self.stream_fn, "on_error": self.on_error,
               "func": self.func, "threads": self.threads, "smem": self.smem, "params": self.params_addr,
               "index": self.index, "set_maps": self._set_maps, "current_device": current_device,
               "switch_device": switch_device, "lock": self.lock}
        lines = [
            "def call(grid, args, stream=None):",
            "    if callable(grid):",
            "        grid = grid(dict(meta))",
            "    try:",
            "        dims = grids[grid]",
            "    except (KeyError, TypeError):",
            "        dims = resolve(grid)",
            "    if dims is None:",
            "        return ck",
        ]
        # the fill and the launch under the prepared launch's lock: another thread filling the same buffer
        # between them would launch this call on its pointers
        lines.append("    with lock:")
        for k, (slot, pos) in enumerate(self.pointer_slots):
            env[f"v{k}"] = self.values[slot]
            lines += [f"        p{k} = args[{pos}].data_ptr()", f"        v{k}.value = p{k}"]
        for k, (slot, pos) in enumerate(self.scalar_slots):
            env[f"s{k}"] = self.values[slot]
            lines.append(f"        s{k}.value = args[{pos}]")
        if self.map_slots:
            lines.append(f"        set_maps(({''.join(f'p{k}, ' for k in self.map_source)}), args)")
        if current_device is not None:
            lines += ["        if current_device() != index:", "            return switch_device(prep, dims, stream)"]
        lines += [
            "        if stream is None:",
            "            stream = raw_stream(index)",
            "        rc = launch(func, dims[0], dims[1], dims[2], threads, smem, stream, params)",
            "        if rc:",
            "            on_error(prep, rc, dims, stream)",
            "    return ck",
        ]
        return _define("\n".join(lines) + "\n", env, "call")

    def record(self) -> tuple:
        """What a signature's entry holds: (call, ck, simple, func, threads, smem, params, index, stream_fn, grids,
        meta, pointer slots as packed (address, position) pairs). `simple`: only tensor pointers to fill, on one
        device, so the C fast path fills and launches itself."""
        simple = not self.scalar_slots and not self.map_slots and not self.switches
        slots = b"".join(struct.pack("@Pn", ctypes.addressof(self.values[j]), pos) for j, pos in self.pointer_slots)
        return (self.call, self.ck, simple, self.func, self.threads, self.smem, self.params_addr, self.index,
                self.stream_fn, self.grids, self.meta, slots)

    def grid_dims(self, grid):
        """The (x, y, z) of a grid tuple or int (cached per grid), None for an empty one."""
        dims = normalize_grid(grid)
        cl = getattr(getattr(self.ck, "kir", None), "cluster", (1, 1, 1))
        if dims is not None and cl != (1, 1, 1):   # whole clusters: the grid is rounded up (as the interpreter does)
            dims = tuple(-(-g // c) * c for g, c in zip(dims, cl))
        try:
            if len(self.grids) >= _GRID_CACHE_LIMIT:
                self.grids.clear()
            self.grids[grid] = dims
        except TypeError:
            pass  # an unhashable grid (a list) is normalized each time
        return dims

    def _set_maps(self, key: tuple, args):
        hit = self.maps.get(key)
        if hit is None:
            from .tensor_map import tensor_map

            built = [tensor_map(spec, args[pos]) for spec, pos in self.map_specs]
            for (spec, pos), (_, good) in zip(self.map_specs, built):
                if not good and spec.required:
                    from .tensor_map import require

                    require(spec, args[pos])
            addrs = tuple(ctypes.addressof(buf) for buf, _ in built)
            ok = sum(int(good) << k for k, (_, good) in enumerate(built))
            hit = (addrs, ok, built)  # `built` keeps the buffers alive
            if len(self.maps) >= _MAP_CACHE_LIMIT:
                self.maps.clear()
            self.maps[key] = hit
        if hit is not self.current_maps:
            for j, addr in zip(self.map_slots, hit[0]):
                self.params[j] = addr
            self.map_ok.value = hit[1]
            self.current_maps = hit

    def launch_dims(self, dims, stream):
        """cuLaunchKernel on already filled arguments (the device switch and the error retry use it)."""
        if stream is None:
            stream = self.stream_fn(self.index)
        return self.launch_fn(self.func, dims[0], dims[1], dims[2], self.threads, self.smem, stream,
                              self.params_addr)


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
