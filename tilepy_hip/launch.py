"""Launch compiled kernels on torch CUDA tensors, on torch's current stream, through the CUDA driver API
(cuModuleLoadData through ctypes on libcuda; cuLaunchKernel through `native.py`'s small C extension).

The first call of a signature (dtypes, shapes, devices, contiguity, constexprs) takes the slow path below and
leaves a prepared launch (`prepared.py`) that later calls of the same signature reuse without checks.
Arguments are checked against the kernel's signature first (tilepy.LaunchError names the parameter and what
is wrong: not a tensor, wrong device, dtype, rank, a static or shared symbolic dimension, not contiguous).
Kernels asking for more than 48 KB of dynamic shared memory get their limit raised with
cuFuncSetAttribute. Kernels with bulk tensor copies get their tensor maps (tensor_map.py) after the
signature's arguments. Launches are CUDA-graph capturable: a launch only calls cuLaunchKernel on the current
stream; module loading happens at the first launch, so launch once before capturing.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import sys

from tilepy.errors import LaunchError
from tilepy.types import ScalarType, TensorType

from .driver import check as _check
from .driver import driver as _driver
from .driver import ensure_context as _ensure_context
from .prepared import CUDA_ERROR_INVALID_CONTEXT, PreparedLaunch, build_prepared, fast_path, signature_key
from .tensor_map import launch_values

_package = sys.modules[__name__.rpartition(".")[0]]  # tilepy_hip, whose `launch` attribute a guard may wrap

_TORCH_DTYPES = {
    "f16": "float16",
    "bf16": "bfloat16",
    "e4m3": "float8_e4m3fn",
    "f32": "float32",
    "f64": "float64",
    "i8": "int8",
    "i32": "int32",
    "i64": "int64",
    "u32": "uint32",
    "bool": "bool",
}
_CTYPES = {
    "f16": None,
    "bf16": None,
    "e4m3": None,
    "f32": ctypes.c_float,
    "f64": ctypes.c_double,
    "i8": ctypes.c_int8,
    "i32": ctypes.c_int32,
    "i64": ctypes.c_int64,
    "u32": ctypes.c_uint32,
    "bool": ctypes.c_bool,
}
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


@functools.cache
def _capability(device_index: int | None) -> tuple[int, int]:
    import torch

    return torch.cuda.get_device_capability(device_index)


def device_target(device_index: int | None = None) -> str:
    """The tilepy target of a CUDA device: sm_90a for compute capability 9.0, sm_80 for 8.x."""
    major, minor = _capability(device_index)
    if major == 9:
        return "sm_90a"
    if major >= 8:
        return "sm_80"
    raise LaunchError(
        f"CUDA device of compute capability {major}.{minor} is older than sm_80, which tilepy_hip "
        "does not target"
    )


_FUNCTIONS: dict = {}


def _function(ck, device_index: int):
    key = (ck.key, device_index)
    fn = _FUNCTIONS.get(key)
    if fn is not None:
        return fn
    _ensure_context(device_index)
    cuda = _driver()
    module = ctypes.c_void_p()
    _check(cuda.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(ck.binary)), f"loading `{ck.name}`")
    func = ctypes.c_void_p()
    _check(cuda.cuModuleGetFunction(ctypes.byref(func), module, ck.name.encode()), f"finding `{ck.name}`")
    if ck.smem_bytes > 48 * 1024:
        dev = ctypes.c_int()
        _check(cuda.cuDeviceGet(ctypes.byref(dev), device_index), "cuDeviceGet")
        limit = ctypes.c_int()
        _check(
            cuda.cuDeviceGetAttribute(
                ctypes.byref(limit), CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev
            ),
            "cuDeviceGetAttribute",
        )
        if ck.smem_bytes > limit.value:
            raise LaunchError(
                f"`{ck.name}` needs {ck.smem_bytes} bytes of shared memory; this device allows "
                f"{limit.value} per block"
            )
        _check(
            cuda.cuFuncSetAttribute(func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, ck.smem_bytes),
            "raising the dynamic shared memory limit",
        )
    _FUNCTIONS[key] = (module, func)
    return module, func


def pack_args(ck, args, device=None) -> tuple[list, dict, object]:
    """Check run-time arguments against the kernel's parameters; (ctypes values, symbolic dims, device)."""
    values, dims, on_device = pack_values(ck, args)
    for name, dev in on_device:  # devices last: the other checks also run without a GPU
        if dev.type != "cuda":
            raise LaunchError(
                f"argument `{name}` of `{ck.name}` is on {dev}; tilepy_hip runs on CUDA tensors "
                "(move it with .cuda(), or run the interpreter with kernel[grid](...))"
            )
        if device is not None and dev != device:
            raise LaunchError(
                f"argument `{name}` is on {dev} but the launch is on {device}; put all tensors on one device"
            )
        device = dev
    return values, dims, device


