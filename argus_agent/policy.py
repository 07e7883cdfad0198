"""What a candidate module may say, checked on its source in the parent before anything of it runs.

A candidate is tilepy kernels plus a host `argus_forward(model, *inputs)` that allocates, reshapes, casts and
launches. Everything a candidate could use to change how it is judged lies outside that: reaching torch's
internals (`torch._C.DisableTorchFunction`, `torch.ops`, `torch.library`), foreign code (`ctypes`, cuBLAS,
`subprocess`), other streams and threads (work the timer does not see), the file system (the reference's
outputs), and rebinding anything that lives in another module (`torch.allclose = ...`). The rules below keep a
candidate to the small language it needs:

- imports only from `ALLOWED_IMPORTS` (tilepy, torch, the launch helper, the stdlib kernels, math...);
- `torch.X` only for X in `TORCH_ATTRS` (allocation, views, casts, dtypes), `torch.cuda.X` for device queries;
- no attribute whose name starts with `_` (`torch._C`, `x.__class__`), no dunder names (`__builtins__`);
- no `getattr`/`setattr`/`eval`/`exec`/`open`/`globals`/... (reaching names by string or the outside world);
- no assignment to, or deletion of, any attribute (monkeypatching), no dunder methods (`__torch_function__`).

The evaluation does not depend on these rules for its verdict (outputs are judged in the parent with the
parent's torch), but they keep the in-child guard, which sees host-side torch arithmetic, honest.

    >>> check_source("import torch\\ntorch.allclose = lambda *a, **k: True\\n", "cand.py")
    'cand.py:2:1: forbidden: assigns to `torch.allclose` ...'   # doctest: +SKIP
"""

from __future__ import annotations

import ast

from tilepy.errors import CompileError, Span

from .evaluate import ALLOWED

ALLOWED_IMPORTS = ("__future__", "math", "functools", "itertools", "torch", "tilepy", "argus_agent.runtime",
                   "stdlib_kernels")
# `import torch.cuda` and the like: the package itself is allowed, its submodules only through the rules below.
PACKAGE_IMPORTS = ("tilepy", "stdlib_kernels")
DTYPES = frozenset("""float32 float float16 half bfloat16 float64 double int8 uint8 int16 int32 int int64 long
bool float8_e4m3fn float8_e5m2 complex64""".split())
TORCH_ATTRS = ALLOWED | DTYPES | frozenset("""Tensor Size device dtype no_grad inference_mode finfo iinfo cuda
is_tensor""".split())
CUDA_ATTRS = frozenset("is_available current_device device_count get_device_capability get_device_name".split())
FORBIDDEN_NAMES = frozenset("""getattr setattr delattr eval exec compile open globals locals vars breakpoint
input memoryview help exit quit""".split())


class PolicyError(CompileError):
    """The candidate's source uses something a candidate may not (the message says what and where)."""

    kind = "forbidden"


def check_source(source: str, filename: str = "<candidate>") -> str:
    """'' when `source` keeps to the candidate language, else the first violation, formatted like tilepy's
    errors (`file:line:col: forbidden: ...`, the source line, a caret, a hint)."""
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as e:
        line = (e.text or "").rstrip("\n")
        return str(PolicyError(f"syntax error: {e.msg}", Span(filename, e.lineno or 0, max(0, (e.offset or 1) - 1),
                                                              line), "the candidate must be a Python module"))
    lines = source.splitlines()
    checker = _Checker()
    checker.visit(tree)
    if not checker.problems:
        return ""
    node, message, hint = checker.problems[0]
    lineno = getattr(node, "lineno", 0)
    text = lines[lineno - 1] if 0 < lineno <= len(lines) else ""
    return str(PolicyError(message, Span(filename, lineno, getattr(node, "col_offset", 0), text), hint))


def _allowed_module(name: str) -> bool:
    return name in ALLOWED_IMPORTS or any(name.startswith(p + ".") for p in PACKAGE_IMPORTS)


class _Checker(ast.NodeVisitor):
    def __init__(self):
        self.modules: dict[str, str] = {}   # local name -> qualified name of what it is bound to
        self.problems: list = []

    def bad(self, node, message, hint):
        self.problems.append((node, message, hint))

    # ---------------------------------------------------------------- imports
    def visit_Import(self, node):
        for a in node.names:
            if not _allowed_module(a.name):
                self.bad(node, f"imports `{a.name}`", "a candidate imports only " + ", ".join(ALLOWED_IMPORTS))
            elif a.asname:
                self.modules[a.asname] = a.name
            else:
                self.modules[a.name.split(".")[0]] = a.name.split(".")[0]

    def visit_ImportFrom(self, node):
        mod = node.module or ""
        if node.level or not _allowed_module(mod):
            self.bad(node, f"imports from `{'.' * node.level}{mod}`",
                     "a candidate imports only " + ", ".join(ALLOWED_IMPORTS))
            return
        for a in node.names:
            qual = f"{mod}.{a.name}"
            if a.name.startswith("_") and mod != "__future__":
                self.bad(node, f"imports the private name `{qual}`", "use the module's public API")
            elif mod == "torch" and a.name not in TORCH_ATTRS:
                self.bad(node, f"imports `{qual}`", _torch_hint())
            self.modules[a.asname or a.name] = qual

    # ---------------------------------------------------------------- names and attributes
    def visit_Name(self, node):
        if node.id in FORBIDDEN_NAMES:
            self.bad(node, f"uses the builtin `{node.id}`",
                     "name things directly: reaching attributes or code by string, and files, are not allowed")
        elif node.id.startswith("__") and node.id.endswith("__"):
            self.bad(node, f"uses the interpreter's name `{node.id}`", "a candidate keeps to its own names")

    def visit_Attribute(self, node):
        if node.attr.startswith("_"):
            self.bad(node, f"reaches the private attribute `.{node.attr}`",
                     "torch and tilepy internals (torch._C, dunder attributes) are off limits to candidates")
            return
        qual = self.qualified(node)
        if isinstance(node.ctx, ast.Store | ast.Del):
            self.bad(node, f"{'assigns to' if isinstance(node.ctx, ast.Store) else 'deletes'} the attribute "
                     f"`{qual or ast.unparse(node)}`",
                     "a candidate changes no object's attributes (no monkeypatching); keep state in locals")
        elif qual and qual.split(".")[0] == "torch":
            self.check_torch(node, qual.split("."))
        self.generic_visit(node)

    def qualified(self, node) -> str:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.modules:
            return ".".join([self.modules[node.id], *reversed(parts)])
        return ""

    def check_torch(self, node, parts):
        if len(parts) < 2:
            return
        if parts[1] == "cuda":
            if len(parts) >= 3 and parts[2] not in CUDA_ATTRS:
                self.bad(node, f"uses `{'.'.join(parts[:3])}`",
                         "streams, graphs and the CUDA runtime are the evaluator's business; a candidate may "
                         f"query {', '.join(sorted(CUDA_ATTRS))}")
        elif parts[1] not in TORCH_ATTRS:
            self.bad(node, f"uses `{'.'.join(parts[:2])}`", _torch_hint())

    # ---------------------------------------------------------------- definitions
    def visit_FunctionDef(self, node):
        if node.name.startswith("__") and node.name.endswith("__"):
            self.bad(node, f"defines the special method `{node.name}`",
                     "a candidate defines kernels and plain functions, no protocol hooks")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef


def _torch_hint() -> str:
    return ("outside kernels the host may only allocate, view, cast and move tensors (torch."
            "empty/empty_like/zeros/full, .view/.reshape/.permute/.contiguous/.to, dtypes); the arithmetic "
            "belongs in tilepy kernels")
