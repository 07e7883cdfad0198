"""Element types of the tile language and their numpy representation on the CPU interpreter."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DType:
    """An element type. `storage` is the numpy type the interpreter keeps values in; bf16 has none in numpy,
    so it is stored as float32 rounded to bf16 precision after every op that produces it."""

    name: str
    bits: int
    kind: str  # "float" | "int" | "uint" | "bool"
    storage: str

    @property
    def bytes(self) -> int:
        return max(self.bits // 8, 1)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def np(self) -> np.dtype:
        return np.dtype(self.storage)

    def __repr__(self) -> str:
        return f"tp.{self.name}"

    def __str__(self) -> str:
        return self.name


f16 = DType("f16", 16, "float", "float16")
bf16 = DType("bf16", 16, "float", "float32")
f32 = DType("f32", 32, "float", "float32")
f64 = DType("f64", 64, "float", "float64")
i8 = DType("i8", 8, "int", "int8")
i32 = DType("i32", 32, "int", "int32")
i64 = DType("i64", 64, "int", "int64")
u32 = DType("u32", 32, "uint", "uint32")
bool_ = DType("bool", 8, "bool", "bool")

ALL = {d.name: d for d in (f16, bf16, f32, f64, i8, i32, i64, u32, bool_)}

# numpy / torch dtype names accepted at launch, mapped to ours.
_FROM_NAME = {
    "float16": f16, "half": f16, "bfloat16": bf16, "float32": f32, "float": f32, "float64": f64,
    "double": f64, "int8": i8, "int32": i32, "int": i32, "int64": i64, "long": i64, "uint32": u32, "bool": bool_,
}


def from_any(dt) -> DType | None:
    """Our DType for a numpy dtype, torch dtype or name; None when there is none."""
    if isinstance(dt, DType):
        return dt
    name = str(dt).replace("torch.", "")
    return ALL.get(name) or _FROM_NAME.get(name)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bf16 (ties to even), keeping float32 storage."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, out)


def to_storage(x, dtype: DType) -> np.ndarray:
    """Convert values to the interpreter's storage of `dtype` with the target type's rounding."""
    arr = np.asarray(x)
    if dtype is bf16:
        return round_bf16(arr.astype(np.float32))
    return arr.astype(dtype.storage)


def promote(a: DType, b: DType) -> DType:
    """Result type of a binary op on two tiles: the wider float wins; float beats int."""
    if a == b:
        return a
    if a.is_float and not b.is_float:
        return a
    if b.is_float and not a.is_float:
        return b
    if a.is_float and b.is_float:
        if a.bits != b.bits:
            return a if a.bits > b.bits else b
        return f32  # f16 with bf16: neither holds the other
    if a.kind == "bool":
        return b
    if b.kind == "bool":
        return a
    return a if a.bits >= b.bits else b
