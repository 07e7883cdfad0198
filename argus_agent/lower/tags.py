"""Tags in the lowering's generated kernels: what each element a kernel reads is, stated so that
tilepy-verify proves the rendered kernel reads what the lowering's index maps say.

Every tensor parameter is tagged with its own flat coordinates, `tp.tag(b_x, lambda j: ("b_x", j))` (a 2-D
view `b_x_rows` of an (M, R) buffer with `("b_x", R * a + b)`, the same flat element), and every load the
lowering rendered from an index map (an `IExpr` over the kernel's loop variables) is followed by

    tp.assert_tag(t3, lambda t, i: i >= N or t == ("b_x", <index map at i>), at=(i,))

in a Pointwise kernel (i: the output's flat index), or, in a Reduction kernel, with `at=(m, r)` (the output
index and the reduction index; `at=(m,)` before the reduction loop). The predicate's index map is rendered
from the `IExpr` independently of the emitter's rendering of the load, so a wrong index in the generated
source (a wrong stride, divisor, offset, a swapped window) is a `tag_assertion` error with a counterexample
naming the output (and reduction) index, the element the kernel reads and the one the map says.

Tags and assertions emit no device code. Loads whose index is data (`gather` values: embedding lookups,
indices read from memory) are not asserted: their index is not an index map.
"""

from __future__ import annotations

from .index import IExpr, variables

ENABLED = True  # module switch (tests and benchmarks compare with and without)


def _param_tags(em, buffers) -> list:
    out = []
    for buf, view in em.params:
        if view is None:
            out.append(f'tp.tag({buf}, lambda j: ("{buf}", j))')
        else:
            name, shape = view
            if len(shape) != 2:
                continue
            out.append(f'tp.tag({name}, lambda a, b: ("{buf}", {int(shape[1])} * a + b))')
    return out


def _render(e: IExpr) -> str:
    """The index map as a tag-lambda expression over the loop variables (IExpr's own rendering)."""
    return str(e)


def _assertions(em, loop_vars: dict, at_of) -> dict:
    """{value name: assertion line} for every load rendered from an index map."""
    out = {}
    for v, name in em.done.items():
        if v.op != "load":
            continue
        buf, idx, _conds = v.args
        at = at_of(v)
        guard = " or ".join(f"{x} >= {loop_vars[x]}" for x in at)
        pred = f'("{buf}", {_render(idx)})'
        body = f"{guard} or t == {pred}" if guard else f"t == {pred}"
        tiles = f"({at[0]},)" if len(at) == 1 else f"({', '.join(at)})"
        out[name] = f"tp.assert_tag({name}, lambda t, {', '.join(at)}: {body}, at={tiles})"
    return out


def _insert(body: list, asserts: dict, tags: list) -> list:
    res = list(tags)
    for line in body:
        res.append(line)
        head = line.lstrip()
        name = head.split(" = ", 1)[0] if " = " in head else None
        got = asserts.get(name)
        if got is not None:
            res.append(line[: len(line) - len(head)] + got)
    return res


def annotate_pointwise(body: list, em, numel: int) -> list:
    """`body` (the kernel's lines, unindented) with tensor tags first and an assertion after every load."""
    if not ENABLED:
        return body
    asserts = _assertions(em, {"i": numel}, lambda v: ("i",))
    return _insert(body, asserts, _param_tags(em, None))


def annotate_reduction(body: list, em, M: int, R: int) -> list:
    """As annotate_pointwise for a Reduction kernel: loads before the loop relate to the output index m,
    loads in the loop to (m, r)."""
    if not ENABLED:
        return body

    def at_of(v):
        names = {x.name for x in variables(v.args[1])} | set(v.vars)
        return ("m", "r") if "r" in names else ("m",)

    asserts = _assertions(em, {"m": M, "r": R}, at_of)
    return _insert(body, asserts, _param_tags(em, None))
