"""Type rules of the compute builtins: math, reductions, layouts, mma, tags and scheduling hints."""


from __future__ import annotations

import libcst as cst

from . import dtypes as dt
from . import ir
from .builtins_util import _instr_hint, _remove_dim, _show
from .errors import (
    ConstexprError,
    KernelTypeError,
    ShapeError,
    TargetError,
    UnsupportedConstructError,
)
from .instructions import MmaInstr, mma_operand_layout
from .ops import UNARY_MATH
from .tagfn import build_tag_fn
from .types import NONE, RegType, ScalarType, SharedType, TensorType


class ComputeRules:
    """Mixin of BuiltinRules: math, reductions, mma, tags."""

    # ------------------------------------------------------------ math
    def _math_operand(self, x, node, name):
        x = self.tile_value(x, node)
        x = self.expr(x, node)
        if not x.type.dtype.is_float:
            raise self.err(node, f"tp.{name} of an integer value", f"cast first: tp.{name}(x.to(tp.f32))",
                           KernelTypeError)
        return x

    def b_cast(self, node, x, dtype):
        dtype = self.dtype(dtype, node)
        x = self.expr(self.tile_value(x, node), node)
        t = x.type
        new = RegType(dtype, t.shape, t.layout) if isinstance(t, RegType) else ScalarType(dtype, t.uniform)
        return self.make("cast", new, node, x, dtype=dtype)

    def b_where(self, node, cond, a, b):
        cond = self.expr(self.tile_value(cond, node), node)
        if cond.type.dtype != dt.bool_:
            raise self.err(node, "tp.where's condition must be boolean", "compare: x > 0", KernelTypeError)
        sel = self.binop("+", a, b, node)  # result dtype and shape of the two values
        shape_type = self._tile_result(sel.type.dtype, cond.type, sel.type, node) if isinstance(
            cond.type, RegType) or isinstance(sel.type, RegType) else sel.type
        return self.make("where", shape_type, node, cond, sel.lhs, sel.rhs)

    def _elementwise2(self, name, node, a, b):
        sel = self.binop("+", a, b, node)
        return self.make(name, sel.type, node, sel.lhs, sel.rhs)

    def b_maximum(self, node, a, b):
        return self._elementwise2("maximum", node, a, b)

    def b_minimum(self, node, a, b):
        return self._elementwise2("minimum", node, a, b)

    def _reduce(self, op, node, x, axis, keepdims):
        x = self.tile_value(x, node)
        if not (isinstance(x, ir.Expr) and isinstance(x.type, RegType)):
            raise self.err(node, f"reductions take a register tile, got {_show(x)}", cls=KernelTypeError)
        t = x.type
        axis = self.const_int(axis, node, "reduction axis")
        if axis < 0:
            axis += len(t.shape)
        if not 0 <= axis < len(t.shape):
            raise self.err(node, f"axis {axis} is out of range for a tile of rank {len(t.shape)}", cls=ShapeError)
        layout = t.layout.drop_dim(axis)
        shape = tuple(1 if d == axis else n for d, n in enumerate(t.shape))
        if not keepdims:
            shape = shape[:axis] + shape[axis + 1:]
            layout = _remove_dim(layout, axis)
        return self.make(op, RegType(t.dtype, shape, layout), node, x, axis=axis, keepdims=bool(keepdims))

    def b_sum(self, node, x, axis=None, keepdims=False):
        if axis is None:
            raise self.err(node, "tp.sum needs an axis", "tp.sum(x, axis=1)", KernelTypeError)
        return self._reduce("sum", node, x, axis, keepdims)

    def b_max(self, node, x, axis=None, keepdims=False):
        if isinstance(axis, ir.Expr | float):
            return self.b_maximum(node, x, axis)
        if axis is None:
            raise self.err(node, "tp.max needs an axis (or two values: tp.maximum(a, b))", cls=KernelTypeError)
        return self._reduce("max_reduce", node, x, axis, keepdims)

    def b_min(self, node, x, axis=None, keepdims=False):
        if isinstance(axis, ir.Expr | float):
            return self.b_minimum(node, x, axis)
        if axis is None:
            raise self.err(node, "tp.min needs an axis (or two values: tp.minimum(a, b))", cls=KernelTypeError)
        return self._reduce("min_reduce", node, x, axis, keepdims)

    def b_convert_layout(self, node, x, layout):
        x = self.tile_value(x, node)
        if not (isinstance(x, ir.Expr) and isinstance(x.type, RegType)):
            raise self.err(node, "tp.convert_layout takes a register tile", cls=KernelTypeError)
        layout = self._layout_arg(layout, x.type.shape, x.type.dtype, node)
        return self.make("convert_layout", RegType(x.type.dtype, x.type.shape, layout), node, x, layout=layout)

    # ------------------------------------------------------------ mma
    def b_mma(self, node, a, b, acc, instr=None):
        if not (isinstance(acc, ir.Expr) and isinstance(acc.type, RegType)):
            raise self.err(node, "tp.mma's accumulator must be a register tile",
                           "acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(instr, (BM, BN), warps))",
                           KernelTypeError)
        origin = acc.type.layout.origin
        if instr is None:
            if not origin or origin[1] != "c":
                raise self.err(node, "tp.mma cannot tell which instruction to use",
                               "give the accumulator layout=tp.accumulator(instr, shape, warps) or pass instr=",
                               KernelTypeError)
            from .instructions import ALL
            instr = ALL[origin[0]]
        if not isinstance(instr, MmaInstr):
            raise self.err(node, f"instr must be an MMA instruction such as tp.nv.mma_m16n8k16_bf16, got "
                           f"{_show(instr)}", cls=KernelTypeError)
        if not self.tr.target.has(instr.family):
            raise self.err(node, f"{instr.name} does not exist on target {self.tr.target.name}",
                           _instr_hint(instr, self.tr.target), TargetError)
        warps = origin[2] if origin else (1, 1)
        M, N = acc.type.shape
        for op, name in ((a, "A"), (b, "B")):
            if not (isinstance(op, ir.Expr) and isinstance(op.type, RegType | SharedType)):
                raise self.err(node, f"MMA operand {name} must be a register or shared tile, got {_show(op)}",
                               "stage global tiles through shared memory or tp.load them", KernelTypeError)
            if isinstance(op.type, SharedType) and op.type.stages is not None:
                raise self.err(node, f"MMA operand {name} is a multi-stage shared tile", "index the stage",
                               KernelTypeError)
            if op.type.dtype != instr.ab:
                raise self.err(node, f"MMA operand {name} is {op.type.dtype} but {instr.name} multiplies "
                               f"{instr.ab}", f"cast it with .to(tp.{instr.ab.name}) or pick another instruction",
                               KernelTypeError)
        if len(a.type.shape) != 2 or len(b.type.shape) != 2:
            raise self.err(node, "MMA operands must be 2-D tiles", cls=ShapeError)
        (am, ak), (bk, bn) = a.type.shape, b.type.shape
        if (am, bn) != (M, N) or ak != bk:
            raise self.err(node, f"MMA shapes do not agree: A {a.type.shape} @ B {b.type.shape} into acc {(M, N)}",
                           "A is (M, K), B is (K, N), acc is (M, N)", ShapeError)
        if ak % instr.k:
            raise self.err(node, f"K={ak} is not a multiple of {instr.name}'s k={instr.k}", cls=ShapeError)
        if acc.type.dtype != instr.acc:
            raise self.err(node, f"accumulator is {acc.type.dtype}; {instr.name} accumulates in {instr.acc}",
                           cls=KernelTypeError)
        if instr.smem_operands:
            for x, which in ((a, "a"), (b, "b")):
                frag = instr.operand(which)
                if frag is None and not isinstance(x.type, SharedType):
                    raise self.err(node, f"{instr.name} reads {which.upper()} from shared memory", "pass a shared tile"
                                   + (f" or use {instr.name}_rs (A in registers)" if which == "a" else ""),
                                   KernelTypeError)
                if frag is not None and not isinstance(x.type, RegType):
                    raise self.err(node, f"{instr.name} reads {which.upper()} from registers",
                                   f"tp.load it with layout=tp.mma_layout({instr!r}, '{which}', shape, warps), or use "
                                   f"{instr.name.removesuffix('_rs')} for a shared {which.upper()}", KernelTypeError)
        expected = mma_operand_layout(instr, "c", (M, N), warps)
        if acc.type.layout.num_threads != expected.num_threads:
            raise self.err(node, "accumulator layout does not fit the instruction's warp grid", cls=ShapeError)
        return self.make("mma", acc.type, node, a, b, acc, instr=instr, warps=tuple(warps))

    def b_mma_async(self, node, a, b, acc, instr=None):
        """tp.mma issued as one asynchronous wgmma group (no wait): retire it with tp.mma_wait(n) before the
        operands' shared stages are released or the result is read."""
        call = self.b_mma(node, a, b, acc, instr)
        if call.attrs["instr"].family != "wgmma":
            raise self.err(node, f"tp.mma_async issues wgmma groups; {call.attrs['instr'].name} is synchronous",
                           "use tp.mma, or a tp.nv.wgmma_* instruction on sm_90a", TargetError)
        call.attrs["async_"] = True
        return call

    def b_mma_wait(self, node, n=0):
        n = self.const_int(n, node, "tp.mma_wait count")
        if not 0 <= n <= 7:
            raise self.err(node, f"tp.mma_wait count must be 0..7 (wgmma.wait_group), got {n}", cls=ConstexprError)
        if not self.tr.target.has("wgmma"):
            raise self.err(node, f"tp.mma_wait waits for wgmma groups, which target {self.tr.target.name} lacks",
                           "use tp.mma (synchronous) on this target", TargetError)
        return self.make("mma_wait", NONE, node, n=n)

    def b_setmaxnreg(self, node, n):
        n = self.const_int(n, node, "tp.setmaxnreg register count")
        if not (24 <= n <= 256 and n % 8 == 0):
            raise self.err(node, f"tp.setmaxnreg takes 24..256 registers in steps of 8, got {n}",
                           "producers commonly take 40, consumers 232 (two consumer warpgroups)", ConstexprError)
        if not self.tr.target.has("wgmma"):
            raise self.err(node, f"setmaxnreg exists on sm_90a only, not on {self.tr.target.name}",
                           "drop tp.setmaxnreg on this target", TargetError)
        return self.make("setmaxnreg", NONE, node, n=n)

    def b_mma_operands(self, node, acc):
        if not (isinstance(acc, ir.Expr) and isinstance(acc.type, RegType)):
            raise self.err(node, "tp.mma_operands takes an MMA accumulator", cls=KernelTypeError)
        return self.make("mma_operands", acc.type, node, acc)

    def b_schedule(self, node, **hints):
        for k, v in hints.items():
            if isinstance(v, ir.Expr):
                raise self.err(node, f"schedule hint {k} must be a compile-time value", cls=ConstexprError)
        return self.make("schedule", NONE, node, hints=hints)

    # ------------------------------------------------------------ tags
    def _tag_call(self, name, node: cst.Call):
        pos = [a for a in node.args if a.keyword is None]
        kw = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        if len(pos) < 2 and "fn" not in kw:
            raise self.err(node, f"tp.{name}(value, lambda ...) takes a value and a lambda", cls=KernelTypeError)
        target = self.tr.expr(pos[0].value)
        fn_node = pos[1].value if len(pos) > 1 else kw.pop("fn")
        if not isinstance(fn_node, cst.Lambda):
            raise self.err(node, f"tp.{name} needs a lambda written in place", "tp.tag(A, lambda i, j: ('A', i, j))",
                           KernelTypeError)
        fn = self.tag_fn(fn_node)
        if not isinstance(target, ir.Expr):
            raise self.err(node, f"tp.{name} applies to a tensor or tile, got {_show(target)}", cls=KernelTypeError)
        if name == "tag":
            if isinstance(target.type, TensorType) and self.tr.block is not self.tr.top_block:
                raise self.err(node, "a global tensor is tagged inside a loop or branch",
                               "tag tensors once, at the top level of the kernel: a tag names what the data is, "
                               "for every iteration", UnsupportedConstructError)
            rank = len(getattr(target.type, "shape", ()))
            if len(fn.params) != rank:
                raise self.err(fn_node, f"tag function takes {len(fn.params)} coordinates; the value has rank {rank}",
                               cls=KernelTypeError)
            return self.make("tag", NONE, node, target, fn=fn)
        message = self.tr.expr(kw["message"]) if "message" in kw else ""
        at = self.tr.expr(kw["at"]) if "at" in kw else ()
        at = at if isinstance(at, tuple) else (at,)
        for x in at:  # integer tiles whose element values follow the tag into the predicate
            if not (isinstance(x, ir.Expr) and isinstance(x.type, RegType | ScalarType) and x.type.dtype.is_int):
                raise self.err(node, f"tp.assert_tag(..., at=...) takes integer tiles or scalars, got {_show(x)}",
                               "at=(i,) with i = i0 + tp.arange(BLOCK): the predicate gets each element's i",
                               KernelTypeError)
        if at and len(fn.params) != 1 + len(at):
            raise self.err(fn_node, f"the predicate takes {len(fn.params)} parameters; with {len(at)} `at` tiles "
                           f"it takes {1 + len(at)} (the tag, then one value per tile)", cls=KernelTypeError)
        return self.make("assert_tag", NONE, node, target, *at, fn=fn, message=message)

    def tag_fn(self, node: cst.Lambda):
        return build_tag_fn(self.tr, node)


def _unary(name):
    def rule(self, node, x):
        if name == "abs":  # the one math op that also means something on integers
            x = self.expr(self.tile_value(x, node), node)
            return self.make(name, x.type, node, x)
        x = self._math_operand(x, node, name)
        return self.make(name, x.type, node, x)

    rule.__name__ = f"b_{name}"
    rule.__doc__ = f"tp.{name}(x): elementwise {name} of a float tile or scalar"
    return rule


for _name in UNARY_MATH:
    setattr(ComputeRules, f"b_{_name}", _unary(_name))

