"""Routed-expert (MoE) subgraphs to `stdlib_kernels/moe.py` (issue 16 item 5).

A top-k MoE layer has no ATen op of its own: torch.export leaves it as a softmax, a topk, a renormalization, a
gate (scatter, index_put / index_add, one-hot) and the experts as bmm / mm chains between views and permutes
(einsum, a Python loop). `find` recognizes it on the captured core-ATen graph, before anything is lowered:

1. structure: a `topk` (largest, last dim) of a float32 `_softmax` over the last dim of router logits L
   (T, E); the router's input X (T, H) is the activation operand of the matmul L is computed from; the
   expert weights are parameters shaped (E, H, F) twice and (E, F, H) (stacked), or 2E of (F, H) and E of
   (H, F) (per-expert nn.Linear weights, in registration order: blocked w1.*, w3.*, or interleaved per
   expert);
2. function: the candidate output O (a later node of T x H elements that reads X, the topk and the weights)
   must equal moe(X, L, w1, w3, w2, k) = sum over the k chosen experts of softmax(L)[topk] renormalized times
   (silu(x W1_e) * (x W3_e)) W2_e, checked numerically on random X and weights (relative error < 3e-2; a
   swapped w1 / w3, missing renormalization or another combine is off by O(1)). The graph is run by torch at
   its own shapes: on the CPU when its matmuls are small, on a CUDA device when there is one, else the check
   (and the routing) is skipped.

`plan` then decides whether the stdlib kernels take it (sm_90a; bf16 X and weights; H and F multiples of 8 for
the bulk copies; E <= 256); a routed program lowers only what the MoE does not consume (the router, the
weights' (E, H, 2F) gate/up copy) and O becomes a `MoeTemplate`: `moe_route`, `moe_permute`, the grouped
`moe_gemm13` / `moe_gemm2` and `moe_combine` launched by the host program, which reads the largest expert
count once (the capacity of the expert-major buffers, as `moe.moe`). Anything else lowers op by op (the scatter
family is lowered: ops_scatter.py); the reason is logged.
"""

from __future__ import annotations

import itertools
import logging
import re
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from .core import Buffer, LTensor, buffer_tensor
from .index import const, flatten, unflatten
from .registry import register

log = logging.getLogger("argus_agent.lower")

CPU_CHECK_FLOPS = 4e9     # the numeric check runs the graph on the CPU up to this many matmul flops
MAX_EXPERTS = 256
PRESETS_OVERRIDE = None   # tests: moe.TINY to run the grouped GEMMs' small tiles on the interpreter


@dataclass
class MoeMatch:
    out: object            # the fx node O the MoE computes
    x: object              # X (T, H)
    logits: object         # L (..., E), float32
    topk: int
    T: int
    H: int
    F: int
    E: int
    w1: list               # placeholder nodes: stacked [p] or per expert [p_0, ..., p_E-1]
    w3: list
    w2: list
    stacked: bool
    live: set = field(default_factory=set)   # nodes the rest of the program still needs


@dataclass
class MoeTemplate:
    """out (T, H) bf16 = the MoE of x (T, H) bf16 with router logits (T, E) f32, w13 (E, H, 2F) bf16 (gate
    columns, then up columns) and w2 (E, F, H) bf16, top-k routing."""

    out: Buffer
    x: Buffer
    logits: Buffer
    w13: Buffer
    w2: Buffer
    T: int
    H: int
    F: int
    E: int
    topk: int
    presets: dict
    what: str = ""

    @property
    def K(self) -> int:        # the longest sum it runs (for tolerances): the down GEMM's
        return self.F


# ---------------------------------------------------------------- recognition

def _is(node, *names) -> bool:
    return isinstance(node, fx.Node) and node.op == "call_function" and str(node.target) in names


def _val(node):
    v = node.meta.get("val") if isinstance(node, fx.Node) else None
    return v if isinstance(v, torch.Tensor) else None


