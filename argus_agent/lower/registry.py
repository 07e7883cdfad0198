"""The table from core-ATen ops to their lowerings (one registration per op, as Inductor's lowering.py)."""

from __future__ import annotations

import torch

LOWERINGS: dict = {}


def register(*names: str):
    """Register a lowering under ATen names: "aten.add" (every overload) or "aten.add.Tensor" (one)."""
    def deco(fn):
        for n in names:
            LOWERINGS[n] = fn
        return fn
    return deco


def lookup(target):
    """The lowering of an fx call target (an OpOverload), or None."""
    name = str(target)                 # "aten.add.Tensor"
    if name in LOWERINGS:
        return LOWERINGS[name]
    packet = name.rsplit(".", 1)[0] if name.count(".") >= 2 else name
    return LOWERINGS.get(packet)


def result_dtype(node) -> torch.dtype:
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)):
        val = val[0]
    return val.dtype if isinstance(val, torch.Tensor) else torch.float32


def result_shape(node, k: int | None = None) -> tuple:
    val = node.meta.get("val")
    if k is not None:
        val = val[k]
    return tuple(int(n) for n in val.shape)
