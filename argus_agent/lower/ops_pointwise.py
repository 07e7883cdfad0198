"""Lowerings of core-ATen pointwise ops: broadcasting, tensor and scalar operands, where, comparisons, casts."""

from __future__ import annotations

import math

import torch

from . import values as vals
from .core import LTensor, broadcast_coords, broadcast_shapes
from .registry import register, result_dtype, result_shape
from .values import call, const


def _operand_dtype(x) -> torch.dtype:
    if isinstance(x, LTensor):
        return x.dtype
    if isinstance(x, bool):
        return torch.bool
    if isinstance(x, int):
        return torch.int64
    return torch.float32


def pointwise(fn, node, *operands, dtype=None) -> LTensor:
    """out(c) = fn(*operand values at c) over the broadcast shape; scalars are weakly typed constants."""
    dtype = dtype or result_dtype(node)
    cdt = vals.compute_dtype(dtype)
    shapes = [x.shape for x in operands if isinstance(x, LTensor)]
    shape = broadcast_shapes(*shapes) if shapes else ()

    tensor_dts = [vals.compute_dtype(x.dtype) for x in operands if isinstance(x, LTensor)]
    base = vals.promote(*tensor_dts) if tensor_dts else cdt

    def scalar_dtype(x):
        # Python numbers are weakly typed (as in torch): they take the tensors' dtype unless a float meets ints
        if isinstance(x, bool):
            return torch.bool
        if isinstance(x, float) and not base.is_floating_point:
            return torch.float32 if cdt == torch.bool or not cdt.is_floating_point else cdt
        return base if base != torch.bool else (torch.float32 if isinstance(x, float) else torch.int64)

    def value(coords):
        args = []
        for x in operands:
            if isinstance(x, LTensor):
                args.append(x(broadcast_coords(coords, x.shape, shape)))
            else:
                args.append(const(x, scalar_dtype(x)))
        return fn(*args)

    return LTensor(shape, dtype, value)


def _math(op, cdt):
    return lambda *a: call(op, *a, dtype=cdt)


def _unary(name: str, build):
    @register(name)
    def lower(ctx, node, x, *rest, **kw):
        cdt = vals.compute_dtype(result_dtype(node))
        return pointwise(lambda a: build(vals.cast(a, cdt), cdt), node, x)

    return lower


_SIMPLE_UNARY = {
    "exp": "exp",
    "log": "log",
    "sqrt": "sqrt",
    "rsqrt": "rsqrt",
    "abs": "abs",
    "sin": "sin",
    "cos": "cos",
    "tanh": "tanh",
    "sigmoid": "sigmoid",
    "erf": "erf",
    "exp2": "exp2",
    "log2": "log2",
    "neg": "neg",
}
for _name, _op in _SIMPLE_UNARY.items():
    _unary(f"aten.{_name}", lambda a, cdt, _op=_op: call(_op, a, dtype=cdt))
    if _name != "sigmoid":   # the prims some decompositions emit (copysign: prims.abs)
        _unary(f"prims.{_name}", lambda a, cdt, _op=_op: call(_op, a, dtype=cdt))


def _c(v, like):
    return const(v, like.dtype)


