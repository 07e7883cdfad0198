"""tests/verify/dynamic_tags.py: the actual tag of every element on the interpreter, and tp.assert_tag evaluated
on it. These are the dynamic ground truth the soundness tests hold the verifier's tag_assertion check to."""

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv
from stdlib_kernels import gemm
from tilepy.interpreter import run_ir

from . import replay
from . import seeded_kernels as S
from .dynamic_tags import UNINIT, Alts, DynamicTagTracker, run

RNG = np.random.default_rng(7)
I16 = tp.nv.mma_m16n8k16_bf16


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def xtags(shape, name="x", dr=0, dc=0):
    out = np.empty(shape, dtype=object)
    for i, j in np.ndindex(*shape):
        out[i, j] = (name, i + dr, j + dc)
    return out


# ----------------------------------------------------------------------------------------- data movement


@tp.kernel(threads=64)
def staged(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, "M", "N"], PATH: tp.constexpr = "copy",
           OFF: tp.constexpr = 0):
    m0 = tp.block_id(0) * 16
    s = tp.shared((16, 16), tp.f32, layout=tp.Layout((16, 16), (1, 16)), swizzle=tp.Swizzle(2, 2, 4))
    tp.tag(X, lambda i, j: ("x", i, j))
    if PATH == "copy":
        tp.copy(X[m0 + OFF:m0 + OFF + 16, 0:16], s)
    elif PATH == "async":
        tp.copy_async(X[m0 + OFF:m0 + OFF + 16, 0:16], s)
        tp.commit_async()
        tp.wait_async(0)
    elif PATH == "store":
        tp.store(s, tp.load(X[m0 + OFF:m0 + OFF + 16, 0:16], layout=tp.blocked((16, 16), 64, 4)))
    elif PATH == "role":
        if tp.warp_id() == 1:
            tp.store(s, tp.load(X[m0 + OFF:m0 + OFF + 16, 0:16], layout=tp.blocked((16, 16), 32, 2)))
    tp.barrier()
    y = tp.load(s, layout=tp.blocked((16, 16), 64, 1))             # other threads than wrote
    tp.store(Y[m0:m0 + 16, 0:16], tp.convert_layout(y, tp.blocked((16, 16), 64, 4)))


@pytest.mark.parametrize("path", ["copy", "async", "store", "role"])
@pytest.mark.parametrize("off", [0, 1])
def test_tags_follow_data_global_shared_registers_global(path, off):
    X, Y = f32(32, 16), np.zeros((32, 16), np.float32)
    _, tracker = run(staged.ir(target="sm_80", PATH=path, OFF=off), (2,), [X, Y])
    got = tracker.memory_tags(1)
    assert got.shape == (32, 16)
    # Y[i, j] holds X[i + off, j]: the data and its tag, including the one row past X (tag of its coordinates)
    np.testing.assert_array_equal(got, xtags((32, 16), dr=off))
    ref = np.vstack([X, np.zeros((1, 16), np.float32)])[off:off + 32]
    np.testing.assert_array_equal(Y, ref)
    # X itself keeps its tags
    np.testing.assert_array_equal(tracker.memory_tags(0), xtags((32, 16)))


@tp.kernel(threads=32)
def early_read(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], Z: tp.Tensor[tp.f32, "N"]):
    s = tp.shared((64,), tp.f32)
    tp.tag(X, lambda i: ("x", i))
    tp.copy_async(X[0:64], s)
    tp.commit_async()
    tp.store(Y[0:64], tp.load(s))                                    # before the copy landed
    tp.wait_async(0)
    tp.barrier()
    tp.store(Z[0:64], tp.load(s))


def test_async_copy_tags_land_when_the_wait_retires_them():
    X, Y, Z = f32(64), np.zeros(64, np.float32), np.zeros(64, np.float32)
    _, tracker = run(early_read.ir(target="sm_80"), (1,), [X, Y, Z])
    assert all(t is UNINIT for t in tracker.memory_tags(1))
    assert np.isnan(Y).all()  # the interpreter's poison: the same story in the data
    assert list(tracker.memory_tags(2)) == [("x", i) for i in range(64)]


