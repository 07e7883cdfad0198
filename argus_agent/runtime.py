"""What generated `model_new.py` files import: one `launch` that runs a tilepy kernel on the GPU through
tilepy_hip for CUDA tensors, and on the CPU interpreter otherwise.

    launch(softmax, lambda m: (m["M"],), x, y, BLOCK_N=1024)

The grid may be a callable of {constexpr and symbolic dimension name: value} (the kernel's defaults merged
with the overrides), so a tuned tile size moves the grid with it.
"""

from __future__ import annotations

from tilepy.language import TensorSpec

GPU_TARGET = {"nvidia": "sm_90a", "amd": "gfx942"}


def _meta(kernel, args, constexprs: dict) -> dict:
    meta = kernel.resolve_constexprs({k: v for k, v in constexprs.items() if k in kernel.constexpr_names})
    runtime = [(n, spec) for n, spec, _ in kernel.params if spec != "constexpr"]
    for (_name, spec), a in zip(runtime, args):
        if isinstance(spec, TensorSpec) and hasattr(a, "shape"):
            for d, n in zip(spec.shape, a.shape):
                if isinstance(d, str):
                    meta[d] = int(n)
    return meta


def launch(kernel, grid, *args, target: str | None = None, **constexprs):
    """Run `kernel` over `grid` on `args` (CUDA tensors: compiled through tilepy_hip; else interpreted)."""
    if callable(grid):
        grid = grid(_meta(kernel, args, constexprs))
    if isinstance(grid, int):
        grid = (grid,)
    grid = tuple(int(g) for g in grid)
    on_gpu = any(getattr(a, "is_cuda", False) for a in args)
    if on_gpu:
        import tilepy_hip
        return tilepy_hip.launch(kernel, grid, *args, **constexprs)
    return kernel[grid](*args, target=target, **constexprs)