_unary("aten.relu", lambda a, cdt: call("maximum", a, _c(0, a)))
_unary("aten.reciprocal", lambda a, cdt: call("div", _c(1, a), a))
_unary("aten.log1p", lambda a, cdt: call("log", call("add", a, _c(1, a))))
_unary("aten.expm1", lambda a, cdt: call("sub", call("exp", a), _c(1, a)))
_unary("aten.log10", lambda a, cdt: call("mul", call("log2", a), _c(math.log10(2.0), a)))
_unary("aten.tan", lambda a, cdt: call("div", call("sin", a), call("cos", a)))
_unary("aten.sinh", lambda a, cdt: call("mul", call("sub", call("exp", a), call("exp", call("neg", a))), _c(0.5, a)))
_unary("aten.cosh", lambda a, cdt: call("mul", call("add", call("exp", a), call("exp", call("neg", a))), _c(0.5, a)))
_unary("aten.asinh", lambda a, cdt: call("log", call("add", a, call("sqrt", call("add", call("mul", a, a), _c(1, a))))))
_unary("aten.acosh", lambda a, cdt: call("log", call("add", a, call("sqrt", call("sub", call("mul", a, a), _c(1, a))))))
_unary(
    "aten.atanh",
    lambda a, cdt: call(
        "mul", call("log", call("div", call("add", _c(1, a), a), call("sub", _c(1, a), a))), _c(0.5, a)
    ),
)
_unary("aten.floor", lambda a, cdt: a if not cdt.is_floating_point else call("floordiv", a, _c(1, a)))
_unary(
    "aten.ceil",
    lambda a, cdt: a if not cdt.is_floating_point else call("neg", call("floordiv", call("neg", a), _c(1, a))),
)
_unary(
    "aten.trunc",
    lambda a, cdt: (
        a
        if not cdt.is_floating_point
        else call(
            "where",
            call("lt", a, _c(0, a)),
            call("neg", call("floordiv", call("neg", a), _c(1, a))),
            call("floordiv", a, _c(1, a)),
        )
    ),
)
_unary(
    "aten.sign",
    lambda a, cdt: call("sub", vals.cast(call("gt", a, _c(0, a)), cdt), vals.cast(call("lt", a, _c(0, a)), cdt)),
)
_unary("aten.logical_not", lambda a, cdt: call("eq", a, const(0, a.dtype)))
_unary("aten.bitwise_not", lambda a, cdt: call("logical_not", a) if cdt == torch.bool else call("invert", a))


@register("aten.round")
def _round(ctx, node, x, decimals=0):
    if decimals:
        raise NotImplementedError("round with decimals")
    cdt = vals.compute_dtype(result_dtype(node))

    def f(a):
        a = vals.cast(a, cdt)
        fl = call("floordiv", a, _c(1, a))
        diff = call("sub", a, fl)
        half = call("eq", diff, _c(0.5, a))
        even = call("eq", call("sub", fl, call("mul", call("floordiv", fl, _c(2, a)), _c(2, a))), _c(0, a))
        up = call("add", fl, _c(1, a))
        nearest = call("where", call("lt", diff, _c(0.5, a)), fl, up)
        return call("where", half, call("where", even, fl, up), nearest)

    return pointwise(f, node, x)


@register("aten.isnan")
def _isnan(ctx, node, x):
    return pointwise(lambda a: call("ne", a, a), node, x)


@register("aten.signbit", "prims.signbit")
def _signbit(ctx, node, x):
    """x's sign bit: negative, or a negative zero. A NaN reads as positive whatever its sign bit (the value
    language has no bit casts; torch's decompositions reach signbit through copysign)."""
    return pointwise(lambda a: _negative(a) if a.dtype.is_floating_point
                     else call("lt", a, const(0, a.dtype), dtype=torch.bool), node, x)


@register("aten.isinf")
def _isinf(ctx, node, x):
    return pointwise(lambda a: call("eq", call("abs", a), const(math.inf, a.dtype)), node, x)


_BINARY = {
    "add": "add",
    "sub": "sub",
    "mul": "mul",
    "maximum": "maximum",
    "minimum": "minimum",
    "bitwise_and": "and",
    "bitwise_or": "or",
    "bitwise_xor": "xor",
    "logical_and": "and",
    "logical_or": "or",
    "logical_xor": "ne",
    "fmax": "maximum",
    "fmin": "minimum",
}
_COMPARE = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "eq": "eq", "ne": "ne"}


def _binary(name: str, op: str):
    @register(f"aten.{name}")
    def lower(ctx, node, a, b, alpha=1, **kw):
        dtype = result_dtype(node)
        cdt = vals.compute_dtype(dtype)
        if op in ("and", "or", "ne") and name.startswith("logical"):
            return pointwise(
                lambda x, y: call(
                    op, call("ne", x, const(0, x.dtype)), call("ne", y, const(0, y.dtype)), dtype=torch.bool
                ),
                node,
                a,
                b,
                dtype=torch.bool,
            )
        if alpha != 1:
            return pointwise(
                lambda x, y: call(op, x, call("mul", y, const(alpha, cdt), dtype=cdt), dtype=cdt), node, a, b
            )
        return pointwise(lambda x, y: call(op, x, y, dtype=cdt), node, a, b)

    return lower


