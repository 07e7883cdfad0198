"""Recurrent layers (`nn.LSTM`, `nn.GRU`, `nn.RNN`): kept whole by capture, lowered to a host loop of steps.

`torch.export` holds `aten.lstm.input` / `aten.gru.input` / `aten.rnn_tanh.input` / `aten.rnn_relu.input` as one
node before the decompositions, which would unroll it into a few ops per time step and layer (a 128-step,
two-layer LSTM was 517 kernels, 27 MB of source and over four minutes of lowering). Capture keeps these
ops whole (graph.KEPT_WHOLE); here each layer and direction becomes an `RnnTemplate`: the host program loops
over the time steps and launches `stdlib_kernels/rnn.py`'s `rnn_step` once per step (the same compiled kernel:
every per-step offset is a run-time argument). Layer l reads layer l - 1's output sequence as its input; h_n
and c_n are views of the last step's rows (the first step's for the reverse direction) and of the final cell
state, read by ordinary pointwise kernels.

fp32 only (the step's FMA sums are PyTorch's fp32 cell); other dtypes, projections (`proj_size`), packed
sequences and dropout in training mode are lowered through torch's own decomposition (`ops_attention.
_decompose`, per step, with the reason logged).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
import torch.fx as fx

from . import values as vals
from .core import Buffer, LTensor, buffer_tensor
from .graph import source_line
from .index import add, const
from .registry import register
from .values import call

log = logging.getLogger("argus_agent.lower")

# the op -> stdlib_kernels.rnn's cell number (LSTM, GRU, RNN_TANH, RNN_RELU)
CELLS = {"aten.lstm.input": 0, "aten.gru.input": 1, "aten.rnn_tanh.input": 2, "aten.rnn_relu.input": 3}


@dataclass
class RnnTemplate:
    """One layer and direction over T steps. x (T * B rows of I, row of (b, t) = b * x_rb + t * x_rt),
    out (T * B rows of D * H, same row rule with o_rb / o_rt; this direction's columns from col0), the initial
    state rows h0_row0 + b of h0 (and c0), cbuf (2 * B, H) the cell state's ping-pong (LSTM)."""

    cell: int
    x: Buffer
    x_rows: int
    x_rb: int
    x_rt: int
    h0: Buffer
    h0_rows: int
    h0_row0: int
    c0: Buffer | None
    cbuf: Buffer | None
    wi: Buffer
    wh: Buffer
    bi: Buffer
    bh: Buffer
    out: Buffer
    o_rb: int
    o_rt: int
    col0: int
    T: int
    B: int
    I: int
    H: int
    D: int
    reverse: bool
    what: str = ""

    @property
    def K(self) -> int:       # the longest sum it runs (for tolerances)
        return self.I + self.H


def render_rnn(t: RnnTemplate, n: int) -> list[str]:
    from stdlib_kernels import rnn

    p = rnn.policy(t.B, t.H)
    grid = rnn.grid(t.B, t.H, p)
    G = rnn.GATES[t.cell]
    v = f"_r{n}"
    h0 = f"{t.h0.name}.view({t.h0_rows}, {t.H})"
    c0 = f"{t.c0.name}.view({t.h0_rows}, {t.H})" if t.c0 is not None else h0    # no cell state: never read
    cb = f"{t.cbuf.name}.view({2 * t.B}, {t.H})" if t.cbuf is not None else h0
    steps = f"range({t.T} - 1, -1, -1)" if t.reverse else f"range({t.T})"
    prev = "t + 1" if t.reverse else "t - 1"
    consts = ", ".join(f"{k}={val}" for k, val in p.items())
    return [
        f"{v}x, {v}o = {t.x.name}.view({t.x_rows}, {t.I}), {t.out.name}.view({t.T * t.B}, {t.D * t.H})",
        f"{v}h0, {v}c0, {v}c = {h0}, {c0}, {cb}",
        f"{v}w = ({t.wi.name}.view({G * t.H}, {t.I}), {t.wh.name}.view({G * t.H}, {t.H}), {t.bi.name}, "
        f"{t.bh.name})",
        f"for s, t in enumerate({steps}):     # {t.what}",
        "    first = s == 0",
        f"    launch(rnn_step, {grid}, {v}x, {v}h0 if first else {v}o, {v}c0 if first else {v}c, *{v}w, {v}o, "
        f"{v}c, t * {t.x_rt}, {t.h0_row0} if first else ({prev}) * {t.o_rt}, 1 if first else {t.o_rb}, "
        f"0 if first else {t.col0}, {t.h0_row0} if first else {t.B} * ((s - 1) % 2), t * {t.o_rt}, "
        f"{t.B} * (s % 2), NB={t.B}, CELL={t.cell}, X_RB={t.x_rb}, O_RB={t.o_rb}, O_COL0={t.col0}, {consts})",
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
    from stdlib_kernels import rnn

    cell = CELLS[str(node.target)]
    hs = list(hx) if isinstance(hx, (list, tuple)) else [hx]
    per = (4 if has_biases else 2)
    D = 2 if bidirectional else 1
    tensors = [x] + hs + list(params)
    why = None
    if any(t.dtype != torch.float32 for t in tensors):
        why = "operands not all float32"
    elif len(params) != per * num_layers * D:
        why = "weights other than (w_ih, w_hh[, b_ih, b_hh]) per layer (an LSTM projection)"
    elif train and dropout > 0 and num_layers > 1:
        why = "dropout between layers in training mode"
    elif len(x.shape) != 3:
        why = "an unbatched input"
    if why is not None:
        log.info("%s: %s decomposed per step: %s", source_line(node), node.target, why)
        return _decompose_lists(ctx, node, [x, hx, params])
    if batch_first:
        B, T, _ = x.shape
    else:
        T, B, _ = x.shape
    H = hs[0].shape[-1]
    G = rnn.GATES[cell]
    h0 = ctx.contiguous(hs[0], "rnn_h0").buffer
    c0 = ctx.contiguous(hs[1], "rnn_c0").buffer if cell == rnn.LSTM else None
    layer_in = ctx.contiguous(x, "rnn_x").buffer
    if not has_biases:     # one zero buffer serves every layer and direction
        zeros = ctx.contiguous(LTensor((G * H,), torch.float32, lambda c: vals.const(0, torch.float32)),
                               "rnn_nobias").buffer
    I = x.shape[2]
    # row of (b, t) in a (T * B)-row view of the input / outputs: batch-first b * T + t, else t * B + b
    rb, rt = (T, 1) if batch_first else (1, B)
    outs = []
    for layer in range(num_layers):
        out = ctx.add_buffer(f"rnn_out{layer}", (T * B, D * H), torch.float32)
        for d in range(D):
            k = (layer * D + d) * per
            wi, wh = (ctx.contiguous(params[k + i], f"rnn_w{i}").buffer for i in range(2))
            bi, bh = ((ctx.contiguous(params[k + i], f"rnn_b{i}").buffer for i in (2, 3)) if has_biases
                      else (zeros, zeros))
            cbuf = ctx.add_buffer("rnn_c", (2 * B, H), torch.float32) if cell == rnn.LSTM else None
            ctx.kernels.append(RnnTemplate(
                cell=cell, x=layer_in, x_rows=T * B, x_rb=rb, x_rt=rt, h0=h0, h0_rows=num_layers * D * B,
                h0_row0=(layer * D + d) * B, c0=c0, cbuf=cbuf, wi=wi, wh=wh, bi=bi, bh=bh, out=out, o_rb=rb,
                o_rt=rt, col0=d * H, T=T, B=B, I=I, H=H, D=D, reverse=d == 1,
                what=f"layer {layer}{' reverse' if d else ''} of {source_line(node)}"))
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


def _state(bufs, T, B, H, D, rb, rt, final: bool) -> LTensor:
    """h_n (from each layer-direction's output rows at its last step) or c_n (from its ping-pong buffer's half
    written last), stacked over layers * directions: (L * D, B, H)."""
    LD = len(bufs)
    views = [buffer_tensor(b) for b in bufs]

    def pick(k: int, b, j):
        d = k % D
        if final:                       # h: the output row of the direction's last step
            t_last = 0 if d == 1 else T - 1
            return views[k]([add(b * rb, const(t_last * rt)), add(j, const(d * H))])
        half = (T - 1) % 2               # c: the ping-pong half the last step wrote
        return views[k]([add(b, const(half * B)), j])

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