def pack_values(ck, args) -> tuple[list, dict, list]:
    """pack_args's checks that need no GPU: (ctypes values, symbolic dims, [(tensor parameter, device)])."""
    import torch

    values, dims, first_seen, on_device = [], {}, {}, []
    params = ck.params
    if len(args) != len(params):
        raise LaunchError(
            f"kernel `{ck.name}` takes {len(params)} run-time arguments "
            f"({', '.join(p.name for p in params)}), got {len(args)}"
        )
    for p, a in zip(params, args):
        t = p.type
        if isinstance(t, TensorType):
            if not isinstance(a, torch.Tensor):
                raise LaunchError(
                    f"argument `{p.name}` of `{ck.name}` must be a torch tensor, got {type(a).__name__}"
                )
            want = getattr(torch, _TORCH_DTYPES[t.dtype.name])
            if a.dtype != want:
                raise LaunchError(
                    f"argument `{p.name}` of `{ck.name}` has dtype {a.dtype}; the kernel declares "
                    f"{t.dtype} ({want})"
                )
            if a.dim() != len(t.shape):
                raise LaunchError(
                    f"argument `{p.name}` of `{ck.name}` has {a.dim()} dimensions {tuple(a.shape)}; "
                    f"the kernel declares {len(t.shape)}: {t}"
                )
            for i, (d, n) in enumerate(zip(t.shape, a.shape)):
                n = int(n)
                if isinstance(d, int):
                    if n != d:
                        raise LaunchError(f"dimension {i} of `{p.name}` is {n}; the kernel declares {d}")
                    continue
                if d in dims and dims[d] != n:
                    raise LaunchError(
                        f"dimension `{d}` is {dims[d]} in `{first_seen[d]}` but {n} in `{p.name}` "
                        f"(dimension {i}); tensors sharing a dimension name must agree"
                    )
                if n >= 2**31:
                    raise LaunchError(
                        f"dimension {i} of `{p.name}` is {n}, over the 2**31 - 1 tilepy_hip supports"
                    )
                dims.setdefault(d, n)
                first_seen.setdefault(d, p.name)
            if not a.is_contiguous():
                raise LaunchError(
                    f"argument `{p.name}` of `{ck.name}` is not contiguous (strides {a.stride()}); "
                    f"pass {p.name}.contiguous()"
                )
            on_device.append((p.name, a.device))
            values.append(ctypes.c_void_p(a.data_ptr()))
            values += [ctypes.c_int(int(n)) for d, n in zip(t.shape, a.shape) if not isinstance(d, int)]
        elif isinstance(t, ScalarType):
            kind = t.dtype
            if isinstance(a, torch.Tensor):
                if a.numel() != 1:
                    raise LaunchError(
                        f"argument `{p.name}` is a scalar {kind}; got a tensor of shape {tuple(a.shape)}"
                    )
                a = a.item()
            if kind.is_float:
                if not isinstance(a, int | float) or isinstance(a, bool):
                    raise LaunchError(
                        f"argument `{p.name}` must be a number ({kind}), got {type(a).__name__}"
                    )
            elif kind.is_int:
                if not isinstance(a, int) or isinstance(a, bool):
                    raise LaunchError(f"argument `{p.name}` must be an int ({kind}), got {type(a).__name__}")
            ct = _CTYPES.get(kind.name)
            if ct is None:
                raise LaunchError(f"scalar arguments of type {kind} are not supported; pass f32")
            values.append(ct(a))
        else:
            raise LaunchError(f"parameter `{p.name}` of type {t} cannot be passed at launch")
    return values, dims, on_device


