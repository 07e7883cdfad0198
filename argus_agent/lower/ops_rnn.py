"""Recurrent layers (`nn.LSTM`, `nn.GRU`, `nn.RNN`): kept whole by capture, lowered to a host loop of steps.

`torch.export` holds `aten.lstm.input` / `aten.gru.input` / `aten.rnn_tanh.input` / `aten.rnn_relu.input` as one
node before the decompositions, which would unroll it into a few ops per time step and layer (a 128-step,
two-layer LSTM was 517 kernels, 27 MB of source and over four minutes of lowering). Capture keeps these
ops whole (graph.KEPT_WHOLE). Each layer is what cuDNN makes of it: the input's share of every gate at every
step, x W_ih^T, is ONE GEMM before the loop (the lowering's fp32 GEMM: 3xTF32 on sm_90a, as accurate as
an SGEMM); then an `RnnTemplate`, a host loop over the time steps launching `stdlib_kernels/rnn.py`'s step once
per step, both directions of a bidirectional layer in one launch (the same compiled kernel: every per-step
offset is a run-time argument). The step multiplies only h_{t-1} W_hh^T (on sm_90a on the tensor cores,
`rnn_step_tc`: split TF32, fp32-accurate; elsewhere FMA sums, `rnn_step`) and applies the cell. Layer l reads
layer l - 1's output sequence as its input; h_n and c_n are views of the last step's rows (the first step's
for the reverse direction) and of the final cell state, read by ordinary pointwise kernels.

fp32 only (PyTorch's fp32 cell); other dtypes, projections (`proj_size`), packed sequences and dropout in
training mode are lowered through torch's own decomposition (`ops_attention._decompose`, per step, with the
reason logged).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import torch
import torch.fx as fx

from . import values as vals
from .core import Buffer, LTensor, buffer_tensor
from .graph import source_line
from .index import add, const
from .ops_nn import matmul
from .registry import register
from .values import call

log = logging.getLogger("argus_agent.lower")

# the op -> stdlib_kernels.rnn's cell number (LSTM, GRU, RNN_TANH, RNN_RELU)
CELLS = {"aten.lstm.input": 0, "aten.gru.input": 1, "aten.rnn_tanh.input": 2, "aten.rnn_relu.input": 3}


@dataclass
class RnnTemplate:
    """One layer over T steps, both directions (D) in one launch per step. gx (T * B rows of D * G * H: the
    input's share x W_ih^T of every gate, computed before the loop; the row of (b, t) is b * rb + t * rt),
    out (T * B rows of D * H, same row rule; direction d's columns from d * H), the initial state rows
    h0_row0 + d * B + b of h0 (and c0), cbuf (2 * D * B, H) the cell state's ping-pong (LSTM), wh (D * G * H, H),
    bi and bh (D * G * H) the directions' W_hh, b_ih and b_hh stacked. `tc`: the tensor-core step (sm_90a)."""

    cell: int
    gx: Buffer
    h0: Buffer
    h0_rows: int
    h0_row0: int
    c0: Buffer | None
    cbuf: Buffer | None
    wh: Buffer
    bi: Buffer
    bh: Buffer
    out: Buffer
    rb: int
    rt: int
    T: int
    B: int
    I: int
    H: int
    D: int
    tc: bool = False
    passes: int = 3     # the tensor-core step's TF32 products per k-tile: 3 (fp32-accurate) or 1 (TF32)
    what: str = ""

    @property
    def K(self) -> int:       # the longest sum behind an element (for tolerances): the projection's, then the step's
        return self.I + self.H


def render_rnn(t: RnnTemplate, n: int) -> list[str]:
    from stdlib_kernels import rnn

    G = rnn.GATES[t.cell]
    if t.tc:
        kern, p = "rnn_step_tc", {**rnn.policy_tc(t.B, t.H, G), "PASSES": t.passes}
        grid = rnn.grid_tc(t.B, t.H, p, t.D)
    else:
        kern, p = "rnn_step", rnn.policy(t.B, t.H)
        grid = rnn.grid(t.B, t.H, p, t.D)
    v = f"_r{n}"
    h0 = f"{t.h0.name}.view({t.h0_rows}, {t.H})"
    c0 = f"{t.c0.name}.view({t.h0_rows}, {t.H})" if t.c0 is not None else h0    # no cell state: never read
    cb = f"{t.cbuf.name}.view({2 * t.D * t.B}, {t.H})" if t.cbuf is not None else h0
    consts = ", ".join(f"{k}={val}" for k, val in {
        "NB": t.B, "T": t.T, "CELL": t.cell, "G": G, "ND": t.D, "X_RB": t.rb, "X_RT": t.rt, "O_RB": t.rb,
        "O_RT": t.rt, **p}.items())
    # step 0 reads h0 / c0 (rows h0_row0 + d * B + b); step s > 0 the previous step's output rows of its
    # direction and the ping-pong half step s - 1 wrote; step s writes half s % 2 (the kernel derives the rows
    # from s: its only per-step argument)
    return [
        f"{v}x, {v}o = {t.gx.name}.view({t.T * t.B}, {t.D * G * t.H}), {t.out.name}.view({t.T * t.B}, {t.D * t.H})",
        f"{v}w = ({t.wh.name}.view({t.D * G * t.H}, {t.H}), {t.bi.name}, {t.bh.name}, {v}o, {cb})",
        f"launch({kern}, {grid}, {v}x, {h0}, {c0}, *{v}w, 0, {t.h0_row0}, {consts})",
        f"for s in range(1, {t.T}):     # {t.what}",
        f"    launch({kern}, {grid}, {v}x, {v}o, {cb}, *{v}w, s, {t.h0_row0}, {consts})",
    ]


def _decompose_lists(ctx, node, lowered: list):
    """The node through torch's own decomposition, its tensor operands given as node arguments or lists of them
    (`lowered`: the lowered values of node.args' leading tensor / list arguments, in order): the op alone is
    exported on meta tensors and decomposed with capture's table, and that graph's ops are lowered one by one."""
    from .ops_attention import lower_decomposition

    slots, values = [], []
    for a, val in zip(node.args, lowered):
        if isinstance(a, fx.Node):
            slots.append(a)
            values.append(val)
        else:
            slots += list(a)
            values += list(val)
    n_lists = len(lowered)

    class One(torch.nn.Module):
        def forward(self, *tensors):
            it = iter(tensors)
            args = [next(it) if isinstance(a, fx.Node) else [next(it) for _ in a] if i < n_lists else a
                    for i, a in enumerate(node.args)]
            return node.target(*args)

    metas = tuple(torch.empty(tuple(n.meta["val"].shape), dtype=n.meta["val"].dtype, device="meta") for n in slots)
    with torch.no_grad():
        ep = torch.export.export(One(), metas, strict=False).run_decompositions(torch.export.default_decompositions())
    return lower_decomposition(ctx, node, ep.graph, values)


def _rnn(ctx, node, x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):

    cell = CELLS[str(node.target)]
    hs = list(hx) if isinstance(hx, (list, tuple)) else [hx]
    per = (4 if has_biases else 2)
    D = 2 if bidirectional else 1
    tensors = [x] + hs + list(params)
    dtypes = {t.dtype for t in tensors}
    why = None
    if len(dtypes) != 1 or not dtypes <= {torch.float32, torch.float16, torch.bfloat16}:
        why = f"operands of {sorted(map(str, dtypes))} (one of float32, float16, bfloat16 is taken)"
    elif len(params) != per * num_layers * D:
        why = "weights other than (w_ih, w_hh[, b_ih, b_hh]) per layer (an LSTM projection)"
    elif train and dropout > 0 and num_layers > 1:
        why = "dropout between layers in training mode"
    elif len(x.shape) != 3:
        why = "an unbatched input"
    if why is not None:
        log.info("%s: %s decomposed per step: %s", source_line(node), node.target, why)
        return _decompose_lists(ctx, node, [x, hx, params])
    dtype = x.dtype
    if dtype != torch.float32:
        # a half-precision layer computes in fp32 (as cuDNN's: fp32 accumulation and cell math), its operands
        # read up and its results stored back in their dtype
        x, hs, params = _f32(x), [_f32(h) for h in hs], [_f32(w) for w in params]
        got = _rnn32(ctx, node, cell, x, hs, params, has_biases, num_layers, D, per, batch_first)
        return tuple(LTensor(t.shape, dtype, lambda c, t=t: vals.cast(t(c), dtype)) for t in got)
    return _rnn32(ctx, node, cell, x, hs, params, has_biases, num_layers, D, per, batch_first)


def _f32(t: LTensor) -> LTensor:
    return LTensor(t.shape, torch.float32, lambda c: vals.cast(t(c), torch.float32))


def _rnn32(ctx, node, cell, x, hs, params, has_biases, num_layers, D, per, batch_first):
    from stdlib_kernels import rnn

    if batch_first:
        B, T, _ = x.shape
    else:
        T, B, _ = x.shape
    H = hs[0].shape[-1]
    G = rnn.GATES[cell]
    h0 = ctx.contiguous(hs[0], "rnn_h0").buffer
    c0 = ctx.contiguous(hs[1], "rnn_c0").buffer if cell == rnn.LSTM else None
    layer_in = ctx.contiguous(x, "rnn_x").buffer
    I = x.shape[2]
    # row of (b, t) in a (T * B)-row view of the input / outputs: batch-first b * T + t, else t * B + b
    rb, rt = (T, 1) if batch_first else (1, B)
    tc = ctx.target == "sm_90a"
    # cuDNN runs fp32 RNNs with TF32 products while torch.backends.cudnn.allow_tf32 (its default), as it runs
    # convolutions: the projection GEMM and the step follow the convolutions' precision (precision.py)
    prec = getattr(ctx, "precision", None)
    passes = 1 if prec is not None and prec.conv != "fp32" else 3
    if not has_biases:     # one zero b_hh serves every layer
        zeros = ctx.contiguous(LTensor((D * G * H,), torch.float32, lambda c: vals.const(0, torch.float32)),
                               "rnn_nobias").buffer
    outs = []
    for layer in range(num_layers):
        ks = [(layer * D + d) * per for d in range(D)]
        wi = _stacked(ctx, [params[k] for k in ks], "rnn_wi")
        wh = _stacked(ctx, [params[k + 1] for k in ks], "rnn_wh")
        if has_biases:
            bi, bh = (_stacked(ctx, [params[k + i] for k in ks], f"rnn_b{i}") for i in (2, 3))
        else:
            bi = bh = zeros
        # the input's share of every gate at every step: one GEMM (T * B, I) @ (I, D * G * H) (b_ih: the step's)
        N = D * G * H
        wit = LTensor((I, N), torch.float32, lambda c, w=wi, k=I: vals.load(w.name, add(c[1] * k, c[0]),
                                                                             torch.float32))
        ctx.precision = None if prec is None else replace(prec, matmul="tf32" if passes == 1 else "fp32")
        try:
            gx = ctx.contiguous(matmul(ctx, _rows(layer_in, T * B, I), wit, torch.float32, base="rnn_gx"),
                                "rnn_gx").buffer
        finally:
            ctx.precision = prec
        out = ctx.add_buffer(f"rnn_out{layer}", (T * B, D * H), torch.float32)
        cbuf = ctx.add_buffer("rnn_c", (2 * D * B, H), torch.float32) if cell == rnn.LSTM else None
        ctx.kernels.append(RnnTemplate(
            cell=cell, gx=gx, h0=h0, h0_rows=num_layers * D * B, h0_row0=layer * D * B, c0=c0, cbuf=cbuf, wh=wh,
            bi=bi, bh=bh, out=out, rb=rb, rt=rt, T=T, B=B, I=I, H=H, D=D, tc=tc, passes=passes,
            what=f"layer {layer}{' (both directions)' if D == 2 else ''} of {source_line(node)}"))
        outs.append((out, cbuf))
        layer_in, I = out, D * H
    ot = buffer_tensor(layer_in)
    if batch_first:
        output = LTensor((B, T, D * H), torch.float32, lambda c: ot([add(c[0] * T, c[1]), c[2]]))
    else:
        output = LTensor((T, B, D * H), torch.float32, lambda c: ot([add(c[0] * B, c[1]), c[2]]))
    hn = _state([o for o, _ in outs], T, B, H, D, rb, rt, final=True)
    if cell != rnn.LSTM:
        return output, hn
    return output, hn, _state([cb for _, cb in outs], T, B, H, D, rb, rt, final=False)


def _rows(buf: Buffer, rows: int, cols: int) -> LTensor:
    """A contiguous buffer as a (rows, cols) matrix."""
    return LTensor((rows, cols), buf.dtype, lambda c: vals.load(buf.name, add(c[0] * cols, c[1]), buf.dtype))


def _stacked(ctx, tensors: list, base: str) -> Buffer:
    """The tensors (each (R, ...) alike) stacked along dim 0 as one contiguous buffer: the parameter itself when
    there is one, else a copy (a bidirectional layer's two directions, once per call)."""
    if len(tensors) == 1:
        return ctx.contiguous(tensors[0], base).buffer
    first = tensors[0]
    R = first.shape[0]

    def f(c):
        v = None
        for k in range(len(tensors) - 1, -1, -1):
            e = tensors[k]([add(c[0], const(-k * R))] + list(c[1:]))
            v = e if v is None else call("where", call("lt", vals.index_value(c[0]),
                                                        vals.const((k + 1) * R, torch.int64), dtype=torch.bool),
                                         e, v, dtype=torch.float32)
        return v
    return ctx.contiguous(LTensor((len(tensors) * R,) + tuple(first.shape[1:]), torch.float32, f), base).buffer


def _state(bufs, T, B, H, D, rb, rt, final: bool) -> LTensor:
    """h_n (from each layer's output rows at its direction's last step) or c_n (from the half of its ping-pong
    buffer written last), stacked over layers * directions: (L * D, B, H)."""
    LD = len(bufs) * D
    views = [buffer_tensor(b) for b in bufs]

    def pick(k: int, b, j):
        layer, d = divmod(k, D)
        if final:                       # h: the output row of the direction's last step
            t_last = 0 if d == 1 else T - 1
            return views[layer]([add(b * rb, const(t_last * rt)), add(j, const(d * H))])
        half = (T - 1) % 2               # c: the ping-pong half the last step wrote
        return views[layer]([add(b, const((half * D + d) * B)), j])

    def f(c):
        which, b, j = c
        v = pick(LD - 1, b, j)
        for k in range(LD - 2, -1, -1):
            v = call("where", call("eq", vals.index_value(which), vals.const(k, torch.int64), dtype=torch.bool),
                     pick(k, b, j), v, dtype=torch.float32)
        return v
    return LTensor((LD, B, H), torch.float32, f)


for _name in CELLS:
    register(_name)(_rnn)
