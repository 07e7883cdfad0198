"""Render a lowered program as one candidate module: tilepy kernels plus the host `argus_forward`.

The kernels come from one renderer per kernel class: `render_flat` (Pointwise kernels and reductions on
flat indices), `render_tiled` (row- and column-mode reductions, split partials and their combine),
`render_stats` (argmax/argmin, Welford mean and variance), `render_rows` (scans, whole-row fused kernels),
`templates` (GEMM and convolution templates from stdlib_kernels with fused epilogues); `emit` names and
renders the values of a kernel body. This module puts the kernels in order and writes the host program
(allocation and launches only).
"""

from __future__ import annotations

import dataclasses
import re

from .core import Pointwise, Reduction, RowFused, Scan
from .ops_attention import AttentionTemplate, attention_source, render_attention
from .ops_depthwise import DepthwiseTemplate, render_depthwise
from .ops_moe import MoeTemplate, moe_source, render_moe
from .ops_reduce import SortTemplate, render_sort, sort_source
from .ops_rnn import RnnTemplate, render_rnn
from .ops_scatter import ScatterAddTemplate, render_scatter_add
from .ops_views import EmbeddingBagTemplate, render_embedding_bag
from .render_flat import needs_i64, render_pointwise, render_reduction
from .render_rows import render_row_fused, render_scan
from .render_stats import render_arg_reduction, render_welford
from .render_tiled import render_tiled_reduction
from .templates import (
    SWAP,
    ConvTemplate,
    Fp32GemmTemplate,
    MatmulTemplate,
    conv_weight_preps,
    fp32_tile,
    fuse_epilogues,
    matmul_source,
    preset_source,
    render_gemm_template,
    render_matmul,
    stdlib_source,
    swap_source,
)

# Templates that launch one stdlib module's kernels as written: (spec class, module, host lines of a spec at
# program position n)
STDLIB_TEMPLATES = (
    (RnnTemplate, "rnn", render_rnn),     # a recurrent layer: a host loop of stdlib rnn_step launches
    (DepthwiseTemplate, "depthwise_conv", lambda k, n: render_depthwise(k)),   # the large-window stencil
    (ScatterAddTemplate, "scatter_add", lambda k, n: render_scatter_add(k)),
    (EmbeddingBagTemplate, "embedding_bag", lambda k, n: render_embedding_bag(k)),   # bags of one size
)

HEADER = '''"""ARGUS candidate: {what}.

Lowered from the reference's core-ATen graph (torch.export). Kernels in tilepy; `argus_forward(model, *inputs)`
is the host program (allocation and launches only). Precision: {precision}.
"""

import torch

import tilepy as tp
from argus_agent.runtime import aligned16, launch, state, weight_split

PRECISION = {precision!r}
'''

def _state_spec(target: str, kind: str) -> str:
    """runtime.state's spec of parameter / buffer `target` ('a.0.weight'): ("p", ("a", "0"), "weight")."""
    *path, leaf = target.split(".")
    return repr(("p" if kind == "param" else "b", tuple(path), leaf))


@dataclasses.dataclass(frozen=True)
class _Workspace:
    """A template's scratch tensor of a fixed shape, allocated once per (device, input shapes) with the
    intermediates instead of on every call."""
    name: str
    alloc: str


_WORKSPACE = re.compile(r"^    (\w+) = (torch\.empty\((?:\d+|\((?:\d+, )*\d+,?\)), dtype=torch\.\w+, device=dev\))$")


def _hoist_workspaces(launches: list) -> tuple[list, list]:
    """The templates' host lines less their top-level `name = torch.empty(<constant shape>, ...)` scratch
    allocations (names assigned once in the program), and those allocations as _Workspace temps. Contents of
    torch.empty are unspecified, so a template never reads what it did not write in the same call: reusing the
    tensor across calls is safe, as it is for the intermediates."""
    lines = [line for kname, line, _ in launches if kname is None]
    text = "\n".join(lines)
    hoisted, out = [], []
    for kname, line, grid in launches:
        if kname is not None:
            out.append((kname, line, grid))
            continue
        keep = []
        for ln in line.split("\n"):
            m = _WORKSPACE.match("    " + ln) if not ln.startswith(" ") else None
            if m and len(re.findall(rf"(?m)^\s*{m.group(1)} = ", text)) == 1:
                hoisted.append(_Workspace(m.group(1), m.group(2)))
            else:
                keep.append(ln)
        if keep:
            out.append((None, "\n".join(keep), grid))
    return out, hoisted


