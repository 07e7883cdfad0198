"""tilepy_hip: HIP C++ backend for tilepy kernels (sm_90a, sm_80, gfx942).

    import tilepy_hip
    src = tilepy_hip.render(kernel.ir("sm_90a", BLOCK=1024), "sm_90a")     # HIP C++ text
    ck = tilepy_hip.compile(kernel, target="sm_90a", BLOCK=1024)          # CompiledKernel (cached on disk)
    tilepy_hip.launch(kernel, grid, x, y, z, BLOCK=1024)                  # torch CUDA tensors, current stream
    fwd = tilepy_hip.graphs.GraphedFunction(host_program)                 # CUDA graph per input signature

NVIDIA code compiles with NVRTC (nvcc as fallback) against `include/tilepy_hip.h`, which maps the HIP names
onto CUDA; AMD code compiles with an AMDGPU-capable clang (Debian clang-N, hipcc, or the ziglang wheel).
"""

from __future__ import annotations

import sys as _sys

from tilepy import register_gpu_backend as _register

from . import graphs, native
from ._version import __version__
from .build import CompiledKernel, compile, compile_ir
from .launch import launch
from .render import RENDER_TARGETS, render_source
from .toolchains import find_amd_clang, toolchain_info

_register(_sys.modules[__name__])   # kernel[grid](...) on CUDA tensors launches through this package


def render(kir, target=None) -> str:
    """The HIP C++ source of a specialized kernel (`KernelIR`) for `target` (default: the IR's own target).

    Raises tilepy.CompileError, naming the op's source line and the target, for what the target cannot do.
    """
    return render_source(kir, target)[0]


__all__ = [
    "__version__",
    "render",
    "compile",
    "compile_ir",
    "launch",
    "graphs",
    "native",
    "CompiledKernel",
    "RENDER_TARGETS",
    "find_amd_clang",
    "toolchain_info",
]
