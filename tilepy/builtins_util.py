"""Helpers shared by the builtin type rules (tilepy.builtins_impl and its mixins)."""

from __future__ import annotations

import libcst as cst

from . import ir
from .instructions import MmaInstr
from .layout import Layout, Swizzle
from .tv_layout import TVLayout


def _is_pow2(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


def _broadcast(a: tuple, b: tuple):
    if len(a) != len(b):
        return None
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(out)


def row_major_layout(shape) -> Layout:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return Layout(tuple(shape), tuple(reversed(strides)))


def swizzle_span(s: Swizzle) -> int:
    return 1 << (s.bits + s.base + s.shift)


def _insert_dim(layout: TVLayout, axis: int) -> TVLayout:
    zero = (tuple(0 for _ in layout.thread_shape), tuple(0 for _ in layout.value_shape))
    strides = layout.strides[:axis] + (zero,) + layout.strides[axis:]
    tile = layout.tile[:axis] + (1,) + layout.tile[axis:]
    return TVLayout(tile, layout.thread_shape, layout.value_shape, strides, layout.name)


def _remove_dim(layout: TVLayout, axis: int) -> TVLayout:
    return TVLayout(
        layout.tile[:axis] + layout.tile[axis + 1 :],
        layout.thread_shape,
        layout.value_shape,
        layout.strides[:axis] + layout.strides[axis + 1 :],
        layout.name,
    )


def affine_difference(upper, lower) -> int | None:
    """upper - lower when it is a compile-time constant (both affine in the same run-time terms)."""
    a, b = _linear(upper), _linear(lower)
    if a is None or b is None:
        return None
    keys = set(a) | set(b)
    diff = {k: a.get(k, 0) - b.get(k, 0) for k in keys}
    if any(v for k, v in diff.items() if k != ""):
        return None
    return diff.get("", 0)


def _linear(e) -> dict | None:
    """Linear form {atom key: coefficient, "": constant} of an int expression, atoms keyed structurally."""
    if isinstance(e, bool):
        return None
    if isinstance(e, int):
        return {"": e}
    if isinstance(e, ir.Const) and isinstance(e.value, int):
        return {"": e.value}
    if isinstance(e, ir.BinOp) and e.op in ("+", "-"):
        a, b = _linear(e.lhs), _linear(e.rhs)
        if a is None or b is None:
            return None
        sign = 1 if e.op == "+" else -1
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + sign * v
        return out
    if isinstance(e, ir.BinOp) and e.op == "*":
        a, b = _linear(e.lhs), _linear(e.rhs)
        if a is None or b is None:
            return None
        for const, other in ((a, b), (b, a)):
            if set(const) == {""}:
                return {k: v * const[""] for k, v in other.items()}
    if isinstance(e, ir.Expr):
        return {_key(e): 1}
    return None


def _key(e) -> str:
    if isinstance(e, ir.Var):
        return f"v:{e.name}"
    if isinstance(e, ir.Const):
        return f"c:{e.value}"
    if isinstance(e, ir.BinOp):
        return f"({_key(e.lhs)}{e.op}{_key(e.rhs)})"
    if isinstance(e, ir.UnOp):
        return f"{e.op}{_key(e.operand)}"
    if isinstance(e, ir.Call):
        return f"{e.op}({','.join(_key(a) for a in e.args)};{sorted(e.attrs.items(), key=str)})"
    return repr(e)


def _is_none(node) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _show(value) -> str:
    if isinstance(value, ir.Expr):
        return str(value.type)
    return repr(value)


def _feature_hint(feature: str) -> str:
    return {
        "cp_async": "use tp.copy(...) (synchronous) on this target",
        "bulk_copy": "use tp.copy_async(...) with commit/wait (cp.async) on this target",
        "mbarrier": "synchronize with tp.barrier() on this target",
    }.get(feature, "pick an op the target supports")


def _instr_hint(instr: MmaInstr, target) -> str:
    if target.vendor == "amd":
        return "on AMD use tp.amd.mfma_f32_32x32x8_bf16 or tp.amd.mfma_f32_16x16x16_bf16"
    if instr.family == "wgmma":
        return "on sm_80 use tp.nv.mma_m16n8k16_bf16"
    return "on NVIDIA use tp.nv.mma_m16n8k16_bf16 (or tp.nv.wgmma_* on sm_90a)"
