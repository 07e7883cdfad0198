"""Tags in the lowering's generated kernels: what each element a kernel reads is, stated so that
tilepy-verify proves the rendered kernel reads what the lowering's index maps say.

Every tensor parameter is tagged with its own flat coordinates, `tp.tag(b_x, lambda j: ("b_x", j))` (a 2-D
view `b_x_rows` of an (M, R) buffer with `("b_x", R * a + b)`, the same flat element), and every load the
lowering rendered from an index map (an `IExpr` over the kernel's loop variables) is followed by

    tp.assert_tag(t3, lambda t, i: i >= N or t == ("b_x", <index map at i>), at=(i,))

in a Pointwise kernel (i: the output's flat index), or, in reductions, scans and row kernels, with the
loop variables the map reads (`at=(m, r)`: the output index and the reduction index; `o`, `i` in column
mode). The predicate's index map is rendered from the `IExpr` independently of the emitter's rendering of
the load, so a wrong index in the generated source (a wrong stride, divisor, offset, a swapped window) is a
`tag_assertion` error with a counterexample naming the output (and reduction) index, the element the kernel
reads and the one the map says. A Pointwise kernel also asserts its output,

    tp.assert_tag(b_out, lambda t, i: i >= N or t == <the value's tag tree at i>)

so every stored element is proved to combine the right input elements by the right operations, at the
right place (a store window or an `i` off by one, swapped operands).

Reductions, scans, argmax/argmin and Welford kernels also assert their stores (`reduction_store_assertion`,
`scan_store_assertion`, `template_store_assertion`): over a chunk loop the accumulator is the verifier's fold
(("fold", n, k, t) per iteration k of n) and the claim (`fold_claim`) is that it folds exactly the chunks of
its range, iteration k reading chunk k.

Tags and assertions emit no device code (an index tile only an assertion needs is computed inside its `at`
tuple). Loads whose index is data (`gather` values: embedding lookups, reflect padding) are not asserted:
their index is not an index map; buffers the kernel also stores into are not tagged.
"""

from __future__ import annotations

from .index import IExpr, variables

ENABLED = True  # module switch (tests and benchmarks compare with and without)


def _stored(body: list) -> set:
    """Parameter names the kernel stores into (their tags would not say what a read sees: not tagged)."""
    import re

    return {m.group(1) for line in body for m in re.finditer(r"tp\.store\((\w+)\[", line)}


def _param_tags(em, stored=frozenset()) -> list:
    """`tp.tag` lines: each parameter's elements by their flat index in the buffer (a view's parameter is a
    contiguous reshape of it: row-major)."""
    out = []
    for buf, view in em.params:
        if buf in stored or (view is not None and view[0] in stored):
            continue
        if view is None:
            out.append(f'tp.tag({buf}, lambda j: ("{buf}", j))')
            continue
        name, shape = view
        params = [f"a{d}" for d in range(len(shape))]
        flat, stride = [], 1
        for p, n in reversed(list(zip(params, shape))):
            flat.append(p if stride == 1 else f"{stride} * {p}")
            stride *= int(n)
        out.append(f'tp.tag({name}, lambda {", ".join(params)}: ("{buf}", {" + ".join(reversed(flat))}))')
    return out


def _render(e: IExpr) -> str:
    """The index map as a tag-lambda expression over the loop variables (IExpr's own rendering)."""
    return str(e)


def _assertions(em, loop_vars: dict, at_of, skip=frozenset()) -> dict:
    """{value name: assertion line} for every load rendered from an index map."""
    out = {}
    for v, name in em.done.items():
        if v.op != "load" or v.args[0] in skip:
            continue
        buf, idx, _conds = v.args
        at = at_of(v)
        guard = " or ".join(f"{x} >= {loop_vars[x]}" for x in at if loop_vars.get(x) is not None)
        pred = f'("{buf}", {_render(idx)})'
        body = f"{guard} or t == {pred}" if guard else f"t == {pred}"
        if not at:
            out[name] = f"tp.assert_tag({name}, lambda t: {body})"
            continue
        tiles = f"({at[0]},)" if len(at) == 1 else f"({', '.join(at)})"
        out[name] = f"tp.assert_tag({name}, lambda t, {', '.join(at)}: {body}, at={tiles})"
    return out


