"""`@tilepy.kernel`: the decorator object that holds a kernel's source, signature and specializations."""

from __future__ import annotations

import inspect
import textwrap
import typing

from . import dtypes as dt
from .errors import CompileError, ConstexprError, LaunchError, ResourceError, Span, TargetError
from .frontend import KernelSource, Translator
from .ir import KernelIR
from .language import TensorSpec, constexpr
from .targets import DEFAULT_TARGET, get_target

_GPU_BACKEND = None   # the registered GPU backend: a module (or object) with `launch(kernel, grid, *args, ...)`


def register_gpu_backend(backend) -> None:
    """Called by a GPU backend package when it is imported (tilepy_hip does): `kernel[grid](...)` on device
    tensors calls `backend.launch(kernel, grid, *args, target=..., **constexprs)`, read at call time so a
    wrapper installed on the backend's `launch` is honoured. tilepy itself imports no backend."""
    global _GPU_BACKEND
    _GPU_BACKEND = backend


def gpu_backend():
    """The registered GPU backend; else the first one an installed package announces under the `tilepy.backends`
    entry-point group (importing it registers it)."""
    if _GPU_BACKEND is None:
        from importlib.metadata import entry_points

        for ep in entry_points(group="tilepy.backends"):
            ep.load()
            if _GPU_BACKEND is not None:
                break
    if _GPU_BACKEND is None:
        raise LaunchError("the arguments are GPU tensors but no tilepy GPU backend is loaded: install tilepy-hip "
                          "(pip install -e ./tilepy_hip) or `import tilepy_hip` before launching")
    return _GPU_BACKEND


_LAUNCHER_LIMIT = 256  # launchers kept per kernel (one per grid tuple; cleared past it)


