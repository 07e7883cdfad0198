"""Capture: `torch.export` of the reference, brought down to core ATen by torch's own decompositions.

Parameters, buffers and the user's inputs are graph inputs with known shapes and dtypes; every call is a
core-ATen op overload whose `meta["val"]` holds its result's shape and dtype, and whose `stack_trace` names the
reference's source line.

`scaled_dot_product_attention` stays one node (its decomposition is left out of the table): the lowering runs
the stdlib attention kernel where the target has one and the call suits it, and otherwise decomposes that node
itself with torch's own table (`ops_attention.py`). torch 2.13's export emits only
`aten.scaled_dot_product_attention.default` for `F.scaled_dot_product_attention` (causal or not, masked or not,
`enable_gqa` or not); the backend-specific `_scaled_dot_product_*_attention*` ops appear only when a program
calls them by name, and those still decompose to core ATen.
"""

from __future__ import annotations

import contextlib
import inspect
import linecache
import os
import re
import traceback
import warnings
from dataclasses import dataclass, field

import torch


class LoweringError(Exception):
    """The program uses something the lowering cannot express; the message names the op and the source line."""


@dataclass
class GraphInput:
    name: str            # placeholder name in the graph
    kind: str            # "input" (the user's k-th forward argument) | "param" | "buffer" | "constant"
                         # (a tensor made inside forward: `value` holds it)
    index: int = -1      # for "input": position in forward's arguments
    target: str = ""     # for "param"/"buffer": fully qualified name in the module
    value: object = None  # for non-tensor user inputs: the value export specialized on


@dataclass
class Captured:
    program: object                       # the decomposed ExportedProgram
    inputs: list = field(default_factory=list)   # GraphInput per placeholder, in graph order
    n_user_inputs: int = 0


# tensor constants made inside forward up to this many elements are lowered as values (a select over their
# elements where the index is not known at lowering time); the host program may not build tensors from data
CONSTANT_MAX = 64

# ops kept whole through capture: each has a lowering that picks a stdlib kernel or decomposes the node itself
KEPT_WHOLE = ("aten.scaled_dot_product_attention.default", "aten.lstm.input", "aten.gru.input", "aten.rnn_tanh.input",
              "aten.rnn_relu.input")


def decomposition_table():
    """torch.export's default core-ATen decompositions, less those of the ops in KEPT_WHOLE."""
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if str(op) in KEPT_WHOLE:
            table.pop(op)
    return table


def _forward_line(e: BaseException, model: torch.nn.Module) -> str:
    """' (file:line: `code`)' for where capture failed: the innermost frame of the model's own source file in
    e's traceback or in the call torch quotes in its message ('File "...", line N'), else the call it quotes."""
    try:
        src = os.path.realpath(inspect.getsourcefile(type(model)) or "")
    except TypeError:   # a class defined where inspect cannot find its file
        src = ""
    frames = [(f.f_code.co_filename, n) for f, n in traceback.walk_tb(e.__traceback__)]
    quoted = [(f, int(n)) for f, n in re.findall(r'File "([^"]+)", line (\d+)', str(e))]
    own = [fn for fn in frames + quoted if src and os.path.realpath(fn[0]) == src]
    hit = own[-1] if own else (quoted[-1] if quoted else None)
    if hit is None:
        return ""
    code = linecache.getline(hit[0], hit[1]).strip()
    return f" ({os.path.basename(hit[0])}:{hit[1]}" + (f": `{code}`)" if code else ")")


@contextlib.contextmanager
def _lstm_state_shapes(active: bool):
    """While capturing: torch's one_layer_lstm decomposition returns each final state in the shape of the state it
    was given (a no-op where torch already does; in torch builds before pytorch/pytorch#185716 it drops the
    leftover step dimension)."""
    from torch._decomp import decompositions as decomp

    original = getattr(decomp, "one_layer_lstm", None)
    if not active or original is None:
        yield
        return

    def one_layer_lstm(inp, hidden, params, has_biases, reverse=False):
        out, (h, c) = original(inp, hidden, params, has_biases, reverse=reverse)
        return out, (h.reshape(hidden[0].shape), c.reshape(hidden[1].shape))

    decomp.one_layer_lstm = one_layer_lstm
    try:
        yield
    finally:
        decomp.one_layer_lstm = original