def _defined(body: list) -> set:
    return {line.lstrip().split(" = ", 1)[0] for line in body if " = " in line}


def _insert(body: list, asserts: dict, tags: list, defs: dict | None = None) -> list:
    """Tags first; each assertion after the line that defines its value. A loop variable's tile the
    assertions need but the kernel never wrote (a window load does not mention it) is written in place in
    the `at` tuple from `defs` {var: expression}: an assertion's arguments emit no device code."""
    have = _defined(body)
    inline = {x: e for x, e in (defs or {}).items() if x not in have}
    res = list(tags)
    for line in body:
        res.append(line)
        head = line.lstrip()
        indent = line[: len(line) - len(head)]
        name = head.split(" = ", 1)[0] if " = " in head and "tp.load(" in head else None
        got = asserts.get(name)
        if got is None:
            continue
        if inline and "at=(" in got:
            pre, tup = got.rsplit("at=(", 1)     # "m, r))": the tuple's and the call's parentheses
            names = [x.strip() for x in tup[:-2].split(",") if x.strip()]
            vals = [inline.get(x, x) for x in names]
            got = pre + "at=(" + (f"{vals[0]},))" if len(vals) == 1 else ", ".join(vals) + "))")
        res.append(indent + got)
    return res


def annotate(body: list, em, sizes: dict, order: tuple, defs: dict | None = None) -> list:
    """General form: `sizes` {loop variable: range} (None: no range guard, e.g. a block-uniform scalar),
    `order` the variables in the predicate's parameter order; each load's assertion takes the variables its
    index map reads. `defs` as in `_insert`."""
    if not ENABLED:
        return body

    def at_of(v):
        names = {x.name for x in variables(v.args[1])}
        return tuple(x for x in order if x in names)

    stored = _stored(body)
    skip = {buf for buf, view in em.params if buf in stored or (view is not None and view[0] in stored)}
    return _insert(body, _assertions(em, sizes, at_of, skip), _param_tags(em, stored), defs)


def annotate_tile(body: list, em) -> list:
    """For the tiled emitters (row/column reductions, scans, row-persistent kernels): the loop variables
    are the emitter's (`var_sizes`, block-uniform `scalar_vars`); where a window load left a tile axis's
    index tile out of the kernel, the assertion computes it in its `at` tuple (axis 0 as a column, axis 1
    as a row)."""
    sizes = dict(em.var_sizes)
    order = tuple(x for x in ("m", "o", "i", "r") if x in sizes)
    defs = {}
    for k, (var, start, block) in enumerate(em.axes):
        if var not in em.scalar_vars:
            defs[var] = f"({start} + tp.arange({block})){'[:, None]' if k == 0 else '[None, :]'}"
    return annotate(body, em, sizes, order, defs)


TREE_LIMIT = 256  # leaves of a stored value's tag tree beyond which the store is not asserted
# nesting of an assertion's tuples beyond which it is not written: tilepy parses kernel source with libcst, which
# recurses per level (a chain of ~150 pointwise ops over one load exhausts Python's recursion limit)
DEPTH_LIMIT = 64


def _spend(budget: list):
    """Count one leaf written into an assertion's text; past TREE_LIMIT the assertion is dropped (the text of a
    value DAG written as a tree grows with every path through it: leaky_relu(leaky_relu(x)) reads x 4 times)."""
    budget[0] += 1
    if budget[0] > TREE_LIMIT:
        raise _NoTree()


def _too_big(s) -> bool:
    """Whether a tag structure (a DAG: `_struct` shares the structures of shared values) written out as a tree
    has more than TREE_LIMIT leaves; the walks over it (`_affine_in_r`, `_solvable`, the texts) are tree walks."""
    memo: dict = {}

    def leaves(x):
        if x is None:
            return 0
        got = memo.get(id(x))
        if got is None:
            if isinstance(x, _Leaf):
                got = 1
            elif isinstance(x, _Stage):
                got = leaves(x.struct)
            elif isinstance(x, _Fold):
                got = leaves(x.inner)
            else:
                got = sum(leaves(a) for a in x)
            memo[id(x)] = got
        return got
    return leaves(s) > TREE_LIMIT


