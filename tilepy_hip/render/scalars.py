"""Scalar expressions as C++ text, and the operators that scalars and register-tile values share (binary and
unary operators, casts, `where`, elementwise math from the target's table)."""

from __future__ import annotations

from tilepy import dtypes as dt
from tilepy import ir

from .cexpr import cast, compute_type, ctype, is_half, literal, to_compute


class ScalarOps:
    """Mixin of `walk.Renderer`: scalar expressions, and operator spellings for scalars and tile values."""

    def scalar_as(self, e, dtype: dt.DType) -> str:
        text, have = self.scalar(e)
        return cast(text, have, dtype)

    def scalar(self, e) -> tuple[str, dt.DType]:
        """A scalar expression as (C text, dtype)."""
        if isinstance(e, int | float | bool):
            d = dt.bool_ if isinstance(e, bool) else dt.i32 if isinstance(e, int) else dt.f32
            return literal(e, d), d
        t = e.type
        if isinstance(e, ir.Const):
            return literal(e.value, t.dtype), t.dtype
        if isinstance(e, ir.Var):
            ref = self.env.get(e.name)
            if not isinstance(ref, str):
                raise self.error(f"`{e.name}` is not a scalar here")
            return ref, t.dtype
        if isinstance(e, ir.BinOp):
            a, ad = self.scalar(e.lhs)
            b, bd = self.scalar(e.rhs)
            return self.binop_c(e.op, a, ad, b, bd, t.dtype), t.dtype
        if isinstance(e, ir.UnOp):
            a, ad = self.scalar(e.operand)
            return self.unop_c(e.op, a, ad, t.dtype), t.dtype
        if isinstance(e, ir.Call):
            return self.scalar_call(e), t.dtype
        raise self.error(f"cannot render {e!r}")

    def scalar_call(self, e: ir.Call) -> str:
        op = e.op
        axis = "xyz"[e.attrs.get("axis", 0)] if op in ("block_id", "num_blocks") else None
        if op == "block_id":
            return f"(int)hipBlockIdx_{axis}"
        if op == "num_blocks":
            return f"(int)hipGridDim_{axis}"
        if op == "cluster_rank":
            return self.t.ops["cluster_rank"](self, e)
        if op == "thread_id":
            return "tp_tid"
        if op == "lane_id":
            return "tp_lane"
        if op == "warp_id":
            return "tp_warp"
        if op == "warpgroup_id":
            return f"(tp_tid / {4 * self.t.warp_size})"
        if op == "dim":
            tensor = self.env[e.args[0].name]
            return tensor.dims[e.attrs["axis"]]
        if op in ("cdiv", "min", "max"):
            d = e.type.dtype
            a, b = (self.scalar_as(x, d) for x in e.args)
            fn = {"cdiv": "tp_cdiv", "min": "tp_min", "max": "tp_max"}[op]
            return f"{fn}<{ctype(d)}>({a}, {b})"
        args = [self.scalar(a) for a in e.args]
        return self.elementwise_c(e, args)

    # ------------------------------------------------------------------ operators (scalars and tile values)
    def binop_c(self, op: str, a: str, ad: dt.DType, b: str, bd: dt.DType, out: dt.DType) -> str:
        comp = dt.promote(ad, bd)
        if op == "/" and not comp.is_float:
            comp = dt.f32
        if op in ("and", "or"):
            comp = dt.bool_
        A, B = to_compute(a, ad, comp), to_compute(b, bd, comp)
        ct = compute_type(comp)
        if op == "//":
            text = f"tp_floordiv<{ct}>({A}, {B})" if not comp.is_float else f"tp_floorf({A} / {B})"
        elif op == "%":
            text = f"tp_mod<{ct}>({A}, {B})" if not comp.is_float else f"tp_fmod_py({A}, {B})"
        elif op == "**":
            if not comp.is_float:
                raise self.error(
                    "`**` on run-time integers", "compute powers of constants outside the kernel"
                )
            text = f"tp_powf({A}, {B})"
        elif op in ("and", "or"):
            text = f"({A} {'&&' if op == 'and' else '||'} {B})"
        else:
            text = f"({A} {op} {B})"
        if op in ("<", "<=", ">", ">=", "==", "!=", "and", "or"):
            return text
        result = comp if not is_half(comp) else dt.f32
        return cast(text, result, out) if result != out else text

    def unop_c(self, op: str, a: str, ad: dt.DType, out: dt.DType) -> str:
        if op == "not" or (op == "~" and ad == dt.bool_):
            return f"(!{a})"
        A = to_compute(a, ad, ad)
        text = f"({op}{A})"
        return cast(text, dt.f32, out) if is_half(ad) else text

    def elementwise_c(self, e: ir.Call, args: list) -> str:
        """One value of an elementwise op, from its operands' (C text, dtype)."""
        op, out = e.op, e.type.dtype
        if op == "cast":
            ((a, ad),) = args
            return cast(a, ad, e.attrs["dtype"])
        if op == "where":
            (c, cd), (a, ad), (b, bd) = args
            return f"({cast(c, cd, dt.bool_)} ? {cast(a, ad, out)} : {cast(b, bd, out)})"
        if op in ("maximum", "minimum"):
            (a, ad), (b, bd) = args
            comp = dt.promote(ad, bd)
            text = f"tp_{op}({to_compute(a, ad, comp)}, {to_compute(b, bd, comp)})"
            return cast(text, dt.f32, out) if is_half(comp) else cast(text, comp, out)
        template = self.t.unary.get(op)
        if template is not None:
            ((a, ad),) = args
            if ad.name == "f64":
                tmpl = self.t.unary_f64.get(op)
                if tmpl is None:
                    raise self.error(f"tp.{op} on f64 has no rendering", "cast to f32 first")
                return tmpl.format(x=a)
            text = template.format(x=to_compute(a, ad, ad))
            return cast(text, dt.f32, out) if is_half(ad) else text
        raise self.error(f"tp.{op} has no rendering as an elementwise value", self.t.hint(op))
