"""Matrix instructions with their operand layouts (PTX ISA and AMD CDNA3 ISA fragment maps).

Each instruction names its target family (a `Target` feature), its shape (m, n, k), element types, the number
of threads that execute it together, and the thread-value layout of A (m x k), B (k x n) and C (m x n).
`mma_operand_layout` tiles an instruction's fragment over a whole register tile and a grid of warps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import dtypes as dt
from .tv_layout import TVLayout


@dataclass(frozen=True)
class MmaInstr:
    name: str  # qualified, as written in kernels: "nv.mma_m16n8k16_bf16"
    family: str  # target feature: "mma_sync" | "wgmma" | "mfma"
    m: int
    n: int
    k: int
    ab: dt.DType
    acc: dt.DType
    threads: int
    a: TVLayout | None  # None: operand read from shared memory through a descriptor (wgmma); wgmma "_rs": registers
    b: TVLayout | None
    c: TVLayout
    smem_operands: bool = False  # wgmma: operands without a fragment layout come from shared memory
    fmt: str = ""  # the operands' format when it is not `ab` itself: "tf32" reads f32 registers/shared tiles

    def __repr__(self) -> str:
        return f"tp.{self.name}"

    def __hash__(self) -> int:
        # A constexpr: every launch hashes it (the fast path's signature key). The name names the instruction,
        # so hash that instead of every fragment layout (1.6 us -> 0.1 us).
        return hash(self.name)

    def operand(self, which: str) -> TVLayout | None:
        return {"a": self.a, "b": self.b, "c": self.c}[which]

    def operand_shape(self, which: str) -> tuple[int, int]:
        return {"a": (self.m, self.k), "b": (self.k, self.n), "c": (self.m, self.n)}[which]

    @property
    def format(self) -> str:
        """The operand format the hardware multiplies: "tf32", or `ab`'s name."""
        return self.fmt or self.ab.name

    @property
    def k_major_only(self) -> bool:
        """wgmma reads shared operands of formats other than f16/bf16 (tf32, e4m3) K-major only: the
        descriptor's transpose bits exist for 16-bit types alone."""
        return self.family == "wgmma" and self.format not in ("bf16", "f16")

    def read_operand(self, x):
        """Operand values as the tensor cores see them (float32): tf32 instructions read f32 bit patterns and
        ignore the low 13 mantissa bits (truncation toward zero); other formats read their own dtype."""
        if self.fmt == "tf32":
            return truncate_tf32(x)
        return dt.to_storage(x, self.ab).astype(np.float32)


def truncate_tf32(x) -> np.ndarray:
    """float32 values with the low 13 mantissa bits cleared: what a tf32 MMA reads from an f32 register.

    >>> float(truncate_tf32(np.float32(1 + 2**-10 + 2**-11))[()])
    1.0009765625
    """
    bits = np.array(x, dtype=np.float32).view(np.uint32)
    return (bits & np.uint32(0xFFFFE000)).view(np.float32)


def round_tf32(x) -> np.ndarray:
    """float32 values rounded to the nearest tf32 (10 mantissa bits), ties away from zero: `cvt.rna.tf32.f32`.
    The split x = hi + lo with hi = round_tf32(x) and lo = round_tf32(x - hi) keeps 21 of float32's 24 bits.

    >>> float(round_tf32(np.float32(1 + 2**-11))[()]), float(round_tf32(np.float32(1 + 2**-12))[()])
    (1.0009765625, 1.0)
    """
    a = np.array(x, dtype=np.float32)
    bits = a.view(np.uint32)
    finite = (bits & np.uint32(0x7F800000)) != np.uint32(0x7F800000)
    up = ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.where(finite, up, a).astype(np.float32)


def _frag(tile, tshape, vshape, row, col, name):
    return TVLayout(tile, tshape, vshape, (row, col), name)


def _mma_sync(ab: dt.DType) -> MmaInstr:
    # lane = l0 + 4*l1 (groupID = l1, thread-in-group = l0); PTX "mma.m16n8k16" fragment figures.
    t = (4, 8)
    a = _frag((16, 16), t, (2, 2, 2), ((0, 1), (0, 8, 0)), ((2, 0), (1, 0, 8)), "mma16816.A")
    b = _frag((16, 8), t, (2, 2), ((2, 0), (1, 8)), ((0, 1), (0, 0)), "mma16816.B")
    c = _frag((16, 8), t, (2, 2), ((0, 1), (0, 8)), ((2, 0), (1, 0)), "mma16816.C")
    return MmaInstr(f"nv.mma_m16n8k16_{ab.name}", "mma_sync", 16, 8, 16, ab, dt.f32, 32, a, b, c)


