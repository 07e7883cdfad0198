"""The GPU test modules' common start: `torch = cuda_torch()` skips the calling module (at collection, with the
reason printed) where torch or a CUDA GPU is missing, and puts the repository root on sys.path so the modules import
the packages from this checkout."""

from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def cuda_torch():
    """torch, on a machine with a CUDA GPU; elsewhere the calling test module is skipped."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here (torch.cuda.is_available() is False): GPU tests need the device machine",
                    allow_module_level=True)
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    return torch
