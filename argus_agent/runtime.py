"""What generated `model_new.py` files import: one `launch` that runs a tilepy kernel on the GPU through
tilepy_hip for CUDA tensors, and on the CPU interpreter otherwise.

    launch(softmax, lambda m: (m["M"],), x, y, BLOCK_N=1024)

The grid may be a callable of {constexpr and symbolic dimension name: value} (the kernel's defaults merged
with the overrides), so a tuned tile size moves the grid with it.
"""

from __future__ import annotations


def launch(kernel, grid, *args, target: str | None = None, **constexprs):
    """Run `kernel` over `grid` on `args` (CUDA tensors: compiled through tilepy_hip; else interpreted)."""
    fast = kernel.gpu_launch  # tilepy_hip's prepared launch of a signature it has checked before
    if fast is not None:
        out = fast(grid, None, constexprs, args)
        if out is not None:
            return out
    for a in args:
        if getattr(a, "is_cuda", False):
            import tilepy_hip  # the launch resolves a callable grid itself, once per argument signature

            return tilepy_hip.launch(kernel, grid, *args, **constexprs)
    return kernel[grid](*args, target=target, **constexprs)
