"""The call that reaches cuLaunchKernel: a small C extension (`include/tilepy_hip_launch.c`), built on first use
with the system C compiler into the tilepy_hip cache, or ctypes on libcuda where it cannot be built.

The extension's `launch(func, gx, gy, gz, block_x, shared_bytes, stream, params)` takes ints and returns the
CUresult; its `fast(...)` is the whole fast path of a signature of tensors (key, lookup, pointers, launch; see
prepared.py). Host time per launch on the H100 machine (benchmarks/launch_overhead.py --paths, same prepared
arguments): the extension 2.9-3.8 us, cuda-bindings 3.5-5.1 us, ctypes 4.5-7.3 us; it is the fastest and needs
only a C compiler and Python's headers (no CUDA headers: it finds the driver with dlopen).
`TILEPY_HIP_LAUNCHER=ctypes` forces the ctypes path.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

from .cache import cache_root, sha256

SOURCE = Path(__file__).parent / "include" / "tilepy_hip_launch.c"


def compile_extension() -> Path:
    """Compile the extension (once per source, Python version and machine; cached) and return its path."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    include = sysconfig.get_paths()["include"]
    if cc is None:
        raise OSError("no C compiler (cc, gcc or clang) on PATH")
    if not (Path(include) / "Python.h").exists():
        raise OSError(f"no Python.h in {include} (the Python development headers)")
    text = SOURCE.read_bytes()
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    path = cache_root() / "native" / f"tilepy_hip_launch_{sha256(text + suffix.encode())[:16]}{suffix}"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        cmd = [cc, "-O2", "-shared", "-fPIC", f"-I{include}", str(SOURCE), "-o", str(tmp), "-ldl"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise OSError(f"{' '.join(cmd)} failed: {r.stderr.strip()[-500:]}")
        os.replace(tmp, path)  # concurrent builders each rename a whole file into place
    return path


def _load(path: Path):
    spec = importlib.util.spec_from_file_location("tilepy_hip_launch", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ctypes_launch():
    cu = ctypes.CDLL("libcuda.so.1").cuLaunchKernel  # a handle of its own, so these argtypes are its own
    cu.argtypes = [ctypes.c_void_p, *([ctypes.c_uint] * 7), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]

    def launch(func, gx, gy, gz, bx, smem, stream, params):
        return cu(func, gx, gy, gz, bx, 1, 1, smem, stream, params, None)

    return launch


@functools.cache
def _extension():
    """The C extension module, or the reason it is unavailable (a str)."""
    if os.environ.get("TILEPY_HIP_LAUNCHER") == "ctypes":
        return "TILEPY_HIP_LAUNCHER=ctypes"
    try:
        ext = _load(compile_extension())
    except (OSError, ImportError) as exc:
        return f"the C extension is unavailable: {exc}"
    return ext if ext.driver_found() else "no CUDA driver (libcuda.so.1) for the C extension"


def native_fast():
    """The extension's `bound_fast` (the wrapped-launch check, signature key, lookup, pointer fill and launch in
    C), or None."""
    ext = _extension()
    return None if isinstance(ext, str) else ext.bound_fast


@functools.cache
def launcher() -> tuple:
    """(launch function, which one it is and, for ctypes, why not the extension)."""
    ext = _extension()
    if isinstance(ext, str):
        return _ctypes_launch(), f"ctypes ({ext})"
    return ext.launch, "C extension"
