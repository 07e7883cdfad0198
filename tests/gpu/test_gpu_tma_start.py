"""Bulk tensor copies and stores whose first column is off a 16-byte boundary (H100 faults on such a box: an illegal
instruction, loads and stores alike; benchmarks/profile/lead_tma_offset.py) take the cooperative copy instead:
a literal start at compile time, a run-time start through the test beside the map's bit. Every case exact, the
columns outside the window untouched. Skips without a GPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hip"))

import kernels as extra  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("kernel", [extra.load_at, extra.store_at])
@pytest.mark.parametrize("c0", [0, 8, 1, 4, 5])
def test_a_literal_first_column(kernel, c0):
    x = torch.randn(128, 256, device="cuda").bfloat16()
    y = torch.zeros_like(x)
    kernel[(2,)](x, y, target="sm_90a", C0=c0)
    torch.cuda.synchronize()
    assert torch.equal(y[:, c0:c0 + 64], x[:, c0:c0 + 64])
    assert not y[:, :c0].any() and not y[:, c0 + 64:].any()


@pytest.mark.parametrize("kernel", [extra.load_dyn, extra.store_dyn])
def test_run_time_first_columns(kernel):
    """Blocks at every first column 0 .. 17 (TMA at 0, 8, 16; the copy elsewhere), the same values overlapping."""
    x = torch.randn(128, 256, device="cuda").bfloat16()
    y = torch.zeros_like(x)
    kernel[(2, 18)](x, y, target="sm_90a")
    torch.cuda.synchronize()
    assert torch.equal(y[:, :81], x[:, :81]) and not y[:, 81:].any()