def _router_input(logits):
    """The activation operand of the matmul the router logits come from (through casts and views)."""
    n = logits
    for _ in range(8):
        if _is(n, "aten._to_copy.default", "aten.view.default", "aten._unsafe_view.default", "aten.clone.default",
               "aten.reshape.default"):
            n = n.args[0]
        elif _is(n, "aten.mm.default", "aten.matmul.default"):
            return n.args[0]
        elif _is(n, "aten.addmm.default"):
            return n.args[1]
        else:
            return None
    return None


def _ancestors(node) -> set:
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        for a in n.all_input_nodes:
            if a not in seen:
                seen.add(a)
                todo.append(a)
    return seen


def _weight_choices(params: list, E: int, H: int):
    """(F, stacked, w1, w3, w2) assignments to try, from the parameter placeholders' shapes and order."""
    shapes = {p: tuple(_val(p).shape) for p in params}
    out = []
    three = [p for p in params if len(shapes[p]) == 3 and shapes[p][0] == E]
    for a in three:
        for b in three:
            for c in three:
                if len({a, b, c}) < 3:
                    continue
                (_, h1, f1), (_, h3, f3), (_, f2, h2) = shapes[a], shapes[b], shapes[c]
                if h1 == h3 == h2 == H and f1 == f3 == f2:
                    out.append((f1, True, [a], [b], [c]))
    two = [p for p in params if len(shapes[p]) == 2]
    by_shape: dict = {}
    for p in two:
        by_shape.setdefault(shapes[p], []).append(p)
    for (f, h), ups in by_shape.items():
        if h != H:
            continue
        if f == h:     # square experts: every weight has one shape; roles from the registration order
            if len(ups) != 3 * E:
                continue
            for roles in itertools.permutations(range(3)):
                blocks = [ups[r * E:(r + 1) * E] for r in roles]
                triples = [ups[r::3] for r in roles]
                out += [(f, False, *blocks), (f, False, *triples)]
            continue
        downs = by_shape.get((h, f), [])
        if len(ups) != 2 * E or len(downs) != E:
            continue
        blocked = (ups[:E], ups[E:])
        inter = (ups[0::2], ups[1::2])
        for g1, g3 in (blocked, blocked[::-1], inter, inter[::-1]):
            out.append((f, False, list(g1), list(g3), list(downs)))
    return out


def _stack(ws, stacked, transpose):
    """A (E, rows, cols) float64 tensor of the weights as the formula reads them (x @ w)."""
    if stacked:
        return ws[0].double()
    return torch.stack([w.double().t() if transpose else w.double() for w in ws])


def _formula(x, logits, w1, w3, w2, k):
    """float64 reference: softmax, top-k, renormalize, per expert silu(x W1) * (x W3) then W2, weighted sum."""
    p = torch.softmax(logits.double(), dim=-1)
    wv, ids = torch.topk(p, k, dim=-1)
    wv = wv / wv.sum(-1, keepdim=True)
    x = x.double()
    out = torch.zeros_like(x)
    for e in range(w1.shape[0]):
        tok, slot = torch.nonzero(ids == e, as_tuple=True)
        if tok.numel():
            h = torch.nn.functional.silu(x[tok] @ w1[e]) * (x[tok] @ w3[e])
            out.index_add_(0, tok, (h @ w2[e]) * wv[tok, slot, None])
    return out


def _flops(graph) -> float:
    total = 0.0
    for n in graph.nodes:
        if _is(n, "aten.mm.default", "aten.bmm.default", "aten.addmm.default", "aten.baddbmm.default"):
            v = _val(n)
            a = _val(n.args[-2] if _is(n, "aten.addmm.default", "aten.baddbmm.default") else n.args[0])
            if v is not None and a is not None:
                total += 2.0 * v.numel() * a.shape[-1]
    return total


class _Recorder(fx.Interpreter):
    """Runs the graph keeping every node's value, with tensor factories on the check's device."""

    def __init__(self, gm, device):
        super().__init__(gm, garbage_collect_values=False)
        self.device = device

    def call_function(self, target, args, kwargs):
        if "device" in kwargs:
            kwargs = dict(kwargs, device=self.device)
        return super().call_function(target, args, kwargs)