def _bounded(line: str | None) -> str | None:
    """The assertion, or None when its tuples nest deeper than DEPTH_LIMIT."""
    if line is None:
        return None
    depth = deepest = 0
    for ch in line:
        if ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth -= 1
    return line if deepest <= DEPTH_LIMIT else None


class _NoTree(Exception):
    pass


def _is_tile(v) -> bool:
    return bool(v.vars - {"o"}) or v.reads


def _tree(v, memo: dict, count: list):
    """The tag the verifier gives a rendered value (docs/verification.md: an elementwise result is the tuple
    of its operands' tags, None for a constant, a scalar or an untagged operand; untagged when no operand is
    tagged; casts pass tags through), as tag-lambda source over the loop variables, or None (untagged)."""
    from .values import V

    got = memo.get(v)
    if got is not None or v in memo:
        if got is not None:
            count[0] += got.count('("b')
        return got
    op = v.op
    if op in ("const", "index") or not _is_tile(v):
        text = None
    elif op == "load":
        text = f'("{v.args[0]}", {_render(v.args[1])})'
        count[0] += 1
    elif op == "gather":
        raise _NoTree()  # the index is a value: its tag is the tensor's tag at data the verifier may not follow
    elif op in ("cast", "roundto"):
        text = _tree(v.args[0], memo, count)
    else:
        subs = [_tree(a, memo, count) if isinstance(a, V) else None for a in v.args]
        if op in ("cast",):
            subs = subs[:1]
        text = None if all(x is None for x in subs) else "(" + ", ".join(
            "None" if x is None else x for x in subs) + ("," if len(subs) == 1 else "") + ")"
    if count[0] > TREE_LIMIT:
        raise _NoTree()
    memo[v] = text
    return text


def _store_assertion(body: list, em, numel: int) -> list:
    """`tp.assert_tag(out, lambda t, i: i >= N or t == <tree>)`: every element the kernel stores into its
    output at index i carries the tags of the lowering's value at i (which input elements, combined by which
    operations). Nothing when the value reads through a gather or is untagged."""
    import re

    stores = [m for line in body for m in [re.match(r"\s*tp\.store\((\w+)\[i0:i0 \+ BLOCK\], (\w+)", line)] if m]
    if len(stores) != 1:
        return []
    out, name = stores[0].group(1), stores[0].group(2)
    root = next((v for v, n in em.done.items() if n == name), None)
    if root is None:
        return []
    try:
        tree = _tree(root, {}, [0])
    except _NoTree:
        return []
    if tree is None:
        return []
    line = _bounded(f"tp.assert_tag({out}, lambda t, i: i >= {numel} or t == {tree})")
    return [line] if line else []


def annotate_pointwise(body: list, em, numel: int) -> list:
    """`body` (the kernel's lines, unindented) with tensor tags first, an assertion after every load and one
    on the output: what each stored element is computed from."""
    got = annotate(body, em, {"i": numel}, ("i",))
    if not ENABLED:
        return got
    extra = _store_assertion(body, em, numel)
    n = len(_param_tags(em, _stored(body)))
    return got[:n] + extra + got[n:]


def annotate_reduction(body: list, em, M: int, R: int) -> list:
    """As annotate_pointwise for a Reduction kernel over (m, r)."""
    return annotate(body, em, {"m": M, "r": R}, ("m", "r"))


# ---------------------------------------------------------------- stores of tiled reductions
class _Leaf:
    __slots__ = ("buf", "idx")

    def __init__(self, buf, idx):
        self.buf, self.idx = buf, idx


_UNHOOKED = object()


