"""Attention written out (`softmax(q @ k.transpose(-2, -1) * s [masked]) @ v`) run as the stdlib attention kernels.

References often spell attention out instead of calling scaled_dot_product_attention: minGPT's
`att = (q @ k.transpose(-2, -1)) * (1 / sqrt(d)); att = att.masked_fill(self.mask[:, :, :T, :T] == 0, -inf);
y = softmax(att, -1) @ v`. Captured to core ATen that is bmm -> view -> mul -> where -> _softmax -> bmm, and lowered
op by op it writes the whole (..., T, S) score matrix to memory and reads it back twice. `find` matches the chain in
the captured graph; each match becomes the same `AttentionTemplate` an SDPA call with those operands would
(`ops_attention.kernel_plan` decides, with its preconditions: sm_90a, bf16 or fp32 at fp32 accuracy, head dims):

- scores: `bmm(Q, K^T)` where Q and K^T reach the bmm only through views that merge batch dims, clones and
  expands that broadcast nothing, and K^T is K with its last two dims swapped (`permute` / `transpose`);
- an optional scale: `mul(scores, c)` / `mul(c, scores)` / `div(scores, c)` with c a positive constant (without
  one, the scale is 1, not SDPA's default 1/sqrt(d));
- an optional mask: `where(cond, -inf, scores)` or `where(cond, scores, -inf)` whose condition is computed from
  buffers and constants only (no input) and equals, evaluated at lowering time, torch's top-left causal mask
  (key j hidden from query i exactly where j > i), broadcast over the batch dims; any other mask leaves the chain to
  the op-by-op lowering;
- `_softmax(scores, -1)`, then `bmm(P, V)` with P reaching it only through views / expands, and a view back to the
  batch dims of Q.

Every node inside the chain must have no user outside it (the scores or probabilities also returned or reused keep
the chain op by op). The mask's buffer is read at lowering time: a mask buffer changed after lowering is not seen
(the lowered program is specialized to the module's state, as its shapes are).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from .graph import source_line

log = logging.getLogger("argus_agent.lower")

aten = torch.ops.aten
_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)
_PASS = _VIEWS + (aten.clone.default, aten.expand.default, aten.alias.default)
_COND_OPS = (aten.slice.Tensor, aten.eq.Scalar, aten.ne.Scalar, aten.logical_not.default, aten.bitwise_not.default,
             aten.unsqueeze.default, aten.view.default, aten._unsafe_view.default, aten.expand.default,
             aten._to_copy.default, aten.select.int, aten.alias.default, aten.clone.default, aten.lt.Scalar,
             aten.gt.Scalar, aten.le.Scalar, aten.ge.Scalar, aten.squeeze.dim, aten.squeeze.dims)


@dataclass
class ExplicitAttention:
    out: fx.Node            # the node whose value the template gives (the view of the second bmm, or the bmm)
    q: fx.Node
    k: fx.Node
    v: fx.Node
    scale: float
    causal: bool
    live: set = field(default_factory=set)     # the chain's nodes, computed by the template only
    plan: str = ""                              # kernel_plan's answer for these operands
    group: int = 1


def _shape(n) -> tuple:
    val = n.meta.get("val") if isinstance(n, fx.Node) else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else ()


def _dtype(n):
    val = n.meta.get("val") if isinstance(n, fx.Node) else None
    return val.dtype if isinstance(val, torch.Tensor) else None


def _only_user(n: fx.Node, user: fx.Node) -> bool:
    return list(n.users) == [user]


def _strip_back(n: fx.Node, chain: set) -> fx.Node:
    """Through views that only merge or split leading (batch) dims, clones and expands that broadcast nothing,
    each used only by the node after it: the node whose elements these are."""
    while isinstance(n, fx.Node) and n.op == "call_function" and n.target in _PASS:
        src = n.args[0]
        if not isinstance(src, fx.Node) or len(n.users) != 1:
            break
        a, b = _shape(src), _shape(n)
        if n.target is aten.expand.default and a != b:
            break
        if n.target in _VIEWS and (len(a) < 2 or len(b) < 2 or a[-2:] != b[-2:]
                                   or math.prod(a) != math.prod(b)):
            break
        chain.add(n)
        n = src
    return n


def _strip_forward(n: fx.Node, chain: set) -> fx.Node | None:
    """The one op that consumes `n` past views / clones / expands that keep its last two dims (each single-use)."""
    while True:
        users = list(n.users)
        if len(users) != 1:
            return None
        u = users[0]
        if u.op == "call_function" and u.target in _PASS:
            a, b = _shape(n), _shape(u)
            if (u.target is aten.expand.default and a != b) or (u.target in _VIEWS and (
                    len(b) < 2 or a[-2:] != b[-2:] or math.prod(a) != math.prod(b))):
                return None
            chain.add(u)
            n = u
            continue
        return u


def _swapped(n: fx.Node) -> fx.Node | None:
    """K where `n` is K with its last two dims swapped."""
    if n.op != "call_function":
        return None
    rank = len(_shape(n))
    if n.target is aten.permute.default:
        perm = [p % rank for p in n.args[1]]
        if perm == list(range(rank - 2)) + [rank - 1, rank - 2]:
            return n.args[0]
    if n.target is aten.transpose.int:
        dims = sorted(d % rank for d in n.args[1:3])
        if dims == [rank - 2, rank - 1]:
            return n.args[0]
    return None


def _is_neg_inf(a) -> bool:
    if isinstance(a, (int, float)):
        return a == float("-inf")
    if isinstance(a, fx.Node) and a.op == "call_function" and a.target is aten.scalar_tensor.default:
        return a.args[0] == float("-inf")
    if isinstance(a, fx.Node) and a.op == "call_function" and a.target is aten.full.default:
        return a.args[1] == float("-inf")
    return False


def _const_value(n: fx.Node, captured, values: dict):
    """The value of the boolean mask `n` when it is computed from buffers and constants only (else None)."""
    if n in values:
        return values[n]
    if n.op == "placeholder":
        gi = next((g for g in captured.inputs if g.name == n.name), None)
        if gi is None or gi.kind not in ("buffer", "constant"):
            return None
        ep = captured.program
        val = gi.value if gi.kind == "constant" else ep.state_dict.get(gi.target, ep.constants.get(gi.target))
        if not isinstance(val, torch.Tensor):
            return None
        values[n] = val.detach().cpu()
        return values[n]
    if n.op != "call_function" or n.target not in _COND_OPS:
        return None
    args = []
    for a in n.args:
        if isinstance(a, fx.Node):
            v = _const_value(a, captured, values)
            if v is None:
                return None
            args.append(v)
        else:
            args.append(a)
    try:
        values[n] = n.target(*args, **n.kwargs)
    except Exception:    # noqa: BLE001 - an op that does not evaluate here leaves the mask unknown
        return None
    return values[n]


def _causal(cond: fx.Node, masked_where_true: bool, captured, shape: tuple) -> bool:
    """Whether `cond` (evaluated now) hides exactly the keys j > i of query i, the same for every batch."""
    value = _const_value(cond, captured, {})
    if value is None or value.dtype != torch.bool:
        return False
    t, s = shape[-2:]
    if value.dim() > len(shape) or any(d != 1 for d in value.shape[:-2]) or tuple(value.shape[-2:]) != (t, s):
        return False
    hidden = torch.ones(t, s, dtype=torch.bool).triu(1)
    got = value.reshape(t, s)
    return bool(torch.equal(got if masked_where_true else ~got, hidden))


def _cone(n: fx.Node, stop: set) -> set:
    """`n` and the call_function nodes it is computed from, up to the nodes in `stop` and placeholders."""
    out, todo = set(), [n]
    while todo:
        x = todo.pop()
        if not isinstance(x, fx.Node) or x in out or x in stop or x.op != "call_function":
            continue
        out.add(x)
        todo.extend(a for a in x.all_input_nodes)
    return out


def _match(sm: fx.Node, captured) -> ExplicitAttention | None:
    if len(sm.args) < 2 or (len(sm.args) > 2 and sm.args[2]):
        return None
    rank = len(_shape(sm))
    if rank < 3 or sm.args[1] % rank != rank - 1:
        return None
    chain = {sm}
    x = sm.args[0]
    causal = False
    if x.op == "call_function" and x.target is aten.where.self and len(x.users) == 1:
        cond, a, b = x.args
        if _is_neg_inf(a) and isinstance(b, fx.Node):
            scores, hidden_where_true = b, True
        elif _is_neg_inf(b) and isinstance(a, fx.Node):
            scores, hidden_where_true = a, False
        else:
            return None
        if not isinstance(cond, fx.Node) or not _causal(cond, hidden_where_true, captured, _shape(x)):
            return None
        # the condition's nodes (and the -inf fill) are the template's when nothing else uses them
        inner = _cone(cond, set()) | {n for n in (a, b) if isinstance(n, fx.Node) and n is not scores}
        if any(u not in inner and u is not x for n in inner for u in n.users):
            return None
        chain |= inner | {x}
        causal = True
        x = scores
    scale = 1.0
    if x.op == "call_function" and x.target in (aten.mul.Tensor, aten.div.Tensor) and len(x.users) == 1:
        a, b = x.args
        if x.target is aten.mul.Tensor and isinstance(a, (int, float)) and isinstance(b, fx.Node):
            a, b = b, a
        if not isinstance(a, fx.Node) or not isinstance(b, (int, float)) or not b > 0:
            return None
        scale = float(b) if x.target is aten.mul.Tensor else 1.0 / float(b)
        chain.add(x)
        x = a
    bmm = _strip_back(x, chain)
    if bmm.op != "call_function" or bmm.target is not aten.bmm.default or len(bmm.users) != 1:
        return None
    chain.add(bmm)
    q = _strip_back(bmm.args[0], chain)
    kt = _strip_back(bmm.args[1], chain)
    k = _swapped(kt)
    if k is None or len(kt.users) != 1:
        return None
    chain.add(kt)
    user = _strip_forward(sm, chain)
    if user is None or user.target is not aten.bmm.default or user.args[0] not in chain | {sm}:
        return None
    chain.add(user)
    v = _strip_back(user.args[1], chain)
    out = user
    users = list(user.users)
    want = _shape(q)[:-1] + _shape(v)[-1:]
    if len(users) == 1 and users[0].op == "call_function" and users[0].target in _VIEWS \
            and _shape(users[0]) == want:
        out = users[0]
    if _shape(out) != want or not (len(_shape(q)) == len(_shape(k)) == len(_shape(v)) >= 3):
        return None
    if _shape(q)[:-2] != _shape(k)[:-2] or _shape(k)[:-1] != _shape(v)[:-1] or _shape(q)[-1] != _shape(k)[-1]:
        return None
    if math.prod(_shape(q)[:-2]) != _shape(bmm)[0] or _shape(bmm)[-2:] != (_shape(q)[-2], _shape(k)[-2]):
        return None
    if not (_dtype(q) == _dtype(k) == _dtype(v) == _dtype(sm)):
        return None
    chain.discard(out)
    return ExplicitAttention(out, q, k, v, scale, causal, chain)


def find(captured, target: str) -> dict:
    """{out node: ExplicitAttention} for every written-out attention the stdlib kernels compute on `target`."""
    from .ops_attention import kernel_plan

    found = {}
    if target != "sm_90a":
        return found
    for node in captured.program.graph.nodes:
        if node.op != "call_function" or node.target is not aten._softmax.default:
            continue
        m = _match(node, captured)
        if m is None:
            continue
        q, k, v = (torch.empty(_shape(n), dtype=_dtype(n), device="meta") for n in (m.q, m.k, m.v))
        plan, why = kernel_plan(target, q, k, v, None, 0.0, m.causal, m.scale, False)
        if plan is None:
            log.info("%s: attention written out, lowered op by op: %s", source_line(node), why)
            continue
        m.plan, m.group = plan, why      # (the plan's second value is the query heads per KV head)
        found[m.out] = m
    return found


def lower(ctx, m: ExplicitAttention, env: dict):
    """The template of match `m` on the lowered q, k, v."""
    from .ops_attention import _template

    ctx.note = f"attention written out ({source_line(m.out)})"
    return _template(ctx, m.plan, m.group, env[m.q], env[m.k], env[m.v], m.causal, m.scale)