def find(captured, target: str):
    """The MoE subgraph of a captured program (a MoeMatch), or None; reasons are logged."""
    if target != "sm_90a":
        return None
    ep = captured.program
    graph = ep.graph
    tops = [n for n in graph.nodes if _is(n, "aten.topk.default")]
    if not tops:
        return None
    by_name = {gi.name: gi for gi in captured.inputs}
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    params = [n for n in placeholders if by_name[n.name].kind == "param" and _val(n) is not None]
    for top in tops:
        args = list(top.args) + [None] * 5
        soft, k, dim, largest = args[0], args[1], args[2] if args[2] is not None else -1, args[3]
        sv = _val(soft)
        if sv is None or largest is False or dim not in (-1, sv.dim() - 1):
            continue
        if not _is(soft, "aten._softmax.default") or soft.args[1] not in (-1, sv.dim() - 1) or sv.dtype != \
                torch.float32:
            continue
        logits = soft.args[0]
        x = _router_input(logits)
        xv, lv = _val(x), _val(logits)
        if xv is None or lv is None or lv.dtype != torch.float32:
            continue
        E, H = lv.shape[-1], xv.shape[-1]
        T = lv.numel() // E
        if xv.numel() != T * H or not 1 <= k <= E:
            continue
        if xv.dtype != torch.bfloat16:
            log.info("MoE at %s: X is %s; the stdlib MoE kernels are bf16 (lowered op by op)", top.name, xv.dtype)
            continue
        choices = _weight_choices(params, E, H)
        if not choices:
            continue
        after = False
        cands = []
        wset = {p for c in choices for p in c[2] + c[3] + c[4]}
        for n in graph.nodes:
            after = after or n is top
            v = _val(n)
            if after and n.op == "call_function" and v is not None and v.numel() == T * H \
                    and v.dtype.is_floating_point:
                anc = _ancestors(n)
                if top in anc and x in anc and anc & wset:
                    cands.append(n)
        if not cands:
            continue
        got = _check(ep, captured, placeholders, x, logits, k, cands, choices, T, H, E)
        if got is None:
            log.info("MoE at %s: no node after the routing computes the routed experts (lowered op by op)",
                     top.name)
            continue
        out, (F, stacked, w1, w3, w2) = got
        match = MoeMatch(out, x, logits, int(k), T, H, F, E, w1, w3, w2, stacked)
        match.live = _live(graph, match)
        return match
    return None


def _check(ep, captured, placeholders, x, logits, k, cands, choices, T, H, E):
    flops = _flops(ep.graph)
    if flops <= CPU_CHECK_FLOPS:
        device = torch.device("cpu")
    elif torch.cuda.is_available():
        device = torch.device("cuda")
    else:
        log.info("MoE check skipped: %.3g matmul flops is too much for the CPU and there is no GPU", flops)
        return None
    by_name = {gi.name: gi for gi in captured.inputs}
    g = torch.Generator().manual_seed(1234)
    args = []
    for n in placeholders:
        gi, v = by_name[n.name], _val(n)
        if v is None:
            args.append(gi.value)
        elif gi.kind == "constant":
            args.append(gi.value.to(device))
        elif gi.kind == "buffer":
            args.append(ep.state_dict[gi.target].detach().to(device))
        elif v.dtype.is_floating_point:
            scale = 1.0 if gi.kind == "input" else (v.shape[-2] if v.dim() >= 2 else v.shape[-1]) ** -0.5
            args.append((torch.randn(tuple(v.shape), generator=g) * scale).to(v.dtype).to(device))
        else:
            return None
    rec = _Recorder(ep.graph_module, device)
    try:
        with torch.no_grad():
            rec.run(*args)
    except Exception as e:  # noqa: BLE001 - a graph the check cannot replay is simply not routed
        log.info("MoE check could not run the graph: %s: %s", type(e).__name__, e)
        return None
    env = rec.env
    value = {n: a for n, a in zip(placeholders, args)}
    xv = env[x].reshape(T, H)
    lv = env[logits].reshape(T, E)
    for F, stacked, w1, w3, w2 in choices:
        ref = _formula(xv, lv, _stack([value[p] for p in w1], stacked, True),
                       _stack([value[p] for p in w3], stacked, True), _stack([value[p] for p in w2], stacked, True),
                       int(k))
        scale = ref.norm().item() or 1.0
        hits = [n for n in cands if (env[n].reshape(T, H).double() - ref).norm().item() < 3e-2 * scale]
        if hits:
            best = next((n for n in hits if _val(n).dtype == torch.bfloat16), hits[0])
            return best, (F, stacked, w1, w3, w2)
    return None


