"""The front end's IR: types, constant folding, specialization caching, loops, roles, tags, printing."""

import numpy as np

import tilepy as tp
from tilepy import ir
from tilepy.types import GlobalTileType, RegType, ScalarType, SharedType


@tp.kernel(threads=64)
def scaled_copy(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, "M", "N"], alpha: tp.f32,
                BM: tp.constexpr = 16, BN: tp.constexpr = 32):
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    x = tp.load(X[m0:m0 + BM, n0:n0 + BN])
    tp.store(Y[m0:m0 + BM, n0:n0 + BN], x * alpha)


def _assigns(k):
    return {s.name: s for s in ir.walk(k.body) if isinstance(s, ir.Assign)}


def test_types_and_views():
    k = scaled_copy.ir()
    assert [p.name for p in k.params] == ["X", "Y", "alpha"]
    assert k.constexprs == {"BM": 16, "BN": 32} and k.num_threads == 64
    a = _assigns(k)
    assert a["m0"].value.type == ScalarType(tp.i32, uniform=True)
    x = a["x"].value
    assert isinstance(x.type, RegType) and x.type.shape == (16, 32) and x.type.dtype == tp.f32
    view = x.args[0]
    assert view.op == "view" and isinstance(view.type, GlobalTileType)
    assert view.attrs["sizes"] == (16, 32)
    # the layout covers the whole tile with the kernel's 64 threads, 4-element (16-byte) vectors
    assert x.type.layout.num_threads == 64 and x.type.layout.covers_tile()
    assert x.span.line > scaled_copy.first_line


def test_specializations_are_cached_per_constexpr_and_target():
    a = scaled_copy.ir(BM=16)
    assert scaled_copy.ir(BM=16) is a
    b = scaled_copy.ir(BM=8)
    assert b is not a and _assigns(b)["x"].value.type.shape == (8, 32)
    assert scaled_copy.ir(target="gfx942", BM=16) is not a


def test_constexpr_arithmetic_folds():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"], B: tp.constexpr = 64):
        half = B // 2
        tp.store(X[0:half], tp.zeros((half,), tp.f32))

    body = k.ir().body
    assert len(body) == 1 and body[0].call.op == "store"
    assert body[0].call.args[0].attrs["sizes"] == (32,)


def test_static_range_unrolls_and_range_loops():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"], S: tp.constexpr = 3):
        for s in tp.static_range(S):
            tp.store(X[s * 64:(s + 1) * 64], tp.zeros((64,), tp.f32))
        for i in range(tp.cdiv(X.shape[0], 64)):
            tp.store(X[i * 64:i * 64 + 64], tp.zeros((64,), tp.f32))
        for j in tp.pipeline(4, stages=2):
            tp.barrier()

    body = k.ir().body
    stores = [s for s in body if isinstance(s, ir.Eval)]
    assert len(stores) == 3
    assert [s.call.args[0].args[1].value for s in stores] == [0, 64, 128]
    loops = [s for s in body if isinstance(s, ir.For)]
    assert [(lp.kind, lp.stages) for lp in loops] == [("range", None), ("pipeline", 2)]
    assert loops[0].stop.op == "cdiv"


def test_warp_role_branch_and_uniform_branch():
    @tp.kernel(threads=128)
    def k(X: tp.Tensor[tp.f32, "N"], n: tp.i32):
        if tp.warp_id() == 0:
            tp.barrier()
        else:
            tp.barrier()
        if n > 4:
            tp.barrier()

    ifs = [s for s in k.ir().body if isinstance(s, ir.If)]
    assert [i.kind for i in ifs] == ["role", "uniform"]
    assert ifs[0].cond.type == ScalarType(tp.bool_, uniform=False)


def test_constexpr_if_selects_branch():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"], FAST: tp.constexpr = True):
        if FAST:
            tp.store(X[0:64], tp.zeros((64,), tp.f32))
        else:
            tp.barrier()

    assert [s.call.op for s in k.ir().body] == ["store"]
    assert [s.call.op for s in k.ir(FAST=False).body] == ["barrier"]