@tp.kernel(threads=64)
def elementwise(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], W: tp.Tensor[tp.f32, "N"],
                Z: tp.Tensor[tp.f32, "N"], U: tp.Tensor[tp.f32, "N"], V: tp.Tensor[tp.f32, "N"]):
    tp.tag(X, lambda i: ("x", i))
    tp.tag(Y, lambda i: ("y", i))
    x = tp.load(X[0:128])
    y = tp.load(Y[0:128])
    w = tp.load(W[0:128])                                            # W is untagged
    tp.store(Z[0:128], tp.exp(x) * 2.0 + y)
    tp.store(U[0:128], tp.where(x > y, x, w))
    tp.store(V[0:128], w + 1.0)                                      # nothing tagged: stays untagged


def test_elementwise_ops_give_the_tuple_of_operand_tags():
    args = [f32(128) for _ in range(3)] + [np.zeros(128, np.float32) for _ in range(3)]
    _, tracker = run(elementwise.ir(target="sm_80"), (1,), args)
    Z, U = tracker.memory_tags(3), tracker.memory_tags(4)
    assert Z[5] == (((("x", 5),), None), ("y", 5))                  # ((exp(x) * 2.0) + y)
    assert U[7] == ((("x", 7), ("y", 7)), ("x", 7), None)             # where(x > y, x, w)
    assert tracker.memory_tags(5) is None


@tp.kernel(threads=64)
def reduced(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, "M"], PRED: tp.constexpr = "row"):
    tp.tag(X, lambda i, j: ("x", i, j))
    r = tp.sum(tp.load(X[0:16, 0:8]), axis=1)
    if PRED == "row":
        tp.assert_tag(r, lambda t: t[1] < 16)
    else:
        tp.assert_tag(r, lambda t: t[2] < 7)                         # fails for the element of column 7
    tp.store(Y[0:16], r)


@pytest.mark.parametrize("pred", ["row", "col"])
def test_reductions_keep_every_reduced_tag(pred):
    kir = reduced.ir(target="sm_80", PRED=pred)
    _, tracker = run(kir, (1,), [f32(16, 8), np.zeros(16, np.float32)])
    tags = tracker.memory_tags(1)
    assert isinstance(tags[3], Alts) and set(tags[3].items) == {("x", 3, j) for j in range(8)}
    report = tv.verify(kir)
    if pred == "row":
        assert tracker.ok and report.ok, str(report)
    else:
        (v,) = tracker.violations
        assert len(v) == 16 and v.tags[0]["x"] == ("x", 0, 7)       # the failing alternative
        (f,) = report.by_check("tag_assertion")
        assert tracker.failed(coords=f.counterexample["coords"], span=f.span)


@tp.kernel(threads=32)
def untagged_assert(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"]):
    tp.tag(X, lambda i: ("x", i))
    x = tp.load(X[0:32])
    tp.assert_tag(x, lambda t: t[0] == "x")
    y = tp.load(Y[0:32])
    tp.assert_tag(y, lambda t: t[0] == "y")                          # y is untagged: None[0] raises


def test_a_predicate_python_cannot_evaluate_fails_as_the_verifier_reports():
    kir = untagged_assert.ir(target="sm_80")
    _, tracker = run(kir, (1,), [f32(32), f32(32)])
    (v,) = tracker.violations
    assert len(v) == 32 and v.tags[0] == {"x": None}
    assert [f.span.line for f in tv.verify(kir).by_check("tag_assertion")] == [v.span.line]


@tp.kernel(threads=32)
def tag_tiles(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], Z: tp.Tensor[tp.f32, "N"]):
    s = tp.shared((32,), tp.f32)
    tp.store(s, tp.load(X[0:32]))
    tp.tag(s, lambda i: ("s", i))
    tp.barrier()
    y = tp.load(Y[0:32])
    tp.tag(y, lambda i: ("r", 31 - i))
    tp.store(Z[0:32], tp.load(s) + y)


