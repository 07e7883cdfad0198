"""Views, permutes, slices, indexing, cat and pad: index maps on the consumer's loads, never copies."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import values as vals
from .core import Buffer, LTensor, broadcast_coords, broadcast_shapes, buffer_tensor
from .index import IExpr, Sum, Var, add, const, flatten, floordiv, numel, scale, unflatten, variables
from .registry import register, result_dtype, result_shape
from .values import call


def _dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


@register("aten.view", "aten._unsafe_view", "aten.reshape", "aten.view_copy")
def _view(ctx, node, x, size, *a):
    shape = result_shape(node)
    if shape == x.shape:
        return x
    old = x.shape
    if x.buffer is not None:  # a view of a buffer in memory: read the buffer at the same flat index
        buf = x.buffer
        return LTensor(shape, x.dtype, lambda c: vals.load(buf.name, flatten(c, shape), buf.dtype), buffer=buf)
    return LTensor(shape, x.dtype, lambda c: x(unflatten(flatten(c, shape), old)))


@register("aten.permute")
def _permute(ctx, node, x, dims):
    dims = [_dim(d, len(x.shape)) for d in dims]
    inv = [0] * len(dims)
    for k, d in enumerate(dims):
        inv[d] = k
    return LTensor(result_shape(node), x.dtype, lambda c: x([c[inv[d]] for d in range(len(dims))]))


@register("aten.t", "aten.transpose", "aten.numpy_T")
def _transpose(ctx, node, x, d0=0, d1=1):
    r = len(x.shape)
    if r < 2:
        return x
    d0, d1 = _dim(d0, r), _dim(d1, r)

    def f(c):
        c = list(c)
        c[d0], c[d1] = c[d1], c[d0]
        return x(c)

    return LTensor(result_shape(node), x.dtype, f)


@register("aten.expand", "aten.broadcast_to", "aten.expand_copy")
def _expand(ctx, node, x, size, *a, **kw):
    shape = result_shape(node)
    return LTensor(shape, x.dtype, lambda c: x(broadcast_coords(c, x.shape, shape)))


@register("aten.unsqueeze")
def _unsqueeze(ctx, node, x, d):
    d = _dim(d, len(x.shape) + 1)
    return LTensor(result_shape(node), x.dtype, lambda c: x(c[:d] + c[d + 1 :]))


@register("aten.squeeze")
def _squeeze(ctx, node, x, dims=None):
    shape = result_shape(node)
    r = len(x.shape)
    if dims is None:
        drop = [k for k, n in enumerate(x.shape) if n == 1]
    else:
        dims = [dims] if isinstance(dims, int) else dims
        drop = [_dim(d, r) for d in dims if x.shape[_dim(d, r)] == 1]

    def f(c):
        it = iter(c)
        return x([const(0) if k in drop else next(it) for k in range(r)])

    return LTensor(shape, x.dtype, f)


@register("aten.slice")
def _slice(ctx, node, x, dim=0, start=None, end=None, step=1):
    r = len(x.shape)
    dim = _dim(dim, r)
    n = x.shape[dim]
    start = 0 if start is None else start
    start = max(0, min(n, start + n if start < 0 else start))

    def f(c):
        c = list(c)
        c[dim] = add(c[dim] * step, const(start))
        return x(c)

    return LTensor(result_shape(node), x.dtype, f)


@register("aten.select")
def _select(ctx, node, x, dim, index):
    r = len(x.shape)
    dim = _dim(dim, r)
    index = index + x.shape[dim] if index < 0 else index
    return LTensor(result_shape(node), x.dtype, lambda c: x(c[:dim] + [const(index)] + c[dim:]))


@register("aten.flip")
def _flip(ctx, node, x, dims):
    dims = {_dim(d, len(x.shape)) for d in dims}

    def f(c):
        return x([add(const(x.shape[k] - 1), c[k] * -1) if k in dims else c[k] for k in range(len(c))])

    return LTensor(x.shape, x.dtype, f)


@register("aten.cat")
def _cat(ctx, node, tensors, dim=0):
    shape = result_shape(node)
    dtype = result_dtype(node)
    cdt = vals.compute_dtype(dtype)
    parts = [t for t in tensors if t.numel > 0 or len(t.shape) == len(shape)]
    parts = [t for t in parts if len(t.shape) == len(shape)]
    dim = _dim(dim, len(shape))
    offsets, o = [], 0
    for t in parts:
        offsets.append(o)
        o += t.shape[dim]

    def f(c):
        out = None
        for t, off in reversed(list(zip(parts, offsets))):
            cc = list(c)
            cc[dim] = add(c[dim], const(-off))
            v = vals.cast(t(cc), cdt)
            if out is None:
                out = v
            else:
                cond = call("lt", vals.index_value(c[dim]), vals.const(off + t.shape[dim], torch.int64))
                out = call("where", cond, v, out, dtype=cdt)
        return out

    return LTensor(shape, dtype, f)


@register("aten.slice_scatter")
def _slice_scatter(ctx, node, x, src, dim=0, start=None, end=None, step=1):
    """x with x[..., start:end:step, ...] (along `dim`) replaced by src: src where the coordinate is in the
    slice, x elsewhere (torch's decompositions of circular padding write through it)."""
    r = len(x.shape)
    dim = _dim(dim, r)
    n = x.shape[dim]
    start = 0 if start is None else (start + n if start < 0 else start)
    end = n if end is None or end > n else (end + n if end < 0 else end)
    start = max(0, min(n, start))
    dtype = result_dtype(node)
    cdt = vals.compute_dtype(dtype)
    count = src.shape[dim]

    def f(c):
        e = vals.index_value(c[dim])
        rel = call("sub", e, vals.const(start, torch.int64))
        inside = call("and", call("ge", rel, vals.const(0, torch.int64)),
                      call("lt", rel, vals.const(count * step, torch.int64)), dtype=torch.bool)
        if step != 1:
            inside = call("and", inside, call("eq", call("mod", rel, vals.const(step, torch.int64)),
                                              vals.const(0, torch.int64)), dtype=torch.bool)
        cc = list(c)
        cc[dim] = add(c[dim], const(-start)) if step == 1 else floordiv(add(c[dim], const(-start)), step)
        return call("where", inside, vals.cast(src(cc), cdt), vals.cast(x(c), cdt), dtype=cdt)

    if count == 0:
        return x
    return LTensor(x.shape, dtype, f)


@register("aten.select_scatter")
def _select_scatter(ctx, node, x, src, dim, index):
    """x with x.select(dim, index) replaced by src."""
    r = len(x.shape)
    dim = _dim(dim, r)
    index = index + x.shape[dim] if index < 0 else index
    dtype = result_dtype(node)
    cdt = vals.compute_dtype(dtype)

    def f(c):
        hit = call("eq", vals.index_value(c[dim]), vals.const(index, torch.int64))
        return call("where", hit, vals.cast(src(c[:dim] + c[dim + 1:]), cdt), vals.cast(x(c), cdt), dtype=cdt)

    return LTensor(x.shape, dtype, f)


@register("aten.constant_pad_nd")
def _pad(ctx, node, x, pad, value=0.0):
    shape = result_shape(node)
    dtype = result_dtype(node)
    cdt = vals.compute_dtype(dtype)
    r = len(shape)
    lows = [0] * r
    for k in range(len(pad) // 2):
        lows[r - 1 - k] = pad[2 * k]

    def f(c):
        cc = [add(c[d], const(-lows[d])) for d in range(r)]
        conds = []
        for d in range(r):
            if lows[d] > 0:
                conds.append(("ge0", cc[d]))
            if shape[d] - lows[d] > x.shape[d]:
                conds.append(("lt", cc[d], x.shape[d]))
        inner = vals.cast(x(cc), cdt)
        if not conds:
            return inner
        ok = None
        for cnd in conds:
            e = vals.index_value(cnd[1])
            t = (
                call("ge", e, vals.const(0, torch.int64))
                if cnd[0] == "ge0"
                else call("lt", e, vals.const(cnd[2], torch.int64))
            )
            ok = t if ok is None else call("and", ok, t, dtype=torch.bool)
        return call("where", ok, inner, vals.const(value, cdt), dtype=cdt)

    return LTensor(shape, dtype, f)


def _gather_index(idx: LTensor, c, out_shape):
    """The value of index tensor `idx` at coordinates `c` of the result (broadcast), as an int64 V."""
    return vals.cast(idx(broadcast_coords(c, idx.shape, out_shape)), torch.int64)


class _NoCompose(Exception):
    pass


def _subst_placeholders(v, sub: dict, memo: dict):
    """v with each placeholder variable (name -> int64 V) replaced by its value: an index leaf linear in it
    becomes the leaf without it plus value * coefficient, a load whose index holds it a gather; _NoCompose where a
    placeholder sits inside a div / mod, a load's validity conditions or any other index argument."""
    if not (v.vars & sub.keys()):
        return v
    got = memo.get(v)
    if got is not None:
        return got
    if v.op == "index":
        e = v.args[0]
        rest, extra = const(e.c) if isinstance(e, Sum) else const(0), []
        for coef, a in (e.terms if isinstance(e, Sum) else ((1, e),)):
            if isinstance(a, Var) and a.name in sub:
                extra.append((coef, sub[a.name]))
            elif {x.name for x in variables(a)} & sub.keys():
                raise _NoCompose
            else:
                rest = add(rest, scale(a, coef))
        out = vals.index_value(rest, v.dtype)
        for coef, q in extra:
            q = vals.cast(q, v.dtype)
            out = call("add", out, q if coef == 1 else call("mul", q, vals.const(coef, v.dtype)))
    elif v.op == "load":
        buf, e, conds = v.args
        if any({x.name for x in variables(cd[1])} & sub.keys() for cd in conds) or conds:
            raise _NoCompose
        off = _subst_placeholders(vals.index_value(e), sub, memo)
        out = vals.make("gather", (buf, off), v.dtype)
    else:
        args = []
        for a in v.args:
            if isinstance(a, vals.V):
                args.append(_subst_placeholders(a, sub, memo))
            elif isinstance(a, IExpr) and {x.name for x in variables(a)} & sub.keys():
                raise _NoCompose
            else:
                args.append(a)
        out = vals.make(v.op, tuple(args), v.dtype)
    memo[v] = out
    return out


def _composed_index(x: LTensor, idx: list, first: int, nb: int, bshape, shape):
    """x[indices] as a function of x's expression (no buffer of x) when x is not a buffer, is read at most
    about twice per element (the index picks rows, it does not fan one out to many) and its value is linear in
    the indexed coordinates wherever they reach memory (an index chain, e.g. torch's reflection padding: one
    gather along each padded dim): composed, the chain is one gather. None where it is not."""
    if x.buffer is not None or numel(shape) > 2 * max(1, x.numel):
        return None
    names = {d: f"_ix{d}" for d in range(len(x.shape)) if idx[d] is not None}

    def coords_of(c):
        out = []
        for d in range(len(x.shape)):
            if idx[d] is None:
                out.append(c[d if d < first else d - (sum(t is not None for t in idx)) + nb])
            else:
                out.append(Var(names[d], x.shape[d]))
        return out

    def f(c):
        bc = c[first: first + nb]
        sub = {}
        for d, nm in names.items():
            q = _gather_index(idx[d], bc, bshape)
            n = vals.const(x.shape[d], torch.int64)
            sub[nm] = call("where", call("lt", q, vals.const(0, torch.int64)), call("add", q, n), q)
        return _subst_placeholders(x(coords_of(c)), sub, {})

    try:
        f([Var(f"_probe{k}", n) for k, n in enumerate(shape)])
    except _NoCompose:
        return None
    return f


@register("aten.index")
def _index(ctx, node, x, indices):
    """x[i0, i1, ...] with index tensors (None = a full slice); advanced indices adjacent at the front."""
    shape = result_shape(node)
    idx = list(indices) + [None] * (len(x.shape) - len(indices))
    tensors = [t for t in idx if t is not None]
    first = next(k for k, t in enumerate(idx) if t is not None)
    if any(t is None for t in idx[first : first + len(tensors)]):
        raise NotImplementedError("advanced indices separated by a slice")
    bshape = broadcast_shapes(*[t.shape for t in tensors])
    nb = len(bshape)
    if any(t.dtype == torch.bool for t in tensors):
        raise NotImplementedError("boolean mask indexing (data-dependent shape)")
    composed = _composed_index(x, idx, first, nb, bshape, shape)
    if composed is not None:
        return LTensor(shape, result_dtype(node), composed)
    ctx_x = ctx.realize(x, "indexed")

    def f(c):
        bc = c[first : first + nb]
        coords, k = [], 0
        for d in range(len(x.shape)):
            if idx[d] is None:
                coords.append(c[d if d < first else d - len(tensors) + nb])
            else:
                coords.append(None)
                k += 1
        return _load_at(
            ctx_x,
            coords,
            [(_d, _gather_index(idx[_d], bc, bshape)) for _d in range(len(x.shape)) if idx[_d] is not None],
        )

    return LTensor(shape, result_dtype(node), f)


def _load_at(buf_t: LTensor, coords, dyn) -> vals.V:
    """A load of buffer tensor `buf_t` at static coordinates `coords` where some dims take run-time indices
    (`dyn`: [(dim, int64 V)]); negative indices wrap as in torch."""
    buf = buf_t.buffer
    shape = buf_t.shape
    strides = [1] * len(shape)
    s = 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = s
        s *= shape[d]
    static = flatten([c if c is not None else const(0) for c in coords], shape)
    off = vals.index_value(static)
    for d, v in dyn:
        v = call(
            "where", call("lt", v, vals.const(0, torch.int64)), call("add", v, vals.const(shape[d], torch.int64)), v
        )
        off = call("add", off, call("mul", v, vals.const(strides[d], torch.int64)))
    return vals.make("gather", (buf.name, off), vals.compute_dtype(buf.dtype))


@register("aten.index_select")
def _index_select(ctx, node, x, dim, index):
    shape = result_shape(node)
    dim = _dim(dim, len(x.shape))
    xb = ctx.realize(x, "selected")

    def f(c):
        coords = list(c)
        coords[dim] = None
        return _load_at(xb, coords, [(dim, vals.cast(index([c[dim]]), torch.int64))])

    return LTensor(shape, result_dtype(node), f)


@register("aten.embedding")
def _embedding(ctx, node, weight, indices, *a):
    shape = result_shape(node)
    wb = ctx.realize(weight, "table")
    nb = len(indices.shape)

    def f(c):
        return _load_at(wb, [None, c[nb]], [(0, vals.cast(indices(c[:nb]), torch.int64))])

    return LTensor(shape, result_dtype(node), f)


def _split_linear(e, name: str):
    """(rest, k) with e == rest + k * Var(name), when the variable occurs only as such a term, else None."""
    from .index import _make, _terms, variables

    c, terms = _terms(e)
    k, rest = 0, []
    for coef, atom in terms:
        if isinstance(atom, Var) and atom.name == name:
            k += coef
        elif name in {v.name for v in variables(atom)}:
            return None
        else:
            rest.append((coef, atom))
    return _make(c, rest), k


def _at_value(e: vals.V, name: str, value: vals.V, memo: dict):
    """`e` with the index variable `name` replaced by the run-time int64 `value` (loads along it become
    gathers), or None when the variable is not a plain linear term of every index that reads it."""
    if name not in e.vars:
        return e
    got = memo.get(e)
    if got is not None or e in memo:
        return got
    out = None
    if e.op in ("load", "index"):
        idx = e.args[1] if e.op == "load" else e.args[0]
        conds = e.args[2] if e.op == "load" else ()
        split = _split_linear(idx, name)
        if split is not None and not any(name in {v.name for v in _cond_vars(cd)} for cd in conds):
            rest, k = split
            off = call("add", vals.index_value(rest), call("mul", value, vals.const(k, torch.int64)))
            if e.op == "index":
                out = vals.cast(off, e.dtype)
            elif not conds:
                out = vals.make("gather", (e.args[0], off), e.dtype)
    elif all(not isinstance(a, (tuple, list)) and (isinstance(a, vals.V) or name not in _arg_vars(a))
             for a in e.args):
        args = []
        for a in e.args:
            if isinstance(a, vals.V):
                a = _at_value(a, name, value, memo)
                if a is None:
                    break
            args.append(a)
        else:
            out = vals.make(e.op, tuple(args), e.dtype)
    memo[e] = out
    return out


def _cond_vars(cd):
    from .index import IExpr, variables

    return set().union(*[variables(x) for x in cd if isinstance(x, IExpr)]) if cd else set()


def _arg_vars(a):
    from .index import IExpr, variables

    return {v.name for v in variables(a)} if isinstance(a, IExpr) else set()


def _gather_expression(x: LTensor, dim: int, index_at):
    """x gathered along `dim` at run-time indices without writing x out: x's value at a symbolic coordinate
    of that dim, the coordinate then replaced by the index (each load along it a gather), so only the
    gathered elements are computed (a cross entropy's log-softmax row, a broadcast class weight). None when
    an index reads the coordinate other than linearly (then x is written to a buffer first)."""
    n = x.shape[dim]
    probe = Var(f"_g{dim}", n)

    def f(c):
        coords = list(c)
        coords[dim] = probe
        got = _at_value(x(coords), probe.name, _wrapped(index_at(c), n), {})
        if got is None:
            raise _NotLinear
        return got
    return f


class _NotLinear(Exception):
    pass


def _wrapped(v: vals.V, n: int) -> vals.V:
    v = vals.cast(v, torch.int64)
    return call("where", call("lt", v, vals.const(0, torch.int64)), call("add", v, vals.const(n, torch.int64)), v)


@register("aten.gather")
def _gather(ctx, node, x, dim, index, *a):
    shape = result_shape(node)
    dim = _dim(dim, len(x.shape))
    if x.buffer is None and x.shape:
        lazy = _gather_expression(x, dim, index)
        try:
            lazy(unflatten(Var("_probe", max(1, math.prod(shape))), shape))
            return LTensor(shape, result_dtype(node), lazy)
        except _NotLinear:
            pass
    xb = ctx.realize(x, "gathered")

    def f(c):
        coords = list(c)
        coords[dim] = None
        return _load_at(xb, coords, [(dim, vals.cast(index(c), torch.int64))])

    return LTensor(shape, result_dtype(node), f)


@register("aten.split_with_sizes", "aten.split")
def _split(ctx, node, x, sizes, dim=0):
    dim = _dim(dim, len(x.shape))
    if isinstance(sizes, int):
        n = x.shape[dim]
        sizes = [min(sizes, n - k) for k in range(0, n, sizes)]
    outs, off = [], 0
    for s in sizes:
        shape = list(x.shape)
        shape[dim] = s

        def f(c, off=off):
            c = list(c)
            c[dim] = add(c[dim], const(off))
            return x(c)

        outs.append(LTensor(tuple(shape), x.dtype, f))
        off += s
    return tuple(outs)


@register("aten.as_strided")
def _as_strided(ctx, node, x, size, stride, offset=0):
    xb = ctx.realize(x, "strided")
    buf = xb.buffer
    shape = result_shape(node)
    return LTensor(shape, x.dtype, lambda c: vals.load(buf.name, flatten(c, shape, stride, offset or 0), buf.dtype))



def _static_offsets(offsets: LTensor, n: int):
    """The bag starts when the offsets are known at lowering time (an arange: a 2-D EmbeddingBag input), else
    None."""
    if len(offsets.shape) != 1:
        return None
    def value(v):
        """v's integer when it is built from constants and constant indices only, else None."""
        if v.dtype.is_floating_point:
            return None
        if v.op == "const":
            return v.args[0]
        if v.op == "index":
            e = v.args[0]
            return e.c if isinstance(e, Sum) and not e.terms else None
        if v.op == "cast":
            return value(v.args[0])
        if v.op in vals._PY:
            xs = [value(a) for a in v.args]
            return None if None in xs else vals._PY[v.op](*xs)
        return None

    got = []
    for b in range(offsets.shape[0]):
        x = value(offsets([const(b)]))
        if x is None:
            return None
        got.append(int(x))
    return got


@dataclass
class EmbeddingBagTemplate:
    """out (B, D) f32 = the sum / mean / max (MODE 0 / 1 / 2) of the table's rows at ids (B, S) int64, per bag:
    `stdlib_kernels/embedding_bag.py` (one block per bag and BD columns, BJ row gathers of 16-byte vectors at a
    time)."""

    out: Buffer
    table: Buffer
    ids: Buffer
    B: int
    S: int
    D: int
    V: int
    MODE: int
    what: str = ""

    @property
    def K(self) -> int:       # the longest sum it runs (for tolerances)
        return self.S

    def policy(self) -> tuple[int, int]:
        """(BJ, BD): BD columns a block (a power of two, 32 to 512), BJ rows at a time, about 32 values of each
        tile a thread, no more rows than the bag's (rounded up to a power of two)."""
        bd = max(32, min(512, 1 << max(0, self.D - 1).bit_length()))
        bj = max(2, min(4096 // bd, 32, 1 << max(0, self.S - 1).bit_length()))
        return bj, bd


def render_embedding_bag(t: EmbeddingBagTemplate) -> list[str]:
    bj, bd = t.policy()
    return [f"launch(embedding_bag, ({t.B}, tp.cdiv({t.D}, {bd})), {t.table.name}.view({t.V}, {t.D}), "
            f"{t.ids.name}.view({t.B}, {t.S}), {t.out.name}.view({t.B}, {t.D}), MODE={t.MODE}, BJ={bj}, BD={bd})"]


def _embedding_bag_template(ctx, wb: LTensor, indices: LTensor, nb: int, size: int, base: int, mode: int):
    """Bags of one size on a GPU target: the stdlib kernel (vectorized row gathers) instead of a reduction whose
    every element is a scalar gather."""
    ids = ctx.contiguous(LTensor((nb, size), torch.int64, lambda c: vals.cast(
        indices([add(add(c[0] * size, c[1]), const(base))]), torch.int64)), "bag_ids").buffer
    V, D = wb.shape
    out = ctx.add_buffer("bag", (nb, D), torch.float32)
    ctx.kernels.append(EmbeddingBagTemplate(out, wb.buffer, ids, nb, size, D, V, mode, ctx.note))
    return buffer_tensor(out)


@register("aten._embedding_bag", "aten._embedding_bag_forward_only")
def _embedding_bag(ctx, node, weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    """nn.EmbeddingBag: per bag, the sum (mode 0), mean (1) or max (2) of the rows its indices pick (times
    per-sample weights; padding_idx rows skipped; an empty bag gives 0). Bags of one size at offsets known when
    lowering (a 2-D input) reduce over the bag; run-time offsets reduce over every index with a bag test
    (O(bags x indices): correct, not fast). Only the output is lowered (offset2bag, bag sizes and max
    indices are not)."""
    n = indices.shape[0]
    nb = offsets.shape[0] - (1 if include_last_offset else 0)
    dim = weight.shape[1]
    shape = (nb, dim)
    dtype = result_dtype(node)
    acc = vals.compute_dtype(dtype)
    kind = {0: "sum", 1: "sum", 2: "max"}[mode]
    wb = ctx.realize(weight, "bag_table")
    starts = _static_offsets(offsets, n)
    ends = None
    if starts is not None:
        ends = starts[1:] + ([] if include_last_offset else [n])
        starts = starts[:nb]
    fixed = starts is not None and len({e - s for s, e in zip(starts, ends)}) == 1 and all(
        s == starts[0] + b * (ends[0] - starts[0]) for b, s in enumerate(starts))

    def element(p, col):
        """(value, counts) of index position p (an IExpr) for output column col."""
        i = vals.cast(indices([p]), torch.int64)
        v = vals.cast(_load_at(wb, [None, col], [(0, i)]), acc)
        if per_sample_weights is not None:
            v = call("mul", v, vals.cast(per_sample_weights([p]), acc))
        keep = None if padding_idx is None or padding_idx < 0 else call("ne", i, vals.const(padding_idx, torch.int64))
        return v, keep

    neutral = vals.const(0.0 if kind == "sum" else -math.inf, acc)
    if fixed:
        size, base = ends[0] - starts[0], starts[0]
        if size == 0:
            return LTensor(shape, dtype, lambda c: vals.const(0.0, dtype)), None, None, None
        red_shape = (size,)
        if ctx.target != "cpu" and per_sample_weights is None and (padding_idx is None or padding_idx < 0) \
                and wb.dtype == torch.float32 and dtype == torch.float32 and len(wb.shape) == 2:
            return _embedding_bag_template(ctx, wb, indices, nb, size, base, mode), None, None, None

        def position(oc, rc):
            return add(add(oc[0] * size, rc[0]), const(base))

        def inside(oc, rc):
            return None
    else:
        red_shape = (n,)
        offs = offsets

        def position(oc, rc):
            return rc[0]

        def inside(oc, rc):
            p = vals.index_value(rc[0])
            lo = vals.cast(offs([oc[0]]), torch.int64)
            hi = vals.cast(offs([add(oc[0], const(1))]), torch.int64)   # (the last bag's: past the offsets)
            if not include_last_offset:
                last = call("eq", vals.index_value(oc[0]), vals.const(nb - 1, torch.int64))
                hi = call("where", last, vals.const(n, torch.int64), hi, dtype=torch.int64)
            return call("and", call("ge", p, lo), call("lt", p, hi), dtype=torch.bool)

    def fn(oc, rc):
        v, keep = element(position(oc, rc), oc[1])
        ok = inside(oc, rc)
        ok = keep if ok is None else ok if keep is None else call("and", ok, keep, dtype=torch.bool)
        return v if ok is None else call("where", ok, v, neutral, dtype=acc)
    total = ctx.reduce(kind, shape, red_shape, fn, acc, base="bag")
    if mode == 0:
        out = LTensor(shape, dtype, lambda c: vals.cast(total(c), dtype))
    else:
        def count_fn(oc, rc):
            _, keep = element(position(oc, rc), const(0))
            ok = inside(oc, rc)
            ok = keep if ok is None else ok if keep is None else call("and", ok, keep, dtype=torch.bool)
            one = vals.const(1, torch.int64)
            return one if ok is None else call("where", ok, one, vals.const(0, torch.int64), dtype=torch.int64)
        skips = padding_idx is not None and padding_idx >= 0
        needs_count = mode == 1 or not fixed or skips
        if fixed and not skips:     # every bag holds `size` indices: the count is that number, no kernel
            count = LTensor((nb, 1), torch.int64, lambda c: vals.const(size, torch.int64)) if mode == 1 else None
        else:
            count = ctx.reduce("sum", (nb, 1), red_shape, count_fn, torch.int64, base="bag_count") \
                if needs_count else None

        def fin(c):
            t = total(c)
            if count is None:
                return vals.cast(t, dtype)
            k = vals.cast(count([c[0], const(0)]), acc)
            empty = call("eq", k, vals.const(0.0, acc))
            if mode == 1:
                t = call("div", t, call("where", empty, vals.const(1.0, acc), k, dtype=acc))
            return vals.cast(call("where", empty, vals.const(0.0, acc), t, dtype=acc), dtype)
        out = LTensor(shape, dtype, fin)
    return out, None, None, None