def test_shared_stages_swizzle_and_mma():
    @tp.kernel(threads=128)
    def k(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"]):
        a_s = tp.shared((32, 32), tp.bf16, stages=2, swizzle=tp.Swizzle(2, 3, 3))
        b_s = tp.shared((32, 32), tp.bf16, stages=2)
        acc = tp.zeros((32, 32), tp.f32, layout=tp.accumulator(tp.nv.mma_m16n8k16_bf16, (32, 32), (2, 2)))
        tp.copy_async(A[0:32, 0:32], a_s[1])
        tp.commit_async()
        tp.wait_async(0)
        acc = tp.mma(a_s[1], b_s[0], acc)
        tp.store(C[0:32, 0:32], acc)

    k_ir = k.ir()
    a = _assigns(k_ir)
    st = a["a_s"].value.type
    assert isinstance(st, SharedType) and st.stages == 2 and st.swizzle == tp.Swizzle(2, 3, 3)
    assert k_ir.shared_bytes == 2 * 2 * 32 * 32 * 2
    mma = [s for s in ir.walk(k_ir.body) if isinstance(s, ir.Assign) and s.value.op == "mma"][0].value
    assert mma.attrs["instr"] is tp.nv.mma_m16n8k16_bf16 and mma.attrs["warps"] == (2, 2)


def test_tags_are_carried_with_their_lambdas():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"]):
        tp.tag(X, lambda i: ("x", i + 1))
        x = tp.load(X[0:64])
        tp.assert_tag(x, lambda t: t[1] > 0, message="shifted")

    tag, check = [s.call for s in k.ir().body if isinstance(s, ir.Eval)]
    assert tag.op == "tag" and tag.attrs["fn"].params == ("i",)
    assert tag.attrs["fn"].body == ("tuple", (("const", "x"), ("bin", "+", ("name", "i"), ("const", 1))))
    assert tag.attrs["fn"].fn(3) == ("x", 4)
    assert check.op == "assert_tag" and check.attrs["message"] == "shifted"


def test_reduction_and_broadcast_types():
    @tp.kernel(threads=128)
    def k(X: tp.Tensor[tp.f32, "M", "N"]):
        x = tp.load(X[0:16, 0:64])
        m = tp.max(x, axis=1, keepdims=True)
        s = tp.sum(x, axis=0)
        y = x - m
        tp.store(X[0:16, 0:64], y)

    a = _assigns(k.ir())
    assert a["m"].value.type.shape == (16, 1)
    assert a["s"].value.type.shape == (64,)
    assert a["y"].value.type.layout == a["x"].value.type.layout
    # the reduced layout keeps the row each thread held and drops the column
    m_layout = a["m"].value.type.layout
    x_layout = a["x"].value.type.layout
    assert (m_layout.coords[0] == x_layout.coords[0]).all() and (m_layout.coords[1] == 0).all()


def test_printer_shows_ops_types_and_lines():
    text = str(scaled_copy.ir())
    assert text.startswith("kernel scaled_copy(X: Tensor[f32, M, N]")
    assert "load(view(X, m0, n0, sizes=(16, 32)" in text
    assert "Reg[f32, 16x32" in text
    line = scaled_copy.first_line + 4  # `x = tp.load(...)`
    assert f"# {line}" in text


@tp.kernel(threads=256)
def producer_consumer(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], BLOCK: tp.constexpr = 512):
    i0 = tp.block_id(0) * BLOCK
    buf = tp.shared((BLOCK,), tp.f32)
    full = tp.mbarrier(1)
    wg = tp.warpgroup_id()
    if wg == 0:  # producer warpgroup
        tp.store(buf, tp.load(X[i0:i0 + BLOCK]) * 2.0)
        tp.mbarrier_arrive(full)
    else:  # consumer warpgroup
        tp.mbarrier_wait(full, 0)
        tp.store(Y[i0:i0 + BLOCK], tp.load(buf) + 1.0)


