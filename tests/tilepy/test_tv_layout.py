"""Thread-value layouts: blocked layouts cover any tile, MMA fragments match the ISA's fragment maps."""

import itertools

import numpy as np
import pytest

import tilepy as tp
from tilepy.instructions import ALL, mma_operand_layout
from tilepy.tv_layout import blocked


@pytest.mark.parametrize("threads", [32, 64, 96, 128])
def test_blocked_covers_every_tile(threads):
    for r, c, vec in itertools.product(range(1, 13), range(1, 13), [1, 2, 4, 8]):
        L = blocked((r, c), threads, vec)
        assert L.covers_tile() and L.in_range() and L.num_threads == threads, (r, c, vec)


def test_blocked_gives_contiguous_vectors_per_thread():
    L = blocked((16, 64), 128, 4)  # 1024 elements, 8 per thread: two 4-wide vectors
    rows, cols = L.coords
    assert L.num_values == 8
    assert (np.diff(cols[:, :4], axis=1) == 1).all() and (rows[:, :4] == rows[:, :1]).all()
    assert len(np.unique(L.flat)) == 1024  # no replication when threads divide the tile


@pytest.mark.parametrize("name", sorted(n for n in ALL if not n.startswith("nv.wgmma")))
def test_fragments_hold_each_element_once_per_operand(name):
    ins = ALL[name]
    for which in ("a", "b", "c"):
        frag = ins.operand(which)
        assert frag.num_threads == ins.threads
        flat = frag.flat.ravel()
        assert sorted(flat) == list(range(np.prod(ins.operand_shape(which))))  # a bijection


def test_mma_m16n8k16_accumulator_matches_the_ptx_figure():
    # PTX ISA, mma.m16n8k16 C fragment: c0,c1 at row groupID, cols 2*tig + {0,1}; c2,c3 at row groupID + 8.
    c = ALL["nv.mma_m16n8k16_bf16"].c
    for lane in range(32):
        group, tig = lane // 4, lane % 4
        assert [c.coord(lane, v) for v in range(4)] == [
            (group, 2 * tig), (group, 2 * tig + 1), (group + 8, 2 * tig), (group + 8, 2 * tig + 1)]


def test_tiled_accumulator_covers_the_block_tile_once():
    L = tp.accumulator(tp.amd.mfma_f32_32x32x8_bf16, (64, 128), (2, 2))
    assert L.num_threads == 256 and sorted(L.flat.ravel()) == list(range(64 * 128))
    A = mma_operand_layout(tp.amd.mfma_f32_32x32x8_bf16, "a", (64, 32), (2, 2))
    assert A.covers_tile() and A.num_threads == 256  # A is replicated across the warp columns
