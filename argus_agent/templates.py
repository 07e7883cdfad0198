"""First kernels: a candidate module (tilepy kernels + the host `argus_forward(model, *inputs)`) generated
from a captured `Pattern`.

Core ops come from `stdlib_kernels/` (their source text, comments included, minus the numpy `launch` and
`reference` helpers); elementwise chains and epilogues are generated as tilepy source. The host program is
plain PyTorch that only allocates, reshapes and casts; all arithmetic happens in the kernels.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst

import stdlib_kernels

from .capture import Pattern, UnsupportedOpError, render_expr
from .codemods import NotApplicable, SetConstexpr, SetConstexprs

HEADER = '''"""ARGUS candidate: {what}.

Kernels in tilepy; `argus_forward(model, *inputs)` is the host program (allocation and launches only).
"""

import torch

import tilepy as tp
from argus_agent.runtime import launch
'''

# KernelBench compares with atol = rtol = 1e-2; f32 templates are held to 1e-4. The GEMM template multiplies
# in bf16: rounding the inputs alone (2^-9 relative each) gives a sum of K products an error of about
# 0.002 * sqrt(K) standard deviations for unit-normal data, so its tolerance grows with sqrt(K).
TOLERANCE = {"elementwise": 1e-4, "softmax": 1e-4, "rmsnorm": 1e-4, "matmul": 2e-2}


def tolerance(pattern: Pattern, base_inputs: list) -> float:
    """atol = rtol for comparing a candidate of this pattern with the reference."""
    if pattern.kind != "matmul":
        return TOLERANCE[pattern.kind]
    k = max(int(x.shape[-1]) for x in base_inputs[:1]) if base_inputs else 16
    return max(TOLERANCE["matmul"], 0.015 * k ** 0.5)

GEMM_PRESET_TARGET = {"cpu": "sm_80", "sm_80": "sm_80", "sm_90a": "sm_90a", "gfx942": "gfx942"}
# Hopper gets the warp-specialized TMA + wgmma GEMM; the other targets the pipelined MMA GEMM.
GEMM_KERNEL = {"sm_90a": "gemm_hopper"}


def stdlib_source(name: str) -> str:
    """The kernel part of `stdlib_kernels/<name>.py`: imports, helpers and kernels, without launch/reference,
    PRESETS and the __main__ block."""
    path = Path(stdlib_kernels.__file__).parent / f"{name}.py"
    module = cst.parse_module(path.read_text())
    keep = []
    for stmt in module.body:
        code = cst.Module([]).code_for_node(stmt).lstrip()
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value in ("launch", "reference"):
            continue
        if isinstance(stmt, cst.If) and "__name__" in code:
            continue
        if code.startswith(("import numpy", "import tilepy", "PRESETS")) or _is_docstring(stmt):
            continue
        keep.append(stmt)
    return module.with_changes(body=keep, header=[]).code.strip() + "\n"


def _is_docstring(stmt) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, cst.SimpleString))


def elementwise_kernel(name: str, n_inputs: int, expr, block: int = 1024) -> str:
    params = ", ".join(f'X{k}: tp.Tensor[tp.f32, "N"]' for k in range(n_inputs))
    loads = "".join(f"    x{k} = tp.load(X{k}[i0:i0 + BLOCK])\n" for k in range(n_inputs))
    value = render_expr(expr, [f"x{k}" for k in range(n_inputs)])
    return (f"@tp.kernel(threads=128)\n"
            f'def {name}({params}, Z: tp.Tensor[tp.f32, "N"], BLOCK: tp.constexpr = {block}):\n'
            f"    i0 = tp.block_id(0) * BLOCK\n{loads}"
            f"    tp.store(Z[i0:i0 + BLOCK], {value})\n")


def _arg_source(arg, names) -> str:
    if arg[0] == "in":
        return names[arg[1]]
    return f"model.{arg[1]}"


def generate(pattern: Pattern, base_inputs: list, target: str = "cpu") -> str:
    """The first candidate module for `pattern` (raises UnsupportedOpError where the inputs do not fit)."""
    import torch

    tensors = [x for x in base_inputs if isinstance(x, torch.Tensor)]
    if len(tensors) != len(base_inputs) or len(base_inputs) != pattern.inputs:
        raise UnsupportedOpError("every forward() argument must be a tensor")
    if any(t.dtype != torch.float32 for t in tensors):
        raise UnsupportedOpError(f"inputs must be float32 (got {sorted({str(t.dtype) for t in tensors})})")
    names = [f"x{k}" for k in range(pattern.inputs)]
    sig = ", ".join(["model", *names])
    if pattern.kind == "elementwise":
        used = sorted(_inputs_of(pattern.expr))
        shapes = {tuple(base_inputs[k].shape) for k in used}
        if len(shapes) != 1:
            raise UnsupportedOpError(f"broadcasting between inputs of shapes {sorted(shapes)} is not supported")
        expr = _renumber(pattern.expr, {k: i for i, k in enumerate(used)})
        views = ", ".join(f"{names[k]}.contiguous().view(-1)" for k in used)
        return (HEADER.format(what=pattern.describe()) + "\n\n" +
                elementwise_kernel("fused_elementwise", len(used), expr) + "\n\n" +
                f"def argus_forward({sig}):\n"
                f"    out = torch.empty_like({names[used[0]]}.contiguous())\n"
                f'    launch(fused_elementwise, lambda m: (tp.cdiv(m["N"], m["BLOCK"]),), {views}, out.view(-1))\n'
                f"    return out\n")
    core_src, host = _core(pattern, names, target)
    text = HEADER.format(what=pattern.describe()) + "\n\n" + core_src
    if pattern.epilogue is not None:
        text += "\n\n" + elementwise_kernel("epilogue", 1, pattern.epilogue)
        host += ("    out = torch.empty_like(t)\n"
                 '    launch(epilogue, lambda m: (tp.cdiv(m["N"], m["BLOCK"]),), t.view(-1), out.view(-1))\n'
                 "    return out.view(shape)\n")
    else:
        host += "    return t.view(shape)\n"
    text += f"\n\ndef argus_forward({sig}):\n" + host
    if pattern.kind == "matmul" and target in GEMM_PRESET_TARGET:
        module = __import__(f"stdlib_kernels.{GEMM_KERNEL.get(target, 'gemm')}", fromlist=["PRESETS"])
        preset = module.PRESETS[GEMM_PRESET_TARGET[target]]
        try:
            text = SetConstexprs().apply(text, values={k: _py_source(v) for k, v in preset.items()})
        except NotApplicable:
            pass  # the kernel's defaults are the preset already
    return text


def _core(pattern: Pattern, names, target) -> tuple[str, str]:
    a = [_arg_source(x, names) for x in pattern.core_args]
    pow2 = "max(16, 1 << (x2.shape[1] - 1).bit_length())"
    if pattern.kind == "softmax":
        host = (f"    shape = {a[0]}.shape\n"
                f"    x2 = {a[0]}.contiguous().view(-1, shape[-1])\n"
                f"    t = torch.empty_like(x2)\n"
                f'    launch(softmax, lambda m: (m["M"],), x2, t, BLOCK_N={pow2})\n')
        return stdlib_source("softmax"), host
    if pattern.kind == "rmsnorm":
        host = (f"    shape = {a[0]}.shape\n"
                f"    x2 = {a[0]}.contiguous().view(-1, shape[-1])\n"
                f"    t = torch.empty_like(x2)\n"
                f'    launch(rmsnorm, lambda m: (m["M"],), x2, {a[1]}.detach().contiguous(), t, {pattern.eps!r}, '
                f"BLOCK_N={pow2})\n")
        return stdlib_source("rmsnorm"), host
    if pattern.kind == "matmul":
        kernel = GEMM_KERNEL.get(target, "gemm")
        host = (f"    a, b = {a[0]}, {a[1]}\n"
                f"    if a.dim() != 2 or b.dim() != 2:\n"
                f'        raise ValueError("the GEMM template multiplies 2-D matrices")\n'
                f"    shape = (a.shape[0], b.shape[1])\n"
                f"    t = torch.empty(shape, dtype=torch.float32, device=a.device)\n"
                f'    launch({kernel}, lambda m: (tp.cdiv(m["M"], m["BM"]), tp.cdiv(m["N"], m["BN"])),\n'
                f"           a.detach().to(torch.bfloat16).contiguous(),\n"
                f"           b.detach().to(torch.bfloat16).contiguous(), t)\n")
        return stdlib_source(kernel), host
    raise UnsupportedOpError(f"no template for {pattern.kind}")


def _py_source(v) -> str:
    import tilepy as tp

    if isinstance(v, tp.Swizzle):
        return f"tp.Swizzle({v.bits}, {v.base}, {v.shift})"
    if hasattr(v, "family") and hasattr(v, "name"):
        return f"tp.{v.name}"
    return repr(v)


def _inputs_of(e) -> set:
    if e[0] == "in":
        return {e[1]}
    if e[0] == "const":
        return set()
    return set().union(*(_inputs_of(a) for a in e[1:]))


def _renumber(e, mapping):
    if e[0] == "in":
        return ("in", mapping[e[1]])
    if e[0] == "const":
        return e
    return (e[0], *(_renumber(a, mapping) for a in e[1:]))


__all__ = ["generate", "stdlib_source", "elementwise_kernel", "TOLERANCE", "SetConstexpr"]
