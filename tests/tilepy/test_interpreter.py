"""Semantics of the CPU interpreter (tilepy.interpreter.run_ir) on hand-built KernelIR programs."""

import numpy as np
import pytest

import tilepy as tp
from tilepy import dtypes as dt
from tilepy.errors import InterpreterError, LaunchError, Span
from tilepy.instructions import ALL as INSTRS
from tilepy.instructions import mma_operand_layout
from tilepy.interp_memory import ACCESS_DTYPE
from tilepy.interpreter import run_ir
from tilepy.ir import Assign, BinOp, Call, Const, Eval, For, If, KernelIR, Param, Var
from tilepy.layout import Layout, Swizzle, row_major
from tilepy.tv_layout import TVLayout, blocked
from tilepy.types import (
    NONE,
    GlobalTileType,
    MBarrierType,
    RegType,
    ScalarType,
    SharedType,
    TensorType,
)

# ----------------------------------------------------------------------------------------- IR builders

_line = [0]


def sp() -> Span:
    _line[0] += 1
    return Span("kern.py", _line[0], 4, f"line {_line[0]}")


I32 = ScalarType(dt.i32)
PT = ScalarType(dt.i32, uniform=False)
BOOL_PT = ScalarType(dt.bool_, uniform=False)


def c(v, ty=I32):
    return Const(ty, sp(), value=v)


def v(name, ty=I32):
    return Var(ty, sp(), name=name)


def binop(op, a, b, ty=None):
    return BinOp(ty or a.type, sp(), op=op, lhs=a, rhs=b)


def call(op, *args, ty=NONE, **attrs):
    return Call(ty, sp(), op=op, args=tuple(args), attrs=attrs)


def assign(name, value):
    return Assign(sp(), name=name, value=value)


def ev(op, *args, **attrs):
    return Eval(sp(), call=call(op, *args, **attrs))


def reg(dtype, shape, layout):
    return RegType(dtype, tuple(shape), layout)


def gview(tensor: Var, starts, sizes, dtype):
    return call("view", tensor, *starts, ty=GlobalTileType(dtype, tuple(sizes)), sizes=tuple(sizes),
                squeeze=(False,) * len(sizes))


def load(src, ty, *extra):
    return call("load", src, *extra, ty=ty, layout=ty.layout)


def kernel(params, body, threads, target="sm_90a"):
    ps = [Param(n, t, sp()) for n, t in params]
    return KernelIR("k", ps, {}, body, threads, target, "kern.py", 1)


def tensor(name, dtype, *shape):
    return (name, TensorType(dtype, tuple(shape)))


def shared_of(name, stype):
    return assign(name, call("shared", ty=stype, type=stype))


def acc_rows(trace, node, write=None, space=None):
    rows = trace.of_op(node)
    if write is not None:
        rows = rows[rows["write"] == write]
    if space is not None:
        rows = rows[rows["space"] == space]
    return rows


# ----------------------------------------------------------------------------------------- vector add


def _vadd_kernel(tile=256, threads=64):
    L = blocked((tile,), threads, 4)
    T = reg(dt.f32, (tile,), L)
    A, B, C = (v(n, TensorType(dt.f32, ("N",))) for n in "ABC")
    start = binop("*", call("block_id", ty=I32, axis=0), c(tile))
    la = load(gview(A, [start], (tile,), dt.f32), T)
    lb = load(gview(B, [start], (tile,), dt.f32), T)
    store = ev("store", gview(C, [start], (tile,), dt.f32), binop("+", v("a", T), v("b", T), T))
    body = [assign("a", la), assign("b", lb), store]
    k = kernel([tensor("A", dt.f32, "N"), tensor("B", dt.f32, "N"), tensor("C", dt.f32, "N")], body, threads)
    return k, la, store


def test_vector_add_partial_tile_is_masked():
    k, la, store = _vadd_kernel()
    n = 1000
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    trace = run_ir(k, (4,), [a, b, out], record=True)
    np.testing.assert_array_equal(out, a + b)
    # the last block reads and writes only the 1000 - 768 in-bounds elements
    rows = acc_rows(trace, store.call)
    assert rows["offset"].max() == n - 1 and rows.size == n
    last = rows[rows["block"] == 3]
    assert last.size == n - 768 and last["write"].all()