for _name, _op in _BINARY.items():
    _binary(_name, _op)
for _name, _op in _COMPARE.items():

    @register(f"aten.{_name}")
    def _cmp(ctx, node, a, b, _op=_op):
        return pointwise(lambda x, y: call(_op, x, y), node, a, b, dtype=torch.bool)


@register("aten.rsub")
def _rsub(ctx, node, a, b, alpha=1):
    cdt = vals.compute_dtype(result_dtype(node))
    return pointwise(lambda x, y: call("sub", y, call("mul", x, const(alpha, cdt), dtype=cdt), dtype=cdt), node, a, b)


@register("aten.div")
def _div(ctx, node, a, b, rounding_mode=None):
    dtype = result_dtype(node)
    cdt = vals.compute_dtype(dtype)
    if rounding_mode is None:
        return pointwise(lambda x, y: call("div", x, y, dtype=cdt), node, a, b)
    if rounding_mode == "floor":
        return pointwise(lambda x, y: call("floordiv", x, y, dtype=cdt), node, a, b)
    if rounding_mode == "trunc":

        def f(x, y):
            q = call("div", x, y, dtype=torch.float64 if cdt == torch.float64 else torch.float32)
            t = call(
                "where",
                call("lt", q, const(0, q.dtype)),
                call("neg", call("floordiv", call("neg", q), const(1, q.dtype))),
                call("floordiv", q, const(1, q.dtype)),
            )
            return vals.cast(t, cdt)

        return pointwise(f, node, a, b)
    raise NotImplementedError(f"div rounding_mode={rounding_mode!r}")


@register("aten.remainder")
def _remainder(ctx, node, a, b):
    cdt = vals.compute_dtype(result_dtype(node))
    return pointwise(lambda x, y: call("mod", x, y, dtype=cdt), node, a, b)


@register("aten.fmod")
def _fmod(ctx, node, a, b):
    cdt = vals.compute_dtype(result_dtype(node))

    def f(x, y):
        x, y = vals.cast(x, cdt), vals.cast(y, cdt)
        q = call("div", x, y) if cdt.is_floating_point else call("div", x, y, dtype=torch.float64)
        tq = call(
            "where",
            call("lt", q, const(0, q.dtype)),
            call("neg", call("floordiv", call("neg", q), const(1, q.dtype))),
            call("floordiv", q, const(1, q.dtype)),
        )
        return call("sub", x, call("mul", vals.cast(tq, cdt), y))

    return pointwise(f, node, a, b)


@register("aten.pow")
def _pow(ctx, node, a, b):
    cdt = vals.compute_dtype(result_dtype(node))
    if not isinstance(b, LTensor):
        e = float(b)
        if e == 2.0:
            return pointwise(lambda x: call("mul", vals.cast(x, cdt), vals.cast(x, cdt)), node, a)
        if e == 1.0:
            return pointwise(lambda x: vals.cast(x, cdt), node, a)
        if e == 0.5:
            return pointwise(lambda x: call("sqrt", vals.cast(x, cdt)), node, a)
        if e == -0.5:
            return pointwise(lambda x: call("rsqrt", vals.cast(x, cdt)), node, a)
        if e == 3.0:
            return pointwise(
                lambda x: call("mul", call("mul", vals.cast(x, cdt), vals.cast(x, cdt)), vals.cast(x, cdt)), node, a
            )
        if e == -1.0:
            return pointwise(lambda x: call("div", const(1, cdt), vals.cast(x, cdt)), node, a)
    return pointwise(lambda x, y: call("pow", x, y, dtype=cdt), node, a, b)


# atan(u) = u + u z P(z), z = u^2, on |u| <= tan(pi/8): a least-squares fit (relative error 2e-9, far below
# fp32's rounding; fitted for this file with numpy, weighting the relative error of atan)
_ATAN_P = (-0.3333331861354078, 0.1999869828816573, -0.14248055628363449, 0.10628658245750348,
           -0.06169481242193418)


