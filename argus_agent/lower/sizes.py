"""Size limits and tile arithmetic the lowering's kernel planners share (no imports: the lowering's planners
in core.py and program.py and the renderers all read them)."""

from __future__ import annotations

INT32_MAX = 2**31 - 1
TILE_ELEMS = 4096       # elements of a reduction tile per loop step (16 per thread at 256 threads)
TARGET_BLOCKS = 1024    # blocks that keep an H100 busy (132 SMs, several blocks of 256 threads each)
ROW_MAX = 16384         # the longest row a fused row kernel holds in registers (32 values per thread at 512)
SCAN_SEGMENT = 2048     # a long row's scan runs as segments of this many elements, one block each
SCAN_CHUNK = 256        # elements of a row scanned per tile scan (tilepy_hip: per-thread segments, O(n/P + P))


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def cdiv(a: int, b: int) -> int:
    return -(-int(a) // int(b))


def threads_for(elems: int, most: int = 256) -> int:
    """Threads for a tile of `elems` elements: 16 elements per thread, 32 to `most`."""
    return max(32, min(most, next_pow2(max(1, elems // 16))))
