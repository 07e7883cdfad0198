"""Template kernels: matmuls that a stdlib GEMM does better than the generic reduction.

The lowering emits a `MatmulTemplate` where the target has a tensor-core GEMM for the operands' dtype and the
shapes suit it; the candidate module then holds that stdlib kernel's source (comments included, with the
target's preset as its defaults, so skills and the tuner edit it like any kernel) and the host launches it on
(M, K) and (K, N) row-major views of the operand buffers. Whatever follows the matmul (bias, activation,
cast) reads its f32 result like any buffer and is fused into the next kernel.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
import torch

from .core import Buffer

# target -> {operand dtype: stdlib module name}; fp32 operands take a tensor-core GEMM only once one exists
# that is as accurate as SGEMM (PyTorch computes fp32 matmuls in fp32 unless told otherwise).
GEMMS = {"sm_90a": {torch.bfloat16: "gemm_hopper"}}
# A gemm_hopper epilogue's addend (a Linear's bias) as the accumulator's initial value: off until it is checked
# on the GPU at large shapes (the H100 suite found level2/054, 8192 x 4096 x 8192 bf16 Linear + GELU +
# LayerNorm, outside eager's tolerance with it, while the interpreter at the same policy matches eager). Off,
# an epilogue that reads a tensor besides the accumulator stays in the kernel after the GEMM.
GEMM_ADDEND_INIT = os.environ.get("ARGUS_GEMM_ADDEND_INIT", "0") == "1"


@dataclass
class MatmulTemplate:
    """out (M, N) f32 = a (M, K) @ b, contiguous row-major buffers; b is (K, N) (b_layout "kn") or (N, K) ("nk":
    an nn.Linear weight read in place by gemm_hopper's K-major form, B_NK=1). A fused `epilogue` (a Pointwise
    kernel spec, fuse_epilogues) is stored instead of `out`, in its dtype (bf16: gemm_hopper's bf16 policy)."""

    out: Buffer
    a: Buffer
    b: Buffer
    M: int
    N: int
    K: int
    kernel: str
    what: str = ""
    b_layout: str = "kn"
    epilogue: object = None


def gemm_for(target: str, dtype: torch.dtype, M: int, N: int, K: int) -> str | None:
    """The stdlib GEMM for these operands on `target`, or None (then the generic reduction runs): gemm_hopper, or
    gemm_splitk_swap where gemm_hopper.launch's own policy takes swap-AB (decode rows: `swap_policy`)."""
    name = GEMMS.get(target, {}).get(dtype)
    if name is None:
        return None
    # bulk tensor copies need 16-byte aligned rows; tiny problems are better served by the generic kernel
    if (K * 2) % 16 or (N * 2) % 16 or M * N * K < 64**3:
        return None
    if name == "gemm_hopper" and swap_policy(M, N, K) is not None:
        return SWAP
    return name


SWAP = "gemm_splitk_swap"
# what the candidate module needs of gemm_hopper's source for gemm_splitk_swap (which imports them from it)
SWAP_HELPERS = ("_threads", "b_layout", "splitk_sum")


def swap_policy(M: int, N: int, K: int) -> dict | None:
    """`gemm_hopper.launch`'s policy for an f32-output (M, N, K) GEMM where it is swap-AB (gemm_splitk_swap: C^T =
    B^T A^T for few rows of A, split-K into slots summed by splitk_sum, or unsplit), else None. The lowering
    takes the form launch measured (benchmarks/NOTES.md, G8 / G10) instead of gemm_hopper's 64-row tiles."""
    import tilepy as tp
    from stdlib_kernels import gemm_hopper

    p = gemm_hopper.policy(M, N, K, tp.f32, fixup=True)
    return p if p.get("SWAP_AB") else None


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
    epilogue: object = None     # a fused Pointwise kernel spec (fuse_epilogues), written instead of `out`
    ksplit: int = 1             # split-K: out holds (BATCH, KSPLIT, M, N) partial products
    passes: int = 3             # 3: 3xTF32 (fp32-accurate); 1: one TF32 product (--precision tf32)
    tile: tuple = ()            # gemm_fp32.launch_policy's narrower tile, (name, value) pairs: the kernel's defaults
    swap: tuple = ()            # swap-AB (gemm_fp32.swap_params' (name, value) pairs): out^T = B^T x^T, B read raw


def fp32_gemm_ok(target: str, M: int, N: int, K: int, batch: int) -> bool:
    return target == "sm_90a" and batch * M * N * K >= 64**3 and min(M, N) >= 16


def stdlib_source(name: str) -> str:
    """The kernel part of `stdlib_kernels/<name>.py`: helpers and kernels, without imports, docstring, PRESETS,
    the numpy `launch`/`reference` helpers and the __main__ block."""
    import stdlib_kernels

    path = Path(stdlib_kernels.__file__).parent / f"{name}.py"
    module = cst.parse_module(path.read_text())
    keep = []
    used = _names_used(module)
    for stmt in module.body:
        code = cst.Module([]).code_for_node(stmt).lstrip()
        if isinstance(stmt, cst.FunctionDef) and not stmt.decorators and stmt.name.value not in used:
            continue   # host helpers (numpy launch, reference, splits): the candidate's host program is its own
        if isinstance(stmt, cst.ClassDef) and stmt.name.value not in used:
            continue   # host-side classes (a launch plan cache with __slots__, which the candidate policy refuses)
        if isinstance(stmt, cst.If) and "__name__" in code:
            continue
        if code.startswith(("import ", "from ")) or _is_docstring(stmt):
            continue
        if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Assign) and not any(
                isinstance(t.target, cst.Name) and t.target.value in used for t in stmt.body[0].targets):
            continue   # host-side tables (PRESETS, policy tables, retyped variants) the kernels do not read
        keep.append(stmt)
    return module.with_changes(body=keep, header=[]).code.strip() + "\n"


class _Names(cst.CSTVisitor):
    def __init__(self):
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)


def _names_in(node) -> set[str]:
    v = _Names()
    node.visit(v)
    return v.names


def _names_used(module: cst.Module) -> set[str]:
    """The identifiers the kernels read (decorators, defaults, bodies), closed over the module-level helpers
    and tables they name. Identifiers, not text: a kernel's docstring that says "launch" keeps no host
    `launch` (it would shadow the candidate's own)."""
    defs = {}
    for st in module.body:
        if isinstance(st, cst.FunctionDef) and not st.decorators:
            defs[st.name.value] = st
        elif isinstance(st, cst.SimpleStatementLine) and isinstance(st.body[0], cst.Assign):
            for t in st.body[0].targets:
                if isinstance(t.target, cst.Name):
                    defs[t.target.value] = st
    used: set[str] = set()
    todo = [st for st in module.body if isinstance(st, cst.FunctionDef) and st.decorators]
    while todo:
        for name in _names_in(todo.pop()) - used:
            used.add(name)
            if name in defs:
                todo.append(defs[name])
    return used


