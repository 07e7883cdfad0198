"""`torch.compile(model, backend="argus")`: TorchDynamo graphs lowered to tilepy kernels.

Each graph Dynamo hands over goes through the same lowering as `argus optimize` (torch.export, core-ATen
decompositions, fused tilepy kernels). A graph that cannot be lowered runs eagerly, and the reason is logged
(logger `argus_agent.compile`). The backend is registered under the name "argus" through the
`torch_dynamo_backends` entry point, so no import is needed before `torch.compile`.

    model = torch.compile(MyModel(), backend="argus")
    y = model(x)               # CUDA tensors: compiled with tilepy_hip; CPU tensors: the tilepy interpreter
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import tempfile
from pathlib import Path

import torch

log = logging.getLogger("argus_agent.compile")
_DIR: Path | None = None


def _module_dir() -> Path:
    """Lowered modules live on disk: tilepy reads kernel source through `inspect`."""
    global _DIR
    if _DIR is None:
        base = os.environ.get("ARGUS_HOME")
        root = Path(base) / "compiled" if base else Path(tempfile.gettempdir()) / "argus-compiled"
        root.mkdir(parents=True, exist_ok=True)
        _DIR = root
    return _DIR


def target_of(example_inputs) -> str:
    for x in example_inputs:
        if isinstance(x, torch.Tensor) and x.is_cuda:
            major, minor = torch.cuda.get_device_capability(x.device)
            return "sm_90a" if major == 9 else "sm_80"
    return "cpu"


def load_module(source: str):
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    path = _module_dir() / f"graph_{digest}.py"
    if not path.exists():
        path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"argus_graph_{digest}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def argus_backend(gm: torch.fx.GraphModule, example_inputs, options: dict | None = None):
    """A Dynamo backend: the graph's lowered host program, or `gm.forward` where lowering fails.
    `torch.compile(m, backend="argus", options={"precision": "bf16"})` picks the precision of fp32 matmuls and
    convolutions (fp32, tf32, bf16; default PyTorch's settings at compile time)."""
    precision = (options or {}).get("precision")
    from .lower import LoweringError, lower_model, render_program

    inputs = list(example_inputs)
    if any(not isinstance(x, torch.Tensor) for x in inputs):
        log.warning("argus: graph %s takes non-tensor inputs (symbolic sizes); running it eagerly", gm._get_name())
        return gm.forward
    try:
        prog = lower_model(gm, inputs, target_of(inputs), precision)
        mod = load_module(render_program(prog))
    except LoweringError as e:
        log.warning("argus: running a graph eagerly: %s", e)
        return gm.forward
    forward = mod.argus_forward
    single = prog.single_output

    def run(*args):
        out = forward(gm, *args)
        return (out,) if single else out

    run.argus_kernels = len(prog.kernels)   # for tests and curious users
    return run