def _negative(v):
    """v < 0, counting -0.0 (1 / -0.0 = -inf): the sign atan2 reads."""
    zero = _c(0, v)
    return call("or", call("lt", v, zero),
                call("and", call("eq", v, zero), call("lt", call("div", _c(1, v), v), zero), dtype=torch.bool),
                dtype=torch.bool)


def atan2_value(y, x):
    """atan2(y, x) of two compute-dtype floats, in (-pi, pi], from tilepy's arithmetic (it has no arctangent):
    t = min(|y|, |x|) / max(|y|, |x|) in [0, 1]; above tan(pi/8) atan(t) = pi/4 + atan((t - 1) / (t + 1)); the
    odd polynomial _ATAN_P on |u| <= tan(pi/8); then the octant (|y| > |x|: pi/2 - r), the half plane (x < 0,
    -0.0 included: pi - r) and the sign of y (-0.0 included), as C's atan2: atan2(+-0, -0) = +-pi,
    atan2(+-inf, +-inf) = +-pi/4 or +-3pi/4, NaN in either operand gives NaN."""
    a, b = call("abs", y), call("abs", x)
    hi, lo = call("maximum", a, b), call("minimum", a, b)
    both_inf = call("and", call("eq", a, _c(math.inf, a)), call("eq", b, _c(math.inf, b)), dtype=torch.bool)
    safe_hi = call("where", call("eq", hi, _c(0, hi)), _c(1, hi), hi)
    t = call("where", both_inf, _c(1, a), call("div", lo, safe_hi))
    big = call("gt", t, _c(math.tan(math.pi / 8), t))
    u = call("where", big, call("div", call("sub", t, _c(1, t)), call("add", t, _c(1, t))), t)
    z = call("mul", u, u)
    p = _c(_ATAN_P[-1], z)
    for coef in reversed(_ATAN_P[:-1]):
        p = call("add", call("mul", p, z), _c(coef, z))
    r = call("add", u, call("mul", call("mul", u, z), p))
    r = call("where", big, call("add", r, _c(math.pi / 4, r)), r)
    r = call("where", call("gt", a, b), call("sub", _c(math.pi / 2, r), r), r)
    r = call("where", _negative(x), call("sub", _c(math.pi, r), r), r)
    r = call("where", _negative(y), call("neg", r), r)
    nan = call("or", call("ne", y, y), call("ne", x, x), dtype=torch.bool)
    return call("where", nan, _c(math.nan, r), r)


@register("aten.atan2")
def _atan2(ctx, node, a, b):
    cdt = vals.compute_dtype(result_dtype(node))
    return pointwise(lambda y, x: atan2_value(vals.cast(y, cdt), vals.cast(x, cdt)), node, a, b)


def _sqrt_one_minus_square(a):
    return call("sqrt", call("sub", _c(1, a), call("mul", a, a)))


_unary("aten.atan", lambda a, cdt: atan2_value(a, _c(1, a)))
_unary("prims.atan", lambda a, cdt: atan2_value(a, _c(1, a)))
for _n in ("aten.asin", "prims.asin"):   # |a| > 1: sqrt of a negative is NaN, as torch
    _unary(_n, lambda a, cdt: call("where", call("gt", call("abs", a), _c(1, a)), _c(math.nan, a),
                                   atan2_value(a, _sqrt_one_minus_square(a))))
for _n in ("aten.acos", "prims.acos"):
    _unary(_n, lambda a, cdt: call("where", call("gt", call("abs", a), _c(1, a)), _c(math.nan, a),
                                   atan2_value(_sqrt_one_minus_square(a), a)))


def _shift(left: bool):
    """a << b, a >> b as torch: a shift by a negative amount or by the dtype's width or more gives 0 (left) or
    the sign fill a >> (width - 1) (right); the amount is clamped before the shift (C leaves such shifts
    undefined)."""
    def lower(ctx, node, a, b):
        dtype = result_dtype(node)
        if dtype.is_floating_point or dtype == torch.bool:
            raise NotImplementedError(f"a bit shift of {dtype} tensors")
        cdt = vals.compute_dtype(dtype)
        width = 64 if cdt == torch.int64 else 32

        def f(x, s):
            x, s = vals.cast(x, cdt), vals.cast(s, cdt)
            out = call("or", call("lt", s, const(0, cdt)), call("ge", s, const(width, cdt)), dtype=torch.bool)
            safe = call("where", out, const(0 if left else width - 1, cdt), s, dtype=cdt)
            moved = call("lshift" if left else "rshift", x, safe, dtype=cdt)
            return call("where", out, const(0, cdt), moved, dtype=cdt) if left else moved
        return pointwise(f, node, a, b)
    return lower


