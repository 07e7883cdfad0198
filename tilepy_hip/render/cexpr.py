"""C++ spellings of tilepy types, constants and symbolic index expressions.

Layouts and swizzles (`tilepy.layout`) evaluate on `tilepy.symbolic.Sym`; a `Sym` whose variables are C
names prints here as a C++ expression (coordinates are never negative, so `//` and `%` are C's `/` and `%`).
"""

from __future__ import annotations

import math

from tilepy import dtypes as dt
from tilepy.symbolic import BinOp, Const, Sym, Var, as_sym

C_TYPES = {
    "f16": "tp_f16",
    "bf16": "tp_bf16",
    "e4m3": "tp_e4m3",
    "f32": "float",
    "f64": "double",
    "i8": "signed char",
    "i32": "int",
    "i64": "long long",
    "u32": "unsigned",
    "bool": "bool",
}

C_KEYWORDS = frozenset(
    """
auto bool break case catch char class const constexpr continue default delete do double else enum explicit
extern false float for friend goto if inline int long mutable namespace new operator private protected public
register return short signed sizeof static struct switch template this throw true try typedef typename union
unsigned using virtual void volatile while asm alignas alignof char16_t char32_t decltype noexcept nullptr
static_assert thread_local and or not xor bitand bitor compl and_eq or_eq xor_eq not_eq main
""".split()
)


def ctype(dtype: dt.DType) -> str:
    return C_TYPES[dtype.name]


_STORAGE_FLOATS = ("f16", "bf16", "e4m3")


def compute_type(dtype: dt.DType) -> str:
    """The C type arithmetic on `dtype` happens in: 16-bit floats (and e4m3) compute in float."""
    return "float" if dtype.name in _STORAGE_FLOATS else ctype(dtype)


def is_half(dtype: dt.DType) -> bool:
    """A float kept as raw bits in a struct (tp_f16, tp_bf16, tp_e4m3) that converts through float."""
    return dtype.name in _STORAGE_FLOATS


def cname(name: str) -> str:
    """A user's variable name as a C identifier that cannot clash with C++ or with our `tp_` names."""
    if name in C_KEYWORDS or name.startswith("tp_") or name.startswith("__"):
        return f"{name}_"
    return name


def literal(value, dtype: dt.DType) -> str:
    """A constant of `dtype` as a C++ literal."""
    if dtype.name == "bool":
        return "true" if value else "false"
    if dtype.is_float:
        v = float(value)
        if math.isnan(v):
            text = "TP_NAN"
        elif math.isinf(v):
            text = "TP_INF" if v > 0 else "(-TP_INF)"
        else:
            text = repr(v)
            if "e" not in text and "." not in text:
                text += ".0"
            if dtype.name != "f64":
                text += "f"
        if is_half(dtype):
            return f"{ctype(dtype)}({text})"
        if dtype.name == "f64" and text in ("TP_NAN", "TP_INF", "(-TP_INF)"):
            return f"(double){text}"
        return text
    v = int(value)
    if dtype.name == "u32":
        return f"{v}u"
    if dtype.name == "i64" or not -(2**31) <= v < 2**31:
        return f"{v}LL"
    return str(v)


def cast(text: str, src: dt.DType, dst: dt.DType) -> str:
    """Convert a C expression of type ctype(src) to ctype(dst), through float for 16-bit floats."""
    if src == dst:
        return text
    if is_half(src):
        text = f"(float)({text})"
        if dst.name == "f32":
            return text
    if is_half(dst):
        if not src.is_float or src.name == "f64":
            text = f"(float)({text})"
        return f"{ctype(dst)}({text})"
    return f"({ctype(dst)})({text})"


def to_compute(text: str, src: dt.DType, compute: dt.DType) -> str:
    """`text` (of type ctype(src)) as a value of compute_type(compute)."""
    if is_half(compute):
        return cast(text, src, dt.f32)
    return cast(text, src, compute)


def sym_c(e) -> str:
    """A symbolic integer expression (or an int) as C++."""
    return _fmt(as_sym(e))


_C_OPS = {
    "//": "/",
    "%": "%",
    "+": "+",
    "-": "-",
    "*": "*",
    "^": "^",
    "&": "&",
    "|": "|",
    ">>": ">>",
    "<<": "<<",
}


def _fmt(e: Sym) -> str:
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        return str(e.value) if -(2**31) <= e.value < 2**31 else f"{e.value}LL"
    assert isinstance(e, BinOp)
    return f"({_fmt(e.a)} {_C_OPS[e.op]} {_fmt(e.b)})"


def var(name: str) -> Var:
    """A C variable as a symbolic term, for evaluating layouts on it."""
    return Var(name)