def _live(graph, match) -> set:
    """Nodes the program needs when O is computed from X, the logits and the weights."""
    need, todo = set(), [n for n in graph.nodes if n.op == "output"]
    while todo:
        n = todo.pop()
        if n in need:
            continue
        need.add(n)
        todo += [match.x, match.logits] + match.w1 + match.w3 + match.w2 if n is match.out else n.all_input_nodes
    return need


# ---------------------------------------------------------------- planning and lowering

def plan(match: MoeMatch) -> str | None:
    """None when the stdlib kernels take this MoE, else the reason."""
    if any(_val(p).dtype != torch.bfloat16 for p in match.w1 + match.w3 + match.w2):
        return "expert weights are not bf16"
    if match.H % 8 or match.F % 8:
        return f"H = {match.H} and F = {match.F} must be multiples of 8 (16-byte rows for the bulk copies)"
    if match.E > MAX_EXPERTS:
        return f"{match.E} experts (at most {MAX_EXPERTS})"
    return None


def _presets(T: int) -> dict:
    from stdlib_kernels import moe

    if PRESETS_OVERRIDE is not None:
        return PRESETS_OVERRIDE
    # moe.moe's rule at lowering time: 64-row tiles while no expert can hold more than 64 rows; the gate/up
    # products and silu rounded to bf16 as eager stores them (ROUND)
    base = moe.SMALL_M if T <= moe.SMALL_M["gemm13"]["BM"] else moe.PRESETS
    return dict(base, gemm13=dict(base["gemm13"], ROUND=True))


def lower(ctx, match: MoeMatch, env: dict) -> LTensor:
    """O as a MoeTemplate: X and the logits as buffers, the gate/up weights copied into (E, H, 2F)."""
    from . import values as vals

    T, H, F, E = match.T, match.H, match.F, match.E
    xt = env[match.x]
    x2 = LTensor((T, H), xt.dtype, lambda c: xt(unflatten(flatten(list(c), (T, H)), xt.shape)))
    xb = ctx.contiguous(x2, "moe_x").buffer
    lt, rounding = env[match.logits], None
    src = match.logits.args[0] if _is(match.logits, "aten._to_copy.default") else None
    if src is not None and _val(src) is not None and _val(src).dtype in (torch.bfloat16, torch.float16):
        # eager routes on the router's output as stored (rounded to its half type, then widened); a template
        # GEMM keeps it in f32, and a different rounding would pick other experts on near ties
        lt, rounding = env[src], vals.TP_DTYPE[_val(src).dtype]

    def logit(c):
        v = vals.cast(lt(unflatten(flatten(list(c), (T, E)), lt.shape)), torch.float32)
        return vals.make("roundto", (v, rounding), torch.float32) if rounding else v
    l2 = LTensor((T, E), torch.float32, logit)
    lb = ctx.contiguous(l2, "moe_logits").buffer
    w1, w3, w2 = ([env[p] for p in ps] for ps in (match.w1, match.w3, match.w2))
    bf = torch.bfloat16

    def pick(ws, e, a, b):
        """Element (a, b) of expert e's weight as x @ w reads it (a per-expert Linear weight is transposed)."""
        if match.stacked:
            return ws[0]([e, a, b])
        e_val = vals.index_value(e)
        out = ws[-1]([b, a])
        for j in range(len(ws) - 2, -1, -1):
            out = vals.call("where", vals.call("eq", e_val, vals.const(j, torch.int64)), ws[j]([b, a]), out)
        return out

    def w13_fn(c):
        e, h, f = c      # columns [0, F): the gate weight's, [F, 2F): the up weight's (both read at f % F)
        lo = vals.call("lt", vals.index_value(f), vals.const(F, torch.int64))
        return vals.call("where", lo, pick(w1, e, h, f % F), pick(w3, e, h, f % F))
    w13 = ctx.realize(LTensor((E, H, 2 * F), bf, w13_fn), "moe_w13").buffer
    if match.stacked:
        w2b = ctx.contiguous(w2[0], "moe_w2").buffer
    else:
        w2b = ctx.realize(LTensor((E, F, H), bf, lambda c: pick(w2, c[0], c[1], c[2])), "moe_w2").buffer
    out = ctx.add_buffer("moe_out", (T, H), bf)
    ctx.kernels.append(MoeTemplate(out, xb, lb, w13, w2b, T, H, F, E, match.topk, _presets(T), ctx.note))
    res = buffer_tensor(out)
    ov = _val(match.out)
    shape, dtype = tuple(ov.shape), ov.dtype
    if shape == (T, H) and dtype == bf:
        return res
    return LTensor(shape, dtype, lambda c: vals.cast(res(unflatten(_flat(c, shape), (T, H))), dtype))