def _mma_sync_tf32() -> MmaInstr:
    # PTX "mma.m16n8k8" .tf32 fragments: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4); b0 (k=t, n=g),
    # b1 (t+4, g); C as m16n8k16's. lane = t + 4*g.
    t = (4, 8)
    a = _frag((16, 8), t, (2, 2), ((0, 1), (8, 0)), ((1, 0), (0, 4)), "mma1688tf32.A")
    b = _frag((8, 8), t, (2,), ((1, 0), (4,)), ((0, 1), (0,)), "mma1688tf32.B")
    c = _frag((16, 8), t, (2, 2), ((0, 1), (0, 8)), ((2, 0), (1, 0)), "mma16816.C")
    return MmaInstr("nv.mma_m16n8k8_tf32", "mma_sync", 16, 8, 8, dt.f32, dt.f32, 32, a, b, c, fmt="tf32")


def _wgmma(n: int, ab: dt.DType, fmt: str = "") -> MmaInstr:
    # thread = l0 + 4*l1 + 32*warp; warp w owns rows 16w..16w+15; value = v0 + 2*v1 + 4*chunk (8 columns each).
    t = (4, 8, 4)
    c = _frag((64, n), t, (2, 2, n // 8), ((0, 1, 16), (0, 8, 0)), ((2, 0, 0), (1, 0, 8)), f"wgmma64x{n}.C")
    k = 32 // ab.bytes  # 32 bytes of K per instruction: 8 tf32, 16 bf16/f16, 32 e4m3
    return MmaInstr(f"nv.wgmma_m64n{n}k{k}_{fmt or ab.name}", "wgmma", 64, n, k, ab, dt.f32, 128, None, None, c,
                    smem_operands=True, fmt=fmt)


def _wgmma_rs(n: int, ab: dt.DType) -> MmaInstr:
    """wgmma with A in registers ("RS": register A, shared B through a descriptor). PTX "wgmma .m64nNk16 register
    fragment for matrix A": warp w holds rows 16w..16w+15 with mma.m16n8k16's A map inside the warp (a0,a1: row g,
    columns 2t, 2t+1; a2,a3: row g+8; a4..a7: the same 8 columns on). That is the accumulator's map of two 8-column
    chunks, so an f32 accumulator cast to bf16 is, register for register, the A operand of the next product (the
    FlashAttention P @ V step)."""
    t = (4, 8, 4)
    a = _frag((64, 16), t, (2, 2, 2), ((0, 1, 16), (0, 8, 0)), ((2, 0, 0), (1, 0, 8)), "wgmma64x16.A")
    base = _wgmma(n, ab)
    return MmaInstr(f"nv.wgmma_m64n{n}k16_{ab.name}_rs", "wgmma", 64, n, 16, ab, dt.f32, 128, a, None, base.c,
                    smem_operands=True)


def _wgmma_rs_tf32(n: int) -> MmaInstr:
    """wgmma .tf32 with A in registers: f32 registers read as TF32 (the low 13 mantissa bits ignored). PTX
    "wgmma .m64nNk8 register fragment for matrix A" (32-bit types): warp w holds rows 16w..16w+15 with
    mma.m16n8k8 .tf32's A map inside the warp (a0: row g, column t; a1: row g+8; a2, a3: columns t+4)."""
    t = (4, 8, 4)
    a = _frag((64, 8), t, (2, 2), ((0, 1, 16), (8, 0)), ((1, 0, 0), (0, 4)), "wgmma64x8tf32.A")
    base = _wgmma(n, dt.f32, "tf32")
    return MmaInstr(f"nv.wgmma_m64n{n}k8_tf32_rs", "wgmma", 64, n, 8, dt.f32, dt.f32, 128, a, None, base.c,
                    smem_operands=True, fmt="tf32")


def _mfma32(ab: dt.DType) -> MmaInstr:
    # lane = l0 + 32*l1; "v_mfma_f32_32x32x8_bf16_1k": 4 k-values per lane, 16 accumulators.
    t = (32, 2)
    a = _frag((32, 8), t, (4,), ((1, 0), (0,)), ((0, 4), (1,)), "mfma32x32x8.A")
    b = _frag((8, 32), t, (4,), ((0, 4), (1,)), ((1, 0), (0,)), "mfma32x32x8.B")
    c = _frag((32, 32), t, (4, 4), ((0, 4), (1, 8)), ((1, 0), (0, 0)), "mfma32x32x8.C")
    return MmaInstr(f"amd.mfma_f32_32x32x8_{ab.name}", "mfma", 32, 32, 8, ab, dt.f32, 64, a, b, c)


def _mfma16(ab: dt.DType) -> MmaInstr:
    # lane = l0 + 16*l1; "v_mfma_f32_16x16x16_bf16": 4 k-values per lane, 4 accumulators.
    t = (16, 4)
    a = _frag((16, 16), t, (4,), ((1, 0), (0,)), ((0, 4), (1,)), "mfma16x16x16.A")
    b = _frag((16, 16), t, (4,), ((0, 4), (1,)), ((1, 0), (0,)), "mfma16x16x16.B")
    c = _frag((16, 16), t, (4,), ((0, 4), (1,)), ((1, 0), (0,)), "mfma16x16x16.C")
    return MmaInstr(f"amd.mfma_f32_16x16x16_{ab.name}", "mfma", 16, 16, 16, ab, dt.f32, 64, a, b, c)


class _Namespace:
    """`tp.nv.<instr>` / `tp.amd.<instr>`: attribute access to instructions by their short names."""

    def __init__(self, prefix: str, instrs: list[MmaInstr]):
        self._prefix = prefix
        for ins in instrs:
            setattr(self, ins.name.split(".", 1)[1], ins)

    def __repr__(self) -> str:
        return f"tp.{self._prefix}"


ALL: dict[str, MmaInstr] = {}
for _ins in (
    _mma_sync(dt.bf16), _mma_sync(dt.f16), _mma_sync_tf32(),
    *(_wgmma(n, ab) for n in (8, 16, 24, 32, 48, 64, 80, 96, 104, 112, 128, 192, 256) for ab in (dt.bf16, dt.f16)),
    # tf32: the widths gemm_fp32's wave-filling tiles take (N a multiple of 8, as PTX allows)
    *(_wgmma(n, dt.f32, "tf32") for n in (8, 16, 32, 48, 64, 80, 96, 112, 128, 192, 256)),
    # e4m3 x e4m3 -> f32, both operands K-major (N a multiple of 8, as PTX allows; the bf16 list's widths)
    *(_wgmma(n, dt.e4m3) for n in (8, 16, 24, 32, 48, 64, 80, 96, 104, 112, 128, 144, 160, 176, 192, 256)),
    *(_wgmma_rs(n, ab) for n in (8, 16, 32, 64, 128, 256) for ab in (dt.bf16, dt.f16)),
    *(_wgmma_rs_tf32(n) for n in (8, 16, 32, 48, 64, 80, 96, 112, 128, 192, 256)),
    _mfma32(dt.bf16), _mfma32(dt.f16), _mfma16(dt.bf16), _mfma16(dt.f16),
):
    ALL[_ins.name] = _ins

nv = _Namespace("nv", [i for i in ALL.values() if i.name.startswith("nv.")])
amd = _Namespace("amd", [i for i in ALL.values() if i.name.startswith("amd.")])


def mma_operand_layout(instr: MmaInstr, which: str, tile: tuple[int, int], warps: tuple[int, int]) -> TVLayout:
    """Tile `instr`'s fragment for operand `which` ("a", "b" or "c") over a whole register tile.

    Thread groups of `instr.threads` form a warps[0] x warps[1] grid over (M, N); group (gm, gn) has index
    gm + warps[0] * gn. A is replicated across gn, B across gm. Fragments repeat to cover the tile, group
    tiles interleaved: row block = gm + warps[0] * rep.

    >>> L = mma_operand_layout(ALL["nv.mma_m16n8k16_bf16"], "c", (32, 16), (2, 1))
    >>> L.num_threads, L.num_values
    (64, 8)
    """
    frag = instr.operand(which)
    if frag is None:
        raise ValueError(f"{instr.name} reads operand {which.upper()} from shared memory, not registers")
    gm, gn = warps
    p, q = instr.operand_shape(which)
    rows, cols = tile
    # Which group coordinate moves each fragment dimension, and which one replicates.
    row_group, col_group = {"a": (gm, 1), "b": (1, gn), "c": (gm, gn)}[which]
    if rows % (p * row_group) or cols % (q * col_group):
        raise ValueError(
            f"tile {tile} is not a multiple of {instr.name}'s {which.upper()} fragment {(p, q)} "
            f"times the warp grid {warps}")
    rep_r, rep_c = rows // (p * row_group), cols // (q * col_group)
    (fr_t, fr_v), (fc_t, fc_v) = frag.strides
    # group modes: (gm, gn); stride 0 on the replicated one.
    gm_row = p if which in ("a", "c") else 0
    gn_col = q if which in ("b", "c") else 0
    row = (fr_t + (gm_row, 0), fr_v + (p * row_group, 0))
    col = (fc_t + (0, gn_col), fc_v + (0, q * col_group))
    tshape = frag.thread_shape + (gm, gn)
    vshape = frag.value_shape + (rep_r, rep_c)
    return TVLayout(tuple(tile), tshape, vshape, (row, col), f"{frag.name}x{warps}", (instr.name, which, tuple(warps)))