def _struct(v, memo: dict, count: list, hook=None):
    """`_tree` as a structure (nested tuples, `_Leaf` loads, None) so a load's position in the tag is known.
    `hook(v, count)`, when given, structures a value itself (fused rows: a read of a reduced stage), or returns
    _UNHOOKED."""
    from .values import V

    if hook is not None:
        got = hook(v, count)
        if got is not _UNHOOKED:
            return got
    if v in memo:
        return memo[v]
    op = v.op
    if op in ("const", "index") or not _is_tile(v):
        out = None
    elif op == "load":
        out = _Leaf(v.args[0], v.args[1])
        count[0] += 1
    elif op == "gather":
        raise _NoTree()
    elif op in ("cast", "roundto"):
        out = _struct(v.args[0], memo, count, hook)
    else:
        subs = tuple(_struct(a, memo, count, hook) if isinstance(a, V) else None for a in v.args)
        out = None if all(x is None for x in subs) else subs
    if count[0] > TREE_LIMIT:
        raise _NoTree()
    memo[v] = out
    return out


def _subst_text(e: IExpr, names: dict) -> str:
    """The index map rendered with its loop variables replaced by predicate expressions."""
    import re

    return re.sub(r"\b([morik])\b", lambda m: names.get(m.group(1), m.group(1)), str(e))


def _text(s, names: dict, budget: list | None = None) -> str:
    budget = [0] if budget is None else budget
    if s is None:
        return "None"
    if isinstance(s, _Leaf):
        _spend(budget)
        return f'("{s.buf}", {_subst_text(s.idx, names)})'
    return "(" + ", ".join(_text(x, names, budget) for x in s) + ("," if len(s) == 1 else "") + ")"


def _solvable(s, path=()):
    """(path, leaf, coefficient of r) of a load whose index map is affine in r (r a term of its own, nowhere
    else): the reduction index an element stands for is computable from that load's tag."""
    from .index import Sum, Var

    if isinstance(s, _Leaf):
        e = s.idx
        if isinstance(e, Var) and e.name == "r":
            return path, s, 1
        if isinstance(e, Sum):
            direct = [c for c, a in e.terms if isinstance(a, Var) and a.name == "r"]
            others = [a for c, a in e.terms if not (isinstance(a, Var) and a.name == "r")]
            if len(direct) == 1 and not any("r" in {x.name for x in variables(a)} for a in others):
                return path, s, direct[0]
        return None
    if isinstance(s, tuple):
        for k, x in enumerate(s):
            got = _solvable(x, path + (k,))
            if got is not None:
                return got
    return None


def _affine_in_r(s) -> bool:
    """Whether every load's index map in the structure has r only as a term of its own, or under one floor
    division of a sum of loop variables (a group's parameter, `bias[r // 105]`; a row's statistic,
    `smax[r // 53]`): then the solver's work per stored element stays small (maps with r under % or nested
    divisions, as a convolution's window reads, make the store's proof cost a second where its loads' cost
    milliseconds; those stores are not asserted, their loads are)."""
    from .index import Div, Sum, Var

    def has_r(a):
        return "r" in {x.name for x in variables(a)}

    def linear(a):      # a sum of loop variables, no // or %
        return isinstance(a, Var) or (isinstance(a, Sum) and all(isinstance(b, Var) for _, b in a.terms))

    def cheap(a):       # r as a term of its own, or under one floor division of a linear map (a group's bias)
        if isinstance(a, Var) or not has_r(a):
            return True
        if isinstance(a, Div):
            return linear(a.x)
        return isinstance(a, Sum) and all(cheap(b) for _, b in a.terms)

    if s is None:
        return True
    if isinstance(s, _Stage):
        return _affine_in_r(s.struct)
    if isinstance(s, _Leaf):
        return cheap(s.idx)
    if isinstance(s, _Fold):
        return _affine_in_r(s.inner)
    return all(_affine_in_r(x) for x in s)


def fold_claim(tv: str, inner: str, kexpr: str, lower: str, trips, t0: str | None = None) -> str:
    """The condition on a loop-carried accumulator's tag `tv` (the verifier's fold summary: ("fold", n, k, t)
    for each iteration k of n that folded t in, ("fold", n, None, t0) for its value before the loop) that it
    folds exactly `trips` iterations (an int, or text over the predicate's parameters), iteration k folding in
    the element `inner` (a condition on t) says, whose chunk `kexpr` is k, with `lower` (its index is in the
    range); `t0` the condition on the value before the loop (default: untagged, a tp.full). With the tile's
    lanes (tp.sum over the tile) these are the whole range: no chunk skipped, read twice or at another
    iteration."""
    first = t0 or f"{tv}[3] == None"
    # each side guarded by a test of k the verifier decides (None or a number): the other side's indexing
    # of t would not apply
    return (f'{tv}[0] == "fold" and {tv}[1] == {trips} and ({tv}[2] == None or {inner} and {kexpr} == {tv}[2] '
            f"and {lower}) and ({tv}[2] != None or {first})")