register("aten.bitwise_left_shift", "aten.__lshift__")(_shift(True))
register("aten.bitwise_right_shift", "aten.__rshift__")(_shift(False))


@register("aten.where", "prims.where")
def _where(ctx, node, c, a, b):
    cdt = vals.compute_dtype(result_dtype(node))
    return pointwise(lambda p, x, y: call("where", p, x, y, dtype=cdt), node, c, a, b)


@register("aten.clamp")
def _clamp(ctx, node, x, lo=None, hi=None):
    cdt = vals.compute_dtype(result_dtype(node))
    ops = [x] + [v for v in (lo, hi) if v is not None]

    def f(v, *bounds):
        v = vals.cast(v, cdt)
        k = 0
        if lo is not None:
            v = call("maximum", v, bounds[k])
            k += 1
        if hi is not None:
            v = call("minimum", v, bounds[k])
        return v

    return pointwise(f, node, *ops)


@register("aten.clamp_min")
def _clamp_min(ctx, node, x, lo):
    return _clamp(ctx, node, x, lo, None)


@register("aten.clamp_max")
def _clamp_max(ctx, node, x, hi):
    return _clamp(ctx, node, x, None, hi)


@register("aten.hardtanh")
def _hardtanh(ctx, node, x, lo=-1.0, hi=1.0):
    return _clamp(ctx, node, x, lo, hi)


@register("aten.leaky_relu")
def _leaky(ctx, node, x, slope=0.01):
    cdt = vals.compute_dtype(result_dtype(node))
    return pointwise(
        lambda v: call("where", call("gt", v, const(0, cdt)), v, call("mul", v, const(slope, cdt))), node, x
    )


@register("aten.elu")
def _elu(ctx, node, x, alpha=1.0, scale=1.0, input_scale=1.0):
    cdt = vals.compute_dtype(result_dtype(node))

    def f(v):
        v = vals.cast(v, cdt)
        neg = call(
            "mul", call("sub", call("exp", call("mul", v, const(input_scale, cdt))), const(1, cdt)), const(alpha, cdt)
        )
        return call("mul", call("where", call("gt", v, const(0, cdt)), v, neg), const(scale, cdt))

    return pointwise(f, node, x)


@register("aten.gelu")
def _gelu(ctx, node, x, approximate="none"):
    cdt = vals.compute_dtype(result_dtype(node))

    def f(v):
        v = vals.cast(v, cdt)
        half = call("mul", v, const(0.5, cdt))
        if approximate == "tanh":
            inner = call(
                "mul",
                call("add", v, call("mul", call("mul", call("mul", v, v), v), const(0.044715, cdt))),
                const(math.sqrt(2.0 / math.pi), cdt),
            )
            return call("mul", half, call("add", call("tanh", inner), const(1, cdt)))
        return call(
            "mul", half, call("add", call("erf", call("mul", v, const(1 / math.sqrt(2.0), cdt))), const(1, cdt))
        )

    return pointwise(f, node, x)


@register("aten.silu")
def _silu(ctx, node, x):
    cdt = vals.compute_dtype(result_dtype(node))
    return pointwise(lambda v: call("mul", vals.cast(v, cdt), call("sigmoid", vals.cast(v, cdt))), node, x)


@register("aten.softplus")
def _softplus(ctx, node, x, beta=1.0, threshold=20.0):
    cdt = vals.compute_dtype(result_dtype(node))

    def f(v):
        v = vals.cast(v, cdt)
        bx = call("mul", v, const(beta, cdt))
        soft = call("div", call("log", call("add", call("exp", bx), const(1, cdt))), const(beta, cdt))
        return call("where", call("gt", bx, const(threshold, cdt)), v, soft)

    return pointwise(f, node, x)