def test_tags_on_shared_and_register_tiles():
    _, tracker = run(tag_tiles.ir(target="sm_80"), (1,), [f32(32), f32(32), np.zeros(32, np.float32)])
    assert list(tracker.memory_tags(2)) == [(("s", i), ("r", 31 - i)) for i in range(32)]


@tp.kernel(threads=32)
def masked_store(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"]):
    tp.tag(X, lambda i: ("x", i))
    tp.tag(Y, lambda i: ("y", i))
    x = tp.load(X[0:32])
    tp.store(Y[0:32], x, x > 0.0)


def test_masked_off_elements_keep_their_tags():
    X = f32(32)
    _, tracker = run(masked_store.ir(target="sm_80"), (1,), [X, np.zeros(32, np.float32)])
    assert list(tracker.memory_tags(1)) == [("x", i) if X[i] > 0 else ("y", i) for i in range(32)]


# ----------------------------------------------------------------------------------------- MMA


def test_mma_pairs_on_the_correct_fragment_hold():
    kir = S.reg_mma.ir(target="sm_80", BUG="none")
    _, tracker = run(kir, (1,), [f32(16, 16), f32(16, 16), np.zeros((16, 16), np.float32)])
    assert tracker.ok and tracker.checked == 16 * 16 * 16
    (rec,) = tracker.mma_records
    assert tracker.operand_pairs(rec, (3, 5))[9] == (("A", 3, 9), ("B", 9, 5))


@pytest.mark.parametrize("bug", ["transposed", "blocked", "b_swap"])
def test_mma_pairs_follow_the_hardware_reinterpretation(bug):
    """Probe the interpreter's product: A holds the code 1 + 16 i + k of its element, B one 1 at (k0, j0), so
    C[i, j0] is the code of the A element the instruction multiplied at (i, k0) (and symmetrically for B).
    The tracker's pair tags must name exactly those elements."""
    kir = S.reg_mma.ir(target="sm_80", BUG=bug)
    code = (1 + 16 * np.arange(16)[:, None] + np.arange(16)[None, :]).astype(np.float32)
    k0, j0 = 5, 3
    onehot = np.zeros((16, 16), np.float32)
    onehot[k0, j0] = 1.0
    C = np.zeros((16, 16), np.float32)
    _, tracker = run(kir, (1,), [code, onehot, C])
    (rec,) = tracker.mma_records
    hits = 0
    for i, j in np.ndindex(16, 16):
        # C[i, j] sums the codes of the A elements multiplied with B's one: the pairs whose b tag is ('B', k0, j0)
        pairs = [p for p in tracker.operand_pairs(rec, (i, j)) if p is not None]
        expect = sum(1 + 16 * a[1] + a[2] for a, b in pairs if b == ("B", k0, j0))
        assert C[i, j] == expect, ((i, j), C[i, j], pairs)
        hits += expect > 0
    assert hits >= 16
    assert not tracker.ok
    report = tv.verify(kir)
    assert report.by_check("tag_assertion")
    for f in report.by_check("tag_assertion"):
        cex = f.counterexample
        assert tracker.failed(coords=cex["coords"], k_index=cex["k_index"], span=f.span)


def test_mma_operands_sees_every_mma_execution_once():
    kir = S.pipe_gemm.ir(target="sm_80", BUG="tag_tile")
    A, B = f32(64, 64), f32(64, 32)
    _, tracker = run(kir, (2, 2), [A, B, np.zeros((64, 32), np.float32)])
    seen = [(v.block, v.iteration["k"]) for v in tracker.violations]
    assert len(seen) == len(set(seen)) and {k for _, k in seen} == {1, 2, 3}   # k = 0 reads the right tile
    assert len(tracker.mma_records) == 4 * 4


@pytest.mark.parametrize("target", list(gemm.PRESETS))
def test_stdlib_gemm_assertion_holds_dynamically(target):
    p = gemm.PRESETS[target]
    kir = gemm.gemm.ir(target=target, **p)
    M, N, K = 2 * p["BM"], 2 * p["BN"], 2 * p["BK"]
    A, B, C = f32(M, K), f32(K, N), np.zeros((M, N), np.float32)
    _, tracker = run(kir, (2, 2), [A, B, C])
    assert tracker.ok, str(tracker.violations[0])
    assert tracker.checked == 4 * 2 * p["BM"] * p["BN"] * p["BK"]   # every pair of every MMA execution
    ref = A.astype(np.float64) @ B
    assert np.allclose(C, ref, rtol=3e-2, atol=3e-1)


# ----------------------------------------------------------------------------------------- verifier agreement


SEEDED = [("pipe_gemm", b) for b in ("none", "tag_fn", "tag_tile")] + [
    ("reg_mma", b) for b in ("none", "transposed", "blocked", "b_swap")] + [
    ("add_tags", b) for b in ("none", "shift", "other_block")]


def _seeded_args(name):
    if name == "pipe_gemm":
        return (2, 2), [f32(64, 64), f32(64, 32), np.zeros((64, 32), np.float32)]
    if name == "reg_mma":
        return (1,), [f32(16, 16), f32(16, 16), np.zeros((16, 16), np.float32)]
    return (2,), [f32(2048) for _ in range(3)]


@pytest.mark.parametrize("name, bug", SEEDED, ids=[f"{n}-{b}" for n, b in SEEDED])
def test_seeded_tag_bugs_fail_dynamically_where_the_verifier_says(name, bug):
    kir = getattr(S, name).ir(target="sm_80", BUG=bug)
    grid, args = _seeded_args(name)
    _, tracker = run(kir, grid, args)
    found = tv.verify(kir).by_check("tag_assertion")
    assert {v.span.line for v in tracker.violations} == {f.span.line for f in found}
    assert bool(found) == (bug != "none")
    for f in found:  # replay on a launch that holds the counterexample's block, sizes and iteration
        cex = f.counterexample
        grid, args, _ = replay.args_for(name, kir, cex)
        _, tracker = run(kir, grid, args)
        assert tracker.failed(block=cex["block"], coords=cex["coords"], iteration=cex.get("iteration"),
                              k_index=cex.get("k_index"), span=f.span), str(f)


def test_the_tracker_does_not_change_what_the_kernel_computes():
    kir = S.pipe_gemm.ir(target="sm_80", BUG="none")
    A, B = f32(64, 64), f32(64, 32)
    C0, C1 = np.zeros((64, 32), np.float32), np.zeros((64, 32), np.float32)
    t0 = run_ir(kir, (2, 2), [A, B, C0], record=True)
    t1 = run_ir(kir, (2, 2), [A, B, C1], record=True, tags=DynamicTagTracker())
    np.testing.assert_array_equal(C0, C1)
    np.testing.assert_array_equal(t0.accesses, t1.accesses)


# ----------------------------------------------------------------------------------------- former verifier gaps
# Failures the run showed and the verifier once missed.


@tp.kernel(threads=64)
def read_back(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"]):
    tp.tag(X, lambda i: ("x", i))
    tp.tag(Y, lambda i: ("y", i))
    tp.store(Y[0:64], tp.load(X[1:65]))
    tp.barrier()
    tp.assert_tag(tp.load(Y[0:64]), lambda t: t[0] == "y")         # Y now holds X's elements


def test_tagging_a_tensor_inside_a_loop_is_rejected():
    """Tags are unconditional facts about data: the language takes them only at the kernel's top level (a tag
    applied later in a loop body would leave the first iteration's loads untagged)."""

    @tp.kernel(threads=64)
    def late_tag(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"]):
        for it in range(2):
            x = tp.load(X[0:64])
            tp.assert_tag(x, lambda t: t[0] == "x")
            tp.tag(X, lambda i: ("x", i))
            tp.store(Y[0:64], x)

    with pytest.raises(tp.UnsupportedConstructError, match="top level"):
        late_tag.ir(target="sm_80")


def test_tags_of_a_tensor_the_kernel_writes_are_unknown():
    """Y holds X's elements after the store: the verifier must not trust Y's tag function there."""
    kir = read_back.ir(target="sm_80")
    _, tracker = run(kir, (1,), [f32(80), np.zeros(80, np.float32)])
    assert not tracker.ok
    assert tv.verify(kir).by_check("tag_assertion")
