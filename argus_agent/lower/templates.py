"""Template kernels: matmuls that a stdlib GEMM does better than the generic reduction.

The lowering emits a `MatmulTemplate` where the target has a tensor-core GEMM for the operands' dtype and the
shapes suit it; the candidate module then holds that stdlib kernel's source (comments included, with the
target's preset as its defaults, so skills and the tuner edit it like any kernel) and the host launches it on
(M, K) and (K, N) row-major views of the operand buffers. Whatever follows the matmul (bias, activation,
cast) reads its f32 result like any buffer and is fused into the next kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import libcst as cst
import torch

from .core import Buffer

# target -> {operand dtype: stdlib module name}; fp32 operands take a tensor-core GEMM only once one exists
# that is as accurate as SGEMM (PyTorch computes fp32 matmuls in fp32 unless told otherwise).
GEMMS = {"sm_90a": {torch.bfloat16: "gemm_hopper"}}


@dataclass
class MatmulTemplate:
    """out (M, N) f32 = a (M, K) @ b (K, N), all contiguous row-major buffers."""

    out: Buffer
    a: Buffer
    b: Buffer
    M: int
    N: int
    K: int
    kernel: str
    what: str = ""


def gemm_for(target: str, dtype: torch.dtype, M: int, N: int, K: int) -> str | None:
    """The stdlib GEMM for these operands on `target`, or None (then the generic reduction runs)."""
    name = GEMMS.get(target, {}).get(dtype)
    if name is None:
        return None
    # bulk tensor copies need 16-byte aligned rows; tiny problems are better served by the generic kernel
    if (K * 2) % 16 or (N * 2) % 16 or M * N * K < 64**3:
        return None
    return name


@dataclass
class Fp32GemmTemplate:
    """out (BATCH, M, N) f32 = a (BATCH, M, K) @ b, fp32-accurate on tensor cores (stdlib gemm_fp32: 3xTF32).

    b is a buffer read as (BB, K, N) row-major (b_layout "kn") or (BB, N, K) ("nk": an nn.Linear weight, read
    in place), BB = 1 when one b serves every batch."""

    out: Buffer
    a: Buffer
    b: Buffer
    batch: int
    M: int
    N: int
    K: int
    b_batch: int
    b_layout: str
    what: str = ""
    kernel: str = "gemm_fp32"


def fp32_gemm_ok(target: str, M: int, N: int, K: int, batch: int) -> bool:
    return target == "sm_90a" and batch * M * N * K >= 64**3 and min(M, N) >= 16


def stdlib_source(name: str) -> str:
    """The kernel part of `stdlib_kernels/<name>.py`: helpers and kernels, without imports, docstring, PRESETS,
    the numpy `launch`/`reference` helpers and the __main__ block."""
    import stdlib_kernels

    path = Path(stdlib_kernels.__file__).parent / f"{name}.py"
    module = cst.parse_module(path.read_text())
    keep = []
    kernel_code = "".join(cst.Module([]).code_for_node(st) for st in module.body
                          if isinstance(st, cst.FunctionDef) and st.decorators)
    for stmt in module.body:
        code = cst.Module([]).code_for_node(stmt).lstrip()
        if isinstance(stmt, cst.FunctionDef) and not stmt.decorators and stmt.name.value not in kernel_code:
            continue   # host helpers (numpy launch, reference, splits): the candidate's host program is its own
        if isinstance(stmt, cst.If) and "__name__" in code:
            continue
        if code.startswith(("import ", "from ", "PRESETS", "SMALL_TILE")) or _is_docstring(stmt):
            continue
        keep.append(stmt)
    return module.with_changes(body=keep, header=[]).code.strip() + "\n"


def _is_docstring(stmt) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, cst.SimpleString))


def preset_source(name: str, target: str) -> str:
    """The stdlib kernel's source with the target's preset written in as the constexpr defaults."""
    import importlib

    from ..codemods import NotApplicable, SetConstexprs

    module = importlib.import_module(f"stdlib_kernels.{name}")
    text = stdlib_source(name)
    preset = getattr(module, "PRESETS", {}).get(target)
    if not preset:
        return text
    try:
        return SetConstexprs().apply(text, values={k: _py_source(v) for k, v in preset.items()})
    except NotApplicable:
        return text


def _py_source(v) -> str:
    import tilepy as tp

    if isinstance(v, tp.Swizzle):
        return f"tp.Swizzle({v.bits}, {v.base}, {v.shift})"
    if hasattr(v, "family") and hasattr(v, "name"):
        return f"tp.{v.name}"
    return repr(v)


def render_template(t: MatmulTemplate, target: str) -> tuple[str, str]:
    """(kernel source, host launch line) for a matmul template."""
    src = preset_source(t.kernel, target)
    grid = f"lambda m: (tp.cdiv({t.M}, m['BM']), tp.cdiv({t.N}, m['BN']))"
    launch = (f"launch({t.kernel}, {grid}, {t.a.name}.view({t.M}, {t.K}), {t.b.name}.view({t.K}, {t.N}), "
              f"{t.out.name}.view({t.M}, {t.N}))")
    return src, launch


def render_fp32_gemm(t: Fp32GemmTemplate, n: int) -> list[str]:
    """Host lines: split both operands into TF32 halves (K padded to 4), then the GEMM over (M, N, BATCH)."""
    kp = -(-t.K // 4) * 4
    a_rows = t.batch * t.M
    ah, al, bh, bl = (f"ws{n}_{x}" for x in ("ah", "al", "bh", "bl"))
    nb = t.b_batch
    lines = [f"{ah} = torch.empty(({t.batch}, {t.M}, {kp}), dtype=torch.float32, device=dev)",
             f"{al} = torch.empty(({t.batch}, {t.M}, {kp}), dtype=torch.float32, device=dev)",
             f"{bh} = torch.empty(({nb}, {t.N}, {kp}), dtype=torch.float32, device=dev)",
             f"{bl} = torch.empty(({nb}, {t.N}, {kp}), dtype=torch.float32, device=dev)",
             f"launch(split_tf32, ({-(-a_rows // 16)}, {-(-kp // 128)}), {t.a.name}.view({a_rows}, {t.K}), "
             f"{ah}.view({a_rows}, {kp}), {al}.view({a_rows}, {kp}))"]
    if t.b_layout == "nk":
        lines.append(f"launch(split_tf32, ({-(-nb * t.N // 16)}, {-(-kp // 128)}), {t.b.name}.view({nb * t.N}, "
                     f"{t.K}), {bh}.view({nb * t.N}, {kp}), {bl}.view({nb * t.N}, {kp}))")
    else:
        lines.append(f"launch(split_tf32_t, ({-(-kp // 32)}, {-(-t.N // 32)}, {nb}), {t.b.name}.view({nb}, {t.K}, "
                     f"{t.N}), {bh}, {bl})")
    grid = f"lambda m: (tp.cdiv({t.M}, m['BM']), tp.cdiv({t.N}, m['BN']), {t.batch})"
    lines.append(f"launch(gemm_fp32, {grid}, {ah}, {al}, {bh}, {bl}, {t.out.name}.view({t.batch}, {t.M}, {t.N}))")
    return lines
