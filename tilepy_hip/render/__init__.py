"""HIP C++ renderers: the shared IR walk (`common`), per-target tables (`targets`), and the instruction
emitters tables cannot express (`sm80`, `sm90a`, `gfx942`)."""

from __future__ import annotations

from .common import Renderer
from .targets import RENDER_TARGETS, RenderTarget, coverage, get_render_target


def render_source(kir, target=None) -> tuple[str, int]:
    """(HIP C++ source, dynamic shared memory bytes) of a specialized kernel for `target` (default: the IR's)."""
    r = Renderer(kir, get_render_target(target or kir.target))
    return r.render(), r.smem_bytes


__all__ = ["Renderer", "RenderTarget", "RENDER_TARGETS", "coverage", "get_render_target", "render_source"]
