"""Bulk tensor copies (TMA) on sm_90a: when a `tp.copy_bulk` can be one or a few `cp.async.bulk.tensor`
instructions, and the tensor maps the host must build for them.

A tensor map describes the global tensor (dims, byte strides, element type), the box a copy moves and the
swizzle the copy engine applies on the way into shared memory. The box lands densely in shared memory,
innermost dimension first, with the byte address bits [4, 4 + b) XORed with bits [7, 7 + b) for the
32/64/128-byte swizzles (b = 1, 2, 3): CUTLASS's Swizzle<b, 4, 3> on bytes, i.e. tp.Swizzle(b, 4 - log2(element
bytes), 3) on element offsets (tp.Swizzle(3, 3, 3) on bf16 is the 128-byte swizzle). Elements outside the
tensor are zero-filled, which is the language's masking of a view at the tensor's bounds, and the mbarrier's
transaction count is always the whole box.

What the planner accepts (anything else keeps the per-row / cooperative copy of `sm90a.emit_copy_bulk`):
* the view's innermost tensor dimension is a tile dimension (not indexed by an integer), tensor rank <= 5;
* the shared stage is row-major and compact, or row-major with its last dimension split into column blocks
  `(A, R) : (1, S)` (one copy per block, A columns wide: the wgmma MN-major form of a wide B tile);
* the box's inner extent is a multiple of 16 bytes, every box extent is <= 256, and a swizzled tile's rows are
  exactly one swizzle span (16 << b bytes) wide;
* the shared destination of each copy is aligned to the swizzle pattern (1024/512/256 bytes) or to 128 bytes.
What only the launch can check (a 16-byte aligned base address, byte strides that are multiples of 16, sizes
under the engine's limits) picks the path at run time: the host sets bit i of `tp_tma_ok` when tensor map i
could be encoded, and the kernel takes the fallback otherwise.

A bulk tensor copy or store must also start on a 16-byte boundary: its innermost start coordinate times the element
bytes a multiple of 16 (H100 raises an illegal instruction otherwise, loads and stores alike, measured:
benchmarks/profile/lead_tma_offset.py). `start_guard` decides it at compile time for a literal start (off 16 bytes:
no TMA) and gives the run-time test, beside the `tp_tma_ok` bit, for any other; a TMA-only copy (fallback=False,
multicast) with a run-time start has no other path, so its start must be on 16 bytes (the stdlib's are multiples of
the tile width).
"""

from __future__ import annotations

from dataclasses import dataclass

SWIZZLE_SPAN = {0: 0, 1: 32, 2: 64, 3: 128}  # TMA swizzle mode -> bytes per swizzled row


@dataclass(frozen=True)
class TensorMapSpec:
    """One tensor map kernel parameter: which tensor parameter, the box (innermost dimension first) and the
    swizzle mode (0 none, 1 32B, 2 64B, 3 128B)."""

    param: str  # tilepy name of the tensor parameter
    dtype: str  # tilepy dtype name
    rank: int
    box: tuple  # innermost first
    swizzle: int
    required: bool = False  # a copy_bulk(fallback=False) uses it: the kernel has no other path, the launch refuses

    def to_json(self) -> dict:
        return {"param": self.param, "dtype": self.dtype, "rank": self.rank, "box": list(self.box),
                "swizzle": self.swizzle, "required": self.required}


@dataclass(frozen=True)
class TmaPlan:
    spec: TensorMapSpec
    copies: tuple  # (inner coordinate offset in elements, shared element offset) per instruction
    nbytes: int  # transaction bytes of the whole tile


def start_guard(view, eb: int):
    """Whether the view's innermost start is a 16-byte column: True or False where the start is a literal, else the
    C condition that tests it at run time."""
    start = str(view.starts[-1]).strip()
    q = 16 // eb if 16 % eb == 0 else 0
    if q <= 1:
        return True
    try:
        return int(start.strip("()")) % q == 0
    except ValueError:
        return f"((({start}) & {q - 1}) == 0)"