def _flat(c, shape):
    return flatten(list(c), shape) if shape else const(0)


# ---------------------------------------------------------------- rendering

_HELPERS = ("_threads", "b_layout", "_log2")


def moe_source(templates: list) -> str:
    """The stdlib MoE kernels with the launch's constexprs as their defaults (the agent's gate builds and checks
    each kernel at its defaults: what is checked is what runs); module-level helpers renamed `_moe_*` so they
    cannot meet a GEMM template's helpers of the same name."""
    from .templates import stdlib_source, with_defaults

    t = templates[0]
    text = stdlib_source("moe")
    for name in _HELPERS:
        text = re.sub(rf"(?<![\w.]){name}\b", f"_moe{name if name.startswith('_') else '_' + name}", text)
    for kernel, values in (("moe_gemm13", t.presets["gemm13"]), ("moe_gemm2", t.presets["gemm2"]),
                           ("moe_route", route_params(t)), ("moe_permute", permute_params(t)),
                           ("moe_combine", combine_params(t))):
        text = with_defaults(text, values, kernel=kernel)
    return text


def _pow2(n, lo=1):
    return max(lo, 1 << (int(n) - 1).bit_length())


def route_params(t: MoeTemplate) -> dict:
    return dict(TOPK=t.topk, BT=16, BE=_pow2(t.E, 2))


def permute_params(t: MoeTemplate) -> dict:
    return dict(BR=8, BH=min(512, _pow2(t.H, 16)))


def combine_params(t: MoeTemplate) -> dict:
    return dict(BK=_pow2(t.topk, 2), BH=min(1024, _pow2(t.H, 16)))