def reduction_store_assertion(value, out_param: str, coords: tuple, bound, wrap, fold: int | None = None,
                              lo: str | None = None) -> str | None:
    """`tp.assert_tag(out, lambda t, <coords>: t == <tree> and 0 <= r' < bound)` for a reduction's store:
    every element stored at the output's coordinates (`coords`: the loop variables they are, e.g. ("m",) or
    ("o", "i"); None for a coordinate that is none) is the reduction (at any index r' of the tile's reduction
    range) of the lowering's value at that output index and r'. r' is solved from one load whose index map is
    affine in r, so the tree (every other load and every operation) is checked at that r'. `wrap(tree)`: the
    accumulator's update around the value's tag (`acc + v` -> (None, tree)); `bound`: the tile's reduction
    range (an int), or `bound(r', params)` the range condition as text (a scan's prefix). None when the value
    reads through a gather, has no such load or is untagged. `fold`: the accumulator is carried through a
    loop of that many chunks of `bound` elements (`fold_claim`); `lo`: a coordinate whose value times C is
    the start of the block's chunk of the range (a split reduction's partial s covers [s C, s C + C))."""
    from .index import const, substitute

    if not ENABLED:
        return None
    try:
        s = _struct(value, {}, [0])
    except _NoTree:
        return None
    if s is None or _too_big(s):
        return None
    if not _affine_in_r(s):
        return None
    s = wrap(s)
    got = _solvable(s)
    if got is None:
        return None
    path, leaf, coef = got
    params = [f"c{j}" for j in range(len(coords))]
    names = {x: p for x, p in zip(coords, params) if x is not None}
    base = substitute(leaf.idx, {"r": const(0)})
    root = "t" if fold is None else "t[3]"
    tpath = root + "".join(f"[{k}]" for k in path) + "[1]"
    rtext = f"({tpath} - {_subst_text(base, names)})"
    if coef != 1:
        rtext = f"({rtext} // {coef})"
    rel = rtext if lo is None else f"({rtext} - {names[lo]} * C)"
    names["r"] = rtext
    try:
        tree = _text(s, names)
    except _NoTree:
        return None
    head = f"tp.assert_tag({out_param}, lambda t, {', '.join(params)}: "
    if fold is not None:
        return _bounded(head + fold_claim("t", f"t[3] == {tree}", f"{rel} // {bound}", f"0 <= {rel}", fold) + ")")
    cond = bound(rtext, params) if callable(bound) else f"0 <= {rel} and {rel} < {bound}"
    return _bounded(head + f"t == {tree} and {cond})")


class _Stage:
    """A fused row kernel's reduced stage where a value reads it: the set of the stage value's tags over r."""

    __slots__ = ("struct",)

    def __init__(self, struct):
        self.struct = struct