def test_warp_roles_lay_tiles_over_the_role_threads():
    k = producer_consumer.ir()
    role = next(s for s in k.body if isinstance(s, ir.If))
    assert role.kind == "role"
    load = next(s.call.args[1] for s in role.then if isinstance(s, ir.Eval) and s.call.op == "store")
    assert load.lhs.type.layout.num_threads == 128  # the producer's 128 threads, not the block's 256
    x = np.random.default_rng(1).standard_normal(1300).astype(np.float32)
    y = np.full_like(x, np.nan)
    trace = producer_consumer[(3,)](x, y, record=True)
    np.testing.assert_allclose(y, 2 * x + 1, rtol=1e-6)
    acc = trace.accesses
    global_reads = acc[(acc["space"] == 0) & ~acc["write"]]
    global_writes = acc[(acc["space"] == 0) & acc["write"]]
    assert global_reads["thread"].max() < 128 and global_writes["thread"].min() >= 128


@tp.kernel(threads=32, target="sm_80")
def _fib_positions(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], STEPS: tp.constexpr = 5,
                   BLOCK: tp.constexpr = 64):
    i = tp.arange(BLOCK)
    a = i % 7
    b = (i + 1) % 7
    for _ in tp.static_range(STEPS):
        a, b = b, (a + b) % 7          # the right side first: the old a and b
    c = i
    d = i * 0
    for _ in range(X.shape[0] // BLOCK):
        c, d = d + 1, c                # in a run-time loop as well
    tp.store(Y[0:BLOCK], tp.load(X[0:BLOCK]) * 0.0 + (a * 100 + b).to(tp.f32))
    tp.store(Y[BLOCK:2 * BLOCK], (c * 1000 + d).to(tp.f32))


def test_tuple_assignment_reads_the_old_values():
    """`a, b = b, a + b` as Python means it: every value on the right is read before any name is bound."""
    x = np.zeros(192, np.float32)
    y = np.zeros(192, np.float32)
    _fib_positions[(1,)](x, y)
    i = np.arange(64)
    a, b = i % 7, (i + 1) % 7
    for _ in range(5):
        a, b = b, (a + b) % 7
    c, d = i, i * 0
    for _ in range(3):
        c, d = d + 1, c
    assert np.array_equal(y[:64], a * 100 + b)
    assert np.array_equal(y[64:128], c * 1000 + d)


def test_tuple_assignment_without_overlap_adds_no_temporaries():
    @tp.kernel(threads=32, target="sm_80")
    def plain(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"]):
        i = tp.arange(32)
        a, b = i + 1, i * 2
        tp.store(Y[0:32], tp.load(X[0:32]) + (a + b).to(tp.f32))

    assert "_held" not in str(plain.ir())


@tp.kernel(threads=32, target="sm_80")
def _chains(X: tp.Tensor[tp.i32, "N"], Y: tp.Tensor[tp.i32, "N"], LO: tp.constexpr = -3, HI: tp.constexpr = 5):
    x = tp.load(X[0:64])
    n = X.shape[0]
    inside = LO <= x < HI                                    # tiles: (LO <= x) & (x < HI)
    ordered = (0 < n <= 64).to(tp.i32) if 0 < LO < HI else (-10 < n <= 64 != n + 1)   # compile- and run-time links
    tp.store(Y[0:64], inside.to(tp.i32) * 10 + ordered.to(tp.i32) + abs(x) * 100)


def test_comparison_chains_and_abs_are_pythons():
    x = np.arange(-32, 32, dtype=np.int32)
    y = np.zeros(64, np.int32)
    _chains[(1,)](x, y)
    assert np.array_equal(y, ((-3 <= x) & (x < 5)) * 10 + int(-10 < 64 <= 64 != 65) + np.abs(x) * 100)
    y2 = np.zeros(64, np.int32)
    _chains[(1,)](x, y2, LO=1, HI=4)
    assert np.array_equal(y2, ((1 <= x) & (x < 4)) * 10 + 1 + np.abs(x) * 100)
