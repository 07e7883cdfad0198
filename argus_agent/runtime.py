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


def aligned16(x):
    """`x` itself when its data starts on a 16-byte boundary, else an aligned copy. Kernels built TMA-only
    (the attention kernels' FALLBACK=False) refuse a tensor a tensor map cannot describe; a contiguous view at
    an odd offset into a larger tensor is one, and a copy is what makes it describable."""
    return x if x.data_ptr() % 16 == 0 else x.clone()
