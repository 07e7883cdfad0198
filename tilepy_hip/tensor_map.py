"""Tensor maps (CUtensorMap) for bulk tensor copies, built on the host with the driver's
cuTensorMapEncodeTiled (through the same ctypes handle on libcuda as the launch) and cached per (pointer,
shape, strides, box, swizzle, element type).

The renderer (`render/tma.py`) names, per tensor-map parameter, the tensor parameter, the box (innermost
dimension first) and the swizzle. At launch, `tensor_map_args` checks what only the run-time tensor can
violate (a 16-byte aligned base address, byte strides that are multiples of 16 and under 2**40, sizes under
2**32); when any fails, or the driver refuses the map, the map is left zeroed and its bit in the kernel's
`tp_tma_ok` argument stays clear, so the kernel takes its per-row or per-element fallback.
"""

from __future__ import annotations

import ctypes

# CUtensorMapDataType (e4m3: CU_TENSOR_MAP_DATA_TYPE_UINT8, the copy engine moves bytes)
_DATA_TYPES = {"u8": 0, "i8": 0, "bool": 0, "e4m3": 0, "f16": 6, "f32": 7, "f64": 8, "bf16": 9, "i32": 3, "u32": 2,
               "i64": 5}
_BYTES = {"u8": 1, "i8": 1, "bool": 1, "e4m3": 1, "f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i32": 4, "u32": 4,
          "i64": 8}
CU_TENSOR_MAP_INTERLEAVE_NONE = 0
CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3
CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0  # out-of-bounds elements read as zeros
TENSOR_MAP_BYTES = 128

_CACHE: dict = {}
_CACHE_LIMIT = 4096


def tensor_map_args(spec, shape, ptr: int) -> tuple[dict | None, str]:
    """The arguments of cuTensorMapEncodeTiled for a row-major contiguous tensor of `shape` at `ptr`, or
    (None, why not). `spec` is a render.tma.TensorMapSpec."""
    eb = _BYTES.get(spec.dtype)
    if eb is None or spec.dtype not in _DATA_TYPES:
        return None, f"no tensor-map element type for {spec.dtype}"
    if len(shape) != spec.rank:
        return None, f"the tensor has rank {len(shape)}, the map {spec.rank}"
    if ptr % 16:
        return None, "the tensor's address is not 16-byte aligned"
    dims = [int(n) for n in reversed(shape)]  # innermost first
    if any(n < 1 or n > 2**32 for n in dims):
        return None, "a dimension is empty or over 2**32"
    strides, acc = [], eb
    for n in dims[:-1]:
        acc *= n
        strides.append(acc)  # byte stride of dimensions 1 .. rank - 1
    if any(s % 16 or s >= 2**40 for s in strides):
        return None, "a row's byte stride is not a multiple of 16"
    return {
        "dtype": _DATA_TYPES[spec.dtype],
        "rank": spec.rank,
        "ptr": ptr,
        "dims": dims,
        "strides": strides,
        "box": list(spec.box),
        "swizzle": spec.swizzle,
    }, ""


def _encode(args: dict):
    from .driver import check as _check
    from .driver import driver as _driver

    cuda = _driver()
    rank = args["rank"]
    raw = (ctypes.c_uint8 * (TENSOR_MAP_BYTES + 64))()
    addr = ctypes.addressof(raw)
    aligned = addr + (-addr) % 64  # CUtensorMap is 64-byte aligned
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    rc = cuda.cuTensorMapEncodeTiled(
        ctypes.c_void_p(aligned),
        ctypes.c_int(args["dtype"]),
        u32(rank),
        ctypes.c_void_p(args["ptr"]),
        (u64 * rank)(*args["dims"]),
        (u64 * max(rank - 1, 1))(*(args["strides"] or [0])),
        (u32 * rank)(*args["box"]),
        (u32 * rank)(*([1] * rank)),
        ctypes.c_int(CU_TENSOR_MAP_INTERLEAVE_NONE),
        ctypes.c_int(args["swizzle"]),
        ctypes.c_int(CU_TENSOR_MAP_L2_PROMOTION_L2_256B),
        ctypes.c_int(CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
    )
    if rc != 0:
        try:
            _check(rc, "cuTensorMapEncodeTiled")
        except Exception as exc:  # noqa: BLE001 - a refused map means the fallback path, reported once
            return None, str(exc)
    return (ctypes.c_uint8 * TENSOR_MAP_BYTES).from_buffer_copy(
        (ctypes.c_uint8 * TENSOR_MAP_BYTES).from_address(aligned)
    ), ""


def tensor_map(spec, tensor):
    """(a 128-byte ctypes buffer holding the map, True) or (a zeroed buffer, False) for a torch tensor."""
    shape = tuple(int(n) for n in tensor.shape)
    key = (tensor.data_ptr(), shape, tuple(tensor.stride()), spec.box, spec.swizzle, spec.dtype)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    args, _why = tensor_map_args(spec, shape, tensor.data_ptr())
    buf = None
    if args is not None:
        buf, _why = _encode(args)
    out = (buf, True) if buf is not None else ((ctypes.c_uint8 * TENSOR_MAP_BYTES)(), False)
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[key] = out
    return out


class TensorMapRefused(ValueError):
    """A tensor a TMA-only bulk copy or store (`tp.copy_bulk` / `tp.store_bulk(..., fallback=False)`) accesses
    cannot be described by a tensor map; the kernel has no other path, so it is not launched."""


def require(spec, tensor) -> None:
    """Raise TensorMapRefused naming the tensor parameter and the reason (the map of a required spec was
    refused)."""
    shape = tuple(int(n) for n in tensor.shape)
    _args, why = tensor_map_args(spec, shape, tensor.data_ptr())
    if not why:
        contiguous = getattr(tensor, "is_contiguous", lambda: True)()
        why = "the driver refused the map" + ("" if contiguous else " (the tensor is not contiguous)")
    raise TensorMapRefused(
        f"tensor '{spec.param}' (shape {list(shape)}): {why}. This kernel was built with TMA-only bulk copies "
        "(copy_bulk / store_bulk(..., fallback=False)), so it cannot access it; pass a contiguous tensor with a "
        "16-byte aligned base and 16-byte multiple row strides (e.g. x.contiguous() or a padded copy), or build the "
        "kernel with fallback=True")


def launch_values(ck, args) -> list:
    """The extra kernel arguments of `ck` (a CompiledKernel): one map per tensor-map parameter, then the
    `tp_tma_ok` bit set."""
    if not ck.tensor_maps:
        return []
    by_name = {p.name: a for p, a in zip(ck.params, args)}
    values, ok = [], 0
    for i, spec in enumerate(ck.tensor_maps):
        buf, good = tensor_map(spec, by_name[spec.param])
        if not good and spec.required:
            require(spec, by_name[spec.param])
        values.append(buf)
        ok |= int(good) << i
    return [*values, ctypes.c_uint32(ok)]