def render_moe(t: MoeTemplate, n: int) -> list[str]:
    """Host lines: route (counts zeroed, the inverse map at -1), the capacity from the largest count (one
    device-to-host read unless T fits one tile), permute, the two grouped GEMMs, the combine into `out`."""
    from .templates import _py_source

    T, H, F, E, K = t.T, t.H, t.F, t.E, t.topk
    p13, p2 = t.presets["gemm13"], t.presets["gemm2"]
    bm = max(p13["BM"], p2["BM"])
    kw13 = "".join(f", {a}={_py_source(b)}" for a, b in p13.items())
    kw2 = "".join(f", {a}={_py_source(b)}" for a, b in p2.items())
    rp, pp, cp = route_params(t), permute_params(t), combine_params(t)
    s = f"moe{n}_"
    lines = [f"{s}ids = torch.empty(({T}, {K}), dtype=torch.int32, device=dev)",
             f"{s}w = torch.empty(({T}, {K}), dtype=torch.float32, device=dev)",
             f"{s}rank = torch.empty(({T}, {K}), dtype=torch.int32, device=dev)",
             f"{s}counts = torch.zeros({E}, dtype=torch.int32, device=dev)",
             f"{s}src = torch.full(({E}, {T}), -1, dtype=torch.int32, device=dev)",
             f"launch(moe_route, ({-(-T // rp['BT'])},), {t.logits.name}.view({T}, {E}), {s}ids, {s}w, {s}rank, "
             f"{s}counts, {s}src, TOPK={K}, BT={rp['BT']}, BE={rp['BE']})"]
    if T <= bm:
        lines.append(f"{s}cap = {bm}")
    else:
        lines.append(f"{s}cap = max({bm}, -(-int({s}counts.max()) // {bm}) * {bm})   # one device-to-host read")
    lines += [f"{s}xs = torch.empty(({E}, {s}cap, {H}), dtype=torch.bfloat16, device=dev)",
              f"launch(moe_permute, ({s}cap // {pp['BR']}, {-(-H // pp['BH'])}, {E}), {t.x.name}.view({T}, {H}), "
              f"{s}src, {s}xs, BR={pp['BR']}, BH={pp['BH']})",
              f"{s}hs = torch.empty(({E}, {s}cap, {F}), dtype=torch.bfloat16, device=dev)",
              f"launch(moe_gemm13, ({s}cap // {p13['BM']}, {-(-F // p13['BN'])}, {E}), {s}xs, "
              f"{t.w13.name}.view({E}, {H}, {2 * F}), {s}hs{kw13})",
              f"{s}ys = torch.empty(({E}, {s}cap, {H}), dtype=torch.bfloat16, device=dev)",
              f"launch(moe_gemm2, ({s}cap // {p2['BM']}, {-(-H // p2['BN'])}, {E}), {s}hs, "
              f"{t.w2.name}.view({E}, {F}, {H}), {s}ys{kw2})",
              f"launch(moe_combine, ({T}, {-(-H // cp['BH'])}), {s}ys, {s}ids, {s}rank, {s}w, "
              f"{t.out.name}.view({T}, {H}), BK={cp['BK']}, BH={cp['BH']})"]
    return lines



# ---------------------------------------------------------------- torch._grouped_mm (op by op)

GROUPS_UNROLL = 64    # groups whose row test is written out (more: a count reduction over the offsets)


@register("aten._grouped_mm")
def _grouped_mm(ctx, node, a, b, offs=None, bias=None, out_dtype=None):
    """torch._grouped_mm of 2-D rows and a 3-D stack of G matrices: row r belongs to group g when
    offs[g - 1] <= r < offs[g] (offs: cumulative group ends) and is multiplied by b[g]; rows past the last end
    (left unwritten by torch) are 0. A reduction over K whose right operand is gathered at the row's group
    (correct, not fast: the stdlib MoE kernels take MoE layers whole, see `find`)."""
    from . import values as vals
    from .ops_views import _load_at
    from .registry import result_dtype, result_shape

    if len(a.shape) != 2 or len(b.shape) != 3 or offs is None or bias is not None:
        raise NotImplementedError("_grouped_mm other than 2-D rows x a 3-D stack with offs and no bias")
    shape = result_shape(node)
    G, K, N = b.shape
    dtype = result_dtype(node)
    acc = torch.float32 if dtype in (torch.bfloat16, torch.float16) else vals.compute_dtype(dtype)
    bb = ctx.realize(b, "grouped_b")
    i64 = torch.int64

    def group(r):
        """The group of row r (an IExpr): how many group ends lie at or below it."""
        rv = vals.index_value(r)
        g = vals.const(0, i64)
        for j in range(G):
            end = vals.cast(offs([const(j)]), i64)
            g = vals.call("add", g, vals.cast(vals.call("le", end, rv), i64), dtype=i64)
        return g
    if G > GROUPS_UNROLL:
        raise NotImplementedError(f"_grouped_mm with {G} groups (at most {GROUPS_UNROLL})")

    def fn(oc, rc):
        g = group(oc[0])
        inside = vals.call("lt", g, vals.const(G, i64))
        safe = vals.call("minimum", g, vals.const(G - 1, i64), dtype=i64)
        w = vals.cast(_load_at(bb, [None, rc[0], oc[1]], [(0, safe)]), acc)
        x = vals.cast(a([oc[0], rc[0]]), acc)
        return vals.call("where", inside, vals.call("mul", x, w, dtype=acc), vals.const(0.0, acc), dtype=acc)
    red = ctx.reduce("sum", shape, (K,), fn, acc, base="grouped_mm")
    return LTensor(shape, dtype, lambda c: vals.cast(red(c), dtype))
