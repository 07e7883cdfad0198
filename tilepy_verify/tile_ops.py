"""Abstract values of the scans and shape changes of register tiles (tp.cumsum/cumprod, tp.permute,
tp.reshape): the tag of a result element is composed from the tags of the elements it comes from.

A scan element stands for the elements of its prefix along the axis (j' <= j; j' < j exclusive; reversed:
j' >= j, j' > j); a permuted or reshaped element is one element of the source at the mapped coordinates, and an
integer tile's value map goes through the same coordinate map."""

from __future__ import annotations

from .events import Reg, fresh
from .tagterms import Alt
from .vc import AND, in_range


def scan(walker, e, st):
    x = walker.expr(e.args[0], st)
    ax, n = e.attrs["axis"], e.type.shape[e.attrs["axis"]]
    rev, excl = bool(e.attrs.get("reverse")), bool(e.attrs.get("exclusive"))

    def tag(c, x=x):
        # element j stands for the prefix it combines: j' <= j (exclusive: j' < j); reverse: j' >= j (j' > j)
        r, j = fresh("scan"), c[ax]
        lo, hi = (j + (1 if excl else 0), n) if rev else (0, j + (0 if excl else 1))
        return [Alt(AND(a.cond, in_range(r, lo, hi)), a.tag, a.src) for a in x.tag(c[:ax] + (r,) + c[ax + 1:])]

    return Reg(e.type, tag if isinstance(x, Reg) and x.tag is not None else None, None, (), e.span)


def _moved(walker, e, st, f):
    x = walker.expr(e.args[0], st)
    if not isinstance(x, Reg):
        return Reg(e.type, None, None, (), e.span)
    tag = None if x.tag is None else (lambda c: x.tag(f(c)))
    value = None if x.value is None else (lambda c: x.value(f(c)))
    return Reg(e.type, tag, value, (), x.src)


def permute(walker, e, st):
    dims = e.attrs["dims"]
    return _moved(walker, e, st, lambda c: tuple(c[dims.index(d)] for d in range(len(dims))))


def tile_window(walker, e, st):
    starts = e.attrs["starts"]
    return _moved(walker, e, st, lambda c: tuple(x + a for x, a in zip(c, starts)))


def reshape(walker, e, st):
    new, old = tuple(e.type.shape), tuple(e.args[0].type.shape)

    def f(c):
        flat = 0
        for x, n in zip(c, new):
            flat = flat * n + x
        out = []
        for n in reversed(old):
            out.append(flat % n)
            flat = flat // n
        return tuple(reversed(out))

    return _moved(walker, e, st, f)