def row_fused_store_assertion(value, stages: dict, out_param: str, coords: tuple, bound: int,
                              fold: int | None = None) -> str | None:
    """`tp.assert_tag(out, lambda t, c0[, c1]: ...)` for a fused row kernel's store: the stored element is the
    lowering's value at (m, r) = its coordinates, where each read of a reduced stage ({stage buffer: (stage
    value, wrap, the index it is read at)}) is that stage's reduction: the stage value at the output index (m;
    o, i in column mode) and any r' of the row tile ([0, bound)),
    r' solved, per occurrence, from one of its loads (as in `reduction_store_assertion`). None when a value
    reads through a gather, a stage has no load affine in r, or nothing is tagged. `fold`: each stage's
    accumulator is carried through a loop of that many chunks of `bound` elements (`fold_claim`: the stage's
    place in the tree is its own tag there, the claim on it a condition of its own)."""
    from .index import const, substitute
    from .values import V

    if not ENABLED:
        return None

    def stage_read(v, count):
        if isinstance(v, V) and v.op == "load" and v.args[0] in stages and v.args[1] == stages[v.args[0]][2]:
            sv, wrap, _ = stages[v.args[0]]
            inner = _struct(sv, {}, count, stage_read)
            return None if inner is None else _Stage(wrap(inner))
        return _UNHOOKED

    try:
        s = _struct(value, {}, [0], stage_read)
    except _NoTree:
        return None
    if s is None or _too_big(s) or not _affine_in_r(s):
        return None
    params = [f"c{j}" for j in range(len(coords))]
    conds: list = []
    budget = [0]

    def text(x, path, names):
        if x is None:
            return "None"
        if isinstance(x, _Leaf):
            _spend(budget)
            return f'("{x.buf}", {_subst_text(x.idx, names)})'
        if isinstance(x, _Stage):
            got = _solvable(x.struct)
            if got is None:
                raise _NoTree()
            rel, leaf, coef = got
            base = substitute(leaf.idx, {"r": const(0)})
            here = "t" + "".join(f"[{k}]" for k in path)
            tpath = (here if fold is None else here + "[3]") + "".join(f"[{k}]" for k in rel) + "[1]"
            inner = {x: names[x] for x in ("m", "o", "i") if x in names}
            rtext = f"({tpath} - {_subst_text(base, inner)})"
            if coef != 1:
                rtext = f"({rtext} // {coef})"
            if fold is None:
                conds.append(f"0 <= {rtext} and {rtext} < {bound}")
                return text(x.struct, path, dict(inner, r=rtext))
            sub = text(x.struct, path + (3,), dict(inner, r=rtext))
            conds.append("(" + fold_claim(here, f"{here}[3] == {sub}", f"{rtext} // {bound}", f"0 <= {rtext}", fold)
                         + ")")
            return here
        subs = [text(a, path + (k,), names) for k, a in enumerate(x)]
        return "(" + ", ".join(subs) + ("," if len(subs) == 1 else "") + ")"

    names = {x: p for x, p in zip(coords, params) if x is not None}
    try:
        tree = text(s, (), names)
    except _NoTree:
        return None
    if not conds:
        return None
    return _bounded(f"tp.assert_tag({out_param}, lambda t, {', '.join(params)}: t == {tree} and "
                    f"{' and '.join(conds)})")