@register("aten._to_copy", "aten.to", "aten._convert_element_type", "aten.convert_element_type")
def _to_copy(ctx, node, x, *a, **kw):
    dtype = result_dtype(node)
    return pointwise(lambda v: _cast_like_torch(v, dtype), node, x, dtype=dtype)


def _cast_like_torch(v, dtype):
    cdt = vals.compute_dtype(dtype)
    if dtype == torch.bool:
        return call("ne", v, const(0, v.dtype))
    if dtype in (torch.float16, torch.bfloat16) and v.dtype.is_floating_point:
        # a value stored as a half type is rounded there; in registers keep it in f32, rounded as torch would
        return vals.make("roundto", (vals.cast(v, torch.float32), vals.TP_DTYPE[dtype]), torch.float32)
    return vals.cast(v, cdt)


@register("aten.clone", "aten.alias", "aten.lift_fresh_copy", "aten.detach", "aten.contiguous")
def _identity(ctx, node, x, *a, **kw):
    return x


@register("aten.scalar_tensor")
def _scalar_tensor(ctx, node, v, **kw):
    dtype = result_dtype(node)
    return LTensor((), dtype, lambda c: const(v, dtype))


@register("aten.full")
def _full(ctx, node, size, v, **kw):
    dtype = result_dtype(node)
    return LTensor(tuple(size), dtype, lambda c: const(v, dtype))


@register("aten.full_like")
def _full_like(ctx, node, x, v, **kw):
    dtype = result_dtype(node)
    return LTensor(x.shape, dtype, lambda c: const(v, dtype))


@register("aten.zeros_like", "aten.zeros")
def _zeros(ctx, node, x, *a, **kw):
    dtype = result_dtype(node)
    shape = x.shape if isinstance(x, LTensor) else tuple(x)
    return LTensor(shape, dtype, lambda c: const(0, dtype))


@register("aten.ones_like", "aten.ones")
def _ones(ctx, node, x, *a, **kw):
    dtype = result_dtype(node)
    shape = x.shape if isinstance(x, LTensor) else tuple(x)
    return LTensor(shape, dtype, lambda c: const(1, dtype))


@register("aten.arange")
def _arange(ctx, node, *args, **kw):
    dtype = result_dtype(node)
    n = tuple(node.meta["val"].shape)[0]
    if len(args) == 1:
        start, step = 0, 1
    else:
        start, step = args[0], args[2] if len(args) > 2 else kw.get("step", 1)
    cdt = vals.compute_dtype(dtype)

    def f(c):
        i = vals.index_value(c[0], torch.int64)
        return call("add", call("mul", vals.cast(i, cdt), const(step, cdt)), const(start, cdt), dtype=cdt)

    return LTensor((n,), dtype, f)


@register("aten._assert_tensor_metadata", "aten._assert_scalar", "aten.sym_constrain_range_for_size",
          "aten._assert_async")
def _no_op(ctx, node, *a, **kw):
    return None


@register("aten.empty", "aten.empty_like", "aten.empty_strided", "aten.new_empty", "aten.empty_permuted")
def _empty(ctx, node, *a, **kw):
    """Uninitialized memory: its contents are unspecified, so zeros are as good as any (what reads it is
    overwritten by a copy / slice_scatter in torch's decompositions: circular padding)."""
    dtype = result_dtype(node)
    return LTensor(result_shape(node), dtype, lambda c: const(0, dtype))


@register("aten.copy")
def _copy(ctx, node, dst, src, non_blocking=False):
    """The functional copy: src broadcast to dst's shape, in dst's dtype."""
    dtype = result_dtype(node)
    return LTensor(dst.shape, dtype, lambda c: vals.cast(src(broadcast_coords(c, src.shape, dst.shape)), dtype))


