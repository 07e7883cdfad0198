"""KernelBench-format problems: `class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()`.

A `Problem` loads such a file, builds the reference module, and draws fresh inputs for test shapes. Test
shapes are derived from `get_inputs()` by mapping each distinct dimension size to a new size, consistently
across inputs (so A[M, K] @ B[K, N] stays well formed); sizes that equal a dimension of one of the model's
parameters are kept (a Linear's in_features must not move). On the CPU interpreter the sizes are divided by
`cpu_scale` first, unless the problem defines `get_cpu_inputs()`, which then gives the base shapes (and
`get_cpu_init_inputs()`, if defined, the constructor arguments that go with them).
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch


class ProblemError(Exception):
    """The problem file does not follow KernelBench's format."""


# How test shapes deviate from the base shape: each distinct size s becomes max(1, s * num // den + add).
# The odd offsets make sizes that are not multiples of any tile, so masking is always exercised.
SHAPE_VARIANTS = ((1, 1, 0), (1, 2, 3), (3, 4, 1))


@dataclass
class Problem:
    path: Path
    source: str
    module: object
    name: str
    init_inputs: list
    base_inputs: list  # example inputs (after cpu scaling) that define the base shapes
    kept_sizes: set = field(default_factory=set)
    vary_shapes: bool = False
    int_hi: list | None = None   # per input, the bound of drawn integers (from a `signature`), else None

    def signature(self) -> dict | None:
        """What a sandbox child needs of the base inputs, as JSON: each tensor's shape, dtype and integer bound,
        each plain value; the kept sizes. None when a value would not survive JSON unchanged (then the child
        calls get_inputs() itself)."""
        rows = []
        for x in self.base_inputs:
            if isinstance(x, torch.Tensor):
                hi = None if x.dtype.is_floating_point or x.dtype == torch.bool else \
                    (int(x.max().item()) + 1 if x.numel() else 2)
                rows.append(["tensor", list(x.shape), str(x.dtype).removeprefix("torch."), hi])
            elif x is None or type(x) in (int, float, bool, str):
                rows.append(["value", x])
            else:
                return None
        return {"inputs": rows, "kept": sorted(self.kept_sizes), "vary": self.vary_shapes}

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    def make_model(self, seed: int = 0, cls=None) -> torch.nn.Module:
        """Construct `Model` (or `cls`) with torch seeded as KernelBench does, so parameters agree."""
        torch.manual_seed(seed)
        model = (cls or self.module.Model)(*self.init_inputs)
        return model.eval()

    def shapes(self, n: int = 3) -> list[list]:
        """Shape signatures of the test set: one per variant, the first being the base shape.

        A lowered program is specialized to the base shapes (as Inductor's static-shape mode), so unless
        `vary_shapes` is set, the test set is the base shape alone; evaluations draw fresh inputs per trial."""
        variants = SHAPE_VARIANTS[:n] if self.vary_shapes else SHAPE_VARIANTS[:1]
        return [self._variant_shapes(v) for v in variants]

    def _variant_shapes(self, variant) -> list:
        num, den, add = variant
        mapping = {}

        def new(s: int) -> int:
            if s in self.kept_sizes or s <= 1 or (num, den, add) == (1, 1, 0):
                return s
            if s not in mapping:
                mapping[s] = max(1, s * num // den + add)
            return mapping[s]

        out = []
        for x in self.base_inputs:
            if isinstance(x, torch.Tensor):
                out.append(("tensor", tuple(new(int(d)) for d in x.shape), x.dtype))
            else:
                out.append(("value", x, None))
        return out

    def draw_inputs(self, shapes: list, generator: torch.Generator, device: str = "cpu") -> list:
        """Fresh random inputs of the given shape signature (normal floats, ints in the base range), drawn on the
        generator's device (a CUDA generator makes them on the GPU: no host copy) and moved to `device`."""
        inputs, at = [], generator.device
        for (kind, shape, dtype), base in zip(shapes, self.base_inputs):
            if kind == "value":
                inputs.append(shape)
            elif dtype.is_floating_point:
                x = torch.randn(shape, generator=generator, dtype=torch.float32, device=at)
                inputs.append(x.to(dtype).to(device))
            elif dtype == torch.bool:
                inputs.append((torch.rand(shape, generator=generator, device=at) < 0.5).to(device))
            else:
                hi = self.int_hi[len(inputs)] if self.int_hi else (int(base.max().item()) + 1 if base.numel() else 2)
                x = torch.randint(0, max(hi, 2), shape, generator=generator, dtype=dtype, device=at)
                inputs.append(x.to(device))
        return inputs


def load_module(path: str | Path, name: str | None = None):
    """Import a Python file as a fresh module (registered in sys.modules so inspect can read its source)."""
    path = Path(path).resolve()
    name = name or f"argus_loaded_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProblemError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        sys.modules.pop(name, None)
        raise
    return module


def load_problem(path: str | Path, cpu: bool = True, cpu_scale: int = 1, signature: dict | None = None) -> Problem:
    """Load a KernelBench problem file. On the CPU (`cpu=True`) sizes are divided by `cpu_scale` (>= 1)
    unless the file defines `get_cpu_inputs()`. With the `signature` of the same problem loaded elsewhere
    (`Problem.signature`), get_inputs() is not called and no Model is built here: the base inputs are shapes
    on the meta device (a sandbox child draws its own inputs; it need not make the example ones at full size)."""
    path = Path(path)
    if not path.exists():
        raise ProblemError(f"{path}: no such file")
    source = path.read_text()
    try:
        module = load_module(path)
    except Exception as e:
        raise ProblemError(f"{path}: importing it failed: {type(e).__name__}: {e}") from e
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, attr):
            raise ProblemError(f"{path}: KernelBench problems define `{attr}`; this file does not",)
    init_inputs = list(module.get_cpu_init_inputs() if cpu and hasattr(module, "get_cpu_init_inputs")
                       else module.get_init_inputs())
    if signature is not None:
        base = [torch.empty(r[1], dtype=getattr(torch, r[2]), device="meta") if r[0] == "tensor" else r[1]
                for r in signature["inputs"]]
        hi = [r[3] if r[0] == "tensor" else None for r in signature["inputs"]]
        return Problem(path, source, module, path.stem, init_inputs, base, set(signature["kept"]),
                       bool(signature["vary"]), hi)
    if cpu and hasattr(module, "get_cpu_inputs"):
        base = list(module.get_cpu_inputs())
    else:
        base = list(module.get_inputs())
    torch.manual_seed(0)
    model = module.Model(*init_inputs)
    kept = {int(d) for p in model.parameters() for d in p.shape}
    kept |= {int(d) for b in model.buffers() for d in b.shape}
    problem = Problem(path, source, module, path.stem, init_inputs, base, kept)
    if cpu and cpu_scale > 1 and not hasattr(module, "get_cpu_inputs"):
        problem.base_inputs = _scaled(base, cpu_scale, kept)
    return problem


def _scaled(inputs: list, scale: int, kept: set) -> list:
    mapping = {}

    def new(s: int) -> int:
        if s in kept or s <= 1:
            return s
        return mapping.setdefault(s, max(1, -(-s // scale)))

    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            shape = tuple(new(int(d)) for d in x.shape)
            out.append(torch.zeros(shape, dtype=x.dtype) if x.dtype.is_floating_point else
                       torch.zeros(shape, dtype=x.dtype) + (x.max() if x.numel() else 0))
        else:
            out.append(x)
    return out