def capture_program(model: torch.nn.Module, inputs: list) -> Captured:
    """Export `model(*inputs)` and decompose it to core ATen (raises LoweringError with the reason)."""
    # An LSTM's shapes in the capture come from torch's Python decomposition of aten.lstm (the graph keeps the op
    # whole, KEPT_WHOLE). Before pytorch/pytorch#185716 (torch 2.11 on the GPU machine) its one_layer_lstm returned
    # the final states with a leftover step dimension, [1, batch, hidden] per layer and direction, so h_n / c_n were
    # captured as 4-D and whatever used them failed (level3/023). _lstm_state_shapes corrects that during capture;
    # mkldnn and cuDNN stay off so every device takes that decomposition.
    rnn = any(isinstance(m, torch.nn.RNNBase) for m in model.modules())
    try:
        with torch.no_grad(), warnings.catch_warnings(), torch.backends.mkldnn.flags(enabled=not rnn), \
                torch.backends.cudnn.flags(enabled=not rnn), _lstm_state_shapes(rnn):
            warnings.simplefilter("ignore")   # export's internal deprecation chatter is not the user's concern
            ep = torch.export.export(model, tuple(inputs), strict=False)
            ep = ep.run_decompositions(decomposition_table())
    except Exception as e:  # export failures come in many types; the message is what the user needs
        msg = str(e).strip().splitlines()
        where = _forward_line(e, model)
        hint = ""
        if "data-dependent" in str(e) or "DataDependent" in type(e).__name__:
            hint = ("; the reference branches on tensor values there (a Python `if`, `.item()` or `bool()` of a "
                    "tensor, e.g. an argument check inside a torch.nn.functional function): the lowering follows "
                    "control flow that depends on shapes only, so compute both sides with torch.where or move "
                    "the check out of forward")
        raise LoweringError(f"torch.export could not capture Model.forward{where}: {type(e).__name__}: "
                            f"{msg[0] if msg else ''}{hint}") from e
    sig = ep.graph_signature
    specs = {s.arg.name: s for s in sig.input_specs}
    out_kinds = [s.kind.name for s in sig.output_specs]
    if any(k != "USER_OUTPUT" for k in out_kinds):
        raise LoweringError("Model.forward mutates an input or a buffer in place; in-place updates of inputs "
                            "are not lowered (return a new tensor instead)")
    captured = Captured(ep)
    user = 0
    for node in ep.graph.nodes:
        if node.op != "placeholder":
            continue
        spec = specs[node.name]
        kind = spec.kind.name
        if kind == "USER_INPUT":
            value = inputs[user] if user < len(inputs) else None
            captured.inputs.append(GraphInput(node.name, "input", index=user,
                                              value=None if isinstance(value, torch.Tensor) else value))
            user += 1
        elif kind == "PARAMETER":
            captured.inputs.append(GraphInput(node.name, "param", target=spec.target))
        elif kind == "BUFFER":
            captured.inputs.append(GraphInput(node.name, "buffer", target=spec.target))
        elif kind == "CONSTANT_TENSOR" and isinstance(ep.constants.get(spec.target), torch.Tensor) \
                and 0 < ep.constants[spec.target].numel() <= CONSTANT_MAX:
            # a tensor made inside forward (torch.tensor([...])): lowered as its values (program.constant_tensor)
            captured.inputs.append(GraphInput(node.name, "constant", target=spec.target,
                                              value=ep.constants[spec.target].detach().cpu().clone()))
        else:
            where = next((source_line(u) for u in node.users), "Model.forward")
            raise LoweringError(f"{where}: Model.forward uses a tensor constant ({spec.target}) that is not lowered "
                                f"as values (more than {CONSTANT_MAX} elements, or not a tensor); register it as a "
                                "buffer (self.register_buffer) so ModelNew receives it")
    captured.n_user_inputs = user
    return captured


def source_line(node) -> str:
    """'file.py:LINE: code' of the reference line that produced `node`, from export's stack trace."""
    trace = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+), in \w+\n\s*(.*)', trace)
    frames = [f for f in frames if "/torch/" not in f[0] and "site-packages" not in f[0]]
    if not frames:
        return "Model.forward"
    path, line, code = frames[-1]
    return f"{path.rsplit('/', 1)[-1]}:{line}: {code.strip()}"