def test_load_thread_attribution():
    k, la, store = _vadd_kernel(tile=256, threads=64)
    a = np.arange(256, dtype=np.float32)
    out = np.zeros(256, np.float32)
    trace = run_ir(k, (1,), [a, a, out], record=True)
    rows = acc_rows(trace, la)
    assert rows.size == 256 and not rows["write"].any()
    # blocked(vec=4): thread t reads elements 4t .. 4t+3
    np.testing.assert_array_equal(rows["offset"] // 4, rows["thread"])
    assert (rows["nbytes"] == 4).all() and (rows["space"] == 0).all() and (rows["buffer"] == 0).all()
    assert trace.ops[rows["op"][0]].span.line == la.span.line
    assert trace.buffers == ["A", "B", "C"]


def test_store_replicated_elements_written_once_by_lowest_thread():
    L = blocked((64,), 128, 4)  # 16 threads cover the tile, replicated 8 times
    assert L.num_threads == 128
    T = reg(dt.f32, (64,), L)
    A, C = v("A", TensorType(dt.f32, (64,))), v("C", TensorType(dt.f32, (64,)))
    st = ev("store", gview(C, [c(0)], (64,), dt.f32), v("x", T))
    k = kernel([tensor("A", dt.f32, 64), tensor("C", dt.f32, 64)],
               [assign("x", load(gview(A, [c(0)], (64,), dt.f32), T)), st], 128)
    a = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    trace = run_ir(k, 1, [a, out], record=True)
    np.testing.assert_array_equal(out, a)
    rows = acc_rows(trace, st.call)
    assert rows.size == 64  # each element written once
    assert rows["thread"].max() == 15
    np.testing.assert_array_equal(np.sort(rows["offset"]), np.arange(64))


# ----------------------------------------------------------------------------------------- async copies


def _async_kernel(body_tail, n=64, threads=32, stages=2):
    stype = SharedType(dt.f32, (n,), row_major((n,)), None, stages)
    L = blocked((n,), threads, 4)
    R = reg(dt.f32, (n,), L)
    A = v("A", TensorType(dt.f32, (stages * n,)))
    O = v("O", TensorType(dt.f32, (8, n)))

    def stage(i):
        return call("stage", v("s", stype), c(i), ty=stype.stage())

    def cp(i):
        return ev("copy_async", gview(A, [c(i * n)], (n,), dt.f32), stage(i))

    def snap(row, i):  # O[row] = load(stage i)
        return ev("store", call("view", O, c(row), c(0), ty=GlobalTileType(dt.f32, (n,)), sizes=(1, n),
                                squeeze=(True, False)), load(stage(i), R))

    body = [shared_of("s", stype)] + body_tail(cp, snap)
    k = kernel([tensor("A", dt.f32, stages * n), tensor("O", dt.f32, 8, n)], body, threads, "sm_80")
    a = np.arange(stages * n, dtype=np.float32) + 1
    out = np.zeros((8, n), np.float32)
    return k, a, out


def test_copy_async_invisible_until_wait():
    k, a, out = _async_kernel(lambda cp, snap: [
        cp(0), ev("commit_async"), snap(0, 0), ev("wait_async", n=0), snap(1, 0)])
    run_ir(k, 1, [a, out])
    assert np.isnan(out[0]).all()  # stale (uninitialized) shared memory before the group retired
    np.testing.assert_array_equal(out[1], a[:64])


def test_wait_async_count_and_open_group():
    k, a, out = _async_kernel(lambda cp, snap: [
        cp(0), ev("commit_async"), cp(1), ev("commit_async"),
        ev("wait_async", n=1), snap(0, 0), snap(1, 1),  # one group may stay in flight: the newer one
        ev("wait_async", n=0), snap(2, 1),
    ])
    run_ir(k, 1, [a, out])
    np.testing.assert_array_equal(out[0], a[:64])
    assert np.isnan(out[1]).all()
    np.testing.assert_array_equal(out[2], a[64:])

    k, a, out = _async_kernel(lambda cp, snap: [
        cp(0), ev("wait_async", n=0), snap(0, 0),  # not committed: wait_async does not retire it
        ev("commit_async"), ev("wait_async", n=0), snap(1, 0)])
    trace = run_ir(k, 1, [a, out], record=True)
    assert np.isnan(out[0]).all()
    np.testing.assert_array_equal(out[1], a[:64])
    w = trace.accesses[(trace.accesses["space"] == 1) & trace.accesses["write"]]
    assert w.size == 64 and (w["interval"] == 0).all()


def test_async_write_interval_end_after_barrier():
    k, a, out = _async_kernel(lambda cp, snap: [
        cp(0), ev("commit_async"), ev("barrier"), ev("wait_async", n=0), ev("barrier"), snap(0, 0)])
    trace = run_ir(k, 1, [a, out], record=True)
    w = trace.accesses[(trace.accesses["space"] == 1) & trace.accesses["write"]]
    assert (w["interval"] == 0).all() and (w["interval_end"] == 1).all()
    r = trace.accesses[(trace.accesses["space"] == 1) & ~trace.accesses["write"]]
    assert (r["interval"] == 2).all()
    assert [e.kind for e in trace.events if e.kind == "barrier"] == ["barrier", "barrier"]


# ----------------------------------------------------------------------------------------- shared memory


def test_swizzled_shared_round_trip_and_recorded_offsets():
    M, N = 8, 64
    sw = Swizzle(3, 3, 3)
    stype = SharedType(dt.f16, (M, N), row_major((M, N)), sw, None)
    X, Y = v("X", TensorType(dt.f16, (M, N))), v("Y", TensorType(dt.f16, (M, N)))
    R = reg(dt.f16, (M, N), blocked((M, N), 32, 8))
    cp = ev("copy", gview(X, [c(0), c(0)], (M, N), dt.f16), v("s", stype))
    ld = load(v("s", stype), R)
    body = [shared_of("s", stype), cp, ev("barrier"), assign("r", ld),
            ev("store", gview(Y, [c(0), c(0)], (M, N), dt.f16), v("r", R))]
    k = kernel([tensor("X", dt.f16, M, N), tensor("Y", dt.f16, M, N)], body, 32, "sm_80")
    x = np.random.default_rng(1).standard_normal((M, N)).astype(np.float16)
    y = np.zeros_like(x)
    trace = run_ir(k, 1, [x, y], record=True)
    np.testing.assert_array_equal(y, x)
    reads = acc_rows(trace, cp.call, write=False)
    writes = acc_rows(trace, cp.call, write=True)
    assert reads.size == writes.size == M * N
    np.testing.assert_array_equal(reads["thread"], writes["thread"])  # same thread reads and writes
    np.testing.assert_array_equal(writes["offset"], sw(reads["offset"]))  # global offset = row-major coord
    assert (writes["offset"] != reads["offset"]).any()
    assert (writes["nbytes"] == 2).all() and (writes["interval"] == 0).all()
    lrows = acc_rows(trace, ld)
    assert (lrows["interval"] == 1).all()
    assert trace.shared_allocs[0][0] == "s"


def test_overlapping_shared_layout_gives_wrong_data():
    M, N = 8, 64
    st = SharedType(dt.f32, (M, N), Layout((M, N), (32, 1)), None, None)  # row stride 32 < 64: rows overlap
    X, Y = v("X", TensorType(dt.f32, (M, N))), v("Y", TensorType(dt.f32, (M, N)))
    R = reg(dt.f32, (M, N), blocked((M, N), 32, 4))
    cp = ev("copy", gview(X, [c(0), c(0)], (M, N), dt.f32), v("s", st))
    body = [shared_of("s", st), cp, ev("barrier"), assign("r", load(v("s", st), R)),
            ev("store", gview(Y, [c(0), c(0)], (M, N), dt.f32), v("r", R))]
    k = kernel([tensor("X", dt.f32, M, N), tensor("Y", dt.f32, M, N)], body, 32)
    x = np.arange(M * N, dtype=np.float32).reshape(M, N)
    y = np.zeros_like(x)
    trace = run_ir(k, 1, [x, y], record=True)
    assert not np.array_equal(x, y)
    w = acc_rows(trace, cp.call, write=True)
    assert np.unique(w["offset"]).size < M * N  # distinct elements at the same address


def test_stage_index_out_of_range():
    stype = SharedType(dt.f32, (64,), row_major((64,)), None, 2)
    bad = call("stage", v("s", stype), c(2), ty=stype.stage())
    k = kernel([], [shared_of("s", stype), assign("t", bad)], 32)
    with pytest.raises(InterpreterError, match="stage index 2 is out of range") as ei:
        run_ir(k, 1, [])
    assert ei.value.span is bad.span


# ----------------------------------------------------------------------------------------- mma


def _mma_kernel(instr, M, N, K, warps, a_layout=None, target="sm_90a"):
    La = a_layout or mma_operand_layout(instr, "a", (M, K), warps)
    Lb = mma_operand_layout(instr, "b", (K, N), warps)
    Lc = mma_operand_layout(instr, "c", (M, N), warps)
    RA, RB, RC = reg(instr.ab, (M, K), La), reg(instr.ab, (K, N), Lb), reg(dt.f32, (M, N), Lc)
    A, B, C = (v(n, TensorType(t, s)) for n, t, s in (("A", instr.ab, (M, K)), ("B", instr.ab, (K, N)),
                                                       ("C", dt.f32, (M, N))))
    mma = call("mma", v("a", RA), v("b", RB), v("acc", RC), ty=RC, instr=instr)
    body = [
        assign("a", load(gview(A, [c(0), c(0)], (M, K), instr.ab), RA)),
        assign("b", load(gview(B, [c(0), c(0)], (K, N), instr.ab), RB)),
        assign("acc", load(gview(C, [c(0), c(0)], (M, N), dt.f32), RC)),
        assign("acc", mma),
        ev("store", gview(C, [c(0), c(0)], (M, N), dt.f32), v("acc", RC)),
    ]
    params = [tensor("A", instr.ab, M, K), tensor("B", instr.ab, K, N), tensor("C", dt.f32, M, N)]
    return kernel(params, body, Lc.num_threads, target)


def _mma_data(M, N, K, ab, seed=0):
    rng = np.random.default_rng(seed)
    a = dt.to_storage(rng.standard_normal((M, K)), ab)
    b = dt.to_storage(rng.standard_normal((K, N)), ab)
    acc = rng.standard_normal((M, N)).astype(np.float32)
    ref = acc.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    return a, b, acc, ref


def _transposed(L: TVLayout) -> TVLayout:
    return TVLayout(L.tile, L.thread_shape, L.value_shape, (L.strides[1], L.strides[0]), "transposed")


@pytest.mark.parametrize("name,warps,target", [
    ("nv.mma_m16n8k16_bf16", (2, 2), "sm_90a"),
    ("nv.mma_m16n8k16_f16", (1, 1), "sm_80"),
    ("amd.mfma_f32_32x32x8_bf16", (1, 2), "gfx942"),
    ("amd.mfma_f32_16x16x16_f16", (2, 1), "gfx942"),
])
def test_mma_register_operands(name, warps, target):
    instr = INSTRS[name]
    M, N, K = instr.m * warps[0] * 2, instr.n * warps[1] * 2, 32
    k = _mma_kernel(instr, M, N, K, warps, target=target)
    a, b, acc, ref = _mma_data(M, N, K, instr.ab)
    out = acc.copy()
    run_ir(k, 1, [a, b, out])
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name,warps,target", [
    ("nv.mma_m16n8k16_bf16", (2, 1), "sm_90a"),
    ("amd.mfma_f32_32x32x8_bf16", (1, 1), "gfx942"),
])
def test_mma_wrong_operand_layout_gives_wrong_result(name, warps, target):
    instr = INSTRS[name]
    M, N, K = 32, 32, 32  # square A so a transposed fragment is a valid (but wrong) layout
    good = mma_operand_layout(instr, "a", (M, K), warps)
    bad = _transposed(good)
    assert bad.covers_tile() and bad.num_threads == good.num_threads
    k = _mma_kernel(instr, M, N, K, warps, a_layout=bad, target=target)
    a, b, acc, ref = _mma_data(M, N, K, instr.ab, seed=3)
    out = acc.copy()
    run_ir(k, 1, [a, b, out])
    assert not np.allclose(out, ref, rtol=1e-2, atol=1e-2)
    # what the hardware computes: the registers hold a^T's fragment, read as a's
    np.testing.assert_allclose(out, acc + a.T.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_mma_foreign_fragment_layouts():
    instr = INSTRS["nv.mma_m16n8k16_bf16"]
    a, b, acc, ref = _mma_data(16, 8, 16, dt.bf16, seed=5)
    # same thread/value counts as the A fragment: reinterpreted by the instruction, so a wrong result
    k = _mma_kernel(instr, 16, 8, 16, (1, 1), a_layout=blocked((16, 16), 32, 8))
    out = acc.copy()
    run_ir(k, 1, [a, b, out])
    assert not np.allclose(out, ref, rtol=1e-2, atol=1e-2)
    # 16 values per thread (replicated) where the fragment has 8: not reinterpretable
    good = mma_operand_layout(instr, "a", (16, 16), (1, 1))
    (rt, rv), (ct, cv) = good.strides
    twice = TVLayout(good.tile, good.thread_shape, good.value_shape + (2,), ((rt, rv + (0,)), (ct, cv + (0,))))
    k = _mma_kernel(instr, 16, 8, 16, (1, 1), a_layout=twice)
    with pytest.raises(InterpreterError, match="reads it as"):
        run_ir(k, 1, [a, b, acc.copy()])


def test_wgmma_from_swizzled_shared():
    instr = INSTRS["nv.wgmma_m64n32k16_bf16"]
    M, N, K = 64, 32, 32
    sa = SharedType(dt.bf16, (M, K), row_major((M, K)), Swizzle(2, 3, 3), None)
    sb = SharedType(dt.bf16, (K, N), row_major((K, N)), Swizzle(2, 3, 3), None)
    Lc = mma_operand_layout(instr, "c", (M, N), (1, 1))
    RC = reg(dt.f32, (M, N), Lc)
    A, B, C = v("A", TensorType(dt.bf16, (M, K))), v("B", TensorType(dt.bf16, (K, N))), v("C", TensorType(dt.f32,
                                                                                                          (M, N)))
    mma = call("mma", v("sa", sa), v("sb", sb), v("acc", RC), ty=RC, instr=instr)
    body = [shared_of("sa", sa), shared_of("sb", sb),
            ev("copy", gview(A, [c(0), c(0)], (M, K), dt.bf16), v("sa", sa)),
            ev("copy", gview(B, [c(0), c(0)], (K, N), dt.bf16), v("sb", sb)), ev("barrier"),
            assign("acc", call("zeros", ty=RC, shape=(M, N), dtype=dt.f32, layout=Lc)),
            assign("acc", mma), ev("store", gview(C, [c(0), c(0)], (M, N), dt.f32), v("acc", RC))]
    k = kernel([tensor("A", dt.bf16, M, K), tensor("B", dt.bf16, K, N), tensor("C", dt.f32, M, N)], body, 128)
    a, b, _, _ = _mma_data(M, N, K, dt.bf16)
    out = np.zeros((M, N), np.float32)
    trace = run_ir(k, 1, [a, b, out], record=True)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    r = acc_rows(trace, mma)
    assert r.size == M * K + K * N and (r["thread"] == 0).all() and not r["write"].any()


# ----------------------------------------------------------------------------------------- math


def test_reductions_math_and_casts():
    M, N = 16, 32
    L = blocked((M, N), 64, 4)
    R = reg(dt.f32, (M, N), L)
    Lr = blocked((M,), 64, 1)
    Rr = reg(dt.f32, (M,), Lr)
    Rk = reg(dt.f32, (M, 1), L.drop_dim(1))
    X = v("X", TensorType(dt.f32, (M, N)))
    O = v("O", TensorType(dt.f32, (4, M)))
    B16 = reg(dt.bf16, (M, N), L)
    I = reg(dt.i32, (M, N), L)

    def out_row(i, val):
        return ev("store", call("view", O, c(i), c(0), ty=GlobalTileType(dt.f32, (M,)), sizes=(1, M),
                                squeeze=(True, False)), val)

    x = v("x", R)
    body = [
        assign("x", load(gview(X, [c(0), c(0)], (M, N), dt.f32), R)),
        out_row(0, call("sum", x, ty=Rr, axis=1, keepdims=False)),
        out_row(1, call("max_reduce", x, ty=Rr, axis=1, keepdims=False)),
        # softmax-style: x - max(x, keepdims) then exp, then sum
        assign("m", call("max_reduce", x, ty=Rk, axis=1, keepdims=True)),
        out_row(2, call("sum", call("exp", binop("-", x, v("m", Rk), R), ty=R), ty=Rr, axis=1)),
        # bf16 cast rounds; int cast truncates; silu; min_reduce over them
        out_row(3, call("min_reduce", binop("+", call("cast", call("cast", x, ty=B16, dtype=dt.bf16), ty=R,
                                                                   dtype=dt.f32),
                                                   call("cast", call("cast", x, ty=I, dtype=dt.i32), ty=R,
                                                        dtype=dt.f32), R), ty=Rr, axis=1)),
    ]
    k = kernel([tensor("X", dt.f32, M, N), tensor("O", dt.f32, 4, M)], body, 64)
    xv = (np.random.default_rng(2).standard_normal((M, N)) * 3).astype(np.float32)
    o = np.zeros((4, M), np.float32)
    run_ir(k, 1, [xv, o])
    np.testing.assert_allclose(o[0], xv.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(o[1], xv.max(1))
    np.testing.assert_allclose(o[2], np.exp(xv - xv.max(1, keepdims=True)).sum(1), rtol=1e-5)
    np.testing.assert_array_equal(o[3], (dt.round_bf16(xv) + np.trunc(xv)).min(1))


def test_unary_math_ops():
    n = 128
    L = blocked((n,), 32, 4)
    R = reg(dt.f32, (n,), L)
    X = v("X", TensorType(dt.f32, (n,)))
    ops = ["exp2", "log2", "sqrt", "rsqrt", "abs", "sin", "cos", "tanh", "sigmoid", "silu", "erf", "log"]
    O = v("O", TensorType(dt.f32, (len(ops), n)))
    body = [assign("x", load(gview(X, [c(0)], (n,), dt.f32), R))]
    for i, op in enumerate(ops):
        body.append(ev("store", call("view", O, c(i), c(0), ty=GlobalTileType(dt.f32, (n,)), sizes=(1, n),
                                     squeeze=(True, False)), call(op, v("x", R), ty=R)))
    k = kernel([tensor("X", dt.f32, n), tensor("O", dt.f32, len(ops), n)], body, 32)
    x = np.linspace(0.05, 3.0, n).astype(np.float32)
    o = np.zeros((len(ops), n), np.float32)
    run_ir(k, 1, [x, o])
    import math

    x64 = x.astype(np.float64)
    sig = 1 / (1 + np.exp(-x64))
    ref = [np.exp2(x64), np.log2(x64), np.sqrt(x64), 1 / np.sqrt(x64), x64, np.sin(x64), np.cos(x64),
           np.tanh(x64), sig, x64 * sig, np.array([math.erf(t) for t in x64]), np.log(x64)]
    for op, got, want in zip(ops, o, ref):
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6, err_msg=op)


def test_per_thread_values_and_where():
    n = 64
    L = blocked((n,), 64, 1)  # thread t holds element t
    R = reg(dt.i32, (n,), L)
    O = v("O", TensorType(dt.i32, (n,)))
    tid = call("thread_id", ty=PT)
    lane = call("lane_id", ty=PT)
    val = binop("+", call("arange", ty=R, n=n, layout=L), binop("*", tid, c(100), PT), R)
    sel = call("where", binop("<", lane, c(16), BOOL_PT), val, c(-1), ty=R)
    k = kernel([tensor("O", dt.i32, n)], [ev("store", gview(O, [c(0)], (n,), dt.i32), sel)], 64)
    o = np.zeros(n, np.int32)
    run_ir(k, 1, [o])
    t = np.arange(n)
    np.testing.assert_array_equal(o, np.where(t % 32 < 16, t * 101, -1))


# ----------------------------------------------------------------------------------------- roles


def _role_kernel(consumer_tail=(), producer_extra=(), bulk=False, nchunks=4, skip_arrive=False):
    n = 32
    stype = SharedType(dt.f32, (n,), row_major((n,)), None, None)
    MB = MBarrierType(1)
    Lc = blocked((n,), 32, 1)
    R = reg(dt.f32, (n,), Lc)
    A = v("A", TensorType(dt.f32, (nchunks * n,)))
    O = v("O", TensorType(dt.f32, (n,)))
    kv = v("k")
    src = gview(A, [binop("*", kv, c(n))], (n,), dt.f32)
    if bulk:
        fill = [ev("copy_bulk", src, v("s", stype), v("full", MB))]
    else:
        fill = [ev("copy", src, v("s", stype))]
    producer = [For(sp(), var="k", start=c(0), stop=c(nchunks), step=c(1), kind="range", body=[
        If(sp(), cond=binop(">", kv, c(0)), then=[ev("mbarrier_wait", v("empty", MB), binop("-", kv, c(1)))],
           orelse=[], kind="uniform"),
        *fill, *producer_extra,
        *([] if skip_arrive else [ev("mbarrier_arrive", v("full", MB))]),
    ])]
    consumer = [
        assign("acc", call("zeros", ty=R, shape=(n,), dtype=dt.f32, layout=Lc)),
        For(sp(), var="k", start=c(0), stop=c(nchunks), step=c(1), kind="pipeline", stages=1, body=[
            ev("mbarrier_wait", v("full", MB), kv),
            assign("acc", binop("+", v("acc", R), load(v("s", stype), R), R)),
            ev("mbarrier_arrive", v("empty", MB)),
        ]),
        ev("store", gview(O, [c(0)], (n,), dt.f32), v("acc", R)),
        *consumer_tail,
    ]
    warp = call("warp_id", ty=PT)
    body = [shared_of("s", stype), assign("full", call("mbarrier", ty=MB, count=1)),
            assign("empty", call("mbarrier", ty=MB, count=1)),
            If(sp(), cond=binop("==", warp, c(0), BOOL_PT), then=producer, orelse=consumer, kind="role")]
    k = kernel([tensor("A", dt.f32, nchunks * n), tensor("O", dt.f32, n)], body, 64)
    a = np.arange(nchunks * n, dtype=np.float32)
    return k, a, a.reshape(nchunks, n).sum(0)


@pytest.mark.parametrize("bulk", [False, True])
def test_producer_consumer_through_mbarriers(bulk):
    k, a, ref = _role_kernel(bulk=bulk)
    o = np.zeros(32, np.float32)
    trace = run_ir(k, 2, [a, o], record=True)
    np.testing.assert_array_equal(o, ref)
    # the consumer's stores are by its own threads (32..63), the producer's copies by 0..31
    w = trace.accesses[(trace.accesses["space"] == 0) & trace.accesses["write"]]
    assert w["thread"].min() >= 32
    sw = trace.accesses[(trace.accesses["space"] == 1) & trace.accesses["write"]]
    assert sw["thread"].max() < 32
    if bulk:
        assert set(np.unique(sw["thread"])) == {0}
    kinds = {e.kind for e in trace.events}
    assert {"mbarrier_arrive", "mbarrier_wait", "mbarrier_complete"} <= kinds
    assert trace.mbarriers == ["full", "empty"]


def test_barrier_inside_role_raises():
    bar = ev("barrier")
    k, a, _ = _role_kernel(producer_extra=[bar])
    with pytest.raises(InterpreterError, match="inside a role") as ei:
        run_ir(k, 1, [a, np.zeros(32, np.float32)])
    assert ei.value.span is bar.call.span
    assert f"kern.py:{bar.call.span.line}" in str(ei.value)


def test_deadlock_names_the_waits():
    k, a, _ = _role_kernel(skip_arrive=True)
    with pytest.raises(InterpreterError, match="deadlock") as ei:
        run_ir(k, 1, [a, np.zeros(32, np.float32)])
    msg = str(ei.value)
    assert "mbarrier 'full' for phase 0" in msg and "threads 32-63" in msg


# ----------------------------------------------------------------------------------------- recording


def test_recorded_copy_thread_offset_interval():
    M, N = 4, 32
    stype = SharedType(dt.f32, (M, N), row_major((M, N)), None, None)
    X = v("X", TensorType(dt.f32, ("M", N)))
    cp = ev("copy", gview(X, [binop("*", call("block_id", ty=I32, axis=0), c(M)), c(0)], (M, N), dt.f32),
            v("s", stype))
    k = kernel([tensor("X", dt.f32, "M", N)], [shared_of("s", stype), ev("barrier"), cp, ev("barrier")], 32)
    x = np.zeros((8, N), np.float32)
    trace = run_ir(k, 2, [x], record=True)
    assert trace.accesses.dtype == ACCESS_DTYPE
    rows = acc_rows(trace, cp.call)
    assert rows.size == 2 * 2 * M * N
    assert (rows["interval"] == 1).all() and (rows["interval_end"] == 1).all()
    for blk in (0, 1):
        r = rows[(rows["block"] == blk) & (rows["space"] == 0)]
        # blocked((4, 32), 32, vec=4): thread t copies row-major elements 4t .. 4t+3
        np.testing.assert_array_equal((r["offset"] - blk * M * N) // 4, r["thread"])
        w = rows[(rows["block"] == blk) & (rows["space"] == 1)]
        np.testing.assert_array_equal(w["offset"] // 4, w["thread"])
        assert w["write"].all() and (w["buffer"] == 0).all()


def test_recording_in_loop_iterations():
    n = 32
    stype = SharedType(dt.f32, (n,), row_major((n,)), None, 2)
    X = v("X", TensorType(dt.f32, (4 * n,)))
    i = v("i")
    cp = ev("copy", gview(X, [binop("*", i, c(n))], (n,), dt.f32),
            call("stage", v("s", stype), binop("%", i, c(2)), ty=stype.stage()))
    k = kernel([tensor("X", dt.f32, 4 * n)],
               [shared_of("s", stype), For(sp(), var="i", start=c(0), stop=c(4), step=c(1), body=[cp])], 32)
    trace = run_ir(k, 1, [np.zeros(4 * n, np.float32)], record=True)
    w = acc_rows(trace, cp.call, write=True)
    its = [trace.iterations[j] for j in w["iteration"]]
    assert [dict(t)["i"] for t in its[::n]] == [0, 1, 2, 3]
    np.testing.assert_array_equal(w["offset"][::n], [0, n, 0, n])


# ----------------------------------------------------------------------------------------- launch and errors


def test_launch_errors():
    k, _, _ = _vadd_kernel()
    a = np.zeros(10, np.float32)
    with pytest.raises(LaunchError, match="'B'.*expected dtype f32.*float64"):
        run_ir(k, 1, [a, np.zeros(10), a.copy()])
    with pytest.raises(LaunchError, match="'A'.*rank-1"):
        run_ir(k, 1, [np.zeros((2, 5), np.float32), a, a])
    with pytest.raises(LaunchError, match="'N'"):
        run_ir(k, 1, [a, np.zeros(11, np.float32), a])
    with pytest.raises(LaunchError, match="takes 3 arguments"):
        run_ir(k, 1, [a, a])
    with pytest.raises(LaunchError, match="contiguous"):
        run_ir(k, 1, [np.zeros(20, np.float32)[::2], a, a])


def test_uninitialized_variable():
    bad = v("nope")
    k = kernel([], [assign("x", binop("+", bad, c(1)))], 32)
    with pytest.raises(InterpreterError, match="'nope' is read before it is assigned") as ei:
        run_ir(k, 1, [])
    assert ei.value.span is bad.span


def test_torch_bf16_and_f16_written_back():
    torch = pytest.importorskip("torch")
    n = 128
    L = blocked((n,), 32, 4)
    R16, RB = reg(dt.f16, (n,), L), reg(dt.bf16, (n,), L)
    X, Y = v("X", TensorType(dt.f16, (n,))), v("Y", TensorType(dt.bf16, (n,)))
    body = [ev("store", gview(Y, [c(0)], (n,), dt.bf16),
               binop("*", call("cast", load(gview(X, [c(0)], (n,), dt.f16), R16), ty=RB, dtype=dt.bf16),
                     c(3.0, ScalarType(dt.f32)), RB)),
            ev("store", gview(X, [c(0)], (n,), dt.f16), call("full", c(2.0, ScalarType(dt.f32)), ty=R16,
                                                             shape=(n,), dtype=dt.f16, layout=L))]
    k = kernel([tensor("X", dt.f16, n), tensor("Y", dt.bf16, n)], body, 32)
    x = torch.linspace(-2, 2, n, dtype=torch.float16)
    x0 = x.clone()
    y = torch.zeros(n, dtype=torch.bfloat16)
    run_ir(k, 1, [x, y])
    assert torch.equal(y, (x0.to(torch.bfloat16) * 3))
    assert torch.equal(x, torch.full((n,), 2.0, dtype=torch.float16))
    with pytest.raises(LaunchError, match="expected dtype bf16"):
        run_ir(k, 1, [x, torch.zeros(n, dtype=torch.float32)])


def test_block_wide_layout_inside_role_raises():
    n = 256
    L = blocked((n,), 64, 4)  # all 64 threads hold distinct elements
    R = reg(dt.f32, (n,), L)
    X, Y = v("X", TensorType(dt.f32, (n,))), v("Y", TensorType(dt.f32, (n,)))
    ld = load(gview(X, [c(0)], (n,), dt.f32), R)
    role = If(sp(), cond=binop(">=", call("thread_id", ty=PT), c(32), BOOL_PT), kind="role",
              then=[ev("store", gview(Y, [c(0)], (n,), dt.f32), ld)], orelse=[])
    k = kernel([tensor("X", dt.f32, n), tensor("Y", dt.f32, n)], [role], 64)
    with pytest.raises(InterpreterError, match="held only by threads outside the role") as ei:
        run_ir(k, 1, [np.zeros(n, np.float32), np.zeros(n, np.float32)])
    assert ei.value.span is ld.span


class _Tracker:
    def __init__(self):
        self.calls = []

    def tag(self, node, value, info):
        self.calls.append(("tag", node.op, value, info))

    def assert_tag(self, node, value, info):
        self.calls.append(("assert", node.op, np.array(value), info))

    def mma_operands(self, node, acc, info):
        return ("operands", acc)


def test_tag_tracker_hook_sees_concrete_values():
    n = 64
    L = blocked((n,), 32, 4)
    R = reg(dt.f32, (n,), L)
    X = v("X", TensorType(dt.f32, (n,)))
    fn = object()  # the interpreter passes attrs through untouched
    body = [ev("tag", X, fn=fn), assign("x", load(gview(X, [c(0)], (n,), dt.f32), R)),
            For(sp(), var="i", start=c(0), stop=c(2), step=c(1), body=[ev("assert_tag", v("x", R), fn=fn)])]
    k = kernel([tensor("X", dt.f32, n)], body, 32)
    tracker = _Tracker()
    x = np.arange(n, dtype=np.float32)
    run_ir(k, 2, [x], tags=tracker)
    assert [cl[0] for cl in tracker.calls] == ["tag", "assert", "assert"] * 2
    _, _, val, info = tracker.calls[2]
    np.testing.assert_array_equal(val, x)
    assert info.iteration == (("i", 1),) and info.block == (0, 0, 0) and info.threads.size == 32


# ----------------------------------------------------------------------------------------- through the front end




def _pipe_kernel():
    @tp.kernel(threads=32, target="sm_80")
    def pipe(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], BLOCK: tp.constexpr = 64,
             STAGES: tp.constexpr = 3, WAIT: tp.constexpr = 1):
        s = tp.shared((BLOCK,), tp.f32, stages=STAGES)
        for i in tp.static_range(STAGES - 1):
            tp.copy_async(X[i * BLOCK:(i + 1) * BLOCK], s[i])
            tp.commit_async()
        for k in tp.pipeline(tp.cdiv(X.shape[0], BLOCK), stages=STAGES):
            tp.wait_async(WAIT)
            tp.barrier()
            nk = k + STAGES - 1
            tp.copy_async(X[nk * BLOCK:(nk + 1) * BLOCK], s[nk % STAGES])
            tp.commit_async()
            tp.store(Y[k * BLOCK:(k + 1) * BLOCK], tp.load(s[k % STAGES]))

    return pipe


def test_frontend_pipeline_wait_count():
    pipe = _pipe_kernel()
    x = np.arange(640, dtype=np.float32)
    y = np.zeros_like(x)
    pipe[(1,)](x, y)  # WAIT = STAGES - 2: tile k has landed
    np.testing.assert_array_equal(y, x)
    y = np.zeros_like(x)
    pipe[(1,)](x, y, WAIT=2)  # one group too many left in flight: stale stages are read
    assert not np.array_equal(y, x)
    assert np.isnan(y[:64]).all()


def test_frontend_warp_specialized_bulk_copy():
    @tp.kernel(threads=64, target="sm_90a")
    def ws(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], BLOCK: tp.constexpr = 32):
        s = tp.shared((BLOCK,), tp.f32)
        full = tp.mbarrier(1)
        if tp.warp_id() == 0:
            tp.copy_bulk(X[0:BLOCK], s, full)
            tp.mbarrier_arrive(full)
        else:
            tp.mbarrier_wait(full, 0)
            tp.store(Y[0:BLOCK], tp.load(s) * 2.0)

    x = np.arange(32, dtype=np.float32)
    y = np.zeros_like(x)
    trace = ws[(1,)](x, y, record=True)
    np.testing.assert_array_equal(y, 2 * x)
    g = trace.accesses[trace.accesses["space"] == 0]
    assert set(g[~g["write"]]["thread"]) == {0} and g[g["write"]]["thread"].min() >= 32


@pytest.mark.parametrize("target", ["sm_80", "sm_90a", "gfx942"])
def test_stdlib_gemm_on_every_target(target):
    gemm = pytest.importorskip("stdlib_kernels.gemm")
    rng = np.random.default_rng(7)
    a = dt.round_bf16(rng.standard_normal((70, 80)).astype(np.float32))
    b = dt.round_bf16(rng.standard_normal((80, 72)).astype(np.float32))
    c_out = np.zeros((70, 72), np.float32)
    gemm.launch(a, b, c_out, target=target)
    ref = gemm.reference(a, b)
    assert np.linalg.norm(c_out - ref) / np.linalg.norm(ref) < 1e-6


def test_copy_bulk_lands_at_mbarrier_wait():
    n = 64
    stype = SharedType(dt.f32, (n,), row_major((n,)), None, None)
    MB = MBarrierType(1)
    R = reg(dt.f32, (n,), blocked((n,), 32, 4))
    X, O = v("X", TensorType(dt.f32, (n,))), v("O", TensorType(dt.f32, (2, n)))

    def row(i):
        return call("view", O, c(i), c(0), ty=GlobalTileType(dt.f32, (n,)), sizes=(1, n), squeeze=(True, False))

    body = [shared_of("s", stype), assign("bar", call("mbarrier", ty=MB, count=1)),
            ev("copy_bulk", gview(X, [c(0)], (n,), dt.f32), v("s", stype), v("bar", MB)),
            ev("store", row(0), load(v("s", stype), R)),  # not waited: stale
            ev("mbarrier_arrive", v("bar", MB)), ev("mbarrier_wait", v("bar", MB), c(0)),
            ev("store", row(1), load(v("s", stype), R))]
    k = kernel([tensor("X", dt.f32, n), tensor("O", dt.f32, 2, n)], body, 32)
    x = np.arange(n, dtype=np.float32)
    o = np.zeros((2, n), np.float32)
    run_ir(k, 1, [x, o])
    assert np.isnan(o[0]).all()
    np.testing.assert_array_equal(o[1], x)


try:
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover
    given = None

if given is not None:

    @settings(max_examples=25, deadline=None)
    @given(m=st.sampled_from([1, 2, 8, 16]), n=st.sampled_from([8, 32, 64, 128]), warps=st.sampled_from([1, 2, 4]),
           sw=st.sampled_from([None, (1, 2, 2), (2, 3, 3), (3, 3, 3), (2, 2, 4)]),
           dtype=st.sampled_from([dt.f16, dt.f32]), seed=st.integers(0, 3))
    def test_property_shared_round_trip(m, n, warps, sw, dtype, seed):
        swz = Swizzle(*sw) if sw else None
        if swz is not None and swz.size() > m * n:
            return
        threads = 32 * warps
        stype = SharedType(dtype, (m, n), row_major((m, n)), swz, None)
        Lr = blocked((m, n), threads, 1)  # a different register layout than the copy's
        X, Y = v("X", TensorType(dtype, (m, n))), v("Y", TensorType(dtype, (m, n)))
        cp = ev("copy", gview(X, [c(0), c(0)], (m, n), dtype), v("s", stype))
        body = [shared_of("s", stype), cp, ev("barrier"),
                assign("r", load(v("s", stype), reg(dtype, (m, n), Lr))),
                ev("store", gview(Y, [c(0), c(0)], (m, n), dtype), v("r", reg(dtype, (m, n), Lr)))]
        k = kernel([tensor("X", dtype, m, n), tensor("Y", dtype, m, n)], body, threads)
        x = np.random.default_rng(seed).standard_normal((m, n)).astype(dtype.np)
        y = np.zeros_like(x)
        trace = run_ir(k, 1, [x, y], record=True)
        np.testing.assert_array_equal(y, x)
        w = acc_rows(trace, cp.call, write=True)
        assert np.unique(w["offset"]).size == m * n  # a swizzle is a bijection
