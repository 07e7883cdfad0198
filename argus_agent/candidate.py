"""A candidate: the source text of a module with tilepy kernels and a host `argus_forward`, loaded from a
file (tilepy reads kernel source through `inspect`, so candidates live on disk under the run's directory)."""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from .problem import Problem, load_module


class CandidateError(Exception):
    """The candidate does not import, or lacks `argus_forward`."""


@dataclass
class Candidate:
    source: str
    path: Path
    module: object

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:12]

    def kernels(self) -> dict:
        import tilepy as tp

        return {k: v for k, v in vars(self.module).items() if isinstance(v, tp.Kernel)}

    def model_class(self, problem: Problem):
        """`ModelNew`: the problem's `Model` (same constructor, same parameters) with forward replaced by the
        candidate's host program."""
        forward = self.module.argus_forward

        class ModelNew(problem.module.Model):
            def forward(self, *inputs):
                return forward(self, *inputs)

        return ModelNew


def load_candidate(source: str, directory: Path) -> Candidate:
    """Write `source` to `directory/cand_<hash>.py` and import it (fresh module per distinct source)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    path = directory / f"cand_{digest}.py"
    if not path.exists() or path.read_text() != source:
        path.write_text(source)
    name = f"argus_candidate_{digest}"
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path.resolve()):
        module = sys.modules[name]
    else:
        try:
            module = load_module(path, name)
        except SyntaxError as e:
            raise CandidateError(f"{path.name}:{e.lineno}: syntax error: {e.msg}") from e
        except Exception as e:
            raise CandidateError(f"{path.name}: importing failed: {type(e).__name__}: {e}") from e
    if not callable(getattr(module, "argus_forward", None)):
        raise CandidateError(f"{path.name}: defines no `argus_forward(model, *inputs)` host function")
    return Candidate(source, path, module)


def load_model_new(path: Path, problem: Problem):
    """`ModelNew` from a model_new.py file (ours or anyone's, KernelBench style)."""
    module = load_module(path)
    cls = getattr(module, "ModelNew", None)
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise CandidateError(f"{path}: defines no `class ModelNew(nn.Module)`")
    return cls
