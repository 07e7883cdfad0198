"""The precision fp32 matmuls and convolutions are computed at: PyTorch's own choice, or the user's.

    resolve(None)     PyTorch's settings, read now (at capture): matmuls in TF32 while
                      `torch.backends.cuda.matmul.allow_tf32` is on or `torch.get_float32_matmul_precision()` is
                      not "highest"; convolutions in TF32 while `torch.backends.cudnn.allow_tf32` is on (its
                      default); fp32 otherwise
    resolve("fp32")   fp32-accurate (3xTF32 on the tensor cores)
    resolve("tf32")   TF32 products allowed (convolutions: one TF32 pass)
    resolve("bf16")   operands rounded to bf16, products accumulated in f32 (matmuls: the bf16 tensor-core GEMM
                      where its shapes allow)

Only fp32 operands are affected: half-precision programs compute as before. The agent's tolerance follows the
precision (1e-2 below fp32, never looser).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

PRECISIONS = ("fp32", "tf32", "bf16")


@dataclass(frozen=True)
class Precision:
    matmul: str          # fp32 | tf32 | bf16
    conv: str            # fp32 | tf32 | bf16
    asked: str | None    # what the user asked for; None: PyTorch's settings

    def describe(self) -> str:
        if self.asked:
            return f"{self.asked} (--precision {self.asked}: fp32 matmuls and convolutions)"
        why = []
        why.append("matmul " + self.matmul + (" (torch.backends.cuda.matmul.allow_tf32 / "
                                               "set_float32_matmul_precision)" if self.matmul == "tf32" else ""))
        why.append("conv " + self.conv + (" (torch.backends.cudnn.allow_tf32)" if self.conv == "tf32" else ""))
        return "as PyTorch: " + ", ".join(why)

    @property
    def reduced(self) -> bool:
        return self.matmul != "fp32" or self.conv != "fp32"


def resolve(asked: str | None = None) -> Precision:
    """The precision asked for, else `ARGUS_PRECISION` (what `argus optimize/suite --precision` set for the run
    and its workers), else PyTorch's settings as they are now."""
    import os

    asked = asked or os.environ.get("ARGUS_PRECISION") or None
    if asked is not None and asked not in PRECISIONS:
        raise ValueError(f"precision {asked!r}: choose one of {', '.join(PRECISIONS)} (or none: PyTorch's settings)")
    if asked:
        return Precision(asked, asked, asked)
    mm = "tf32" if (torch.backends.cuda.matmul.allow_tf32
                    or torch.get_float32_matmul_precision() != "highest") else "fp32"
    conv = "tf32" if torch.backends.cudnn.allow_tf32 else "fp32"
    return Precision(mm, conv, None)


def as_bf16(ctx, t, base: str):
    """An fp32 LTensor as a bf16 buffer (each value rounded to nearest even bf16 where it is stored)."""
    from .core import LTensor

    return ctx.realize(LTensor(t.shape, torch.bfloat16, t._fn), base)


def rounded_bf16(ctx, t, base: str):
    """An fp32 LTensor whose values are rounded to bf16, as fp32 (a bf16 buffer read back)."""
    from . import values as vals
    from .core import LTensor

    if t.dtype != torch.float32:
        return t
    b = as_bf16(ctx, t, base)
    return LTensor(t.shape, torch.float32, lambda c: vals.cast(b(c), torch.float32))


_TORCH = {  # the PyTorch settings that compute fp32 matmuls / convolutions at each precision
    "fp32": ("highest", False),
    "tf32": ("high", True),      # TF32 matmuls (allow_tf32) and cuDNN TF32 convolutions
    "bf16": ("medium", True),    # matmuls may take bf16 products; cuDNN has no bf16 mode for fp32: TF32
}


class matching_reference:
    """`with matching_reference():` runs the reference at the precision asked for (--precision, through
    ARGUS_PRECISION), so a candidate is compared with PyTorch computing at that precision (and, where it is
    nearer, with float64: the tolerance itself is never loosened). Without a request PyTorch's settings stay
    as they are (they are the precision)."""

    def __init__(self, asked: str | None = None):
        self.prec = resolve(asked)

    def __enter__(self):
        self.saved = None
        if self.prec.asked:
            self.saved = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32)
            mm, cudnn = _TORCH[self.prec.asked]
            torch.set_float32_matmul_precision(mm)
            torch.backends.cudnn.allow_tf32 = cudnn
        return self.prec

    def __exit__(self, *exc):
        if self.saved is not None:
            torch.set_float32_matmul_precision(self.saved[0])
            torch.backends.cudnn.allow_tf32 = self.saved[1]
        return False