def _raw_stream_fn():
    """torch's accessor for the raw handle of a device's current stream (the fast one where torch has it)."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw if raw is not None else (lambda index: torch.cuda.current_stream(index).cuda_stream)


def _on_launch_error(prep, rc: int, dims, stream):
    if rc == CUDA_ERROR_INVALID_CONTEXT:  # a thread on which torch never made the context current
        _ensure_context(prep.index)
        rc = prep.launch_dims(dims, stream)
    _check(rc, f"launching `{prep.ck.name}`")


def _launch_on_device(prep, dims, stream):
    """The launch on a machine of several GPUs when the tensors' device is not the current one."""
    import torch

    with torch.cuda.device(prep.index):
        rc = prep.launch_dims(dims, stream)
    if rc:
        _on_launch_error(prep, rc, dims, stream)
    return prep.ck


@functools.cache
def _several_devices() -> bool:
    import torch

    return torch.cuda.device_count() > 1


def prepare(ck, args, positions=None) -> PreparedLaunch:
    """Check `args` (run-time arguments in parameter order) against `ck`'s signature, load the module on their
    device, and lay out the argument buffer: a PreparedLaunch whose `.call(grid, args, stream)` launches calls
    of this signature."""
    import torch

    from .native import launcher

    values, _dims, device = pack_args(ck, args)
    values += launch_values(ck, args)  # tensor maps of bulk tensor copies, then their tp_tma_ok bits
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device())
    index = device.index if device.index is not None else torch.cuda.current_device()
    switch = torch.cuda.device(index) if index != torch.cuda.current_device() else contextlib.nullcontext()
    with switch:
        _, func = _function(ck, index)
    several = _several_devices()
    return build_prepared(
        ck, args, values, func, index, positions,
        launch_fn=launcher()[0], stream_fn=_raw_stream_fn(), on_error=_on_launch_error,
        current_device=torch.cuda.current_device if several else None,
        switch_device=_launch_on_device if several else None,
    )


def launch_compiled(ck, grid, args, stream=None):
    """Launch a CompiledKernel on `grid` (a tuple, an int, or a callable of the constexprs and dimensions)
    with run-time arguments `args`, checking them first."""
    return prepare(ck, args).call(grid, args, stream)


_LAUNCHED: dict = {}  # (kernel, target, arch, constexprs) -> CompiledKernel
_PREPARED: dict = {}  # kernel -> _Signatures
_SIGNATURE_LIMIT = 256  # prepared launches per kernel kept (cleared past it)


class _Signatures:
    """The prepared launches of one kernel by signature key (`prepared.signature_key`), and the kernel's fast
    path over them (`Kernel.gpu_launch`, which `kernel[grid](...)` tries first). The fast path steps aside
    while `tilepy_hip.launch` is wrapped (an evaluation guard counting launches, a profiler): the wrapper must
    see every call."""

    def __init__(self, kernel):
        self.entries: dict = {}
        self.key = signature_key(kernel.params)
        from .native import native_fast

        self.fast = fast_path(kernel.params, self.entries, _package, launch, native_fast())
        self.runtime_at = tuple(i for i, (_, spec, _) in enumerate(kernel.params) if spec != "constexpr")
        self.runtime_names = frozenset(n for n, spec, _ in kernel.params if spec != "constexpr")

    def cacheable(self, args, kwargs: dict) -> bool:
        """Whether a call's run-time arguments all come by position (keyword or default ones are bound on the
        slow path each time)."""
        return bool(self.runtime_at) and len(args) > self.runtime_at[-1] and not (set(kwargs) & self.runtime_names)


