"""Thread-value layouts of register tiles: which thread holds which element.

A `TVLayout` maps (thread, value) to a coordinate of the tile, one `Layout` per tile dimension, all over the
same domain shape (thread modes, value modes). Keeping one affine layout per dimension (instead of a flat
offset) makes reductions (drop a dimension), broadcasts and the verifier's symbolic maps direct: evaluating
each dimension's layout on symbolic (thread, value) gives the element coordinate as an expression.
Several threads may hold the same element (stride 0 in a thread mode): that is replication, as after a
reduction or for an MMA operand shared by the warps of one row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .int_tuple import product
from .layout import Layout


@dataclass(frozen=True)
class TVLayout:
    tile: tuple[int, ...]
    thread_shape: tuple[int, ...]
    value_shape: tuple[int, ...]
    # per tile dimension: (thread strides, value strides) for that dimension's coordinate
    strides: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]
    # Descriptive fields: two layouts with the same map are equal whatever their names.
    name: str = field(default="custom", compare=False)
    # (instruction name, operand, warp grid) when this is an MMA fragment layout; () otherwise.
    origin: tuple = field(default=(), compare=False)

    @property
    def num_threads(self) -> int:
        return product(self.thread_shape)

    @property
    def num_values(self) -> int:
        return product(self.value_shape)

    def dim_layout(self, d: int) -> Layout:
        """The affine layout (thread, value) -> coordinate along tile dimension `d`."""
        ts, vs = self.strides[d]
        return Layout((self.thread_shape, self.value_shape), (ts, vs))

    def coord(self, thread, value) -> tuple:
        """Tile coordinate held by `thread` as its value `value`; ints, numpy arrays or symbolic exprs."""
        return tuple(self.dim_layout(d)(thread, value) for d in range(len(self.tile)))

    @cached_property
    def coords(self) -> tuple[np.ndarray, ...]:
        """Per tile dimension, an int64 array [threads, values] of the coordinate each slot holds."""
        t = np.arange(self.num_threads, dtype=np.int64)[:, None]
        v = np.arange(self.num_values, dtype=np.int64)[None, :]
        return tuple(np.broadcast_to(np.asarray(c, dtype=np.int64), (self.num_threads, self.num_values))
                     for c in self.coord(t, v))

    @cached_property
    def flat(self) -> np.ndarray:
        """Row-major flat element index [threads, values]."""
        return np.ravel_multi_index(self.coords, self.tile) if self.tile else np.zeros(
            (self.num_threads, self.num_values), dtype=np.int64)

    def covers_tile(self) -> bool:
        """Every element of the tile is held by some (thread, value)."""
        seen = np.zeros(product(self.tile), dtype=bool)
        seen[self.flat.ravel()] = True
        return bool(seen.all())

    def in_range(self) -> bool:
        return all(int(c.min()) >= 0 and int(c.max()) < n for c, n in zip(self.coords, self.tile))

    def drop_dim(self, axis: int) -> TVLayout:
        """Layout of the reduction along `axis` with keepdims: that coordinate becomes 0."""
        tile = tuple(1 if d == axis else n for d, n in enumerate(self.tile))
        zero = (tuple(0 for _ in self.thread_shape), tuple(0 for _ in self.value_shape))
        strides = tuple(zero if d == axis else s for d, s in enumerate(self.strides))
        return TVLayout(tile, self.thread_shape, self.value_shape, strides, f"reduce({self.name}, {axis})")

    def window(self, starts: tuple[int, ...], sizes: tuple[int, ...]) -> TVLayout:
        """The layout of the sub-tile [starts, starts + sizes) when every thread already holds, among its own
        values, exactly the sub-tile's elements that the result gives it (a register-local slice: the values
        kept, no data moved): the value modes that step across the window's bounds along a dimension are split
        at the window's size and their outer part fixed at the window's start. ValueError otherwise (the window
        cuts a thread mode, a value mode moves two dimensions at once, or the start is not a multiple of the
        split). An accumulator's (BM, 64) column window of a (BM, 256) wgmma tile is the m64n64 layout."""
        vshape, vstr = list(self.value_shape), [list(self.strides[d][1]) for d in range(len(self.tile))]
        for d, (start, size) in enumerate(zip(starts, sizes)):
            if size == self.tile[d]:
                continue
            ts = self.strides[d][0]
            if any(s and (s * (n - 1) >= size) for s, n in zip(ts, self.thread_shape)):
                raise ValueError(f"dimension {d}: a thread mode steps across the window's size {size}")
            modes = []
            for j, (n, s) in enumerate(zip(vshape, vstr[d])):
                if n == 1 or s == 0 or s * n <= size:
                    modes.append((n, [x[j] for x in vstr], None))
                    continue
                if any(x[j] for e, x in enumerate(vstr) if e != d):
                    raise ValueError(f"dimension {d}: a value mode that also moves dimension(s) other than {d}")
                inner = max(1, size // s) if s < size else 1
                if (s < size and (size % s or n % inner)) or (s >= size and s % size):
                    raise ValueError(f"dimension {d}: a value mode of {n} x {s} does not split at {size}")
                if inner > 1:
                    modes.append((inner, [x[j] if e == d else 0 for e, x in enumerate(vstr)], None))
                modes.append((n // inner, None, s * inner))        # outer part: fixed at the window's start
            rest, pos = start, {}
            for k in sorted((k for k, m in enumerate(modes) if m[1] is None), key=lambda k: -modes[k][2]):
                n, _, s = modes[k]
                pos[k] = min(rest // s, n - 1)
                rest -= pos[k] * s
            if rest:
                raise ValueError(f"dimension {d}: the start {start} is not a multiple of the window's value modes")
            vshape = [m[0] for m in modes if m[1] is not None]
            kept = [m[1] for m in modes if m[1] is not None]
            vstr = [[x[e] for x in kept] for e in range(len(self.tile))]
        if not vshape:
            vshape, vstr = [1], [[0] for _ in self.tile]
        out = TVLayout(tuple(sizes), self.thread_shape, tuple(vshape),
                       tuple((tuple(self.strides[d][0]), tuple(vstr[d])) for d in range(len(self.tile))),
                       f"window({self.name}, {tuple(starts)}, {tuple(sizes)})")
        if not (out.in_range() and out.covers_tile()):
            raise ValueError("the window is not held register-locally by this layout")
        # every element of the window is held by the same thread as before (the renderer then reads it in place)
        want = np.ravel_multi_index(tuple(c + st for c, st in zip(out.coords, starts)), self.tile)
        for t in range(self.num_threads):
            if not np.isin(want[t], self.flat[t]).all():
                raise ValueError("the window moves elements between threads")
        return out

    def short(self) -> str:
        return self.name

    def __str__(self) -> str:
        return f"{self.name}[T={self.num_threads}, V={self.num_values}]"


def blocked(tile: tuple[int, ...], num_threads: int, vec: int = 1) -> TVLayout:
    """Spread a tile over threads row-major, each thread holding `vec` contiguous elements of the last
    dimension per step; threads beyond the tile's elements replicate (stride 0).

    >>> blocked((4, 8), 8, vec=4).coord(1, 2)   # thread 1 holds row 0, columns 4..7
    (0, 6)
    """
    tile = tuple(int(n) for n in tile)
    if not tile:
        return TVLayout((), (num_threads,), (1,), (), "scalar")
    while vec > 1 and tile[-1] % vec:
        vec //= 2
    # The row-major element order is cut into [vec | thread | repeat] (fastest first); each cut must fall on
    # a dimension boundary or divide a dimension, so that every coordinate stays affine in (thread, value).
    total = product(tile)
    used = min(num_threads, max(total // vec, 1))
    try:
        if num_threads % used or total % (vec * used):
            raise ValueError("threads do not divide the tile")
        spare, reps = num_threads // used, total // (vec * used)
        thread_modes, value_modes = _split_modes(tile, vec, used, reps)
    except ValueError:
        # Odd shapes (the front end builds only power-of-two tiles; copies may meet others): one thread
        # holds every element and the rest replicate it. Correct, not fast.
        vec, spare = 1, num_threads
        thread_modes, value_modes = _split_modes(tile, 1, 1, total)
    tshape = tuple(n for n, _ in thread_modes) + (spare,)
    vshape = tuple(n for n, _ in value_modes)
    strides = tuple((tuple(s[d] for _, s in thread_modes) + (0,), tuple(s[d] for _, s in value_modes))
                    for d in range(len(tile)))
    return TVLayout(tile, tshape, vshape, strides, f"blocked(vec={vec})")


def _split_modes(tile, vec, threads, reps):
    """Split the row-major index space [vec | threads | reps] (fastest first) into modes that each lie in
    one tile dimension, returning (size, per-dimension stride vector) for thread and value modes."""
    dims = list(reversed(range(len(tile))))  # fastest dimension first
    # remaining capacity in each dimension, walking from the fastest
    segments = [("v", vec), ("t", threads), ("r", reps)]
    modes = {"v": [], "t": [], "r": []}
    d_idx, d_pos = 0, 1  # current dimension (index into dims) and the stride in it of the next element
    for kind, count in segments:
        while count > 1:
            d = dims[d_idx]
            room = tile[d] // d_pos
            if room <= 1:
                d_idx += 1
                d_pos = 1
                continue
            take = _gcd_take(count, room)
            stride = [0] * len(tile)
            stride[d] = d_pos
            modes[kind].append((take, tuple(stride)))
            count //= take
            d_pos *= take
            if d_pos >= tile[d]:
                d_idx += 1
                d_pos = 1
    zero = (1, tuple(0 for _ in tile))
    thread_modes = modes["t"] or [zero]
    value_modes = modes["v"] + modes["r"] or [zero]
    return thread_modes, value_modes


def _gcd_take(count: int, room: int) -> int:
    from math import gcd

    g = gcd(count, room)
    if g == 1:
        raise ValueError(f"cannot split {count} across a dimension of {room}")
    return g