def _is_docstring(stmt) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, cst.SimpleString))


@functools.lru_cache(maxsize=32)
def preset_source(name: str, target: str) -> str:
    """The stdlib kernel's source with the target's preset written in as the constexpr defaults."""
    import importlib

    module = importlib.import_module(f"stdlib_kernels.{name}")
    preset = getattr(module, "PRESETS", {}).get(target)
    return with_defaults(stdlib_source(name), preset or {})


def with_defaults(text: str, values: dict, kernel: str | None = None) -> str:
    """`text` (kernel source without imports) with `values` as the constexpr defaults of `kernel` (every kernel
    when None). The codemods find kernels by how the module spells tilepy, so the import goes in front while
    they run; a value equal to the default already is no change."""
    from ..codemods import NotApplicable, SetConstexprs

    if not values:
        return text
    header = "import tilepy as tp\n"
    try:
        out = SetConstexprs().apply(header + text, values={k: _py_source(v) for k, v in values.items()},
                                    kernel=kernel)
    except NotApplicable:
        return text
    assert out.startswith(header)
    return out[len(header):]


def _py_source(v) -> str:
    import tilepy as tp

    if isinstance(v, tp.Swizzle):
        return f"tp.Swizzle({v.bits}, {v.base}, {v.shift})"
    if hasattr(v, "family") and hasattr(v, "name"):
        return f"tp.{v.name}"
    return repr(v)