def _log2(n: int) -> int:
    return n.bit_length() - 1


def _row_major(shape) -> list:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return list(reversed(out))


def plan(view, stype, align: int) -> tuple[TmaPlan | None, str]:
    """(plan, "") when the copy of `view` into a shared stage of type `stype` (aligned to `align` bytes) is a
    TMA copy; (None, reason) otherwise."""
    eb = stype.dtype.bytes
    rank = len(view.starts)
    tdims = view.tile_dims
    shape = tuple(stype.shape)
    if rank > 5:
        return None, f"the tensor has rank {rank} (TMA takes at most 5)"
    if not tdims or tdims[-1] != rank - 1:
        return None, "the view's innermost dimension is indexed by an integer"
    lay_shape, lay_stride = stype.layout.shape, stype.layout.stride
    if not isinstance(lay_shape, tuple):
        lay_shape, lay_stride = (lay_shape,), (lay_stride,)
    if len(lay_shape) != len(shape):
        return None, "the shared layout's rank differs from the tile's"
    last_shape, last_stride = lay_shape[-1], lay_stride[-1]
    if isinstance(last_shape, tuple):
        if not (len(last_shape) == 2 and isinstance(last_stride, tuple) and last_stride[0] == 1
                and all(isinstance(x, int) for x in (*last_shape, *last_stride))):
            return None, "the shared layout's last dimension is not (columns, blocks) : (1, block stride)"
        inner, blocks, block_stride = last_shape[0], last_shape[1], last_stride[1]
    elif last_stride == 1:
        inner, blocks, block_stride = last_shape, 1, 0
    else:
        return None, "the shared tile's last dimension is not contiguous"
    if inner * blocks != shape[-1]:
        return None, "the shared layout does not cover the tile's last dimension"
    outer = tuple(lay_shape[:-1])
    if any(isinstance(x, tuple) for x in (*outer, *lay_stride[:-1])):
        return None, "the shared layout is hierarchical outside its last dimension"
    if list(lay_stride[:-1]) != _row_major((*outer, inner))[:-1]:
        return None, "the shared tile is not row-major"
    box_elems = inner
    for n in outer:
        box_elems *= n
    if blocks > 1 and block_stride < box_elems:
        return None, "the shared layout's column blocks overlap"
    if inner * eb % 16:
        return None, f"its rows are {inner * eb} bytes, not a multiple of 16"
    if inner > 256 or any(n > 256 for n in outer):
        return None, "a box dimension is over 256 elements"
    sw = stype.swizzle
    mode = 0
    if sw is not None and sw.bits == 0:  # tp.Swizzle(0, ...) permutes nothing
        sw = None
    if sw is not None:
        if sw.shift != 3 or sw.bits not in (1, 2, 3) or (1 << sw.base) * eb != 16:
            return None, f"{sw} is not a TMA swizzle (tp.Swizzle(1..3, {4 - _log2(eb)}, 3) for {eb}-byte elements)"
        mode = sw.bits
        if inner * eb != SWIZZLE_SPAN[mode]:
            return None, (f"its rows are {inner * eb} bytes but the {SWIZZLE_SPAN[mode]}-byte swizzle needs rows of "
                          "exactly that width")
    pattern = SWIZZLE_SPAN[mode] * 8 if mode else 128
    if align % pattern or (block_stride * eb) % pattern:
        return None, f"the shared destination is not aligned to {pattern} bytes"
    # box per tensor dimension, innermost first: squeezed dimensions move one element
    box = []
    for j in range(rank - 1, -1, -1):
        if j not in tdims:
            box.append(1)
        elif j == rank - 1:
            box.append(inner)
        else:
            box.append(outer[tdims.index(j)])
    spec = TensorMapSpec(view.tensor.param, stype.dtype.name, rank, tuple(box), mode)
    copies = tuple((b * inner, b * block_stride) for b in range(blocks))
    return TmaPlan(spec, copies, box_elems * blocks * eb), ""
