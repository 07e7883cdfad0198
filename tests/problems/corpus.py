"""Loading and measuring the problem corpus (shared by its tests and by tools that run the suite).

A problem is one file under `level1/` (single ops), `level2/` (fused chains) or `level3/` (whole blocks and
small networks) in KernelBench's format plus CPU sizes: `Model`,
`get_inputs()`, `get_init_inputs()`, `get_cpu_inputs()`, `get_cpu_init_inputs()`. Real sizes are only ever
built on torch's meta device here, so measuring them allocates nothing.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import sys
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

ROOT = Path(__file__).resolve().parent
LEVELS = ("level1", "level2", "level3")
FUNCTIONS = ("get_inputs", "get_init_inputs", "get_cpu_inputs", "get_cpu_init_inputs")
NAME = re.compile(r"^(\d{3})_[a-z0-9]+(_[a-z0-9]+)*\.py$")

# An H100 SXM's peaks, used only for a lower bound on the reference's time: HBM3 bandwidth, and fp32 (non-tensor
# core; PyTorch does not use TF32 for fp32 matmul by default) and dense bf16 tensor-core throughput.
H100_BYTES_PER_S = 3.35e12
H100_FLOPS_PER_S = {torch.float32: 60e12, torch.bfloat16: 800e12, torch.float16: 800e12}


def problem_paths(level: str | None = None) -> list[Path]:
    """Problem files of one level (or of all levels), sorted by name."""
    levels = LEVELS if level is None else (level,)
    return sorted(p for lv in levels for p in (ROOT / lv).glob("*.py") if p.name != "__init__.py")


def problem_id(path: Path) -> str:
    """'level1/001_relu' for tests/problems/level1/001_relu.py."""
    return f"{path.parent.name}/{path.stem}"


@functools.cache
def load(path: Path):
    """Import a problem file as a module (cached; file names start with digits, so not via import)."""
    name = "corpus_" + problem_id(path).replace("/", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def build(module, cpu: bool = True, seed: int = 0) -> tuple[torch.nn.Module, list]:
    """The model (seeded as KernelBench does, in eval mode) and one draw of its inputs, at CPU or real sizes."""
    init = module.get_cpu_init_inputs() if cpu else module.get_init_inputs()
    torch.manual_seed(seed)
    model = module.Model(*init).eval()
    inputs = list(module.get_cpu_inputs() if cpu else module.get_inputs())
    return model, inputs


def tensor_bytes(values) -> int:
    return sum(t.numel() * t.element_size() for t in tree_leaves(values) if isinstance(t, torch.Tensor))


class _LargestTensor(TorchDispatchMode):
    """Records the largest tensor any op produces (the eager reference's biggest intermediate)."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.largest = max([self.largest] + [tensor_bytes(t) for t in tree_leaves(out)])
        return out


def real_size_profile(module) -> dict:
    """Bytes and FLOPs of the problem at its real sizes, measured on the meta device (nothing is allocated)."""
    with torch.device("meta"):
        model, inputs = build(module, cpu=False)
        flops, largest = FlopCounterMode(display=False), _LargestTensor()
        with flops, largest, torch.no_grad():
            out = model(*inputs)
    params = list(model.parameters()) + list(model.buffers())
    dtype = next((t.dtype for t in tree_leaves(inputs) + params
                  if isinstance(t, torch.Tensor) and t.dtype.is_floating_point), torch.float32)
    return {"input_bytes": tensor_bytes(inputs), "param_bytes": tensor_bytes(params), "output_bytes": tensor_bytes(out),
            "flops": flops.get_total_flops(), "largest_tensor_bytes": largest.largest, "dtype": dtype}


def roofline_seconds(profile: dict) -> float:
    """A lower bound on the eager reference's time on an H100: it must at least read its inputs and parameters
    and write its outputs, and at least do its matmul/conv/attention FLOPs at peak."""
    moved = profile["input_bytes"] + profile["param_bytes"] + profile["output_bytes"]
    peak = H100_FLOPS_PER_S.get(profile["dtype"], H100_FLOPS_PER_S[torch.float32])
    return max(moved / H100_BYTES_PER_S, profile["flops"] / peak)
