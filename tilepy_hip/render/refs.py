"""What names are bound to while a kernel renders: global tensors and views of them, shared allocations and
views of them (element offsets come from `SharedType.offset`, printed as C++ by `cexpr.sym_c`)."""

from __future__ import annotations

from dataclasses import dataclass

from tilepy import dtypes as dt
from tilepy.types import SharedType


@dataclass
class TensorRef:
    ptr: str
    dtype: dt.DType
    dims: list  # C expressions of each dimension's size
    param: str = ""  # the tilepy parameter's name


@dataclass
class ViewRef:
    """A window of a global tensor: starts per tensor dimension, static sizes, squeezed dimensions."""

    tensor: TensorRef
    starts: list  # C expressions
    sizes: tuple
    squeeze: tuple

    @property
    def dtype(self):
        return self.tensor.dtype

    @property
    def tile_dims(self) -> list[int]:
        """Tensor dimension of each tile dimension."""
        return [j for j, q in enumerate(self.squeeze) if not q]

    def stride(self, j: int) -> str:
        dims = self.tensor.dims[j + 1 :]
        return " * ".join(f"(long long){d}" for d in dims) if dims else "1LL"


@dataclass
class SmemRef:
    """One stage of a shared tile: `ptr` is a C element pointer, `offset` its byte offset in tp_smem."""

    ptr: str
    stype: SharedType
    offset: str
    align: int = 16

    @property
    def dtype(self):
        return self.stype.dtype


@dataclass
class SharedAlloc:
    name: str
    stype: SharedType
    offset: int


__all__ = ["SharedAlloc", "SmemRef", "TensorRef", "ViewRef"]
