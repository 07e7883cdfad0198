"""Conditional expressions, permuted shared-tile views and shared windows (issue 17): interpreter semantics
against numpy, the renderer's C, and what the verifier proves through them (tags through a transposed shared
read, through halo windows and through MMA results; windows bounds-checked; uninitialized halo elements)."""

import numpy as np
import pytest

import tilepy as tp
import tilepy_hip
import tilepy_verify as tv
from tilepy.dtypes import round_bf16

I16 = tp.nv.mma_m16n8k16_bf16


@tp.kernel(threads=64, target="sm_80")
def ifexp(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], n: tp.i32, FAST: tp.constexpr = True):
    i0 = tp.block_id(0) * 64
    x = tp.load(X[i0:i0 + 64])
    scale = 2.0 if FAST else 3.0                      # compile time: one branch is translated
    lim = n if n < 100 else 100                       # run-time scalars
    y = x * scale if n > 5 else x                     # scalar condition, tile values
    z = tp.where(tp.arange(64) + i0 < lim, y, 0.0)
    w = z if tp.block_id(0) > 0 else -z
    tp.store(Y[i0:i0 + 64], (w > 1.0) if False else w)


@pytest.mark.parametrize("n, fast", [(90, True), (3, False), (200, True)])
def test_conditional_expressions_match_numpy(n, fast):
    x = np.arange(128, dtype=np.float32) - 20
    y = np.zeros_like(x)
    ifexp[(2,)](x, y, n, FAST=fast)
    i = np.arange(128)
    scaled = x * (2.0 if fast else 3.0) if n > 5 else x
    ref = np.where(i < min(n, 100), scaled, 0)
    ref = np.where(i >= 64, ref, -ref)
    assert np.array_equal(y, ref)


def test_conditional_expressions_render_and_verify():
    kir = ifexp.ir()
    assert sum(1 for s in kir.body if getattr(s, "name", "") == "scale") == 0  # folded into a constant
    src = tilepy_hip.render(kir)
    assert "lim = ((n < 100) ? n : 100);" in src
    assert tv.verify(kir).ok


@tp.kernel(threads=128, target="sm_80")
def transpose_tile(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, "N", "M"], VIA: tp.constexpr = "fn",
                   BUG: tp.constexpr = "none"):
    T = 32
    m0 = tp.block_id(0) * T
    n0 = tp.block_id(1) * T
    tp.tag(X, lambda i, j: ("X", i, j))
    s = tp.shared((T, T), tp.f32, stages=2, layout=tp.Layout((T, T), (T + 1, 1)), swizzle=None)
    tp.store(s[1], tp.load(X[m0:m0 + T, n0:n0 + T]))
    tp.barrier()
    if VIA == "fn":
        st = tp.transpose(s[1])
    elif VIA == "attr":
        st = s[1].T
    else:
        st = tp.permute(s[1], (1, 0))
    if BUG == "untransposed":
        y = tp.load(s[1])
    else:
        y = tp.load(st)
    r = tp.arange(T)
    tp.tag(r, lambda i: ("r", i))
    tp.assert_tag(y + r[:, None].to(tp.f32), lambda t: t[0][2] % 32 == t[1][1])   # row j of y is column j of X
    tp.store(Y[n0:n0 + T, m0:m0 + T], y)


@pytest.mark.parametrize("via", ["fn", "attr", "permute"])
def test_shared_transpose_interpreter_renderer_verifier(via):
    x = np.arange(40 * 70, dtype=np.float32).reshape(40, 70)
    y = np.zeros((70, 40), np.float32)
    transpose_tile[(2, 3)](x, y, VIA=via)
    assert np.array_equal(y, x.T)
    src = tilepy_hip.render(transpose_tile.ir(VIA=via))
    assert "(tp_tc1 * 33)" in src  # the read walks the padded rows: element (j, i) at i * 33 + j
    assert tv.verify(transpose_tile, VIA=via).ok


def test_shared_transpose_tags_are_reframed():
    report = tv.verify(transpose_tile, BUG="untransposed")
    f = [f for f in report.errors if f.check == "tag_assertion"]
    assert f, str(report)


