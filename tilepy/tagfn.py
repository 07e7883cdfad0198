"""Tag functions and tag predicates: the lambdas of tp.tag / tp.assert_tag, kept as data for the verifier.

The body becomes a small expression tree over the lambda's parameters: tuples, constants, names, arithmetic,
comparisons, boolean logic and constant indexing. Anything else is a CompileError at the lambda.
"""

from __future__ import annotations

import libcst as cst

from . import ir
from .errors import UnsupportedConstructError
from .operators import BINOPS, CMPOPS


def build_tag_fn(tr, node: cst.Lambda) -> ir.TagFn:
    params = tuple(p.name.value for p in node.params.params)
    if node.params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) or node.params.kwonly_params:
        raise tr.error(node, "tag lambdas take plain positional parameters", cls=UnsupportedConstructError)
    body = _tree(tr, node.body, set(params))
    source = cst.Module(body=[]).code_for_node(node)
    # The compiled lambda sees the kernel's globals and compile-time constants (for names used in the body).
    env = dict(tr.src.fn.__globals__)
    env.update({k: v for k, v in tr.scope.items() if not isinstance(v, ir.Expr)})
    fn = eval(compile(source, tr.src.file, "eval"), env)  # noqa: S307 - the user's own kernel source
    return ir.TagFn(params, body, source, fn, tr.span(node))


def _tree(tr, node, params: set):
    if isinstance(node, cst.Tuple):
        return ("tuple", tuple(_tree(tr, e.value, params) for e in node.elements))
    if isinstance(node, cst.Integer | cst.Float | cst.SimpleString):
        return ("const", node.evaluated_value)
    if isinstance(node, cst.Name):
        if node.value in params:
            return ("name", node.value)
        if node.value in ("True", "False"):
            return ("const", node.value == "True")
        value = tr.expr(node)
        if isinstance(value, ir.Expr):
            raise tr.error(node, f"tag lambdas cannot use the run-time value `{node.value}`",
                           "use the lambda's parameters and compile-time constants", UnsupportedConstructError)
        return ("const", value)
    if isinstance(node, cst.BinaryOperation):
        return ("bin", BINOPS[type(node.operator)], _tree(tr, node.left, params), _tree(tr, node.right, params))
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        c = node.comparisons[0]
        op = CMPOPS.get(type(c.operator))
        if op is not None:
            return ("cmp", op, _tree(tr, node.left, params), _tree(tr, c.comparator, params))
    if isinstance(node, cst.BooleanOperation):
        op = "and" if isinstance(node.operator, cst.And) else "or"
        return ("bool", op, _tree(tr, node.left, params), _tree(tr, node.right, params))
    if isinstance(node, cst.UnaryOperation):
        if isinstance(node.operator, cst.Not):
            return ("not", _tree(tr, node.expression, params))
        if isinstance(node.operator, cst.Minus):
            return ("bin", "-", ("const", 0), _tree(tr, node.expression, params))
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        return ("index", _tree(tr, node.value, params), _tree(tr, node.slice[0].slice.value, params))
    raise tr.error(node, "tag lambdas may use tuples, constants, parameters, arithmetic, comparisons, "
                   "and/or/not and constant indexing", cls=UnsupportedConstructError)