# Single-precision inverse error function (M. Giles, "Approximating the erfinv function", GPU Computing Gems,
# 2011): a polynomial in w = -log(1 - x^2) on two ranges, about 1e-7 relative, then Newton steps on erf (each an
# erf and an exp): one for fp32, two for float64 (1e-11 after one near |x| = 1, about 1e-15 after two).
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                   -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def erfinv_value(x):
    """erfinv(x) as a value tree: NaN outside [-1, 1], +-inf at +-1, as torch."""
    def horner(coeffs, t):
        p = _c(coeffs[0], x)
        for k in coeffs[1:]:
            p = call("add", _c(k, x), call("mul", p, t))
        return p

    w = call("neg", call("log", call("mul", call("sub", _c(1, x), x), call("add", _c(1, x), x))))
    central = horner(_ERFINV_CENTRAL, call("sub", w, _c(2.5, x)))
    tail = horner(_ERFINV_TAIL, call("sub", call("sqrt", w), _c(3, x)))
    y = call("mul", call("where", call("lt", w, _c(5, x)), central, tail), x)
    for _ in range(2 if x.dtype == torch.float64 else 1):
        slope = call("mul", _c(2 / math.sqrt(math.pi), x), call("exp", call("neg", call("mul", y, y))))
        y = call("sub", y, call("div", call("sub", call("erf", y), x), slope))
    ax = call("abs", x)
    edge = call("where", call("eq", ax, _c(1, x)), call("mul", x, _c(math.inf, x)), _c(math.nan, x))
    return call("where", call("lt", ax, _c(1, x)), y, edge)


for _n in ("aten.erfinv", "prims.erf_inv"):
    _unary(_n, lambda a, cdt: erfinv_value(a))


@register("prims.hypot")
def _hypot(ctx, node, a, b):
    def f(x, y):
        return call("sqrt", call("add", call("mul", x, x), call("mul", y, y)))
    return pointwise(f, node, a, b)


@register("aten.rrelu_with_noise_functional", "aten.rrelu_with_noise")
def _rrelu(ctx, node, x, noise, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """Eval-mode RReLU: a leaky ReLU of slope (lower + upper) / 2 (training mode draws random slopes)."""
    if training:
        raise NotImplementedError("RReLU in training mode (random slopes)")
    slope = (lower + upper) / 2

    def f(v):
        return call("where", call("gt", v, const(0, v.dtype)), v, call("mul", v, const(slope, v.dtype)))
    out = pointwise(f, node, x, dtype=result_dtype(node))
    if isinstance(node.meta.get("val"), (tuple, list)):
        return out, noise
    return out


# Special functions as value trees. lgamma: Lanczos (g = 7, 9 terms; ~1e-15 relative in float64) on x >= 0.5,
# the reflection Γ(x) Γ(1 - x) = π / sin(π x) below (+inf at the poles 0, -1, -2, ...). digamma: the recurrence up
# to x + 6, then the asymptotic series, and ψ(1 - x) - π cot(π x) below 0.5 (-inf at +0, +inf at -0, NaN at the
# negative integers, as torch). i0: Abramowitz & Stegun 9.8.1 / 9.8.2 (|error| < 2e-7 relative: fp32 accuracy).
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
            1.5056327351493116e-7)


def _lanczos_lgamma(y):
    """lgamma(y) for y >= 0.5."""
    z = call("sub", y, _c(1, y))
    s = _c(_LANCZOS[0], y)
    for k, c in enumerate(_LANCZOS[1:], start=1):
        s = call("add", s, call("div", _c(c, y), call("add", z, _c(k, y))))
    t = call("add", z, _c(7.5, y))
    return call("add", call("add", _c(0.5 * math.log(2 * math.pi), y),
                            call("mul", call("add", z, _c(0.5, y)), call("log", t))),
                call("sub", call("log", s), t))


def _frac_near(x):
    """x - round(x), in [-0.5, 0.5] and exact: sin(π x) and cot(π x) from it keep their precision near the
    integers (π x itself is rounded before the sine sees it)."""
    return call("sub", x, call("floordiv", call("add", x, _c(0.5, x)), _c(1, x)))


def _sin_pi(r, dtype):
    """sin(π r) for r in [-0.5, 0.5], in fp32 (the GPU renderers have no f64 sine), as `dtype`."""
    r32 = vals.cast(r, torch.float32)
    return vals.cast(call("sin", call("mul", const(math.pi, torch.float32), r32, dtype=torch.float32),
                          dtype=torch.float32), dtype)


