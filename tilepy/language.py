"""The names kernels use (`import tilepy as tp`): annotations, builtins and compile-time helpers.

Builtins are markers: inside an `@tilepy.kernel` body the front end translates calls to them into IR; called
from plain Python they raise. Compile-time helpers (layouts, swizzles, cdiv on ints) are ordinary functions
the front end evaluates while compiling.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import dtypes as _dt
from .tv_layout import TVLayout, blocked


class Builtin:
    """A language builtin such as `tp.load`; meaningful only inside a kernel body."""

    def __init__(self, name: str, doc: str = "", plain=None):
        self.name = name
        self.__doc__ = doc or f"tilepy builtin `tp.{name}`"
        self.plain = plain  # what the builtin computes when called from plain Python, if it means anything there

    def __call__(self, *args, **kwargs):
        if self.plain is not None:
            return self.plain(*args, **kwargs)
        raise RuntimeError(
            f"tp.{self.name}(...) is a tilepy builtin and only works inside an @tilepy.kernel function; "
            f"run the kernel on the interpreter (kernel[grid](...)) instead of calling it from Python")

    def __repr__(self) -> str:
        return f"tp.{self.name}"


@dataclass(frozen=True)
class TensorSpec:
    """`tp.Tensor[dtype, dim0, dim1, ...]`: a global tensor argument; dims are ints or symbolic names."""

    dtype: _dt.DType
    shape: tuple


class _TensorAnnotation:
    def __getitem__(self, item) -> TensorSpec:
        item = item if isinstance(item, tuple) else (item,)
        dtype, *dims = item
        dtype = _dt.from_any(dtype)
        if dtype is None or not all(isinstance(d, int | str) for d in dims):
            raise TypeError("write tensor annotations as tp.Tensor[tp.f32, 'M', 'N'] (a dtype, then int or str dims)")
        return TensorSpec(dtype, tuple(dims))


Tensor = _TensorAnnotation()


class constexpr:  # noqa: N801 - spelled like the annotation users know from Triton
    """Annotation of a compile-time parameter: the kernel is specialized (and cached) per value."""


_BUILTINS = (
    "block_id num_blocks thread_id lane_id warp_id warpgroup_id cdiv load store copy copy_async commit_async "
    "wait_async copy_bulk barrier mbarrier mbarrier_arrive mbarrier_wait shared zeros full arange cast where "
    "maximum minimum exp exp2 log log2 sqrt rsqrt abs sin cos tanh sigmoid silu erf round_tf32 sum max min mma "
    "convert_layout tag assert_tag mma_operands schedule pipeline static_range num_threads warp_size "
    "atomic_add atomic_max atomic_min atomic_cas prod any all argmax argmin cumsum cumprod permute reshape transpose "
    "broadcast_to mma_async mma_wait setmaxnreg store_bulk store_bulk_wait cluster_rank cluster_sync store_remote"
).split()

def cdiv_const(a: int, b: int) -> int:
    """ceil(a / b) for non-negative ints."""
    return -(-a // b)


builtins = {name: Builtin(name) for name in _BUILTINS}
builtins["cdiv"].plain = cdiv_const


def accumulator(instr, shape, warps=(1, 1)) -> TVLayout:
    """Layout of an MMA accumulator tile: `instr`'s C fragment tiled over `shape` and a warp grid."""
    from .instructions import mma_operand_layout

    return mma_operand_layout(instr, "c", tuple(shape), tuple(warps))


def mma_layout(instr, operand: str, shape, warps=(1, 1)) -> TVLayout:
    """Layout of MMA operand `operand` ("a", "b" or "c") of `instr` over a tile `shape` and a warp grid."""
    from .instructions import mma_operand_layout

    return mma_operand_layout(instr, operand, tuple(shape), tuple(warps))


__all__ = ["Builtin", "Tensor", "TensorSpec", "constexpr", "builtins", "accumulator", "mma_layout", "blocked"]