def scan_store_assertion(value, out_param: str, row: bool, bn: int, nk: int, ragged: bool, reverse: bool,
                         exclusive: bool, seg: tuple | None = None) -> str | None:
    """`tp.assert_tag(out, lambda t, c0, c1[, c2]: ...)` for a scan over chunks of `bn` elements with a carry
    (`c = scan(v) op carry`, stored in the loop; `carry = carry op reduce(v)`): the element stored at (c0 = m,
    c1 = j) (columns: (o, j, i)) is t = (scan tag, carry tag) where the scan's element is the value at (m, r1)
    for r1 in j's chunk and its prefix (r1 <= j; r1 < j exclusive; reversed r1 >= j, r1 > j), and the carry is
    the fold of exactly the chunks before j's (after it, reversed): iteration k' folds in the reduction of
    chunk k' (nk - 1 - k' reversed). `seg` = (L, S, O, segment buffer): rows scanned in segments of L by their
    own blocks (s = j // L), the carry starting as the fold of the segment sums before s (after it),
    `for q in range(s)`: iteration q' loads segment q' (s + 1 + q' reversed) of row m. None when the value
    reads through a gather, has no load affine in r, or is untagged."""
    from .index import const, substitute

    if not ENABLED:
        return None
    try:
        st = _struct(value, {}, [0])
    except _NoTree:
        return None
    if st is None or _too_big(st) or not _affine_in_r(st):
        return None
    vw = (None, st, None) if ragged else st
    got = _solvable(vw)
    if got is None:
        return None
    path, leaf, coef = got
    params = ["c0", "c1"] if row else ["c0", "c1", "c2"]
    names = {"m": "c0"} if row else {"o": "c0", "i": "c2"}
    base = _subst_text(substitute(leaf.idx, {"r": const(0)}), names)

    def solved(prefix):
        rt = f"({prefix}{''.join(f'[{k}]' for k in path)}[1] - {base})"
        return f"({rt} // {coef})" if coef != 1 else rt

    j = "c1"
    start = "0"
    if seg is not None:
        L, S, O, sbuf = seg
        start = f"(c1 // {L}) * {L}"
    chunk = f"(({j} - {start}) // {bn})"
    r1, r2 = solved("t[0]"), solved("t[1][3][1]")
    before = ("<" if exclusive else "<=") if not reverse else (">" if exclusive else ">=")
    try:
        tv1, tv2 = _text(vw, dict(names, r=r1)), _text(vw, dict(names, r=r2))
    except _NoTree:
        return None
    local = (f"t[0] == {tv1} and (({r1} - {start}) // {bn}) == {chunk} and "
             f"{r1} {before} {j}")
    k2 = f"(({r2} - {start}) // {bn})"
    if reverse:
        trips, kexpr = f"{nk - 1} - {chunk}", f"{nk - 1} - {k2}"
    else:
        trips, kexpr = chunk, k2
    t0 = None
    if seg is not None:
        s_ = f"(c1 // {L})"
        q = f"{s_} + 1 + t[1][3][2]" if reverse else "t[1][3][2]"
        strips = f"{S - 1} - {s_}" if reverse else s_
        t0 = "(" + fold_claim("t[1][3]", f'(t[1][3][3] == (None, ("{sbuf}", {O} * ({q}) + c0)))', "t[1][3][2]",
                              "True", strips) + ")"
    carry = fold_claim("t[1]", f"t[1][3][1] == {tv2}", kexpr, f"0 <= {r2} - {start}",
                       trips, t0)
    return _bounded(f"tp.assert_tag({out_param}, lambda t, {', '.join(params)}: {local} and {carry})")


# ---------------------------------------------------------------- stores of hand-written tile templates
class _Fold:
    """A loop-carried accumulator after its loop: the verifier's ("fold", n, k, t) over its update t."""

    __slots__ = ("inner",)

    def __init__(self, inner):
        self.inner = inner


_PASS = {"sum", "max", "min", "prod"}          # reductions over a tile axis: an element's tag, any lane
_UNTAGGED = {"full", "zeros", "arange"}


def _unary_math() -> frozenset:
    from tilepy.ops import UNARY_MATH

    return frozenset(UNARY_MATH)


def _line_struct(node, env: dict):
    """The tag structure of one template expression (python ast) as the verifier gives it: an elementwise
    operation or tp.where the tuple of its operands' tags (None when none is tagged), a tile reduction, cast
    or `[:, None]` its operand's, constants and index tiles None."""
    import ast

    def ew(parts):
        return None if all(p is None for p in parts) else tuple(parts)

    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.Constant):
        return None
    if isinstance(node, ast.BinOp):
        return ew([_line_struct(node.left, env), _line_struct(node.right, env)])
    if isinstance(node, ast.Compare) and len(node.comparators) == 1:
        return ew([_line_struct(node.left, env), _line_struct(node.comparators[0], env)])
    if isinstance(node, ast.Subscript):
        return _line_struct(node.value, env)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        f = node.func
        if f.attr == "to":
            return _line_struct(f.value, env)
        if isinstance(f.value, ast.Name) and f.value.id == "tp":
            if f.attr in _UNTAGGED:
                return None
            if f.attr in _PASS:
                return _line_struct(node.args[0], env)
            if f.attr in ("where", "maximum", "minimum") or f.attr in _unary_math():
                return ew([_line_struct(a, env) for a in node.args])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float":
        return None
    raise _NoTree()


def _run_lines(lines: list, env: dict) -> dict:
    import ast

    for line in lines:
        tree = ast.parse(line.strip())
        st = tree.body[0]
        if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)):
            continue
        name = st.targets[0].id
        if name in env and env.get(("seeded", name)):
            continue          # a value the emitter rendered: its structure is the lowering's own
        env[name] = _line_struct(st.value, env)
    return env


