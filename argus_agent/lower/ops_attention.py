"""`scaled_dot_product_attention`: the stdlib attention kernels where they apply, else torch's own decomposition.

Capture keeps the op whole (graph.KEPT_WHOLE). On sm_90a a call that meets the kernels' preconditions becomes an
`AttentionTemplate`: the host program launches `attention_fwd` (FlashAttention-3 shaped, stdlib_kernels/
attention.py) on (B*H, S, D) views of the operand buffers, or, for at most 16 queries per head without a causal
mask, split-KV decoding (`attention_decode` + `attention_merge`; the stdlib `decode`'s policy: the keys cut into
one wave of blocks by `attention.decode_splits`, so the split count follows the cache length; one split writes
the bf16 output itself through `attention_decode_bf16`, no partials and no merge; up to 8 splits merge with
every split's partial loaded at once, `attention.merge_params`). Anything else (fp32 and fp16 operands, other
head dims, masks, dropout, the CPU target) is decomposed here by torch's own table (the math form: bmm, softmax,
bmm, masks included) and those core-ATen ops are lowered one by one, exactly as a fully decomposed capture
would have them; the reason is logged (logger `argus_agent.lower`).

fp32 operands on sm_90a run `attention_fp32` (stdlib_kernels/attention_fp32.py) at fp32 accuracy: both products
as split TF32 on the tensor cores (three TF32 products, as the fp32 GEMM), online softmax, no S x S matrix.
The host program splits q and k into TF32 halves and v into transposed halves (`split_tf32`, `split_tf32_t` of
stdlib gemm_fp32) into workspaces, then launches the kernel on (B*H, S, D) views; head dims 32, 64 and 128 (any
other head dim, masks and dropout decompose as above, with the reason logged).

Preconditions of the kernel path (each failing one is the logged reason):
- target sm_90a; q, k and v bfloat16 (the kernels are bf16 in and out with fp32 softmax statistics), or all
  float32 (`attention_fp32`, fp32-accurate; fp32 attention is never run in bf16: precision follows PyTorch);
- head dim 64 or 128 (fp32: 32, 64 or 128), the same for q, k and v; no attn_mask; dropout_p 0; scale None or
  positive;
- batch dims equal; query heads equal to KV heads, or a multiple of them with enable_gqa;
- is_causal is torch's top-left form (key j visible to query i when j <= i): the forward kernel's; the decode
  kernel's causal form is bottom-right, so decoding takes only non-causal calls (or SQ == SKV, where both agree).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import torch
import torch.fx as fx

from .core import Buffer, LTensor, buffer_tensor
from .graph import LoweringError, source_line
from .index import Var, unflatten
from .registry import register

log = logging.getLogger("argus_agent.lower")

DECODE_MAX_QUERIES = 16     # attention_decode packs GROUP * QLEN rows per KV head, QLEN <= 16
NUM_SMS = 132               # H100 SXM: decode splits the keys for one wave of blocks (attention.decode_splits)
FP32_HEAD_DIMS = (32, 64, 128)   # attention_fp32.HEAD_DIMS


@dataclass
class AttentionTemplate:
    """out (BH, SQ, D) in bf16 = softmax(q k^T * scale) v, q (BH, SQ, D), k and v (BHKV, SKV, D) buffers,
    BH = GROUP * BHKV (query head bh reads KV head bh // GROUP); lse (BH, SQ) f32 gets each row's
    log-sum-exp. `splits` > 0: split-KV decoding, partial outputs in `parts` / `lse_parts` (none with one split:
    the kernel writes `out` and `lse` itself)."""

    out: Buffer
    q: Buffer
    k: Buffer
    v: Buffer
    lse: Buffer
    bh: int
    bhkv: int
    sq: int
    skv: int
    d: int
    causal: bool
    scale: float
    what: str = ""
    kernel: str = "attention"
    splits: int = 0
    chunk: int = 0
    parts: Buffer | None = None
    lse_parts: Buffer | None = None
    halves: tuple | None = None         # attention_fp32: the TF32 halves (qh, ql, kh, kl, vh, vl) workspaces

    @property
    def K(self) -> int:         # the longest sum the kernel runs (the softmax denominator), for tolerances
        return self.skv


def kernel_plan(target: str, q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa) -> tuple:
    """("fwd" | "decode" | "fp32", group) when the stdlib kernels compute this call, else (None, the reason)."""
    if target != "sm_90a":
        return None, f"target {target} has no attention kernel (sm_90a has)"
    dts = {t.dtype for t in (q, k, v)}
    fp32 = dts == {torch.float32}
    if dts != {torch.bfloat16} and not fp32:
        names = "/".join(sorted(str(d).replace("torch.", "") for d in dts))
        return None, (f"operands are {names}; the stdlib attention kernels take bf16, or fp32 at fp32 accuracy "
                      "(a reference is matched in its own precision, never silently in bf16)")
    if attn_mask is not None:
        return None, "attn_mask is given (the kernel takes is_causal only)"
    if dropout_p:
        return None, f"dropout_p={dropout_p}"
    if scale is not None and not scale > 0:
        return None, f"scale={scale} (the kernel folds a positive scale into exp2)"
    if len(q.shape) < 3 or len(k.shape) != len(q.shape) or len(v.shape) != len(q.shape):
        return None, f"operands of rank {len(q.shape)}/{len(k.shape)}/{len(v.shape)} (need (..., H, S, D) alike)"
    d = q.shape[-1]
    if fp32 and (d not in FP32_HEAD_DIMS or k.shape[-1] != d or v.shape[-1] != d):
        return None, (f"head dims {d}/{k.shape[-1]}/{v.shape[-1]} (the fp32 kernel takes 32, 64 or 128, the same "
                      "for q, k, v)")
    if not fp32 and (d not in (64, 128) or k.shape[-1] != d or v.shape[-1] != d):
        return None, f"head dims {d}/{k.shape[-1]}/{v.shape[-1]} (the kernel takes 64 or 128, the same for q, k, v)"
    if k.shape != v.shape:
        return None, f"k {k.shape} and v {v.shape} differ"
    if q.shape[:-3] != k.shape[:-3]:
        return None, f"batch dims {q.shape[:-3]} and {k.shape[:-3]} differ (broadcast batches)"
    h, hkv = q.shape[-3], k.shape[-3]
    if h != hkv and not (enable_gqa and hkv and h % hkv == 0):
        return None, f"{h} query heads against {hkv} KV heads" + ("" if enable_gqa else " without enable_gqa")
    sq, skv = q.shape[-2], k.shape[-2]
    if sq == 0 or skv == 0:
        return None, "an empty sequence"
    bh = math.prod(q.shape[:-2])
    if bh >= 65536 or bh * max(sq, skv) * d >= 2**31:
        return None, f"{bh} heads x {max(sq, skv)} x {d} exceeds the kernel's 32-bit grid and indices"
    group = h // hkv
    if fp32:
        return "fp32", group
    if sq <= DECODE_MAX_QUERIES and (not is_causal or sq == skv) and skv > sq:
        return "decode", group
    return "fwd", group


def _plain(ctx, t: LTensor, base: str) -> Buffer:
    """The buffer holding `t`'s elements in row-major order: its own when it reads one so, else a copy."""
    i = Var("i", t.numel)
    v = t(unflatten(i, t.shape))
    if v.op == "load" and v.args[1] == i and not v.args[2]:
        buf = next((b for b in ctx.buffers if b.name == v.args[0]), None)
        if buf is not None and buf.numel == t.numel and buf.dtype == t.dtype:
            return buf
    return ctx.realize(LTensor(t.shape, t.dtype, t._fn), base).buffer


def _template(ctx, plan, group, q, k, v, is_causal, scale) -> LTensor:
    from stdlib_kernels import attention

    qb, kb, vb = _plain(ctx, q, "attn_q"), _plain(ctx, k, "attn_k"), _plain(ctx, v, "attn_v")
    sq, d = q.shape[-2:]
    skv = k.shape[-2]
    bh = math.prod(q.shape[:-2])
    bhkv = bh // group
    out = ctx.add_buffer("attn", q.shape, torch.float32 if plan == "fp32" else torch.bfloat16)
    lse = ctx.add_buffer("attn_lse", (bh, sq), torch.float32)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    t = AttentionTemplate(out, qb, kb, vb, lse, bh, bhkv, sq, skv, d, bool(is_causal), scale, ctx.note)
    if plan == "fp32":      # TF32 halves: q and k as they lie, v transposed (keys padded to 4: 16-byte rows)
        skvp = -(-skv // 4) * 4
        t.kernel = "attention_fp32"
        t.halves = tuple(ctx.add_buffer(f"attn_{n}", shape, torch.float32) for n, shape in (
            ("qh", (bh, sq, d)), ("ql", (bh, sq, d)), ("kh", (bhkv, skv, d)), ("kl", (bhkv, skv, d)),
            ("vh", (bhkv, d, skvp)), ("vl", (bhkv, d, skvp))))
    if plan == "decode":
        rows = group * sq
        bn, _ = attention.decode_ring(d, rows, skv, attention.decode_splits(bhkv, rows, skv, d, NUM_SMS))
        tiles = -(-skv // bn)
        splits = attention.decode_splits(bhkv, rows, skv, d, NUM_SMS, bn)   # one wave (stdlib `decode`'s rule)
        chunk = -(-tiles // splits) * bn
        splits = -(-skv // chunk)          # every split holds at least one key
        t.splits, t.chunk = splits, chunk
        if splits > 1:                     # one split: the kernel stores the normalized bf16 output itself
            t.parts = ctx.add_buffer("attn_parts", (splits, bhkv, rows, d), torch.float32)
            t.lse_parts = ctx.add_buffer("attn_lse_parts", (splits, bhkv, rows), torch.float32)
        assert d in attention.DECODE_STAGES
    ctx.kernels.append(t)
    return buffer_tensor(out)


def fwd_params(t: AttentionTemplate) -> dict:
    """attention_fwd's constexprs: the stdlib's tuned policy for this head dim, query length and mask (its
    `launch` uses the same), the mask and the GQA group (attention_fp32's: its policy, likewise)."""
    from stdlib_kernels import attention, attention_fp32

    if t.kernel == "attention_fp32":
        return {**attention_fp32.policy(t.d, t.sq, t.causal), "GROUP": t.bh // t.bhkv}

    base = attention.policy(t.d, t.sq, t.causal) if hasattr(attention, "policy") else attention.PRESETS[t.d]
    return {**base, "CAUSAL": t.causal, "GROUP": t.bh // t.bhkv}


def decode_params(t: AttentionTemplate) -> dict:
    from stdlib_kernels import attention

    rows = t.bh // t.bhkv * t.sq
    bn, stages = attention.decode_ring(t.d, rows, t.skv, attention.decode_splits(t.bhkv, rows, t.skv, t.d, NUM_SMS))
    return dict(HEAD_DIM=t.d, BN=bn, STAGES=stages, CONSUMERS=1 if rows <= 64 else 2, QLEN=t.sq, CAUSAL=t.causal)


def decode_kernel(t: AttentionTemplate) -> str:
    """The decode kernel a split-KV template launches: `attention_decode_bf16` (its one split's output stored as
    the bf16 result) with one split, else `attention_decode` (float32 partials for the merge)."""
    return "attention_decode_bf16" if t.splits == 1 else "attention_decode"


def merge_params(t: AttentionTemplate) -> dict:
    """attention_merge's constexprs (the stdlib `decode`'s): up to 8 splits loaded as one tile, BR rows a block."""
    from stdlib_kernels import attention

    return attention.merge_params(t.splits, t.bh // t.bhkv * t.sq, t.d)


def _bf16_decode(fn, cst):
    """`attention_decode_bf16`: the attention_decode FunctionDef `fn` with its partial output OP typed bf16 (the
    stdlib's `attention_decode.retyped(OP=...)`, written out as a kernel of its own: a candidate holds the source
    of every kernel it launches)."""
    if not any(p.name.value == "OP" for p in fn.params.params):
        raise AssertionError("attention_decode has no parameter OP to retype")
    ann = cst.Annotation(cst.parse_expression('tp.Tensor[tp.bf16, "NS", "BHKV", "M", "D"]'))
    params = [p.with_changes(annotation=ann) if p.name.value == "OP" else p for p in fn.params.params]
    return fn.with_changes(name=cst.Name("attention_decode_bf16"), params=fn.params.with_changes(params=params))


def attention_source(templates: list, target: str) -> str:
    """The stdlib attention module's source with only the kernels these templates launch, whose constexpr
    defaults are the (first) launch's: each kernel of a candidate is built and checked on its own at its
    defaults (the agent's gate refuses register spills), so what is checked is what runs."""
    import libcst as cst

    from ..codemod_base import NotApplicable, constexpr_params, kernels, parse_source
    from ..codemods import SetConstexprs
    from .templates import preset_source, with_defaults

    f32 = next((t for t in templates if t.kernel == "attention_fp32"), None)
    if f32 is not None:     # the fp32 kernel, its launch's constexprs as the defaults (+ the bf16 kernels' text)
        text = with_defaults(preset_source("attention_fp32", target), fwd_params(f32), kernel="attention_fp32")
        rest = [t for t in templates if t.kernel != "attention_fp32"]
        return (attention_source(rest, target) + "\n\n" + text) if rest else text
    fwd = next((t for t in templates if not t.splits), None)
    dec = next((t for t in templates if t.splits > 1), None)        # float32 partials, merged
    one = next((t for t in templates if t.splits == 1), None)       # one split: the bf16 output directly
    used = ({"attention_fwd"} if fwd else set()) | ({"attention_decode", "attention_merge"} if dec else set())
    module = cst.parse_module(preset_source("attention", target))
    body = []
    for st in module.body:
        kernel = isinstance(st, cst.FunctionDef) and st.decorators
        if kernel and st.name.value == "attention_decode" and one:
            body.append(_bf16_decode(st, cst))
        if not (kernel and st.name.value not in used):
            body.append(st)
    # the codemods find kernels by how the module spells tilepy: the header names it, and goes again after
    header = "import tilepy as tp\n"
    text = header + module.with_changes(body=body).code
    for kernel, values in (("attention_fwd", fwd and fwd_params(fwd)), ("attention_decode", dec and decode_params(dec)),
                           ("attention_decode_bf16", one and decode_params(one)),
                           ("attention_merge", dec and merge_params(dec))):
        if not values:
            continue
        want = {k: repr(v) for k, v in values.items()}
        try:
            text = SetConstexprs().apply(text, values=want, kernel=kernel)
        except NotApplicable:
            pass     # every value is the default already; checked below, as for a codemod that did apply
        have = next(constexpr_params(fn) for fn in kernels(parse_source(text)) if fn.name.value == kernel)
        if {k: have.get(k) for k in want} != want:
            raise AssertionError(f"{kernel}'s constexpr defaults {have} are not the launch's {want}")
    return text[len(header):]


def render_attention(t: AttentionTemplate) -> list[str]:
    """Host lines: the stdlib kernels on (BH, S, D) views of the flat buffers."""
    scale_log2 = t.scale * math.log2(math.e)
    if t.kernel == "attention_fp32":
        return _render_fp32(t, scale_log2)
    q, k, v = (f"{b.name}.view({n}, {s}, {t.d})" for b, n, s in ((t.q, t.bh, t.sq), (t.k, t.bhkv, t.skv),
                                                                   (t.v, t.bhkv, t.skv)))
    if not t.splits:
        params = fwd_params(t)
        kw = ", ".join(f"{a}={b!r}" for a, b in params.items())
        grid = f"lambda m: (tp.cdiv(tp.cdiv({t.sq}, 64 * m['CONSUMERS']), 2 if m.get('PAIRED') else 1), {t.bh})"
        return [f"launch(attention_fwd, {grid}, {q}, {k}, {v}, {t.out.name}.view({t.bh}, {t.sq}, {t.d}), "
                f"{t.lse.name}.view({t.bh}, {t.sq}), {scale_log2!r}, {kw})"]
    rows = t.bh // t.bhkv * t.sq
    params = decode_params(t)
    kw = ", ".join(f"{a}={b!r}" for a, b in params.items())
    m_blocks = -(-rows // (64 * params["CONSUMERS"]))
    # the GROUP query heads of a KV head are adjacent: (B*H, QLEN, D) is (B*HKV, GROUP*QLEN, D) as it lies
    qp = f"{t.q.name}.view({t.bhkv}, {rows}, {t.d})"
    if t.splits == 1:      # the one split's normalized output and log-sum-exp are the result: no merge
        op = f"{t.out.name}.view(1, {t.bhkv}, {rows}, {t.d})"
        lp = f"{t.lse.name}.view(1, {t.bhkv}, {rows})"
        return [f"launch(attention_decode_bf16, (1, {t.bhkv}, {m_blocks}), {qp}, {k}, {v}, {op}, {lp}, "
                f"{scale_log2!r}, {t.chunk}, {kw})"]
    op = f"{t.parts.name}.view({t.splits}, {t.bhkv}, {rows}, {t.d})"
    lp = f"{t.lse_parts.name}.view({t.splits}, {t.bhkv}, {rows})"
    mp = merge_params(t)
    mkw = ", ".join(f"{a}={b!r}" for a, b in mp.items())
    return [f"launch(attention_decode, ({t.splits}, {t.bhkv}, {m_blocks}), {qp}, {k}, {v}, {op}, {lp}, "
            f"{scale_log2!r}, {t.chunk}, {kw})",
            f"launch(attention_merge, ({t.bhkv}, {-(-rows // mp['BR'])}), {op}, {lp}, "
            f"{t.out.name}.view({t.bhkv}, {rows}, {t.d}), {t.lse.name}.view({t.bhkv}, {rows}), {mkw})"]


def _render_fp32(t: AttentionTemplate, scale_log2: float) -> list[str]:
    """Host lines of fp32 attention: q and k split into TF32 halves (`split_tf32` on (rows, D)), v into
    transposed halves (`split_tf32_t`: (BHKV, D, SKVP), zeros past SKV), then `attention_fp32`."""
    qh, ql, kh, kl, vh, vl = (b.name for b in t.halves)
    d, skvp = t.d, t.halves[4].shape[-1]
    lines = []
    for src, hi, lo, rows in ((t.q, qh, ql, t.bh * t.sq), (t.k, kh, kl, t.bhkv * t.skv)):
        lines.append(f"launch(split_tf32, ({-(-rows // 16)}, {-(-d // 128)}), {src.name}.view({rows}, {d}), "
                     f"{hi}.view({rows}, {d}), {lo}.view({rows}, {d}))")
    lines.append(f"launch(split_tf32_t, ({-(-skvp // 32)}, {-(-d // 32)}, {t.bhkv}), "
                 f"{t.v.name}.view({t.bhkv}, {t.skv}, {d}), {vh}.view({t.bhkv}, {d}, {skvp}), "
                 f"{vl}.view({t.bhkv}, {d}, {skvp}))")
    params = fwd_params(t)
    kw = ", ".join(f"{a}={b!r}" for a, b in params.items())
    views = [f"{qh}.view({t.bh}, {t.sq}, {d})", f"{ql}.view({t.bh}, {t.sq}, {d})",
             f"{kh}.view({t.bhkv}, {t.skv}, {d})", f"{kl}.view({t.bhkv}, {t.skv}, {d})",
             f"{vh}.view({t.bhkv}, {d}, {skvp})", f"{vl}.view({t.bhkv}, {d}, {skvp})"]
    grid = f"({-(-t.sq // (64 * params['CONSUMERS']))}, {t.bh})"
    lines.append(f"launch(attention_fp32, {grid}, {', '.join(views)}, {t.out.name}.view({t.bh}, {t.sq}, {d}), "
                 f"{t.lse.name}.view({t.bh}, {t.sq}), {scale_log2!r}, {kw})")
    return lines


def _decompose(ctx, node, args: list, kwargs: dict) -> LTensor:
    """Lower the node through torch's own decomposition of it (the core-ATen ops a full capture would hold)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx


    slots, fakes = [], []
    with FakeTensorMode():
        for a in list(node.args) + list(node.kwargs.values()):
            if isinstance(a, fx.Node):
                val = a.meta["val"]
                slots.append(a)
                fakes.append(torch.empty(tuple(val.shape), dtype=val.dtype))
    n_args = len(node.args)
    keys = list(node.kwargs)

    def call(*tensors):
        it = iter(tensors)
        flat = [next(it) if isinstance(a, fx.Node) else a for a in list(node.args) + list(node.kwargs.values())]
        return node.target(*flat[:n_args], **dict(zip(keys, flat[n_args:])))

    with torch.no_grad():
        gm = make_fx(call, decomposition_table=torch.export.default_decompositions(), tracing_mode="fake")(*fakes)
    result = lower_decomposition(ctx, node, gm.graph, [_operand(src, args, kwargs, node) for src in slots])
    return result[0] if isinstance(result, tuple) else result


def lower_decomposition(ctx, node, graph, operands: list):
    """Lower the graph of torch's decomposition of `node` (its placeholders bound to `operands` in order) op by
    op, each op carrying the node's source line; the lowered output (a tuple for several)."""
    from .dispatch import lower_node

    env: dict = dict(zip([n for n in graph.nodes if n.op == "placeholder"], operands))
    for n in graph.nodes:
        if n.op == "call_function":
            n.meta["stack_trace"] = node.meta.get("stack_trace")
            env[n] = lower_node(ctx, n, env)
        elif n.op == "get_attr":
            raise LoweringError(f"{source_line(node)}: torch's decomposition of `{node.target}` reads a constant "
                                "tensor, which is not lowered")
        elif n.op == "output":
            res = n.args[0]
            return tuple(env[r] for r in res) if isinstance(res, (tuple, list)) else env[res]


def _operand(src_node, args, kwargs, node):
    """The lowered value of the SDPA node's operand `src_node` (positional or keyword)."""
    for a, val in zip(node.args, args):
        if a is src_node:
            return val
    for key, a in node.kwargs.items():
        if a is src_node:
            return kwargs[key]
    raise AssertionError(f"operand {src_node} not found")


@register("aten.scaled_dot_product_attention.default")
def _sdpa(ctx, node, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None, enable_gqa=False):
    plan, why = kernel_plan(ctx.target, q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    if plan is not None:
        return _template(ctx, plan, why, q, k, v, is_causal, scale)
    log.info("%s: scaled_dot_product_attention decomposed to bmm/softmax/bmm: %s", source_line(node), why)
    given = dict(q=q, k=k, v=v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                 enable_gqa=enable_gqa)      # the lowered values, positional ones first as the node has them
    result = _decompose(ctx, node, list(given.values())[:len(node.args)], {key: given[key] for key in node.kwargs})
    if not isinstance(result, LTensor):
        raise LoweringError(f"{source_line(node)}: the decomposition of scaled_dot_product_attention gave "
                            f"{type(result).__name__}")
    return result