def test_permute_needs_a_stage_and_a_permutation():
    @tp.kernel(threads=64, target="sm_80")
    def bad(X: tp.Tensor[tp.f32, 8, 8], HOW: tp.constexpr = "staged"):
        s = tp.shared((8, 8), tp.f32, stages=2)
        if HOW == "staged":
            t = tp.transpose(s)
        else:
            t = tp.permute(s[0], (0, 0))
        tp.store(X[0:8, 0:8], tp.load(t))

    with pytest.raises(tp.KernelTypeError, match="one stage") as e:
        bad.ir()
    assert "a_s[k % STAGES]" in e.value.hint
    with pytest.raises(tp.ShapeError, match="permutation"):
        bad.ir(HOW="dims")


@tp.kernel(threads=64, target="sm_80")
def chained(A: tp.Tensor[tp.bf16, 32, 16], B: tp.Tensor[tp.bf16, 16, 16], V: tp.Tensor[tp.bf16, 16, 16],
            O: tp.Tensor[tp.f32, 32, 16], BUG: tp.constexpr = "none"):
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    tp.tag(V, lambda j, d: ("V", j, d))
    a = tp.load(A[0:32, 0:16], layout=tp.mma_layout(I16, "a", (32, 16), (2, 1)))
    b = tp.load(B[0:16, 0:16], layout=tp.mma_layout(I16, "b", (16, 16), (2, 1)))
    s = tp.mma(a, b, tp.zeros((32, 16), tp.f32, layout=tp.accumulator(I16, (32, 16), (2, 1))))
    p = tp.convert_layout(s.to(tp.bf16), tp.mma_layout(I16, "a", (32, 16), (2, 1)))
    if BUG == "transposed":
        v = tp.load(V[0:16, 0:16], layout=tp.mma_layout(I16, "b", (16, 16), (2, 1)))
        tp.tag(v, lambda d, j: ("V", j, d))
    else:
        v = tp.load(V[0:16, 0:16], layout=tp.mma_layout(I16, "b", (16, 16), (2, 1)))
    o = tp.mma(p, v, tp.zeros((32, 16), tp.f32, layout=tp.accumulator(I16, (32, 16), (2, 1))))
    tp.assert_tag(tp.mma_operands(o), lambda x, y: x[1][2] == y[1])   # S's column j meets V's row j
    tp.assert_tag(o, lambda t: t[0][1][2] == t[1][1] and t[0][0][0] == "A")   # and so does the result's tag
    tp.store(O[0:32, 0:16], o)


def test_tags_flow_through_mma_results():
    report = tv.verify(chained)
    assert report.ok, str(report)
    bad = tv.verify(chained, BUG="transposed")
    assert {f.check for f in bad.errors} == {"tag_assertion"} and len(bad.errors) == 2, str(bad)
    rng = np.random.default_rng(3)
    a, b, v = (round_bf16(rng.standard_normal(sh).astype(np.float32)) for sh in ((32, 16), (16, 16), (16, 16)))
    o = np.zeros((32, 16), np.float32)
    chained[(1,)](a, b, v, o)
    ref = round_bf16((a.astype(np.float64) @ b).astype(np.float32)).astype(np.float64) @ v
    assert np.allclose(o, ref, rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------- shared windows
@tp.kernel(threads=64, target="sm_80")
def halo1d(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], BN: tp.constexpr = 64, BUG: tp.constexpr = "none"):
    tp.tag(X, lambda i: ("X", i))
    i0 = tp.block_id(0) * BN
    s = tp.shared((BN + 2,), tp.f32)                      # the tile and its two halo elements
    tp.copy(X[i0 - 1:i0 - 1 + BN], s[0:BN])
    if BUG != "nohalo":
        tp.copy(X[i0 - 1 + BN:i0 + 1 + BN], s[BN:BN + 2])
    if BUG != "nobarrier":
        tp.barrier()
    left = tp.load(s[0:BN])
    mid = tp.load(s[1:1 + BN])
    right = tp.load(s[1:1 + BN]) if BUG == "shift" else tp.load(s[2:2 + BN])
    y = left + mid + right
    tp.assert_tag(y, lambda t: t[0][0][1] + 1 == t[0][1][1] and t[0][1][1] + 1 == t[1][1])
    tp.store(Y[i0:i0 + BN], y)


