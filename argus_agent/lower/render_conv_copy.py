"""conv_tma's channels-last copy with the convolution's input computed in it (a fused prologue).

conv_tma reads its input as one channels-last, zero-padded, TF32-rounded copy (`stdlib_kernels/conv_tma.py`
`to_ndhwc`: (N, DP, HP, WP, CP), a (T, T) tile of (channels, pixels of one row) per block, transposed through
shared memory). When the input is an expression rather than a buffer (reflect / circular / replicate padding
as torch decomposes them, an activation before the convolution, a permute), realizing it first costs a whole
pass over the input (two for reflect padding, one per padded dim). Here the copy evaluates the expression
itself: the same blocks and stores as `to_ndhwc`, the load replaced by the expression's value at the tile's
coordinates (channel tile c, source pixels w of row (n, d, h)), zero where the convolution's own padding is.
"""

from __future__ import annotations

from dataclasses import dataclass

from .core import Buffer, LTensor
from .emit import _TileEmitter, _view_signature
from .index import Var, as_index, unflatten
from .values import walk


@dataclass
class NdhwcCopy:
    """The input x (an expression of shape (N, C, *spatial)) of a conv_tma convolution, with its geometry."""

    x: LTensor
    geometry: dict


def copy_reads(x: LTensor, geometry: dict, names) -> tuple:
    """The buffers (by name, from `names`: name -> Buffer) the copy of x reads."""
    value = _value(x, geometry)
    used = []
    for v in walk([value]):
        if v.op in ("load", "gather") and v.args[0] not in used:
            used.append(v.args[0])
    return tuple(names[b] for b in used)


def reads_per_element(value, sizes: dict, big: int = 4096, inner=None, strided: int = 1) -> int:
    """Reads of large buffers (`sizes`: name -> numel, at least `big` elements) one element of `value` needs: a
    `where` costs its condition and the dearer of its branches (a padding's select reads one place), any other
    op the sum of its operands (a sum of taps reads every tap). With `inner` (the Var of the value's innermost
    coordinate) a load whose address steps by more than 2 elements where `inner` steps by one (a transposed read:
    neighbouring threads touch different 32-byte sectors) costs `strided` reads instead of one."""
    memo: dict = {}

    def cost(v) -> int:
        got = memo.get(v)
        if got is not None:
            return got
        own = 1 if v.op in ("load", "gather") and sizes.get(v.args[0], 0) >= big else 0
        if own and inner is not None and v.op == "load" and _steps_far(v.args[1], inner):
            own = strided
        sub = [cost(a) for a in v.args if hasattr(a, "op") and hasattr(a, "args")]
        if v.op == "where" and len(sub) == 3:
            out = own + sub[0] + max(sub[1], sub[2])
        else:
            out = own + sum(sub)
        memo[v] = out
        return out

    return cost(value)