def template_store_assertion(em, pre: list, loop: list, post: list, stored: str, out_param: str, coords: tuple,
                             trips: int, bound: int, lo: str | None = None, at: tuple | None = None) -> str | None:
    """`tp.assert_tag(out, lambda t, <coords>: ...)` for the store of `stored` in a hand-written template
    (argmax/argmin's (value, index) lanes, Welford's (count, mean, M2)): the lines before the chunk loop, its
    body and the lines after it are read as the verifier reads them (`_line_struct`; the values the emitter
    rendered are their lowering values), each accumulator the loop carries whose tag changes is a fold, and
    every fold the stored value reads must fold exactly `trips` chunks of `bound`, iteration k reading the
    lowering's values at the output's index and an r' of chunk k (`lo`: a split partial's coordinate, its
    chunk starting at lo * C). `at`: the assertion is on the register tile `out_param` (its elements, at the
    index tiles `at` of the coordinates) instead of a tensor. None when a value reads through a gather, has
    no load affine in r, or nothing is tagged."""
    import ast
    import re

    from .index import const, substitute

    if not ENABLED:
        return None
    env: dict = {}
    try:
        if any(v.op == "gather" for v in em.done):
            raise _NoTree()      # an index that is data: not an index map
        for v, name in em.done.items():
            if v.op == "load" and re.fullmatch(r"t\d+", name):      # the emitter's loads: their index maps
                env[name] = _Leaf(v.args[0], v.args[1])
                env[("seeded", name)] = True
        _run_lines(pre, env)
        init = dict(env)
        body = _run_lines(loop, dict(env))
        for name in {line.strip().split(" = ", 1)[0] for line in loop if " = " in line}:
            if name in init and not env.get(("seeded", name)) and body.get(name) is not None:
                if any(re.search(rf"\b{name}\b", line.split(" = ", 1)[1]) for line in loop if " = " in line):
                    env[name] = _Fold(body[name]) if body[name] is not init[name] else init[name]
        _run_lines(post, env)
        s = _line_struct(ast.parse(stored.strip()).body[0].value, env)
    except (_NoTree, SyntaxError):
        return None
    if s is None or _too_big(s):
        return None
    params = [f"c{j}" for j in range(len(coords))]
    names = {x: p for x, p in zip(coords, params) if x is not None}
    conds: list = []
    folds = [0]
    budget = [0]

    def text(x, path, rn):
        if x is None:
            return "None"
        if isinstance(x, _Leaf):
            _spend(budget)
            if "r" in {v.name for v in variables(x.idx)} and "r" not in rn:
                raise _NoTree()
            return f'("{x.buf}", {_subst_text(x.idx, rn)})'
        if isinstance(x, _Fold):
            if not _affine_in_r(x.inner):
                raise _NoTree()
            got = _solvable(x.inner)
            if got is None:
                raise _NoTree()
            rel, leaf, coef = got
            here = "t" + "".join(f"[{k}]" for k in path)
            base = substitute(leaf.idx, {"r": const(0)})
            inner = {k: v for k, v in rn.items() if k != "r"}
            rt = f"({here}[3]{''.join(f'[{k}]' for k in rel)}[1] - {_subst_text(base, inner)})"
            if coef != 1:
                rt = f"({rt} // {coef})"
            off = rt if lo is None else f"({rt} - {names[lo]} * C)"
            sub = text(x.inner, path + (3,), dict(inner, r=rt))
            conds.append("(" + fold_claim(here, f"{here}[3] == {sub}", f"{off} // {bound}", f"0 <= {off}", trips)
                         + ")")
            folds[0] += 1
            return here
        if isinstance(x, _Stage):
            raise _NoTree()
        return "(" + ", ".join(text(a, path + (k,), rn) for k, a in enumerate(x)) + ("," if len(x) == 1 else "") + ")"

    try:
        tree = text(s, (), dict(names))
    except _NoTree:
        return None
    if not folds[0]:
        return None
    tail = "" if at is None else f", at=({', '.join(at)}{',' if len(at) == 1 else ''})"
    claim = " and ".join(conds) if tree == "t" else f"t == {tree} and " + " and ".join(conds)
    return _bounded(f"tp.assert_tag({out_param}, lambda t, {', '.join(params)}: {claim}{tail})")
