"""tp.reshape(x, shape, layout=): when the result's layout holds, in every thread and value slot, the element of
the same row-major index as x's, the reshape is a register copy (no shared memory, no barrier); otherwise it goes
through a shared scratch tile. Both compute the same tile (interpreter against numpy; the CUDA source rendered,
compiled where NVRTC is here). `stdlib_kernels.llm_ops._as_pairs` builds such a layout for GPT-J's pairs."""

import numpy as np
import pytest

import tilepy as tp
import tilepy_hip
from stdlib_kernels.llm_ops import _as_pairs
from tilepy_hip import build
from tilepy_hip.render.scans import _same_slots

NV = build.nvidia_compiler()
LX = tp.blocked((4, 64), 64, vec=8)


@tp.kernel(threads=64)
def swap_pairs(X: tp.Tensor[tp.f32, 4, 64], Y: tp.Tensor[tp.f32, 4, 64], SAME: tp.constexpr = True):
    """Y[r, 2i + e] = X[r, 2i + 1 - e]: each element's partner in its pair, through a (4, 32, 2) view."""
    x = tp.load(X[0:4, 0:64], layout=LX)
    x3 = tp.reshape(x, (4, 32, 2), layout=_as_pairs(LX)) if SAME else tp.reshape(x, (4, 32, 2))
    tp.store(Y[0:4, 0:64], tp.reshape(tp.sum(x3, axis=2, keepdims=True) - x3, (4, 64), layout=LX))


def test_pairs_layout_holds_the_same_slots():
    for tile, threads in (((4, 64), 64), ((32, 128), 128), ((8, 128), 128), ((1, 8), 32), ((2, 16), 64)):
        lx = tp.blocked(tile, threads, vec=8)
        lp = _as_pairs(lx)
        assert lp.tile == (tile[0], tile[1] // 2, 2) and _same_slots(lx, lp)
        assert lp.covers_tile() and lp.in_range()
    assert not _same_slots(LX, tp.blocked((4, 32, 2), 64))      # the default layout of the shape differs


@pytest.mark.parametrize("same", [True, False])
def test_interpreter(same):
    x = (np.random.default_rng(3).integers(-64, 64, (4, 64)) / 8).astype(np.float32)   # (a + b) - a exact
    y = np.full_like(x, np.nan)
    swap_pairs[(1,)](x, y, SAME=same)
    np.testing.assert_array_equal(y, x.reshape(4, 32, 2)[..., ::-1].reshape(4, 64))


@pytest.mark.parametrize("target", ["sm_90a", "sm_80", "gfx942"])
def test_register_copy_renders_without_shared_memory(target):
    src = tilepy_hip.render(swap_pairs.ir(target, SAME=True), target)
    assert "tp_smem +" not in src and "__syncthreads" not in src
    slow = tilepy_hip.render(swap_pairs.ir(target, SAME=False), target)
    assert "tp_smem +" in slow                                   # the default layouts go through shared memory


@pytest.mark.skipif(NV is None, reason="no NVRTC or nvcc here (pip install nvidia-cuda-nvrtc)")
def test_compiles_with_vector_accesses(tmp_path):
    ck = build.compile_ir(swap_pairs.ir("sm_90a", SAME=True), cache_dir=tmp_path)
    assert ck.resources["spill_stores"] == 0
    src = tilepy_hip.render(swap_pairs.ir("sm_90a", SAME=True), "sm_90a")
    assert "tp_ldvec<float, 4>" in src and "tp_stvec<float, 4>" in src
