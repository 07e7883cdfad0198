"""Register-tile windows `x[a:a + n, b:b + m]` (op tile_window): the sub-tile at compile-time bounds, kept in the
threads and registers that held it (TVLayout.window). A column block of a wgmma accumulator is the narrower
instruction's accumulator layout; windows a layout spreads across threads are refused with the reason. The
interpreter slices the tile; the renderer reads the source's registers in place (no shared-memory exchange)."""

import numpy as np
import pytest

import tilepy as tp
from tilepy.tv_layout import blocked

ACC = tp.accumulator(tp.nv.wgmma_m64n256k16_bf16, (128, 256), (2, 1))


@pytest.mark.parametrize("c0,n", [(0, 64), (64, 64), (192, 64), (128, 128), (0, 256), (8, 8)])
def test_accumulator_column_windows_keep_each_element_in_its_thread(c0, n):
    w = ACC.window((0, c0), (128, n))
    assert w.tile == (128, n) and w.num_threads == ACC.num_threads and w.num_values == ACC.num_values * n // 256
    # every (thread, value) of the window names an element the same thread held in the whole tile, at the offset
    whole = {(t, int(r), int(c)) for t in range(ACC.num_threads)
             for r, c in zip(ACC.coords[0][t], ACC.coords[1][t])}
    for t in range(w.num_threads):
        for r, c in zip(w.coords[0][t], w.coords[1][t]):
            assert (t, int(r), int(c) + c0) in whole
    assert w.covers_tile()
    if n == 64:   # the m64n64 accumulator's map, value for value
        narrow = tp.accumulator(tp.nv.wgmma_m64n64k16_bf16, (128, 64), (2, 1))
        assert all(np.array_equal(a, b) for a, b in zip(w.coords, narrow.coords))


@pytest.mark.parametrize("starts,sizes,why", [
    ((0, 4), (128, 4), "thread mode"),                 # 4 columns: the quad's threads hold 2 each
    ((0, 32), (128, 64), "not a multiple"),            # 64 columns starting off a multiple of 64
    ((64, 0), (64, 256), "thread mode"),               # the rows of one consumer warpgroup: another thread set
])
def test_windows_across_threads_are_refused(starts, sizes, why):
    with pytest.raises(ValueError, match=why):
        ACC.window(starts, sizes)


def test_blocked_row_window():
    L = blocked((32, 64), 128, 4)
    w = L.window((8, 0), (8, 64))
    assert w.tile == (8, 64) and w.num_values == L.num_values // 4


@tp.kernel(threads=256, target="sm_90a")
def _pieces(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.bf16, "M", "N"], W: tp.constexpr = 64):
    x = tp.load(X[0:128, 0:256], layout=tp.accumulator(tp.nv.wgmma_m64n256k16_bf16, (128, 256), (2, 1)))
    for p in tp.static_range(256 // W):
        tp.store(Y[0:128, p * W:p * W + W], x[:, p * W:p * W + W] * 2.0)


@pytest.mark.parametrize("w", [64, 128])
def test_pieces_of_an_accumulator_on_the_interpreter(w):
    x = np.random.default_rng(w).standard_normal((128, 256)).astype(np.float32)
    y = np.full_like(x, np.nan)
    _pieces[(1,)](x, y, W=w)
    from tilepy.dtypes import round_bf16

    np.testing.assert_array_equal(y, round_bf16(x * 2))


def test_pieces_render_in_place():
    """The window reads the accumulator's own registers: no shared-memory exchange (no shared memory, no
    __syncthreads) between the load and the pieces' stores."""
    from tilepy_hip.render import render_source

    src, smem = render_source(_pieces.ir("sm_90a", W=64))
    assert smem == 0 and "__syncthreads" not in src


def test_window_errors_name_the_line():
    @tp.kernel(threads=128)
    def bad(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, "M", "N"]):
        x = tp.load(X[0:32, 0:64], layout=tp.blocked((32, 64), 128, 4))
        tp.store(Y[0:32, 0:16], x[:, 0:16])

    with pytest.raises(tp.ShapeError) as e:
        bad.ir()
    assert "not held by the same threads" in e.value.message and "convert_layout" in e.value.hint

    @tp.kernel(threads=128)
    def moving(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, "M", "N"]):
        x = tp.load(X[0:32, 0:64], layout=tp.blocked((32, 64), 128, 4))
        for i in range(2):
            tp.store(Y[0:8, 0:64], x[i * 8:i * 8 + 8, :])

    with pytest.raises(tp.ConstexprError):
        moving.ir()
