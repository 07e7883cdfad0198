"""The CUDA driver API through ctypes on libcuda: the library handle, error checking, and torch's primary
context. The one place tilepy_hip touches the driver directly (launch.py loads modules and launches;
tensor_map.py encodes TMA descriptors)."""

from __future__ import annotations

import ctypes
import functools

from tilepy.errors import LaunchError


@functools.cache
def driver():
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise LaunchError(f"the CUDA driver (libcuda.so.1) is not available: {exc}") from None
    cuda.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    return cuda


def check(rc: int, what: str):
    if rc != 0:
        msg = ctypes.c_char_p()
        driver().cuGetErrorString(rc, ctypes.byref(msg))
        raise LaunchError(f"{what} failed: CUDA error {rc} ({(msg.value or b'?').decode()})")


def ensure_context(device_index: int):
    """torch's primary context for `device_index`, current on this thread."""
    import torch

    torch.cuda.init()
    cuda = driver()
    ctx = ctypes.c_void_p()
    check(cuda.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    if not ctx.value:
        dev = ctypes.c_int()
        check(cuda.cuDeviceGet(ctypes.byref(dev), device_index), "cuDeviceGet")
        check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        check(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx.value