def lgamma_value(x):
    low = call("lt", x, _c(0.5, x))
    y = call("where", low, call("sub", _c(1, x), x), x)
    big = _lanczos_lgamma(y)
    sin = call("abs", _sin_pi(_frac_near(x), x.dtype))
    reflected = call("sub", call("log", call("div", _c(math.pi, x), sin)), big)
    pole = call("and", low, call("eq", x, call("floordiv", x, _c(1, x))), dtype=torch.bool)
    return call("where", pole, _c(math.inf, x), call("where", low, reflected, big))


def _digamma_positive(y):
    """digamma(y) for y >= 0.5: six steps of ψ(y) = ψ(y + 1) - 1 / y, then the series at y + 6."""
    shift = _c(0, y)
    for k in range(6):
        shift = call("add", shift, call("div", _c(1, y), call("add", y, _c(k, y))))
    w = call("add", y, _c(6, y))
    r = call("div", _c(1, y), call("mul", w, w))
    series = _c(-1 / 132, y)        # the terms in 1 / w^(2k): -1/12, 1/120, -1/252, 1/240, -1/132
    for c in (1 / 240, -1 / 252, 1 / 120, -1 / 12):
        series = call("add", _c(c, y), call("mul", series, r))
    asym = call("add", call("sub", call("log", w), call("div", _c(0.5, y), w)), call("mul", series, r))
    return call("sub", asym, shift)


def digamma_value(x):
    low = call("lt", x, _c(0.5, x))
    y = call("where", low, call("sub", _c(1, x), x), x)
    big = _digamma_positive(y)
    r = _frac_near(x)                 # cot has period 1: reduce first, exactly
    reflected = call("sub", big, call("div", call("mul", _c(math.pi, x), _sin_pi(call("sub", _c(0.5, x),
                                                                                       call("abs", r)), x.dtype)),
                                      _sin_pi(r, x.dtype)))
    zero = call("eq", x, _c(0, x))
    negint = call("and", low, call("eq", x, call("floordiv", x, _c(1, x))), dtype=torch.bool)
    at_zero = call("where", _negative(x), _c(math.inf, x), _c(-math.inf, x))
    return call("where", zero, at_zero, call("where", negint, _c(math.nan, x), call("where", low, reflected, big)))


_I0_SMALL = (1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813)
_I0_LARGE = (0.39894228, 0.01328592, 0.00225319, -0.00157565, 0.00916281, -0.02057706, 0.02635537,
             -0.01647633, 0.00392377)


def i0_value(x):
    ax = call("abs", x)

    def poly(coeffs, t):
        p = _c(coeffs[-1], x)
        for c in reversed(coeffs[:-1]):
            p = call("add", _c(c, x), call("mul", p, t))
        return p

    t = call("div", ax, _c(3.75, x))
    small = poly(_I0_SMALL, call("mul", t, t))
    u = call("div", _c(3.75, x), ax)
    large = call("mul", call("div", call("exp", ax), call("sqrt", ax)), poly(_I0_LARGE, u))
    return call("where", call("le", ax, _c(3.75, x)), small, large)


def _special(name: str, value, inside):
    """A special function of fp32 / half inputs computed in `inside` precision, rounded once to the result;
    float64 inputs are refused (parts of each are only fp32-accurate)."""
    @register(*name.split())
    def lower(ctx, node, x, *rest, **kw):
        cdt = vals.compute_dtype(result_dtype(node))
        if cdt == torch.float64:
            raise NotImplementedError(f"{name.split()[0]} in float64 (parts of its approximation are fp32-accurate)")
        return pointwise(lambda a: vals.cast(value(vals.cast(a, inside)), cdt), node, x)
    return lower


# lgamma and digamma cancel near their zeros and poles: float64 inside (the sine of the reduced argument in fp32),
# rounded once (lgamma in fp32 throughout was ~2e-6 off near x = 1 and 2, torch's 6e-8)
_special("aten.lgamma prims.lgamma", lgamma_value, torch.float64)
_special("aten.digamma prims.digamma", digamma_value, torch.float64)
_special("aten.i0 prims.bessel_i0 aten.special_i0", i0_value, torch.float32)