def render_program(prog, precision: str | None = None) -> str:
    """The candidate module's source for a LoweredProgram (`precision`: the text recorded in it; default the
    program's own, `precision.Precision.describe`)."""
    if precision is None:
        precision = prog.precision.describe() if getattr(prog, "precision", None) is not None else "fp32"
    kernels, kept = fuse_epilogues(prog.kernels, prog.buffers, prog.outputs)   # pointwise into GEMM/conv stores
    prog = dataclasses.replace(prog, kernels=kernels, buffers=kept)
    buffers = {b.name: b for b in prog.buffers}
    kernels_src, launches = [], []
    extra_temps: list = []
    templates_done = set()
    # conv_tma weights reordered from a parameter: the reordering launch becomes weight_split's prep (run once per
    # state of the parameter) instead of a launch on every call
    wpreps = conv_weight_preps(prog.kernels, buffers, {b.name for b in prog.outputs})
    prep_lines: dict = {}
    for n, k in enumerate(prog.kernels):
        if isinstance(k, (Fp32GemmTemplate, ConvTemplate)):
            wprep = None
            if isinstance(k, ConvTemplate) and k.w.name in prep_lines:
                wprep = (wpreps[k.w.name], prep_lines[k.w.name])
            srcs, lines = render_gemm_template(k, n, prog.target, buffers, templates_done, wprep)
            kernels_src += srcs
            launches += [(None, line, None) for line in lines]
            continue
        if isinstance(k, AttentionTemplate):
            if "attention" not in templates_done:
                kernels_src.append(attention_source([a for a in prog.kernels if isinstance(a, AttentionTemplate)],
                                                    prog.target))
                templates_done.add("attention")
            if k.kernel == "attention_fp32" and "gemm_fp32" not in templates_done:   # its split_tf32(_t)
                kernels_src.append(preset_source("gemm_fp32", prog.target))
                templates_done.add("gemm_fp32")
            launches += [(None, line, None) for line in render_attention(k)]
            continue
        plain = next(((name, render) for cls, name, render in STDLIB_TEMPLATES if isinstance(k, cls)), None)
        if plain is not None:     # a template whose kernels are one stdlib module's, as written
            name, render = plain
            if name not in templates_done:
                kernels_src.append(stdlib_source(name))
                templates_done.add(name)
            launches += [(None, line, None) for line in render(k, n)]
            continue
        if isinstance(k, SortTemplate):     # the stdlib bitonic row sort
            if "sort" not in templates_done:
                kernels_src.append(sort_source(k))
                templates_done.add("sort")
            launches += [(None, line, None) for line in render_sort(k)]
            continue
        if isinstance(k, MoeTemplate):
            if "moe" not in templates_done:
                kernels_src.append(moe_source([m for m in prog.kernels if isinstance(m, MoeTemplate)]))
                templates_done.add("moe")
            launches += [(None, line, None) for line in render_moe(k, n)]
            continue
        if isinstance(k, MatmulTemplate):
            if k.kernel == SWAP and k.kernel not in templates_done:
                # gemm_splitk_swap builds on gemm_hopper's helpers: that module's source first where the program
                # has gemm_hopper templates too, else the helpers alone
                hopper = [m for m in prog.kernels if isinstance(m, MatmulTemplate) and m.kernel == "gemm_hopper"]
                if hopper and "gemm_hopper" not in templates_done:
                    kernels_src.append(matmul_source(hopper, prog.target))
                    templates_done.add("gemm_hopper")
                kernels_src.append(swap_source([m for m in prog.kernels if isinstance(m, MatmulTemplate)
                                                and m.kernel == SWAP], prog.target,
                                               with_helpers="gemm_hopper" not in templates_done))
                templates_done.add(k.kernel)
            if k.kernel not in templates_done:
                kernels_src.append(matmul_source([m for m in prog.kernels if isinstance(m, MatmulTemplate)
                                                  and m.kernel == k.kernel], prog.target))
                templates_done.add(k.kernel)
            srcs, lines = render_matmul(k, n, prog.target, buffers)   # (a K-major B / fused epilogue: own kernel)
            kernels_src += srcs
            launches += [(None, line, None) for line in lines]
            continue
        if isinstance(k, (Scan, RowFused)) or (isinstance(k, Reduction) and k.mode != "generic"
                                                and not needs_i64(k, buffers)):
            render = render_scan if isinstance(k, Scan) else render_row_fused if isinstance(k, RowFused) \
                else render_arg_reduction if k.kind.startswith("arg") else render_welford if k.kind == "welford" \
                else render_tiled_reduction
            base = f"scan_{k.kind}" if isinstance(k, Scan) else "fused_rows" if isinstance(k, RowFused) \
                else f"reduce_{k.kind}"
            parts, temps = render(k, f"k{n}_{base}", buffers)
            for b in temps:
                buffers[b.name] = b
                extra_temps.append(b)
            for src, kname, args, grid in parts:
                kernels_src.append(src)
                launches.append((kname, args, grid))
            continue
        base = "pointwise" if isinstance(k, Pointwise) else f"reduce_{k.kind}"
        kname = f"k{n}_{base}"
        if isinstance(k, Pointwise):
            src, args, info = render_pointwise(k, kname, buffers)
        else:
            src, args, info = render_reduction(k, kname, buffers)
        kernels_src.append(src)
        if isinstance(k, Pointwise) and k.out.name in wpreps:
            prep_lines[k.out.name] = f"launch({kname}, {info['grid']}, {', '.join(args)})"
            continue
        launches.append((kname, args, info["grid"]))
    cap = prog.captured
    user = [gi for gi in cap.inputs if gi.kind == "input"]
    arg_names = [f"x{gi.index}" for gi in user]
    host = [f"def argus_forward(model, {', '.join(arg_names)}):" if arg_names else "def argus_forward(model):"]
    dev = None
    tma_only = any(isinstance(k, AttentionTemplate)
                   or (isinstance(k, Fp32GemmTemplate) and fp32_tile(k).get("TMA_ONLY")) for k in prog.kernels)
    for gi in user:
        b = prog.placeholders.get(gi.name)
        if b is None:
            if gi.value is not None:
                host.append(f"    if x{gi.index} != {gi.value!r}:")
                host.append(
                    f"        raise ValueError('argument {gi.index} was {gi.value!r} when the program was "
                    f"lowered; lower it again for x{gi.index}=' + repr(x{gi.index}))"
                )
            continue
        # TMA-only kernels (attention, gemm_fp32's narrower tiles) take the inputs as they are: one at an odd
        # address is copied aligned
        bind = f"aligned16(x{gi.index}.contiguous())" if tma_only else f"x{gi.index}.contiguous()"
        host.append(f"    {b.name} = {bind}.view(-1)")
        dev = dev or f"x{gi.index}.device"
    bound = [(prog.placeholders[gi.name].name, _state_spec(gi.target, gi.kind)) for gi in cap.inputs
             if gi.kind in ("param", "buffer") and gi.name in prog.placeholders]
    if bound:
        host.append(f"    {', '.join(n for n, _ in bound)}, = state(model, ({', '.join(s for _, s in bound)},))")
        dev = dev or f"{bound[0][0]}.device"
    dev = dev or "torch.device('cpu')"
    host.append(f"    dev = {dev}")
    # intermediates are allocated once per (device, input shapes) and reused; outputs are fresh per call
    out_names = {b.name for b in prog.outputs}
    temps = [b for b in list(prog.buffers) + extra_temps if b.kind == "temp" and b.name not in out_names]
    for b in prog.buffers:
        if b.kind == "temp" and b.name in out_names:
            host.append(f"    {b.name} = torch.empty({max(1, b.numel)}, dtype={b.dtype}, device=dev)")
    launches, hoisted = _hoist_workspaces(launches)
    temps += hoisted
    if temps:
        shapes = ", ".join(f"tuple(x{gi.index}.shape)" for gi in user if prog.placeholders.get(gi.name))
        host.append(f"    key = (str(dev), {shapes})" if shapes else "    key = (str(dev),)")
        host.append("    got = _TEMPS.get(key)")
        host.append("    if got is None:")
        host.append("        got = _TEMPS[key] = (")
        for b in temps:
            host.append(f"            {b.alloc}," if isinstance(b, _Workspace) else
                        f"            torch.empty({max(1, b.numel)}, dtype={b.dtype}, device=dev),")
        host.append("        )")
        host.append(f"    {', '.join(b.name for b in temps)}, = got")
    for kname, args, grid in launches:
        if kname is None:
            host.append(f"    {args}")
        else:
            host.append(f"    launch({kname}, {grid}, {', '.join(args)})")
    outs = [f"{b.name}.view({tuple(s)})" for b, s in zip(prog.outputs, prog.output_shapes)]
    host.append(f"    return {outs[0]}" if prog.single_output else f"    return ({', '.join(outs)},)")
    what = f"{len(prog.kernels)} kernel{'s' if len(prog.kernels) != 1 else ''} from {len(prog.ops)} core-ATen ops"
    return (
        HEADER.format(what=what, precision=precision)
        + "\n\n"
        + "\n\n".join(kernels_src)
        + "\n\n"
        + ("# intermediates per (device, input shapes): allocated on the first call, reused after\n_TEMPS = {}\n\n\n"
           if "_TEMPS" in "\n".join(host) else "")
        + "\n".join(host)
        + "\n"
    )