def launch(kernel, grid, *args, target: str | None = None, stream=None, **kwargs):
    """Compile (cached) and launch a tilepy kernel on torch CUDA tensors, on the current stream.

    `grid` is a tuple, an int, or a function of {constexpr and dimension name: value} like `kernel[grid]`.
    A call whose arguments have the signature (dtypes, shapes, devices, contiguity, constexprs) of an earlier
    one reuses its checked, prepared launch (`prepared.py`); any other call is checked in full first.

    >>> launch(vector_add, (tp.cdiv(n, 1024),), x, y, z, BLOCK=1024)    # doctest: +SKIP
    """
    fast = kernel.gpu_launch
    if fast is not None:
        ck = fast(grid, target, kwargs, args, stream)
        if ck is not None:
            return ck
    return _launch_checked(kernel, grid, args, kwargs, target, stream)


def _launch_checked(kernel, grid, args, kwargs, target, stream):
    """The slow path: bind and check the arguments, compile or find the binary, prepare, remember, launch."""
    import torch

    from .build import compile_ir

    runtime, consts = kernel.bind_args(args, kwargs)
    tensors = [a for a in runtime if isinstance(a, torch.Tensor) and a.is_cuda]
    if not tensors and not torch.cuda.is_available():
        raise LaunchError(f"no CUDA device to launch `{kernel.name}` on; run it on the CPU interpreter with "
                          f"{kernel.name}[grid](...), or build it with tilepy_hip.compile")
    index = tensors[0].device.index if tensors else torch.cuda.current_device()
    arch = device_target(index)
    # `target` picks the language target (which instructions the kernel may use); the binary is always built
    # for the device: an sm_80 kernel runs on an H100 as sm_90a code (its ops are a subset).
    try:  # this kernel, these constexprs, this device, compiled before
        key = (kernel, target, arch, tuple(sorted(consts.items())))
        ck = _LAUNCHED.get(key)
    except TypeError:  # an unhashable constexpr: resolve it the long way
        key, ck = None, None
    if ck is None:
        ck = compile_ir(kernel.ir(target or arch, **consts), arch)
        if key is not None:
            _LAUNCHED[key] = ck
    table = _PREPARED.get(kernel) or _Signatures(kernel)
    if not (tensors and table.cacheable(args, kwargs)):
        prep = prepare(ck, runtime)
        return prep.call(grid, _scalars_as_numbers(prep, runtime), stream)
    prep = prepare(ck, runtime, positions=table.runtime_at)
    call_args = _scalars_as_numbers(prep, args)
    if call_args is args:  # a scalar passed as a one-element tensor is read on the host: never cached
        try:
            sig = table.key(target, kwargs, args)
            if len(table.entries) >= _SIGNATURE_LIMIT:
                table.entries.clear()
            table.entries[sig] = prep.record()
            _PREPARED[kernel] = table
            kernel.gpu_launch = table.fast
        except TypeError:
            pass  # an unhashable argument or constexpr: no fast-path entry, every call takes the checked path
    return prep.call(grid, call_args, stream)


def _scalars_as_numbers(prep, args):
    """`args` with one-element tensors passed for scalar parameters read out (pack_args checked them)."""
    import torch

    if not any(isinstance(args[i], torch.Tensor) for _, i in prep.scalar_slots):
        return args
    args = list(args)
    for _, i in prep.scalar_slots:
        if isinstance(args[i], torch.Tensor):
            args[i] = args[i].item()
    return args
