"""The operator tables of the front end: which IR operator a Python operator node becomes (libcst node type ->
op string, for `BinOp`/comparisons), and what an operator does on compile-time Python values.

They are shared by the kernel translator (frontend.py) and the tag-lambda reader (tagfn.py), and live apart
from both so that neither imports the other: builtins_compute.py reads tag lambdas through tagfn.py while the
translator dispatches builtins to the type rules, which would otherwise close an import cycle
frontend -> builtins_impl -> builtins_compute -> tagfn -> frontend.
"""

from __future__ import annotations

import libcst as cst

BINOPS = {
    cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*", cst.Divide: "/", cst.FloorDivide: "//",
    cst.Modulo: "%", cst.Power: "**", cst.BitAnd: "&", cst.BitOr: "|", cst.BitXor: "^",
    cst.LeftShift: "<<", cst.RightShift: ">>",
}
CMPOPS = {
    cst.LessThan: "<", cst.LessThanEqual: "<=", cst.GreaterThan: ">", cst.GreaterThanEqual: ">=",
    cst.Equal: "==", cst.NotEqual: "!=",
}
PY_BINOPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
    "//": lambda a, b: a // b, "%": lambda a, b: a % b, "**": lambda a, b: a**b, "&": lambda a, b: a & b,
    "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "and": lambda a, b: a and b, "or": lambda a, b: a or b,
}
