"""Launch checks of the CPU interpreter: the grid, and the kernel arguments bound to the kernel's parameters
(tensor rank, shape, symbolic dimensions, dtype, device, contiguity; scalar kinds), with LaunchErrors that
say how to fix the call.

`_LaunchArgs` is mixed into `interpreter._Interpreter`; `bind` fills its `base_env` / `base_types`.
"""

from __future__ import annotations

import numpy as np

from . import dtypes as dt
from .errors import LaunchError
from .interp_memory import TensorBuf
from .interp_ops import I32, _is_scalar_value, _scalar
from .types import ScalarType, TensorType


def _norm_grid(grid) -> tuple:
    if isinstance(grid, int | np.integer):
        grid = (int(grid),)
    grid = tuple(int(g) for g in grid)
    if not 1 <= len(grid) <= 3 or any(g < 0 for g in grid):
        raise LaunchError(f"grid must be 1 to 3 non-negative ints, got {grid}")
    return grid + (1,) * (3 - len(grid))


class _LaunchArgs:
    """Argument binding of `_Interpreter` (a mixin: see the module docstring)."""

    def bind(self, args: list) -> list:
        kir = self.kir
        if len(args) != len(kir.params):
            names = ", ".join(p.name for p in kir.params)
            raise LaunchError(f"kernel '{kir.name}' takes {len(kir.params)} arguments ({names}), got {len(args)}")
        dims: dict[str, tuple[int, str]] = {}
        writeback = []
        for i, (p, a) in enumerate(zip(kir.params, args)):
            t = p.type
            if isinstance(t, TensorType):
                arr, wb = self._tensor_arg(p, a)
                if arr.ndim != t.rank:
                    raise LaunchError(
                        f"argument '{p.name}' of kernel '{kir.name}': expected a rank-{t.rank} tensor {t}, got "
                        f"shape {list(arr.shape)}; pass a tensor of shape [{', '.join(map(str, t.shape))}]")
                for d, (want, got) in enumerate(zip(t.shape, arr.shape)):
                    if isinstance(want, str):
                        if want in dims and dims[want][0] != got:
                            n0, who = dims[want]
                            raise LaunchError(
                                f"argument '{p.name}' of kernel '{kir.name}': dimension {d} is '{want}' = {got}, "
                                f"but '{who}' gave '{want}' = {n0}; all tensors must agree on '{want}'")
                        dims.setdefault(want, (int(got), p.name))
                    elif int(want) != got:
                        raise LaunchError(
                            f"argument '{p.name}' of kernel '{kir.name}': dimension {d} must be {want}, got {got} "
                            f"(shape {list(arr.shape)}, expected {t})")
                self.base_env[p.name] = TensorBuf(i, p.name, t.dtype, arr)
                if wb is not None:
                    writeback.append(wb)
            elif isinstance(t, ScalarType):
                self.base_env[p.name] = self._scalar_arg(p, a)
            else:
                self.base_env[p.name] = a
            self.base_types[p.name] = t
        for name, (n, _) in dims.items():
            self.base_env.setdefault(name, n)
            self.base_types.setdefault(name, I32)
        for name, v in (kir.constexprs or {}).items():
            self.base_env.setdefault(name, v)
        return writeback

    def _tensor_arg(self, p, a):
        want = p.type.dtype
        where = f"argument '{p.name}' of kernel '{self.kir.name}'"
        if type(a).__module__.startswith("torch"):
            if getattr(a, "device", None) is not None and a.device.type != "cpu":
                raise LaunchError(f"{where}: the interpreter runs on the CPU; got a tensor on {a.device}; "
                                  "pass tensor.cpu() and copy the result back")
            got = dt.from_any(a.dtype)
            if got != want:
                raise LaunchError(f"{where}: expected dtype {want} ({p.type}), got {a.dtype}; convert with "
                                  f".to(...) before the launch")
            if not a.is_contiguous():
                raise LaunchError(f"{where}: tensor is not contiguous (strides {a.stride()}); pass .contiguous() "
                                  "and read the results from that tensor")
            a = a.detach()
            if got is dt.bf16:
                import torch

                arr = a.to(torch.float32).numpy().copy()

                def wb(t=a, arr=arr):
                    t.copy_(torch.from_numpy(dt.round_bf16(arr)).to(torch.bfloat16))

                return arr, wb
            if got is dt.e4m3:  # float32 holding e4m3 values (exact both ways)
                import torch

                arr = a.to(torch.float32).numpy().copy()

                def wb(t=a, arr=arr):
                    t.copy_(torch.from_numpy(dt.round_e4m3(arr)).to(torch.float8_e4m3fn))

                return arr, wb
            return a.numpy(), None
        if not isinstance(a, np.ndarray):
            raise LaunchError(f"{where}: expected a tensor {p.type} (numpy array or CPU torch tensor), got "
                              f"{type(a).__name__}")
        got = dt.from_any(a.dtype)
        # numpy has no bf16 or e4m3: float32 arrays stand for them (values rounded when stored).
        if got != want and not (want in (dt.bf16, dt.e4m3) and got is dt.f32):
            raise LaunchError(f"{where}: expected dtype {want} ({p.type}), got numpy {a.dtype}; convert with "
                              f".astype({want.storage!r}) before the launch")
        if not a.flags.c_contiguous:
            raise LaunchError(f"{where}: array is not C-contiguous (strides {a.strides}); pass "
                              "np.ascontiguousarray(x) and read the results from that array")
        return a, None

    def _scalar_arg(self, p, a):
        want = p.type.dtype
        where = f"argument '{p.name}' of kernel '{self.kir.name}'"
        if hasattr(a, "item") and getattr(a, "ndim", 0) == 0:
            a = a.item()
        if not _is_scalar_value(a):
            raise LaunchError(f"{where}: expected a scalar {want}, got {type(a).__name__}")
        if want.is_int and not (isinstance(a, int | np.integer) and not isinstance(a, bool)):
            raise LaunchError(f"{where}: expected an integer ({want}), got {a!r}; pass int(...)")
        return _scalar(a, want)