class Kernel:
    """A tilepy kernel. `kernel[grid](*args, **constexprs)` runs it (on the CPU interpreter for numpy arrays
    and CPU tensors); `kernel.ir(**constexprs)` gives the typed IR of one specialization.

        @tp.kernel(threads=64)
        def scale(X: tp.Tensor[tp.f32, "N"], BLOCK: tp.constexpr = 64): ...

        scale[(tp.cdiv(n, 64),)](x)      # x: a numpy array or CPU tensor (interpreter), or a CUDA tensor
    """

    # Set by a GPU backend (tilepy_hip) once it has launched this kernel: `fast(grid, target, kwargs, args)`
    # launches a call whose argument signature it has checked before and returns its result, else None.
    gpu_launch = None

    def __init__(self, fn, threads=128, target: str | None = None, cluster=None, min_blocks=None,
                 unsigned_role_index=False):
        self.fn = fn
        self.cluster = cluster
        self.min_blocks = min_blocks
        # a bool, or a function of the constexprs dict (chosen per specialization, as min_blocks)
        self.unsigned_role_index = unsigned_role_index if callable(unsigned_role_index) else bool(unsigned_role_index)
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.name = fn.__name__
        self.threads = threads
        self.default_target = target or DEFAULT_TARGET
        lines, first_line = inspect.getsourcelines(fn)
        self.file = inspect.getsourcefile(fn) or "<kernel>"
        self.source = textwrap.dedent("".join(lines))
        self.first_line = first_line
        self._src = KernelSource(fn, self.source, self.file, first_line)
        self.params = self._signature()
        self._cache: dict = {}
        self._launchers: dict = {}

    def _span(self) -> Span:
        text = self.source.splitlines()[0] if self.source else ""
        return Span(self.file, self.first_line, 0, text)

    def _signature(self):
        try:
            hints = typing.get_type_hints(self.fn)
        except Exception:
            hints = dict(getattr(self.fn, "__annotations__", {}))
        params = []
        for p in inspect.signature(self.fn).parameters.values():
            ann = hints.get(p.name, p.annotation)
            if isinstance(ann, str):
                try:
                    ann = eval(ann, self.fn.__globals__)  # noqa: S307 - the user's own annotation
                except Exception:
                    ann = inspect.Parameter.empty
            default = None if p.default is inspect.Parameter.empty else p.default
            if ann is constexpr:
                params.append((p.name, "constexpr", default))
            elif isinstance(ann, TensorSpec):
                params.append((p.name, ann, default))
            elif dt.from_any(ann) is not None:
                params.append((p.name, dt.from_any(ann), default))
            else:
                raise CompileError(
                    f"parameter `{p.name}` of kernel `{self.name}` has no tilepy annotation", self._span(),
                    "annotate it: X: tp.Tensor[tp.f32, 'N'], n: tp.i32, or BLOCK: tp.constexpr = 128")
        return params

    def retyped(self, **annotations) -> Kernel:
        """The same source with some tensor or scalar parameters retyped: one kernel body, several signatures,
        each its own kernel object (own specialization cache, own binaries). `gemm.retyped(C=tp.Tensor[tp.bf16,
        "M", "N"])` stores the f32 accumulator into a bf16 C (tp.store casts to the view's dtype)."""
        specs = {n: s for n, s, _ in self.params}
        new = {}
        for name, ann in annotations.items():
            spec = ann if isinstance(ann, TensorSpec) else dt.from_any(ann)
            if name not in specs or specs[name] == "constexpr" or spec is None or (
                    isinstance(spec, TensorSpec) != isinstance(specs[name], TensorSpec)):
                raise CompileError(
                    f"kernel `{self.name}` cannot retype `{name}` as {ann!r}", self._span(),
                    f"retype a tensor parameter as a tp.Tensor[...] and a scalar as a dtype; parameters: "
                    f"{', '.join(n for n, s in specs.items() if s != 'constexpr')}")
            new[name] = spec
        clone = object.__new__(type(self))
        clone.__dict__.update({k: v for k, v in self.__dict__.items() if k != "gpu_launch"})
        clone.params = [(n, new.get(n, s), d) for n, s, d in self.params]
        clone._cache = {}
        clone._launchers = {}
        return clone

    @property
    def constexpr_names(self) -> list[str]:
        return [n for n, spec, _ in self.params if spec == "constexpr"]

    def resolve_constexprs(self, given: dict) -> dict:
        values = {}
        unknown = set(given) - set(self.constexpr_names)
        if unknown:
            raise ConstexprError(
                f"kernel `{self.name}` has no constexpr parameter(s) {', '.join(sorted(unknown))}", self._span(),
                f"its constexprs are: {', '.join(self.constexpr_names) or 'none'}")
        for name, spec, default in self.params:
            if spec != "constexpr":
                continue
            value = given.get(name, default)
            if value is None:
                raise ConstexprError(f"constexpr `{name}` of kernel `{self.name}` has no value", self._span(),
                                     f"pass {name}=... or give it a default in the signature")
            values[name] = value
        return values

    def num_threads(self, constexprs: dict, target) -> int:
        n = self.threads(constexprs) if callable(self.threads) else self.threads
        if not isinstance(n, int) or n <= 0 or n % target.warp_size or n > target.max_threads:
            warp = target.warp_size
            suggestion = max(warp, (n // warp) * warp) if isinstance(n, int) else 128
            raise ResourceError(
                f"kernel `{self.name}` asks for {n} threads per block; {target.name} needs a multiple of "
                f"{target.warp_size} up to {target.max_threads}", self._span(), f"use threads={suggestion}")
        return n

    def cluster_dims(self, constexprs: dict, target) -> tuple:
        """The thread-block cluster shape (x, y, z) for these constexprs: `cluster=` of the decorator (an int, a
        tuple of 1 to 3 ints, or a function of the constexprs dict), (1, 1, 1) without one."""
        c = self.cluster(constexprs) if callable(self.cluster) else self.cluster
        if c is None:
            return (1, 1, 1)
        if isinstance(c, int):
            c = (c,)
        ok = isinstance(c, tuple) and 1 <= len(c) <= 3 and all(isinstance(x, int) and x >= 1 for x in c)
        c = tuple(c) + (1,) * (3 - len(c)) if ok else c
        if not ok or c[0] * c[1] * c[2] > 8:
            raise ResourceError(f"kernel `{self.name}` asks for a cluster of {c!r} blocks; a cluster is 1 to 3 "
                                "positive ints of at most 8 blocks in all", self._span(), "use cluster=(2, 1, 1)")
        if c != (1, 1, 1) and not target.has("cluster"):
            raise TargetError(f"kernel `{self.name}` declares a thread-block cluster {c}, which target "
                              f"{target.name} does not have", self._span(), "drop cluster= on this target")
        return c

    def ir(self, target: str | None = None, **constexprs) -> KernelIR:
        """The typed IR of this kernel specialized for `constexprs` on `target` (cached)."""
        tgt = get_target(target or self.default_target)
        values = self.resolve_constexprs(constexprs)
        key = (tgt.name, tuple(sorted((k, _hashable(v)) for k, v in values.items())))
        if key not in self._cache:
            threads = self.num_threads(values, tgt)
            cluster = self.cluster_dims(values, tgt)
            kir = Translator(self._src, self.params, values, tgt, threads, cluster).translate()
            mb = self.min_blocks(values) if callable(self.min_blocks) else self.min_blocks
            kir.min_blocks = int(mb or 0)
            uri = self.unsigned_role_index
            kir.unsigned_role_index = bool(uri(values) if callable(uri) else uri)
            self._cache[key] = kir
        return self._cache[key]

    specialize = ir

    def __getitem__(self, grid):
        try:  # on the path of every launch: a launcher per grid tuple, made once
            return self._launchers[grid]
        except (KeyError, TypeError):
            return self._launcher(grid)

    def _launcher(self, grid) -> Launcher:
        launcher = Launcher(self, grid)
        if type(grid) in (tuple, int):  # a grid function is often a fresh lambda per call: not kept
            if len(self._launchers) >= _LAUNCHER_LIMIT:
                self._launchers.clear()
            self._launchers[grid] = launcher
        return launcher

    def run(self, grid, *args, target: str | None = None, record: bool = False, tags=None, **constexprs):
        """Run on the CPU interpreter; returns the interpreter's Trace (accesses when record=True)."""
        from .interpreter import run_ir

        params, consts = self.bind_args(args, constexprs)
        kir = self.ir(target, **consts)
        grid = resolve_grid(grid, self, kir, params)
        kwargs = {"record": record}
        if tags is not None:
            kwargs["tags"] = tags
        return run_ir(kir, grid, params, **kwargs)

    def bind_args(self, args, kwargs):
        """Split launch arguments into run-time values (param order) and constexprs."""
        names = [n for n, _, _ in self.params]
        if len(args) > len(names):
            raise LaunchError(f"kernel `{self.name}` takes {len(names)} arguments, got {len(args)}")
        given = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise LaunchError(f"kernel `{self.name}` has no parameter `{k}`; parameters: {', '.join(names)}")
            if k in given:
                raise LaunchError(f"parameter `{k}` given twice")
            given[k] = v
        runtime, consts = [], {}
        for name, spec, default in self.params:
            if spec == "constexpr":
                if name in given:
                    consts[name] = given[name]
                continue
            if name not in given:
                if default is None:
                    raise LaunchError(f"kernel `{self.name}` needs argument `{name}`")
                given[name] = default
            runtime.append(given[name])
        return runtime, consts

    def __call__(self, *args, **kwargs):
        raise LaunchError(f"launch kernel `{self.name}` with a grid: {self.name}[(blocks,)](...)")

    def __repr__(self) -> str:
        return f"<tilepy.Kernel {self.name} ({self.file}:{self.first_line})>"


class Launcher:
    __slots__ = ("kernel", "grid")  # made per `kernel[grid]`: on the path of every launch

    def __init__(self, kernel: Kernel, grid):
        self.kernel, self.grid = kernel, grid

    def __call__(self, *args, target: str | None = None, **kwargs):
        """Run on the GPU through tilepy_hip when the tensors live there, else on the CPU interpreter."""
        fast = self.kernel.gpu_launch
        if fast is not None:
            out = fast(self.grid, target, kwargs, args)
            if out is not None:
                return out
        for a in args:  # a plain loop: this is on the path of every GPU launch
            if getattr(a, "is_cuda", False):
                break
        else:
            if not any(getattr(a, "is_cuda", False) for a in kwargs.values()):
                return self.kernel.run(self.grid, *args, target=target, **kwargs)
        return gpu_backend().launch(self.kernel, self.grid, *args, target=target, **kwargs)


def resolve_grid(grid, kernel: Kernel, kir: KernelIR, args) -> tuple[int, ...]:
    """A grid tuple, or a callable of {constexpr and symbolic dim name: value} returning one."""
    if callable(grid):
        meta = dict(kir.constexprs)
        for p, a in zip(kir.params, args):
            shape = getattr(p.type, "shape", None)
            if shape is not None and hasattr(a, "shape"):
                for d, n in zip(shape, a.shape):
                    if isinstance(d, str):
                        meta[d] = int(n)
        grid = grid(meta)
    if isinstance(grid, int):
        grid = (grid,)
    grid = tuple(int(g) for g in grid)
    if not 1 <= len(grid) <= 3 or any(g < 0 for g in grid):
        raise LaunchError(f"grid must be 1 to 3 non-negative ints, got {grid}")
    return grid


def _hashable(v):
    try:
        hash(v)
        return v
    except TypeError:
        return repr(v)


def kernels_from_source(source: str, filename: str, namespace: dict | None = None) -> dict[str, Kernel]:
    """Execute Python source that defines @tilepy.kernel functions and return them by name.

    The source is registered with `linecache` under `filename`, so kernels built from text (by the agent or
    a generator) report errors with real lines exactly like kernels in files do."""
    import linecache

    lines = source.splitlines(keepends=True)
    linecache.cache[filename] = (len(source), None, lines, filename)
    env = {"__name__": f"tilepy_source_{abs(hash(filename))}", "__file__": filename}
    env.update(namespace or {})
    exec(compile(source, filename, "exec"), env)  # noqa: S102 - the caller's own kernel source
    return {k: v for k, v in env.items() if isinstance(v, Kernel)}


def kernel(fn=None, *, threads=128, target: str | None = None, cluster=None, min_blocks=None,
           unsigned_role_index=False):
    """Decorate a Python function as a tilepy kernel.

    `threads` (int, or a function of the constexprs dict) is the block size; `target` the default target;
    `cluster` (an int, a tuple of 1 to 3 ints, or a function of the constexprs dict) groups blocks into thread-block
    clusters of that shape (sm_90a): consecutive blocks along x (then y, z) form one cluster. `min_blocks` (an int,
    or a function of the constexprs dict; 0 / None: none) asks the compiler to fit that many blocks per
    multiprocessor in registers (CUDA's `__launch_bounds__(threads, min_blocks)`; a memory-bound row kernel that
    would otherwise take 2 registers past 65536 / (threads * min_blocks) loses a block of occupancy).
    `unsigned_role_index` (GPU renders; the value is the same either way): outside loops, a warp role's thread index
    is written at each use as an unsigned remainder the compiler knows lies in [0, role size), so the divisions and
    remainders of it in layouts (an epilogue's hand-over through shared memory, a transposed store) are shifts and
    masks instead of signed divisions; off by default, because in kernels near their register cap it moved the
    compiler's register allocation into spills (tilepy_hip.render.walk.Renderer.role_tid). A bool, or a function of
    the constexprs dict choosing it per specialization (as `min_blocks`).
    """
    opts = dict(threads=threads, target=target, cluster=cluster, min_blocks=min_blocks,
                unsigned_role_index=unsigned_role_index)
    if fn is None:
        return lambda f: Kernel(f, **opts)
    return Kernel(fn, **opts)