def gemm_params(t: MatmulTemplate) -> tuple[str, dict, tuple]:
    """(kernel name, constexprs, grid) of a matmul template: the stdlib module's `policy(M, N, K)` (shape class,
    split-K, persistent) where it has one, else its preset."""
    import importlib

    if t.kernel == SWAP:
        from stdlib_kernels import gemm_hopper

        p = {**swap_policy(t.M, t.N, t.K), **({"B_NK": 1} if t.b_layout == "nk" else {})}
        return t.kernel, gemm_hopper.kernel_params(p), tuple(gemm_hopper.grid_of(t.M, t.N, p))
    module = importlib.import_module(f"stdlib_kernels.{t.kernel}")
    policy = getattr(module, "policy", None)
    if policy is None:
        p = dict(getattr(module, "PRESETS", {}).get("sm_90a", {}))
        return t.kernel, p, (-(-t.M // p["BM"]), -(-t.N // p["BN"]))
    p = policy(t.M, t.N, t.K, _out_tp(t.epilogue.out.dtype) if getattr(t, "epilogue", None) is not None else None)
    kname = "gemm_persistent" if p.get("PERSISTENT") else t.kernel
    return kname, module.kernel_params(p), tuple(module.grid_of(t.M, t.N, p))


def _out_tp(dtype: torch.dtype):
    import tilepy as tp

    return {torch.float32: tp.f32, torch.bfloat16: tp.bf16}.get(dtype)


def hopper_plain(M: int, N: int, K: int, out: torch.dtype = torch.float32) -> bool:
    """Whether gemm_hopper's policy for this shape (and output dtype: f32 or bf16) runs the plain kernel, one
    block per output tile with no split-K, persistent grid or cluster: the form that reads B as (N, K) in
    place (B_NK) and stores through a fused epilogue."""
    from stdlib_kernels import gemm_hopper

    tp_out = _out_tp(out)
    if tp_out is None:
        return False
    p = gemm_hopper.policy(M, N, K, tp_out)
    return (p.get("SPLIT_K", 1) == 1 and not p.get("PERSISTENT") and not gemm_hopper.clustered(p)
            and gemm_hopper.shape_class(M, N, K) != "unaligned")


def hopper_nk(M: int, N: int, K: int, out: torch.dtype = torch.float32) -> bool:
    """Whether gemm_hopper's policy for this shape runs gemm_hopper itself (no persistent grid or cluster, rows TMA
    can describe), split-K or not: the kernel that reads B as (N, K) in place (B_NK). A split adds its partial
    tiles atomically into the zeroed f32 output, whatever B's layout."""
    from stdlib_kernels import gemm_hopper

    tp_out = _out_tp(out)
    if tp_out is None:
        return False
    p = gemm_hopper.policy(M, N, K, tp_out)
    return not p.get("PERSISTENT") and not gemm_hopper.clustered(p) and gemm_hopper.shape_class(M, N, K) != "unaligned"


def render_matmul(t: MatmulTemplate, n: int, target: str, buffers: dict) -> tuple[list, list]:
    """(kernel sources to add, host lines) of a matmul template. The plain form launches the module's kernel
    (render_template); a B read as (N, K) or a fused epilogue gets a kernel of its own, gemm_hopper renamed
    (B retyped to (N, K) and B_NK=1; the epilogue written at its '# EPILOGUE' stores), with the launch's
    constexprs as its defaults (the build gate compiles kernels at their defaults)."""
    if t.kernel == SWAP:
        return render_swap(t, n)
    if t.b_layout == "kn" and t.epilogue is None:
        return [], render_template(t, target)
    kname, params, grid = gemm_params(t)
    if kname != t.kernel or (params.get("SPLIT_K", 1) > 1 and t.epilogue is not None):
        raise AssertionError(f"{t.kernel}: a K-major B needs gemm_hopper itself and a fused epilogue its plain kernel, "
                             f"not {kname} {params}")
    if t.epilogue is not None:
        src, kname, extra = _fused_source(t, n, target, buffers)
    else:
        kname, extra = f"{t.kernel}_nk{n}", []
        src = _kernel_as(t.kernel, kname, target)
    bview = f"{t.b.name}.view({t.K}, {t.N})"
    if t.b_layout == "nk":
        src = _retyped(src, t.kernel, _B_NK)
        params = {**params, "B_NK": 1}
        bview = f"{t.b.name}.view({t.N}, {t.K})"
    src = with_defaults(src, params, kernel=kname)
    out = t.epilogue.out if t.epilogue is not None else t.out
    kw = "".join(f", {k}={_py_source(v)}" for k, v in params.items())
    line = (f"launch({kname}, {grid}, {t.a.name}.view({t.M}, {t.K}), {bview}, {out.name}.view({t.M}, {t.N})"
            + "".join(f", {a}" for a in extra) + f"{kw})")
    # split-K (a K-major B without an epilogue): the partial tiles are added into the zeroed f32 output
    return [src], ([f"{out.name}.zero_()"] if params.get("SPLIT_K", 1) > 1 else []) + [line]


def render_swap(t: MatmulTemplate, n: int) -> tuple[list, list]:
    """(kernel sources, host lines) of a swap-AB template: gemm_splitk_swap at `swap_policy`'s constexprs into
    FIXUP=3's slots (a per-call workspace every row of which the kernel writes) and splitk_sum adding them into
    the f32 output; unsplit, the kernel stores the output itself (the workspace and tickets unused). A B read as
    (N, K) (a Linear's weight, in place) gets the kernel of its own, B retyped, B_NK=1."""
    from stdlib_kernels import gemm_hopper

    kname, params, grid = gemm_params(t)
    srcs = []
    bview = f"{t.b.name}.view({t.K}, {t.N})"
    if t.b_layout == "nk":
        kname = f"{SWAP}_nk{n}"
        srcs.append(with_defaults(_retyped(_kernel_as(SWAP, kname, "sm_90a"), SWAP, _B_NK), params, kernel=kname))
        bview = f"{t.b.name}.view({t.N}, {t.K})"
    split = params["SPLIT_K"]
    full = {**swap_policy(t.M, t.N, t.K), "SPLIT_K": split}
    ws = gemm_hopper.workspace_shapes(t.M, t.N, full)[0] if split > 1 else (1, 1)
    kw = "".join(f", {k}={_py_source(v)}" for k, v in params.items())
    out = f"{t.out.name}.view({t.M}, {t.N})"
    lines = [f"ws{n}_slots = torch.empty({tuple(ws)}, dtype=torch.float32, device=dev)",
             f"ws{n}_tickets = torch.zeros(1, dtype=torch.int32, device=dev)",
             f"launch({kname}, {grid}, {t.a.name}.view({t.M}, {t.K}), {bview}, {out}, ws{n}_slots, ws{n}_tickets"
             f"{kw})"]
    if split > 1:
        lines.append(f"launch(splitk_sum, {(-(-t.M // 8), -(-t.N // 128))}, ws{n}_slots, {out}, SPLIT_K={split})")
    return srcs, lines


def swap_source(templates: list, target: str, with_helpers: bool) -> str:
    """gemm_splitk_swap's source for a candidate module (matmul_source: the first (K, N) launch's constexprs as its
    defaults), with what it imports from gemm_hopper (`SWAP_HELPERS`: the thread count, B's staged layout,
    splitk_sum) unless the module holds gemm_hopper's source already."""
    text = matmul_source(templates, target)
    if not with_helpers:
        return text
    hopper = cst.parse_module(preset_source("gemm_hopper", target))
    helpers = [cst.Module([]).code_for_node(st) for st in hopper.body
               if isinstance(st, cst.FunctionDef) and st.name.value in SWAP_HELPERS]
    if len(helpers) != len(SWAP_HELPERS):
        raise AssertionError(f"gemm_hopper's source lacks one of {SWAP_HELPERS}")
    return "\n\n".join(h.strip() + "\n" for h in helpers) + "\n\n" + text


def matmul_source(templates: list, target: str) -> str:
    """The stdlib GEMM module's kernels with the (first) launch's constexprs as their defaults: the agent's
    build gate compiles each kernel at its defaults, so it checks what runs. Templates with a kernel of their
    own (a B read as (N, K), a fused epilogue: render_matmul) carry their constexprs there; the module's
    kernels keep its preset when only those launch (a bf16-output policy's stages and staged epilogue laid on
    the f32 kernel would not fit its shared memory)."""
    if templates[0].kernel == SWAP:   # (swap_source adds gemm_hopper's helpers where the module lacks them)
        text = preset_source(SWAP, target)
        plain = [t for t in templates if t.b_layout == "kn"]
        return with_defaults(text, gemm_params(plain[0])[1], kernel=SWAP) if plain else text
    text = preset_source(templates[0].kernel, target)
    plain = [t for t in templates if t.b_layout == "kn" and t.epilogue is None]
    if not plain:
        return text
    kname, params, _ = gemm_params(plain[0])
    return with_defaults(text, params, kernel=kname)


def render_template(t: MatmulTemplate, target: str) -> list[str]:
    """Host lines of a matmul template: the GEMM at its policy's constexprs (a split-K launch adds its partial
    tiles into the zeroed f32 output)."""
    kname, params, grid = gemm_params(t)
    kw = "".join(f", {k}={_py_source(v)}" for k, v in params.items())
    lines = [f"{t.out.name}.zero_()"] if params.get("SPLIT_K", 1) > 1 else []
    lines.append(f"launch({kname}, {grid}, {t.a.name}.view({t.M}, {t.K}), {t.b.name}.view({t.K}, {t.N}), "
                 f"{t.out.name}.view({t.M}, {t.N}){kw})")
    return lines


def fp32_gemm_raw(t: Fp32GemmTemplate) -> bool:
    """Whether the GEMM reads A as it is and splits it in registers (stdlib gemm_fp32 A_RAW: no split pass over
    A, whose output was twice A's bytes written and read back): A's rows must be 16-byte multiples for TMA."""
    from stdlib_kernels import gemm_fp32

    return gemm_fp32.raw_ok(t.K)


def fp32_tile(t: Fp32GemmTemplate) -> dict:
    """The narrower tile a gemm_fp32 template runs: launch_policy's (`t.tile`), except where a fused epilogue's
    loads, register tiles BN columns wide, would need a width that is not a power of two (96): the preset's 128
    columns there (launch_policy takes 96 only where it does not split K, so nothing else changes)."""
    tile = dict(t.tile)
    bn = tile.get("BN", 128)
    return {} if t.epilogue is not None and bn & (bn - 1) else tile


def fp32_kernel_name(raw: bool, tile: dict) -> str:
    """The name of gemm_fp32 with A_RAW (`raw`) and a narrower tile (`tile`, launch_policy's) as its defaults:
    gemm_fp32_raw, gemm_fp32_raw_bn96_tma, gemm_fp32_bm64_bn64_consumers1_tma, ..."""
    tags = [f"{k.lower()}{v}" for k, v in sorted(tile.items()) if k not in ("INSTR", "TMA_ONLY")]
    tags += ["tma"] if tile.get("TMA_ONLY") else []
    return "_".join(["gemm_fp32"] + (["raw"] if raw else []) + tags)


def fp32_swap_source(t: Fp32GemmTemplate, kname: str, target: str) -> str:
    """gemm_fp32 as the swap-AB kernel `kname` (gemm_fp32_ct for an "nk" weight, gemm_fp32_kt for "kn": their
    retyped parameters written into the signature) with the template's swap constexprs as its defaults."""
    retype = {'C: tp.Tensor[tp.f32, "BC", "M", "N"]': 'C: tp.Tensor[tp.f32, "BC", "N", "M"]'}
    if t.b_layout == "kn":
        for x in ("AH", "AL"):
            retype[f'{x}: tp.Tensor[tp.f32, "BA", "M", "K"]'] = f'{x}: tp.Tensor[tp.f32, "BA", "KA", "M"]'
    src = _retyped(_kernel_as("gemm_fp32", kname, target), "gemm_fp32", retype)
    return with_defaults(src, dict(t.swap), kernel=kname)


def render_fp32_swap(t: Fp32GemmTemplate, n: int, kname: str) -> list[str]:
    """Host lines of a swap-AB fp32 GEMM: x's few rows split into TF32 halves by one pass (K padded to 4), then
    out^T = W x^T with the weight read as it is (copied only where its base is not 16-byte aligned: TMA)."""
    kp = -(-t.K // 4) * 4
    xh, xl = f"ws{n}_xh", f"ws{n}_xl"
    ks = dict(t.swap).get("KSPLIT", 1)
    w, shape = f"ws{n}_w", (1, t.N, t.K) if t.b_layout == "nk" else (1, t.K, t.N)
    return [f"{w} = aligned16({t.b.name}).view{shape}",
            f"{xh} = torch.empty((1, {t.M}, {kp}), dtype=torch.float32, device=dev)",
            f"{xl} = torch.empty((1, {t.M}, {kp}), dtype=torch.float32, device=dev)",
            f"launch(split_tf32, ({-(-t.M // 16)}, {-(-kp // 128)}), {t.a.name}.view({t.M}, {t.K}), "
            f"{xh}.view({t.M}, {kp}), {xl}.view({t.M}, {kp}))",
            f"launch({kname}, lambda m: (tp.cdiv({t.N}, m['BM']) * tp.cdiv({t.M}, m['BN']), 1, {ks}), "
            f"{w}, {w}, {xh}, {xl}, {t.out.name}.view({ks}, {t.M}, {t.N}))"]


def render_fp32_gemm(t: Fp32GemmTemplate, n: int) -> list[str]:
    """Host lines: split B (and A, unless the GEMM splits it in registers: fp32_gemm_raw) into TF32 halves (K
    padded to 4), then the GEMM over (M, N, BATCH); the raw form's kernel is `gemm_fp32_raw` (RAW defaults).
    A B that is a model's parameter or buffer is split once per state of it (`runtime.weight_split`)."""
    kp = -(-t.K // 4) * 4
    a_rows = t.batch * t.M
    ah, al, bh, bl = (f"ws{n}_{x}" for x in ("ah", "al", "bh", "bl"))
    nb = t.b_batch
    if fp32_gemm_raw(t):    # kp == K: A is read in place, as both halves' argument (AL is not read)
        ah = al = f"{t.a.name}.view({t.batch}, {t.M}, {t.K})"
        lines = []
    else:
        lines = [f"{ah} = torch.empty(({t.batch}, {t.M}, {kp}), dtype=torch.float32, device=dev)",
                 f"{al} = torch.empty(({t.batch}, {t.M}, {kp}), dtype=torch.float32, device=dev)",
                 f"launch(split_tf32, ({-(-a_rows // 16)}, {-(-kp // 128)}), {t.a.name}.view({a_rows}, {t.K}), "
                 f"{ah}.view({a_rows}, {kp}), {al}.view({a_rows}, {kp}))"]
    if t.b.kind in ("param", "buffer"):   # a model's weight: split once per state of it (runtime.weight_split)
        if t.b_layout == "nk":
            lines.append(f"{bh}, {bl} = weight_split(split_tf32, ({-(-nb * t.N // 16)}, {-(-kp // 128)}), "
                         f"{t.b.name}, ({nb * t.N}, {t.K}), ({nb}, {t.N}, {kp}), ({nb * t.N}, {kp}))")
        else:
            lines.append(f"{bh}, {bl} = weight_split(split_tf32_t, ({-(-kp // 32)}, {-(-t.N // 32)}, {nb}), "
                         f"{t.b.name}, ({nb}, {t.K}, {t.N}), ({nb}, {t.N}, {kp}), ({nb}, {t.N}, {kp}))")
    else:
        lines += [f"{bh} = torch.empty(({nb}, {t.N}, {kp}), dtype=torch.float32, device=dev)",
                  f"{bl} = torch.empty(({nb}, {t.N}, {kp}), dtype=torch.float32, device=dev)"]
        if t.b_layout == "nk":
            lines.append(f"launch(split_tf32, ({-(-nb * t.N // 16)}, {-(-kp // 128)}), {t.b.name}.view("
                         f"{nb * t.N}, {t.K}), {bh}.view({nb * t.N}, {kp}), {bl}.view({nb * t.N}, {kp}))")
        else:
            lines.append(f"launch(split_tf32_t, ({-(-kp // 32)}, {-(-t.N // 32)}, {nb}), {t.b.name}.view({nb}, "
                         f"{t.K}, {t.N}), {bh}, {bl})")
    zc = t.batch * t.ksplit
    grid = f"lambda m: (tp.cdiv({t.M}, m['BM']), tp.cdiv({t.N}, m['BN']), {zc})"
    ks = (f", KSPLIT={t.ksplit}" if t.ksplit > 1 else "") + (f", PASSES={t.passes}" if t.passes != 3 else "")
    kname = "gemm_fp32_raw" if fp32_gemm_raw(t) else "gemm_fp32"
    lines.append(f"launch({kname}, {grid}, {ah}, {al}, {bh}, {bl}, {t.out.name}.view({zc}, {t.M}, {t.N}){ks})")
    return lines


@dataclass
class ConvTemplate:
    """out (N, Cout, *spatial) f32 = a convolution of x (N, Cin, *spatial) on the tensor cores (stdlib
    conv_igemm: an implicit GEMM whose producer gathers the im2col tiles; no im2col buffer).

    w is the GEMM's B operand as a buffer of (G, Cout/G, Cin/G * kernel volume) row-major: the weight itself
    for a direct convolution, a permuted copy for a transposed one. `split`: 3xTF32 (fp32-accurate) or one
    TF32 pass (PyTorch's cuDNN default for fp32 convolutions)."""

    out: Buffer
    x: Buffer
    w: Buffer
    groups: int
    cog: int
    K: int
    geometry: dict
    split: bool
    what: str = ""
    kernel: str = "conv_igemm"
    epilogue: object = None     # a fused Pointwise kernel spec (fuse_epilogues), written instead of `out`
    w_phase: int = -1           # >= 0: B is w[w_phase] of a (phases, G, Cout/G, K) weight shared by the phases
    xcopy: object = None        # conv_tma: a render_conv_copy.NdhwcCopy (x computed in the channels-last copy)
    xreads: tuple = ()          # the buffers that copy reads (x is then a placeholder, never allocated)


def conv_igemm_ok(target: str, dtype: torch.dtype, npix: int, cig: int, cog: int, kvol: int, groups: int,
                  x_numel: int, y_numel: int) -> bool:
    """Whether a convolution takes the implicit-GEMM kernel: fp32 on sm_90a, enough work for the tensor cores,
    not depthwise (one input and one output channel per group is a stencil: the reduction serves it better),
    and 32-bit indices."""
    return (target == "sm_90a" and dtype == torch.float32 and groups * npix * cog * cig * kvol >= 32**3
            and cig * cog >= 16 and max(x_numel, y_numel) < 2**31)


# ---------------------------------------------------------------------------------------------- epilogues
# The output element each accumulator element becomes, as coordinates of a row-major shape whose flat index is
# the fused Pointwise kernel's `i`: (name, size, text in the stdlib kernel's own names) per coordinate, and the
# parameter the store writes. The epilogue's index expressions are rewritten over these coordinates and
# simplified (a per-channel read (i // OV) % C becomes the channel itself), then written out at each use, never
# assigned: an index tile of aranges and scalars is recomputed in the layout of each access (the
# accumulator's), while a named one would be converted there, with barriers the consumer role cannot run.
_ROWS = "(m0 + tp.arange(BM)[:, None])"
_COLS = "(n0 + tp.arange(BN)[None, :])"
_ANCHOR = "0 * (tp.arange(BM)[:, None] + tp.arange(BN)[None, :])"   # gives a read the accumulator's shape
# conv_tma's staged epilogue (STAGED=1): the tile is (channel, pixel), laid out LE, its value `v`
# (EC channels from n0 + e0 at a time; the tile is pixels q0 .. q0 + BM of image nq)
_STAGED = dict(image="nq", pixels="(q0 + tp.arange(BM)[None, :])", cols="(n0 + e0 + tp.arange(EC)[:, None])",
               anchor="0 * (tp.arange(EC)[:, None] + tp.arange(BM)[None, :])", layout="LE", acc="v",
               marker="  # EPILOGUE STAGED")
_PLAIN = dict(rows=_ROWS, cols=_COLS, anchor=_ANCHOR, layout="LC", acc="acc", marker="  # EPILOGUE")


def _frame(t) -> dict:
    """The epilogue's tile: its row and column coordinates, the anchor that gives a read its shape, the layout,
    the accumulator's name and the marker of the store it replaces."""
    if isinstance(t, ConvTemplate) and t.kernel == "conv_tma" and conv_params(t).get("STAGED"):
        return _STAGED
    return _PLAIN


def _epilogue_coords(t) -> tuple[str, list]:
    if isinstance(t, ConvTemplate):
        fr = _frame(t)
        n, co = t.x.shape[0], t.groups * t.cog
        ov = t.out.numel // (n * co)
        if fr is _STAGED:
            return "Y", [("_eq_n", n, fr["image"]), ("_eq_c", co, f"(g * cog + {fr['cols']})"),
                         ("_eq_p", ov, fr["pixels"])]
        rows, cols = fr["rows"], fr["cols"]
        pix = f"({rows} % OVOL)"
        if t.geometry.get("PHASED"):    # row p is pixel j of phase a's grid: output pixel a + S j
            jd, jh, jw = (f"({rows} % PVOL // (PS1 * PS2))", f"({rows} % (PS1 * PS2) // PS2)",
                          f"({rows} % PS2)")
            pix = f"((({jd} * ST[0] + a0) * OS[1] + {jh} * ST[1] + a1) * OS[2] + {jw} * ST[2] + a2)"
        return "Y", [("_eq_n", n, f"({rows} // PVOL)"), ("_eq_c", co, f"(g * cog + {cols})"),
                     ("_eq_p", ov, pix)]
    if isinstance(t, MatmulTemplate):
        return "C", [("_eq_m", t.M, _ROWS), ("_eq_n", t.N, _COLS)]
    return "C", [("_eq_z", t.batch, "z"), ("_eq_m", t.M, _ROWS), ("_eq_n", t.N, _COLS)]


def _reads(k) -> set:
    from .core import Pointwise, Reduction
    from .values import walk

    if isinstance(k, (Pointwise, Reduction)) or hasattr(k, "value"):
        names = {v.args[0] for v in walk([k.value]) if v.op in ("load", "gather")}
        for st in getattr(k, "stages", ()) or ():
            names |= {v.args[0] for v in walk([st.value]) if v.op in ("load", "gather")}
        return names
    names = {b.name for b in vars(k).values() if isinstance(b, Buffer) and b is not getattr(k, "out", None)}
    epi = getattr(k, "epilogue", None)
    return names | (_reads(epi) - {k.out.name} if epi is not None else set())


def _writes(k) -> set:
    out = {k.out.name} if isinstance(getattr(k, "out", None), Buffer) else set()
    for st in getattr(k, "stages", ()) or ():
        out.add(st.out.name)
    epi = getattr(k, "epilogue", None)
    return out | ({epi.out.name} if epi is not None else set())


def fuse_epilogues(kernels: list, buffers: list, outputs: list) -> tuple[list, list]:
    """Pointwise kernels that read a GEMM or convolution template's result element for element (and nothing
    else of it) run in that template's epilogue: the result never goes to memory, the Pointwise kernel's
    output is stored from the accumulator. (kernels, buffers) with the fused ones removed."""
    from .core import Pointwise
    from .index import Var
    from .values import walk

    kernels = list(kernels)
    out_names = {b.name for b in outputs}
    dropped = set()
    for t in [k for k in kernels if isinstance(k, (Fp32GemmTemplate, ConvTemplate, MatmulTemplate))
              and k.epilogue is None and getattr(k, "ksplit", 1) == 1 and not getattr(k, "swap", ())]:
        name = t.out.name
        if name in out_names:
            continue
        readers = [k for k in kernels if name in _reads(k)]
        if len(readers) != 1 or not isinstance(readers[0], Pointwise):
            continue
        p = readers[0]
        if p.out.numel != t.out.numel or p.out.numel >= 2**31:
            continue
        if isinstance(t, MatmulTemplate) and not (t.kernel == "gemm_hopper"
                                                  and hopper_plain(t.M, t.N, t.K, p.out.dtype)
                                                  and _loads_only_in_addend(p.value, name)):
            continue    # (gemm_hopper's epilogue stores f32 or bf16 from the plain kernel only)
        nodes = walk([p.value])
        if any(v.op == "gather" or (v.op == "index" and v.vars) for v in nodes):
            continue
        if any(v.op == "load" and v.args[0] == name and not (v.args[1] == Var("i", p.out.numel) and not v.args[2])
               for v in nodes):
            continue
        # the Pointwise kernel moves up to the template: what it reads must be ready there
        ti, pi = kernels.index(t), kernels.index(p)
        later = set().union(*[_writes(k) for k in kernels[ti + 1:pi]]) if pi > ti + 1 else set()
        if _reads(p) & later or p.out.name in set().union(*[_reads(k) for k in kernels[ti + 1:pi]] or [set()]):
            continue
        kernels[ti] = dataclasses.replace(t, epilogue=p)   # the program's own specs stay as they are
        kernels.remove(p)
        dropped.add(name)
    return kernels, [b for b in buffers if b.name not in dropped]


def _epilogue(t, buffers: dict, init_ok: bool = False) -> tuple[list, str, list, list]:
    """(body lines, the value to store, extra kernel parameters, accumulator initialization lines) of a
    template's fused epilogue; with `init_ok`, an addend of the accumulator is its initial value instead."""
    from . import values as vals
    from .emit import _Emitter, _tp, _upcast
    from .index import IExpr, Var, flatten, substitute
    from .values import V, walk

    _, coords = _epilogue_coords(t)
    flat = flatten([Var(nm, size) for nm, size, _ in coords], [size for _, size, _ in coords])
    texts = {nm: text for nm, _, text in coords}
    memo: dict = {}

    def over_coords(x):    # the Pointwise value with i = flat(coordinates)
        if isinstance(x, IExpr):
            return substitute(x, {"i": flat})
        if isinstance(x, tuple):
            return tuple(over_coords(a) for a in x)
        if not isinstance(x, V):
            return x
        got = memo.get(id(x))
        if got is None:
            got = memo[id(x)] = vals.make(x.op, tuple(over_coords(a) for a in x.args), x.dtype)
        return got

    value = over_coords(t.epilogue.value)
    fr = _frame(t)

    class _Epi(_Emitter):
        def index(self, e):
            return texts[e.name] if isinstance(e, Var) and e.name in texts else super().index(e)

        def _load(self, v):
            buf, idx, conds = v.args
            mask = self.conds(conds)
            self.use(buf)
            itext = f"({self.index(idx)} + {fr['anchor']})"
            text = (f"tp.load({self.names[buf]}[{itext}]" + (f", mask={mask}" if mask else "")
                    + f", layout={fr['layout']})")
            return _upcast(text, v, self.buf_dtype(buf))

    used = sorted({v.args[0] for v in walk([value]) if v.op == "load"} - {t.out.name})
    names = {b: f"E_{b}" for b in used}
    em = _Epi(names, "i32", {})
    em.anchor = fr["anchor"]
    em.buffer_dtypes = {b: buffers[b].dtype for b in buffers}
    for v in walk([value]):
        if v.op == "load" and v.args[0] == t.out.name:
            em.done[v] = fr["acc"]
    init = []
    split = _addend(value, t.out.name) if init_ok else None
    if split is not None:     # acc + y: y (a bias) is the accumulator's initial value, loaded before the loop
        add_node, y = split
        init = em.lines + [f"acc = {em.value(y)}"]
        em.lines = []
        em.done[add_node] = "acc"
    val = em.value(value)
    params = [f"{names[b]}: tp.Tensor[{_tp(buffers[b].dtype)}, {max(1, buffers[b].numel)}]"
              for b, _ in em.params]
    return em.lines, val, params + [b for b, _ in em.params], init


def _loads_only_in_addend(value, acc_name: str) -> bool:
    """Whether everything a gemm_hopper epilogue reads besides the accumulator is in its addend (the
    accumulator's initial value): another loaded tile beside a 128 x 256 accumulator at the store spills
    (the agent's build gate refuses spills), so such an epilogue stays in the kernel that reads the result."""
    from .values import walk

    reads = [v for v in walk([value]) if v.op in ("load", "gather") and v.args[0] != acc_name]
    if not reads:
        return True
    if not GEMM_ADDEND_INIT:
        return False
    split = _addend(value, acc_name)
    if split is None:
        return False
    inside = {id(v) for v in walk([split[1]])}
    return all(id(v) in inside for v in reads)


def _addend(value, acc_name: str):
    """(the node acc + y, y) where the epilogue's only use of the accumulator is one f32 addition of a value y
    that does not read it (a Linear's bias, a residual): then y can be the accumulator's initial value, and the
    store's epilogue holds no loaded tile beside the accumulator (a 128 x 256 bf16 GEMM's bias tile in the
    accumulator's layout spilled 1160 bytes at its store). Else None."""
    from .values import V, walk

    def is_acc(v):
        return isinstance(v, V) and v.op == "load" and v.args[0] == acc_name

    def reads_acc(v):
        return any(is_acc(x) for x in walk([v]))
    users = [v for v in walk([value]) if any(is_acc(a) for a in v.args)]
    if len(users) != 1 or users[0].op != "add" or users[0].dtype != torch.float32:
        return None
    node = users[0]
    a, b = node.args
    y = b if is_acc(a) else a
    if reads_acc(y) or y.dtype != torch.float32 or not any(x.op in ("load", "gather") for x in walk([y])):
        return None
    return node, y


def _fused_source(t, n: int, target: str, buffers: dict) -> tuple[str, str, list]:
    """(kernel source, kernel name, extra launch arguments) of the template's kernel with its epilogue."""
    import re

    from .emit import _tp

    src = _kernel_only(preset_source(t.kernel, target), t.kernel)
    zero = "acc = tp.zeros((BM, BN), tp.f32, layout=LC)"
    lines, val, extra, init = _epilogue(t, buffers, init_ok=GEMM_ADDEND_INIT and isinstance(t, MatmulTemplate)
                                          and src.count(zero) == 1)
    params, args = extra[:len(extra) // 2], extra[len(extra) // 2:]
    out_param = _epilogue_coords(t)[0]
    fr = _frame(t)
    kname = f"{t.kernel}_e{n}"
    src = src.replace(f"def {t.kernel}(", f"def {kname}(", 1)
    # the output parameter takes the fused kernel's output dtype; the extra tensors follow it
    pat = re.compile(rf"({out_param}: tp\.Tensor\[)tp\.f32(, [^\]]*\])")
    src, k = pat.subn(lambda m: f"{m.group(1)}{_tp(t.epilogue.out.dtype)}{m.group(2)}"
                      + "".join(f", {q}" for q in params), src, count=1)
    if k != 1:
        raise AssertionError(f"{t.kernel}: output parameter {out_param} not found")
    out = []
    for line in src.splitlines():
        if init and line.strip() == zero:     # the accumulator starts from the epilogue's addend
            pad = line[:len(line) - len(line.lstrip())]
            out += [pad + q for q in init]
            continue
        mark = fr["marker"]
        if (mark in line and not line.lstrip().startswith("#")       # a store marked (not a comment)
                and (mark == _STAGED["marker"] or _STAGED["marker"] not in line)):
            pad = line[:len(line) - len(line.lstrip())]
            out += [pad + q for q in lines]
            line = line.split(mark)[0].rstrip().replace(f", {fr['acc']}", f", {val}", 1)
        out.append(line)
    return "\n".join(out) + "\n", kname, args


def _kernel_only(src: str, name: str) -> str:
    """The decorated function `name` of a module's source (decorators included)."""
    module = cst.parse_module(src)
    for st in module.body:
        if isinstance(st, cst.FunctionDef) and st.name.value == name:
            return cst.Module([]).code_for_node(st)
    raise AssertionError(f"no kernel {name}")


def _kernel_as(name: str, kname: str, target: str) -> str:
    """The stdlib kernel `name` (its module's, the target's preset as defaults) as a kernel of its own, `kname`."""
    return _kernel_only(preset_source(name, target), name).replace(f"def {name}(", f"def {kname}(", 1)


_B_NK = {'B: tp.Tensor[tp.bf16, "K", "N"]': 'B: tp.Tensor[tp.bf16, "N", "K"]'}   # B read as (N, K): B_NK=1


def _retyped(src: str, who: str, changes: dict) -> str:
    """`src` with each parameter annotation `old` of `changes` written as its `new` (each must stand once)."""
    for old, new in changes.items():
        if src.count(old) != 1:
            raise AssertionError(f"{who}: parameter {old!r} not found once")
        src = src.replace(old, new)
    return src


def render_gemm_template(t, n: int, target: str, buffers: dict, done: set, wprep: tuple | None = None
                         ) -> tuple[list, list]:
    """(kernel sources to add, host lines) for an Fp32GemmTemplate or a ConvTemplate, fused epilogue or not
    (`wprep`: render_conv's)."""
    srcs = []
    if "gemm_fp32" not in done:         # split_tf32 serves both
        srcs.append(preset_source("gemm_fp32", target))
        done.add("gemm_fp32")
    if isinstance(t, Fp32GemmTemplate) and t.swap:     # (never fused: fuse_epilogues leaves swap-AB alone)
        kname = f"gemm_fp32_s{n}"
        return srcs + [fp32_swap_source(t, kname, target)], render_fp32_swap(t, n, kname)
    if isinstance(t, ConvTemplate) and t.kernel not in done:
        # the launch's constexprs as the defaults (the build gate compiles kernels at their defaults)
        src = with_defaults(preset_source(t.kernel, target), conv_params(t), kernel=t.kernel)
        if t.kernel == "conv_tma":      # and the channels-last copy's
            from stdlib_kernels import conv_tma

            cname, cx, _ = conv_tma.copy_call(t.geometry, t.split)
            src = with_defaults(src, cx, kernel=cname)
        srcs.append(src)
        done.add(t.kernel)
    kname, extra = t.kernel, []
    raw = isinstance(t, Fp32GemmTemplate) and fp32_gemm_raw(t)
    # gemm_fp32's A_RAW (RAW's constexprs) and launch_policy's narrower tile as the kernel's defaults: the build
    # gate compiles each kernel at its defaults, so it checks what runs
    own = {}
    if raw:
        from stdlib_kernels.gemm_fp32 import RAW

        own.update(RAW)
    if isinstance(t, Fp32GemmTemplate):
        own.update(fp32_tile(t))
    if own and t.epilogue is None:
        kname = fp32_kernel_name(raw, fp32_tile(t))
        if kname not in done:
            srcs.append(with_defaults(_kernel_as(t.kernel, kname, target), own, kernel=kname))
            done.add(kname)
    if t.epilogue is not None:
        src, kname, extra = _fused_source(t, n, target, buffers)
        if isinstance(t, ConvTemplate):
            src = with_defaults(src, conv_params(t), kernel=kname)
        src = with_defaults(src, own, kernel=kname)
        srcs.append(src)
    out = t.epilogue.out if t.epilogue is not None else t.out
    xcopy = None
    if isinstance(t, ConvTemplate) and t.xcopy is not None:    # the input computed in its channels-last copy
        from .render_conv_copy import render_ndhwc_copy

        csrc, cargs = render_ndhwc_copy(t.xcopy, f"k{n}_ndhwc", buffers)
        srcs.append(csrc)
        xcopy = (f"k{n}_ndhwc", cargs)
    if isinstance(t, Fp32GemmTemplate):
        lines = render_fp32_gemm(t, n)
        last = lines[-1]
        view = f"{t.out.name}.view({t.batch * t.ksplit}, {t.M}, {t.N})"
        assert view in last
        last = last.replace("launch(gemm_fp32_raw,", "launch(gemm_fp32,")
        lines[-1] = (last.replace("launch(gemm_fp32,", f"launch({kname},")
                     .replace(view, f"{out.name}.view({t.batch * t.ksplit}, {t.M}, {t.N})"
                              + "".join(f", {a}" for a in extra)))
        return srcs, lines
    return srcs, render_conv(t, n, kname, out, extra, done, xcopy, wprep)


def conv_params(t: ConvTemplate) -> dict:
    """The constexprs a convolution template launches conv_igemm with: its preset, the tile policy, the
    geometry and the precision's pass."""
    from stdlib_kernels import conv_igemm, conv_tma

    if t.kernel == "conv_tma":
        return conv_tma.kernel_params(t.geometry, t.cog, t.split)
    return {**conv_igemm.PRESETS["sm_90a"], **conv_igemm.policy(t.geometry, t.cog, t.split), **t.geometry,
            "SPLIT": t.split}


def conv_weight_preps(kernels: list, buffers: dict, outputs: set) -> dict:
    """{B buffer: the parameter it is made of} for conv_tma's reordered weights that can be made once per state of
    the parameter: B a temp written by one Pointwise kernel that reads one parameter or buffer alone, and read by
    nothing but conv_tma templates (as their B). The host program then runs that kernel as the `prep` of
    `runtime.weight_split` (keyed on the parameter), not on every call."""
    from .core import Pointwise

    preps = {}
    for t in kernels:
        if not (isinstance(t, ConvTemplate) and t.kernel == "conv_tma" and t.w_phase < 0 and t.w.kind == "temp"
                and t.w.name not in outputs and t.w.name not in preps):
            continue
        name = t.w.name
        made = [k for k in kernels if getattr(k, "out", None) is not None and k.out.name == name]
        if len(made) != 1 or not isinstance(made[0], Pointwise):
            continue
        src = _reads(made[0])
        if len(src) != 1 or getattr(buffers.get(next(iter(src))), "kind", None) not in ("param", "buffer"):
            continue
        readers = [k for k in kernels if name in _reads(k)]
        if all(isinstance(k, ConvTemplate) and k.kernel == "conv_tma" and k.w_phase < 0 and k.w.name == name
               for k in readers):
            preps[name] = next(iter(src))
    return preps


def render_conv(t: ConvTemplate, n: int, kname: str, out: Buffer, extra: list, done: set | None = None,
                xcopy: tuple | None = None, wprep: tuple | None = None) -> list:
    """Host lines: the weight's TF32 halves (K padded to 4), then the implicit GEMM over (pixels, channels, G). A
    weight that is a model's parameter or buffer (a direct convolution's) is split once per state of it
    (`runtime.weight_split`); so is conv_tma's reordered copy of one (`wprep` = (the parameter, the host line that
    reorders it): weight_split's key and prep, conv_weight_preps); a transposed convolution's permuted copy is
    computed every call, so split with it."""
    from stdlib_kernels import conv_igemm

    g, cog, K = t.groups, t.cog, t.K
    kp = -(-K // 4) * 4
    wh, wl = f"ws{n}_wh", f"ws{n}_wl"
    g = conv_igemm.phases(t.geometry) * t.groups   # B's rows: a PHASED weight holds one per phase and group
    # a weight shared by the phases of a transposed convolution (w_phase >= 0): split once, each phase its slice
    nw = t.w.numel // (g * cog * K) if t.w_phase >= 0 else 1
    key = f"wtf32:{t.w.name}="
    made = [d for d in (done if done is not None else ()) if d.startswith(key)] if t.w_phase >= 0 else []
    rows = nw * g * cog
    lines = []
    if made:
        wh, wl = made[0][len(key):].split(",")
    elif t.w.kind in ("param", "buffer") or wprep is not None:   # split once per state of the weight
        prep = "" if wprep is None else \
            f", key={wprep[0]}, prep=lambda: {wprep[1]}, tag={wprep[1].split('(')[1].split(',')[0]!r}"
        lines.append(f"{wh}, {wl} = weight_split(split_tf32, ({-(-rows // 16)}, {-(-kp // 128)}), {t.w.name}, "
                     f"({rows}, {K}), ({nw * g}, {cog}, {kp}), ({rows}, {kp}){prep})")
        if t.w_phase >= 0 and done is not None:
            done.add(f"{key}{wh},{wl}")
    else:
        lines.append(f"{wh} = torch.empty(({nw * g}, {cog}, {kp}), dtype=torch.float32, device=dev)")
        lines.append(f"{wl} = torch.empty(({nw * g}, {cog}, {kp}), dtype=torch.float32, device=dev)")
        lines.append(f"launch(split_tf32, ({-(-rows // 16)}, {-(-kp // 128)}), {t.w.name}.view({rows}, {K}), "
                     f"{wh}.view({rows}, {kp}), {wl}.view({rows}, {kp}))")
        if t.w_phase >= 0 and done is not None:
            done.add(f"{key}{wh},{wl}")
    if t.w_phase >= 0:
        wh, wl = (f"{v}[{t.w_phase * g}:{(t.w_phase + 1) * g}]" for v in (wh, wl))
    params = conv_params(t)
    ov = t.geometry["OS"][0] * t.geometry["OS"][1] * t.geometry["OS"][2]
    xarg = t.x.name
    if t.kernel == "conv_tma":      # the input channels-last, zero-padded, TF32 (+ tail): A's boxes read it
        from stdlib_kernels import conv_tma

        geo, nb = t.geometry, t.x.shape[0]
        xs = (nb,) + tuple(geo["XQ"]) + (geo["CP"],)
        x5 = (nb, t.x.shape[1]) + tuple(geo["XV"])
        xh, xl = f"ws{n}_xh", (f"ws{n}_xl" if t.split else f"ws{n}_xh")
        # one copy per (input, layout): a transposed convolution's phases read the same one
        key = f"ndhwc:{t.x.name}:{geo['PA']}:{geo['XS']}:{geo['XQ']}:{geo['CP']}:{t.split}="
        made = [d for d in (done if done is not None else ()) if d.startswith(key)]
        if xcopy is not None:     # the generated copy (the input computed in it): its own, never shared
            lines.append(f"{xh} = torch.empty({xs}, dtype=torch.float32, device=dev)")
            if t.split:
                lines.append(f"{xl} = torch.empty({xs}, dtype=torch.float32, device=dev)")
            view = (nb,) + tuple(geo["XS"]) + (geo["CP"],)
            lines.append(f"launch({xcopy[0]}, {conv_tma.copy_grid(nb, geo)}, "
                         + "".join(f"{a}, " for a in xcopy[1])
                         + f"{xh}.view({view}), {xl}.view({view}), SPLIT={bool(t.split)})")
        elif made:
            xh, xl = made[0][len(key):].split(",")
        else:
            lines.append(f"{xh} = torch.empty({xs}, dtype=torch.float32, device=dev)")
            if t.split:
                lines.append(f"{xl} = torch.empty({xs}, dtype=torch.float32, device=dev)")
            cname, cx, view = conv_tma.copy_call(geo, t.split)
            view = view if view == (-1,) else (nb,) + view
            kw = "".join(f", {k}={_py_source(v)}" for k, v in cx.items())
            lines.append(f"launch({cname}, {conv_tma.copy_grid(nb, geo)}, {t.x.name}.view({x5}), "
                         f"{xh}.view({view}), {xl}.view({view}){kw})")
            if done is not None:
                done.add(f"{key}{xh},{xl}")
        xarg = f"{xh}, {xl}"
        grid = conv_tma.grid(nb, params, cog, t.groups)
    else:
        grid = conv_igemm.grid(t.x.shape[0], params, cog, t.groups)
    kw = ", ".join(f"{k}={_py_source(v)}" for k, v in params.items())
    lines.append(f"launch({kname}, {grid}, {xarg}, {wh}, {wl if t.split else wh}, "
                 f"{out.name}.view({t.x.shape[0]}, {t.groups}, {cog}, {ov})" + "".join(f", {a}" for a in extra)
                 + f", {kw})")
    return lines