@tp.kernel(threads=128, target="sm_80")
def halo2d(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, "M", "N"], B: tp.constexpr = 16,
           BUG: tp.constexpr = "none"):
    tp.tag(X, lambda i, j: ("X", i, j))
    r0 = tp.block_id(0) * B
    c0 = tp.block_id(1) * B
    s = tp.shared((B + 2, 2 * B), tp.f32, stages=2)       # rows r0 - 1 .. r0 + B, columns c0 - 1 .. c0 + 2B - 2
    tp.copy(X[r0 - 1:r0 - 1 + B, c0 - 1:c0 - 1 + 2 * B], s[1][0:B, :])
    tp.copy(X[r0 - 1 + B:r0 + 1 + B, c0 - 1:c0 - 1 + 2 * B], s[1][B:B + 2, :])
    tp.barrier()
    acc = tp.zeros((B, B), tp.f32)
    for di in tp.static_range(3):
        for dj in tp.static_range(3):
            if BUG == "row" and di == 2:
                acc += tp.load(s[1][1:1 + B, dj:dj + B])
            else:
                acc += tp.load(s[1][di:di + B, dj:dj + B])
    t = tp.load(tp.transpose(s[1][1:1 + B, 1:1 + B]))     # the center, transposed
    tp.assert_tag(t, lambda x: x[1] % 16 == 0 or x[1] >= 0)
    tp.store(Y[r0:r0 + B, c0:c0 + B], acc)


def test_halo_windows_interpreter():
    x = (np.arange(200, dtype=np.float32) * 0.37) ** 1.5
    y = np.zeros_like(x)
    halo1d[(tp.cdiv(200, 64),)](x, y)
    xp = np.pad(x, 1)
    assert np.allclose(y, xp[:-2] + xp[1:-1] + xp[2:], rtol=1e-6)
    x2 = np.random.default_rng(4).standard_normal((40, 50)).astype(np.float32)
    y2 = np.zeros_like(x2)
    halo2d[(tp.cdiv(40, 16), tp.cdiv(50, 16))](x2, y2)
    xp = np.pad(x2.astype(np.float64), 1)
    ref = sum(xp[di:di + 40, dj:dj + 50] for di in range(3) for dj in range(3))
    assert np.allclose(y2, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bug, checks", [("none", set()), ("nohalo", {"pipeline_hazard"}),
                                         ("nobarrier", {"race"}), ("shift", {"tag_assertion"})])
def test_halo_windows_verifier(bug, checks):
    report = tv.verify(halo1d, BUG=bug)
    assert checks <= {f.check for f in report.errors} and (checks or report.ok), str(report)
    if bug == "nohalo":  # the uninitialized element is a right-halo element, named in the counterexample
        f = next(f for f in report.errors if "before anything was written" in f.message)
        assert f.counterexample["coords"][0] >= 62


def test_halo2d_verifies_and_renders():
    assert tv.verify(halo2d).ok
    src = tilepy_hip.render(halo2d.ir())
    # window (di, dj) of stage 1: the stage base (1 * 576 elements) plus the window's origin di * 32 + dj; the
    # (2, 2) window starts 8-byte aligned, so its pairs of slots are read as vectors (render/tiles.py)
    assert "((s + (1) * 576) + 33)[((tp_tc0 * 32) + tp_tc1)]" in src
    assert "tp_ldvec<float, 2>(((s + (1) * 576) + 66) + ((tp_tc0 * 32) + tp_tc1))" in src


def test_window_errors():
    @tp.kernel(threads=64, target="sm_80")
    def bad(X: tp.Tensor[tp.f32, 64], n: tp.i32, HOW: tp.constexpr = "runtime"):
        s = tp.shared((66,), tp.f32)
        w = tp.shared((8, 8), tp.f32, stages=2)
        if HOW == "runtime":
            tp.store(s[n:n + 64], tp.load(X[0:64]))
        elif HOW == "range":
            tp.store(s[4:4 + 64], tp.load(X[0:64]))
        else:
            tp.store(w[0:4, :], tp.load(X[0:32]))

    with pytest.raises(tp.ConstexprError, match="compile-time") as e:
        bad.ir()
    assert "a_s[k % STAGES]" in e.value.hint
    with pytest.raises(tp.ShapeError, match="leaves axis 0"):
        bad.ir(HOW="range")
    with pytest.raises(tp.KernelTypeError, match="one stage"):
        bad.ir(HOW="staged")
