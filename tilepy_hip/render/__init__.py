"""HIP C++ renderers: the shared IR walk (`walk`, with its pre-pass in `analysis`, scalar expressions in
`scalars`, bound values in `refs`), per-target tables (`targets`), and the instruction emitters tables cannot
express (`sm80`, `sm90a`, `gfx942`)."""

from __future__ import annotations

from .targets import RENDER_TARGETS, RenderTarget, coverage, get_render_target
from .walk import Renderer


def render_source(kir, target=None) -> tuple[str, int]:
    """(HIP C++ source, dynamic shared memory bytes) of a specialized kernel for `target` (default: the IR's)."""
    source, smem, _ = render_kernel(kir, target)
    return source, smem


def render_kernel(kir, target=None) -> tuple[str, int, list]:
    """(source, dynamic shared memory bytes, tensor maps): the tensor maps (`tma.TensorMapSpec`) are the extra
    kernel parameters the launch builds for bulk tensor copies, after the signature's own."""
    r = Renderer(kir, get_render_target(target or kir.target))
    source = r.render()
    return source, r.smem_bytes, list(r.tensor_maps)


__all__ = ["Renderer", "RenderTarget", "RENDER_TARGETS", "coverage", "get_render_target", "render_kernel",
           "render_source"]
