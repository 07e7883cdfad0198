"""What generated `model_new.py` files import: one `launch` that runs a tilepy kernel on the GPU through
tilepy_hip for CUDA tensors, and on the CPU interpreter otherwise.

    launch(softmax, lambda m: (m["M"],), x, y, BLOCK_N=1024)

The grid may be a callable of {constexpr and symbolic dimension name: value} (the kernel's defaults merged
with the overrides), so a tuned tile size moves the grid with it.
"""

from __future__ import annotations

import tilepy_hip  # noqa: F401  (registers the GPU backend that kernel[grid] uses for CUDA tensors)


def launch(kernel, grid, *args, target: str | None = None, **constexprs):
    """Run `kernel` over `grid` on `args`: exactly `kernel[grid](*args, target=target, **constexprs)` (CUDA
    tensors go through tilepy_hip's prepared launch, anything else runs on the interpreter)."""
    return kernel[grid](*args, target=target, **constexprs)