def _steps_far(idx, inner) -> bool:
    """Whether the flat address `idx` moves by more than 2 elements when `inner` goes from 0 to 1 (or from the
    middle of its range one further), the other variables at 0 and at the middle of their ranges."""
    from .index import substitute, variables

    names = variables(idx)
    if inner not in names or inner.size < 2:
        return False
    others = [x for x in names if x != inner]
    for fill in (0, 1):
        for at in (0, (inner.size - 1) // 2):
            base = {x.name: as_index((x.size - 1) // 2 if fill else 0) for x in others}
            a = substitute(idx, {**base, inner.name: as_index(at)}).const
            b = substitute(idx, {**base, inner.name: as_index(at + 1)}).const
            if a is not None and b is not None and abs(b - a) > 2:
                return True
    return False


def _vars(x: LTensor, geometry: dict):
    N, C = x.shape[:2]
    xv = geometry["XV"]
    return {"n": Var("n", N), "c": Var("c", C), "d": Var("d", xv[0]), "h": Var("h", xv[1]), "w": Var("w", xv[2])}


def _value(x: LTensor, geometry: dict):
    v = _vars(x, geometry)
    nsp = len(x.shape) - 2
    sp = list(x.shape[2:])
    xv = tuple(geometry["XV"])
    if xv[:3 - nsp] == (1,) * (3 - nsp) and tuple(xv[3 - nsp:]) == tuple(sp):
        spatial = [v["d"], v["h"], v["w"]][3 - nsp:]
    else:           # a 1x1 convolution: its pixels viewed as one row (w), unflattened to x's spatial dims
        spatial = unflatten(v["w"], sp)
    return x([v["n"], v["c"]] + spatial)


class _CopyEmitter(_TileEmitter):
    """The copy's values over tile axes c (channels) and w (pixels) and the block's row (n, d, h): window
    starts read the row's scalars, every other use their (1, 1) tiles (`nt`, `dt`, `ht`), so that index
    arithmetic on them stays tile arithmetic as the emitter writes it."""

    def index(self, e):
        if isinstance(e, Var) and e.name in self.scalar_vars:
            return f"{e.name}t"
        return super().index(e)


def render_ndhwc_copy(spec: NdhwcCopy, kname: str, buffers: dict) -> tuple[str, list]:
    """(kernel source, host arguments before XH, XL) of the fused copy kernel `kname`: grid
    `conv_tma.copy_grid`, constexpr SPLIT as to_ndhwc's."""
    x, geo = spec.x, spec.geometry
    N, C = x.shape[:2]
    xv, pa, xs, cp = geo["XV"], geo["PA"], geo["XS"], geo["CP"]
    value = _value(x, geo)
    used = []
    for v in walk([value]):
        if v.op in ("load", "gather") and v.args[0] not in used:
            used.append(v.args[0])
    names = {b: b for b in used}
    dtypes = {b: buffers[b].dtype for b in buffers}
    numels = {b: max(1, buffers[b].numel) for b in buffers}
    sizes = {"n": N, "c": C, "d": xv[0], "h": xv[1], "w": xv[2]}
    em = _CopyEmitter(names, "i32", dtypes, sizes, numels, (("c", "c0", "T"), ("w", "ws", "T")), ("n", "d", "h"))
    val = em.value(value)
    if value.op == "const":     # a constant input: a tile of it
        val = f"tp.full((T, T), {val}, tp.f32)"
    body = [
        "w0 = tp.block_id(0) * T",
        "c0 = tp.block_id(1) * T",
        "z = tp.block_id(2)",
        f"hp = z % {xs[1]}",
        f"dp = z // {xs[1]} % {xs[0]}",
        f"n = z // {xs[1] * xs[0]}",
        f"d = dp - {pa[0]}",
        f"h = hp - {pa[1]}",
        f"ws = w0 - {pa[2]}",
        "c = (c0 + tp.arange(T))[:, None]",
        "w = (ws + tp.arange(T))[None, :]",
        "nt = tp.full((1, 1), n, tp.i32)",
        "dt = tp.full((1, 1), d, tp.i32)",
        "ht = tp.full((1, 1), h, tp.i32)",
    ] + em.lines + [
        f"inside = (c < {C}) & (w >= 0) & (w < {xv[2]}) & (ht >= 0) & (ht < {xv[1]}) & (dt >= 0) & (dt < {xv[0]})",
        f"x = tp.where(inside, {val}, 0.0)",
        "hi = tp.round_tf32(x)",
        "rows = tp.blocked((T, T), 128, 4)",
        "tp.store(XH[n, dp, hp, w0:w0 + T, c0:c0 + T], tp.convert_layout(hi.T, rows))",
        "if SPLIT:",
        "    lo = tp.round_tf32(x - hi)",
        "    tp.store(XL[n, dp, hp, w0:w0 + T, c0:c0 + T], tp.convert_layout(lo.T, rows))",
    ]
    params, args = _view_signature(em, [], buffers)
    out_t = f"tp.Tensor[tp.f32, {N}, {xs[0]}, {xs[1]}, {xs[2]}, {cp}]"
    src = (
        "@tp.kernel(threads=128)\n"
        f"def {kname}({', '.join(params + [f'XH: {out_t}', f'XL: {out_t}'])}, SPLIT: tp.constexpr = False, "
        "T: tp.constexpr = 32):\n"
        "    # conv_tma's channels-last copy of an input computed in it (render_conv_copy.py)\n"
        + "".join(f"    {line}\n" for line in body)
    )
    return src, args


def placeholder(ctx, x: LTensor) -> Buffer:
    """A name for the convolution's input in its template (never allocated: the copy computes it)."""
    import torch

    return Buffer(ctx.name("b_conv_in_fused"), tuple(x.shape), torch.float32, "fused")
