"""Types of IR values. Memory spaces are distinct types: a global tensor, a view (tile) of one, a shared
tile, and a register tile distributed over threads by a thread-value layout."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .dtypes import DType
from .layout import ComposedLayout, Layout, Swizzle
from .tv_layout import TVLayout


@dataclass(frozen=True)
class ScalarType:
    """A scalar. `uniform`: the same value in every thread of a block (block ids, loop counters,
    constexpr arithmetic); thread ids and what derives from them are not."""

    dtype: DType
    uniform: bool = True

    def __str__(self) -> str:
        return f"{self.dtype}" + ("" if self.uniform else " (per-thread)")


@dataclass(frozen=True)
class TensorType:
    """A kernel argument in global memory, row-major; dimensions are ints or symbolic names."""

    dtype: DType
    shape: tuple  # of int | str

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        return f"Tensor[{self.dtype}, {', '.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class GlobalTileType:
    """A statically shaped window of a global tensor at run-time offsets; out-of-bounds elements are
    masked (loads read `other`, stores skip them)."""

    dtype: DType
    shape: tuple[int, ...]

    def __str__(self) -> str:
        return f"GlobalTile[{self.dtype}, {'x'.join(map(str, self.shape)) or 'scalar'}]"


@dataclass(frozen=True)
class GatherTileType(GlobalTileType):
    """A gather (or scatter) view of a global tensor: tile element `c` is the tensor element at
    (index_0[c], index_1[c], ...), one integer tile or uniform scalar per tensor dimension. Elements whose
    index falls outside the tensor are masked, as for windows. Strided windows are gather views too."""

    def __str__(self) -> str:
        return f"GlobalGather[{self.dtype}, {'x'.join(map(str, self.shape)) or 'scalar'}]"


@dataclass(frozen=True)
class SharedType:
    """Shared memory (LDS). With `stages` set it is a ring of stage buffers; indexing it by a stage gives
    the stage's tile (stages=None). `layout` maps coordinates to element offsets inside one stage (row-major
    unless given); `swizzle` then permutes those offsets."""

    dtype: DType
    shape: tuple[int, ...]
    layout: Layout
    swizzle: Swizzle | None = None
    stages: int | None = None

    @property
    def stage_elems(self) -> int:
        return self.layout.cosize()

    @property
    def nbytes(self) -> int:
        return self.stage_elems * (self.stages or 1) * self.dtype.bytes

    @property
    def offset_layout(self) -> Layout | ComposedLayout:
        """Tile coordinates -> element offset inside one stage: the layout, then the swizzle."""
        return self.layout if self.swizzle is None else ComposedLayout(self.swizzle, self.layout)

    def offset(self, coords):
        """Element offset inside one stage of the element at `coords` (one coordinate per axis): the
        swizzled layout, `offset_layout(coords)`; stage k of a ring starts k * stage_elems elements on.

        The one definition of where a shared element lives, for the interpreter, the verifier and the
        renderers alike, so it is generic over the coordinates' arithmetic: Python ints give an int, numpy
        integer arrays an int64 array of the coordinates' broadcast shape (elementwise), and
        `tilepy.symbolic.Sym` expressions the offset formula (which the renderers print as C++).
        Raises ValueError when the coordinates do not match the layout's modes."""
        coords = tuple(coords)
        arrays = any(isinstance(c, np.ndarray) for c in coords)
        if arrays:
            coords = tuple(np.asarray(c, dtype=np.int64) for c in coords)
        modes = self.layout.shape
        if isinstance(modes, tuple) and len(modes) == len(coords):
            off = self.offset_layout(coords)
        elif len(coords) == 1:
            off = self.offset_layout(coords[0])
        else:
            raise ValueError(f"shared layout {self.layout} has {len(modes) if isinstance(modes, tuple) else 1} "
                             f"modes but the tile has {len(coords)} dimensions")
        if arrays:
            shape = np.broadcast_shapes(*(c.shape for c in coords))
            return np.broadcast_to(np.asarray(off, dtype=np.int64), shape)
        return off

    def stage(self) -> SharedType:
        return SharedType(self.dtype, self.shape, self.layout, self.swizzle, None)

    def permute(self, dims: tuple) -> SharedType:
        """The same memory seen with its axes permuted: axis k of the result is axis dims[k] (the layout's
        modes move with the axes, so every element keeps its offset; the swizzle and stages are unchanged)."""
        shape = self.layout.shape if isinstance(self.layout.shape, tuple) else (self.layout.shape,)
        stride = self.layout.stride if isinstance(self.layout.stride, tuple) else (self.layout.stride,)
        layout = type(self.layout)(tuple(shape[d] for d in dims), tuple(stride[d] for d in dims))
        return SharedType(self.dtype, tuple(self.shape[d] for d in dims), layout, self.swizzle, self.stages)

    def window(self, starts: tuple, sizes: tuple, squeeze: tuple) -> tuple[SharedType, int]:
        """(type, origin) of the sub-tile at `starts` with `sizes` (axes with squeeze=True are fixed at their
        start and dropped): element c of the window is at offset origin + layout(c) before the swizzle, which
        needs the layout's modes flat (one stride per axis) and, with a swizzle, an origin that the swizzle
        does not mix (a multiple of its period). Raises ValueError with the reason otherwise."""
        shape = self.layout.shape if isinstance(self.layout.shape, tuple) else (self.layout.shape,)
        stride = self.layout.stride if isinstance(self.layout.stride, tuple) else (self.layout.stride,)
        if not all(isinstance(x, int) for x in shape + stride):
            raise ValueError(f"the layout {self.layout} has nested modes; a window needs one stride per axis")
        for d, (a, n, q) in enumerate(zip(starts, sizes, squeeze)):
            if a < 0 or a + (1 if q else n) > self.shape[d]:
                raise ValueError(f"the window [{a}:{a + n}] leaves axis {d} of size {self.shape[d]}")
        origin = sum(a * st for a, st in zip(starts, stride))
        if self.swizzle is not None and origin % self.swizzle.size():
            raise ValueError(f"the window starts at offset {origin}, inside a period of {self.swizzle}")
        keep = [d for d, q in enumerate(squeeze) if not q]
        layout = type(self.layout)(tuple(sizes[d] for d in keep), tuple(stride[d] for d in keep))
        return SharedType(self.dtype, tuple(sizes[d] for d in keep), layout, self.swizzle, None), origin

    def __str__(self) -> str:
        extra = f", swizzle={self.swizzle}" if self.swizzle else ""
        st = f"{self.stages}x" if self.stages else ""
        return f"Shared[{self.dtype}, {st}{'x'.join(map(str, self.shape))}{extra}]"


@dataclass(frozen=True)
class RegType:
    """A register tile: each element lives in the registers of the threads `layout` assigns it to."""

    dtype: DType
    shape: tuple[int, ...]
    layout: TVLayout

    def __str__(self) -> str:
        return f"Reg[{self.dtype}, {'x'.join(map(str, self.shape)) or 'scalar'}, {self.layout.short()}]"


@dataclass(frozen=True)
class MBarrierType:
    """A shared-memory transaction barrier (Hopper mbarrier): `count` arrivals complete a phase. With
    `stages`, an array of that many mbarriers, indexed at run time (`full[k % STAGES]`) to give one."""

    count: int = 1
    stages: int | None = None

    def __str__(self) -> str:
        return f"MBarrier[{self.count}]" + (f" x {self.stages}" if self.stages is not None else "")


@dataclass(frozen=True)
class NoneType_:
    def __str__(self) -> str:
        return "none"


NONE = NoneType_()

IRType = ScalarType | TensorType | GlobalTileType | SharedType | RegType | MBarrierType | NoneType_
