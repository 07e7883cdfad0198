"""tilepy: a tile language for GPU kernels.

    import tilepy as tp

    @tp.kernel(threads=128)
    def add(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], Z: tp.Tensor[tp.f32, "N"],
            BLOCK: tp.constexpr = 1024):
        i0 = tp.block_id(0) * BLOCK
        tp.store(Z[i0:i0 + BLOCK], tp.load(X[i0:i0 + BLOCK]) + tp.load(Y[i0:i0 + BLOCK]))

    add[(tp.cdiv(n, 1024),)](x, y, z)     # runs on the CPU interpreter for numpy arrays
"""

from . import instructions as _instructions
from ._version import __version__
from .dtypes import bf16, bool_, e4m3, f16, f32, f64, i8, i32, i64, u32
from .errors import (
    CompileError,
    ConstexprError,
    InterpreterError,
    KernelTypeError,
    LaunchError,
    ResourceError,
    ShapeError,
    TargetError,
    TilepyError,
    UnsupportedConstructError,
)
from .ir import KernelIR
from .kernel import Kernel, kernel, kernels_from_source, register_gpu_backend
from .language import Tensor, accumulator, blocked, constexpr, mma_layout
from .language import builtins as _builtins
from .layout import Layout, Swizzle
from .printer import format_ir
from .resources import Resources
from .resources import estimate as estimate_resources
from .tv_layout import TVLayout

nv = _instructions.nv
amd = _instructions.amd
globals().update(_builtins)

__all__ = [
    "__version__", "kernel", "Kernel", "KernelIR", "Tensor", "constexpr", "Layout", "Swizzle", "TVLayout",
    "blocked", "accumulator", "mma_layout", "nv", "amd", "format_ir", "kernels_from_source", "Resources",
    "estimate_resources", "register_gpu_backend",
    "bf16", "bool_", "e4m3", "f16", "f32", "f64", "i8", "i32", "i64", "u32",
    "TilepyError", "CompileError", "UnsupportedConstructError", "KernelTypeError", "ShapeError", "ConstexprError",
    "ResourceError", "TargetError", "LaunchError", "InterpreterError",
    *sorted(_builtins),
]
