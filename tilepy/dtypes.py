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
# OCP float8 e4m3 ("e4m3fn"): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, NaN is S.1111.111,
# largest finite 448, smallest subnormal 2**-9. numpy has none, so it is stored as float32 holding e4m3 values
# (rounded after every op that produces e4m3, as bf16 is).
e4m3 = DType("e4m3", 8, "float", "float32")

ALL = {d.name: d for d in (f16, bf16, f32, f64, i8, i32, i64, u32, bool_, e4m3)}

# numpy / torch dtype names accepted at launch, mapped to ours.
_FROM_NAME = {
    "float16": f16, "half": f16, "bfloat16": bf16, "float32": f32, "float": f32, "float64": f64,
    "double": f64, "int8": i8, "int32": i32, "int": i32, "int64": i64, "long": i64, "uint32": u32, "bool": bool_,
    "float8_e4m3fn": e4m3,
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


E4M3_MAX = 448.0


def round_e4m3(x) -> np.ndarray:
    """Round values to the nearest e4m3 (ties to even), saturating to +-448, keeping float32 storage: PTX
    `cvt.rn.satfinite.e4m3x2.f32` (infinities saturate too; NaN stays NaN). Inputs are taken as float32 first,
    as the GPU converts from an f32 register.

    >>> [float(v) for v in round_e4m3(np.array([0.3, 17.0, 1e6, -np.inf, 2.0**-10 * 1.5], np.float32))]
    [0.3125, 16.0, 448.0, -448.0, 0.001953125]
    """
    a = np.asarray(x, dtype=np.float32)
    bits = a.view(np.uint32)
    sign = bits & np.uint32(0x80000000)
    mag = (bits & np.uint32(0x7FFFFFFF)).view(np.float32)
    # quantum of the e4m3 binade holding |x|: 2**(e - 3) for normals (e >= -6), 2**-9 for subnormals; the
    # quantum is a power of two, so x / q and the rounded multiple of q are exact in float32
    exp = ((mag.view(np.uint32) >> np.uint32(23)).astype(np.int32) - 127).clip(-6, 8)
    q = np.ldexp(np.float32(1), exp - 3).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        r = (np.rint(mag / q) * q).astype(np.float32)
        r = np.minimum(r, np.float32(E4M3_MAX))
    out = (r.view(np.uint32) | sign).view(np.float32)
    return np.where(np.isnan(a), a, out).astype(np.float32)


def e4m3_to_bits(x) -> np.ndarray:
    """The e4m3 bit patterns (uint8) of values already rounded to e4m3 (`round_e4m3`); NaN is 0x7f / 0xff."""
    a = round_e4m3(x)
    sign = (np.signbit(a).astype(np.uint8) << np.uint8(7))
    mag = np.abs(a).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.floor(np.log2(np.where(mag > 0, mag, 1.0))).clip(-6, 8)
        normal = mag >= 2.0 ** -6
        m = np.where(normal, mag / 2.0 ** e * 8 - 8, mag * 2.0 ** 9)
        code = np.where(normal, (e + 7) * 8 + m, m)
    code = np.where(np.isnan(a), 0x7F, code).astype(np.uint8)
    return code | sign


def e4m3_from_bits(b) -> np.ndarray:
    """float32 values of e4m3 bit patterns (exact); 0x7f / 0xff are NaN."""
    b = np.asarray(b, dtype=np.uint8).astype(np.int64)
    e, m = (b >> 3) & 0xF, b & 7
    mag = np.where(e == 0, m * 2.0 ** -9, (8 + m) * np.ldexp(1.0, e - 10))
    mag = np.where((b & 0x7F) == 0x7F, np.nan, mag)
    return np.where(b & 0x80, -mag, mag).astype(np.float32)


def to_storage(x, dtype: DType) -> np.ndarray:
    """Convert values to the interpreter's storage of `dtype` with the target type's rounding."""
    arr = np.asarray(x)
    if dtype is bf16:
        return round_bf16(arr.astype(np.float32))
    if dtype is e4m3:
        return round_e4m3(arr.astype(np.float32))
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
