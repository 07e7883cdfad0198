"""The verifier on gathers, scatters and atomics: global races between blocks (counterexamples naming both
blocks), duplicate-index scatters, atomics, and tags through gathers. Each verdict is checked on the
interpreter too: the counterexample's two blocks really write one element, and a clean kernel has none."""

import numpy as np

import tilepy as tp
import tilepy_verify


@tp.kernel(threads=64)
def overlap(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], STRIDE: tp.constexpr = 64):
    i0 = tp.block_id(0) * STRIDE
    tp.store(Y[i0:i0 + 64], tp.load(X[i0:i0 + 64]))


@tp.kernel(threads=64)
def halves(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], SHIFT: tp.constexpr = 0):
    i0 = tp.block_id(0) * 64
    idx = i0 + tp.arange(64) // 2 * 2 + SHIFT * (tp.arange(64) % 2)
    tp.store(Y[idx], tp.load(X[i0:i0 + 64]))


@tp.kernel(threads=64)
def scatter_add(X: tp.Tensor[tp.f32, "N"], I: tp.Tensor[tp.i32, "N"], Y: tp.Tensor[tp.f32, "M"],
                ATOMIC: tp.constexpr = True):
    i0 = tp.block_id(0) * 64
    idx = tp.load(I[i0:i0 + 64], other=-1)
    if ATOMIC:
        tp.atomic_add(Y[idx], tp.load(X[i0:i0 + 64]))
    else:
        tp.store(Y[idx], tp.load(X[i0:i0 + 64]))


def _writers(kernel, grid, args, **cx):
    """{(param, element offset): set of blocks} of the global writes of one interpreter run."""
    trace = kernel[grid](*args, record=True, **cx)
    acc = trace.accesses
    w = acc[acc["write"] & (acc["space"] == 0)]
    out = {}
    for b, buf, off in zip(w["block"], w["buffer"], w["offset"]):
        out.setdefault((int(buf), int(off)), set()).add(int(b))
    return out


def test_two_blocks_writing_one_element_is_a_race_naming_both_blocks():
    r = tilepy_verify.verify(overlap, STRIDE=32)
    (f,) = r.errors
    assert f.check == "global_race" and "block" in f.message and "'Y'" in f.message
    cex = f.counterexample
    b1, b2 = cex["block"][0], cex["other_block"][0]
    assert b1 != b2 and cex["block"][1:] == (0, 0) == cex["other_block"][1:]
    # replay: both blocks write that element on the interpreter
    n = 32 * (max(b1, b2) + 2)
    writers = _writers(overlap, (max(b1, b2) + 1,), (np.zeros(n, np.float32), np.zeros(n, np.float32)),
                       STRIDE=32)
    assert {b1, b2} <= writers[(1, cex["element"][0])]
    assert tilepy_verify.verify(overlap, STRIDE=64).ok
    assert all(len(s) == 1 for s in _writers(overlap, (3,), (np.zeros(192, np.float32),) * 2).values())


def test_a_scatter_with_duplicate_indices_races_with_itself():
    f = tilepy_verify.verify(halves, SHIFT=0).errors[0]
    assert "duplicate indices" in f.message
    c1, c2 = f.counterexample["coords"], f.counterexample["other_coords"]
    assert c1 != c2 and c1[0] // 2 == c2[0] // 2
    assert tilepy_verify.verify(halves, SHIFT=1).ok


def test_data_dependent_scatter_needs_an_atomic():
    assert tilepy_verify.verify(scatter_add, ATOMIC=True).ok
    assert {f.check for f in tilepy_verify.verify(scatter_add, ATOMIC=False).errors} == {"global_race"}


@tp.kernel(threads=64)
def gathered(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], Z: tp.Tensor[tp.f32, "N"],
             SHIFT: tp.constexpr = 0, STEP: tp.constexpr = 2):
    tp.tag(X, lambda i: ("x", i))
    tp.tag(Y, lambda i: ("y", i))
    i0 = tp.block_id(0) * 64
    flip = i0 + 63 - tp.arange(64)
    z = tp.load(X[flip]) + tp.load(Y[i0 + 63 + SHIFT - tp.arange(64)])
    tp.assert_tag(z, lambda t: t[0][1] == t[1][1], message="x[i] meets y[i]")
    s = tp.load(X[i0 * STEP:i0 * STEP + 64 * STEP:STEP])
    tp.assert_tag(s, lambda t: t[1] % 2 == 0, message="every other element")
    tp.store(Z[flip], z + s)


def test_a_gathered_element_carries_the_tag_at_its_index():
    assert tilepy_verify.verify(gathered).ok
    (f,) = tilepy_verify.verify(gathered, SHIFT=1).errors
    assert f.check == "tag_assertion" and "'x', 63" in str(f) and "'y', 64" in str(f)
    (g,) = tilepy_verify.verify(gathered, STEP=3).errors
    assert "every other element" in g.message or "t[1] % 2" in str(g)


@tp.kernel(threads=64)
def loaded_index(X: tp.Tensor[tp.f32, "N"], I: tp.Tensor[tp.i32, "N"], Z: tp.Tensor[tp.f32, "N"]):
    tp.tag(X, lambda i: ("x", i))
    i0 = tp.block_id(0) * 64
    z = tp.load(X[tp.load(I[i0:i0 + 64])])
    tp.assert_tag(z, lambda t: t[1] >= 0, message="an element of x")
    tp.store(Z[i0:i0 + 64], z)


def test_a_data_dependent_gather_has_an_unknown_tag():
    (f,) = tilepy_verify.verify(loaded_index).errors
    assert f.check == "tag_assertion"


@tp.kernel(threads=64, target="sm_80")
def copies(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], STRIDE: tp.constexpr = 64, RD: tp.constexpr = -1):
    s = tp.shared((64,), tp.f32)
    i0 = tp.block_id(0) * STRIDE
    if RD >= 0:
        tp.copy_async(Y[i0 + RD:i0 + RD + 64], s)   # RD > 0: reads elements the next block writes
    else:
        tp.copy_async(X[i0:i0 + 64], s)
    tp.commit_async()
    tp.wait_async(0)
    tp.barrier()
    tp.copy(s, Y[i0:i0 + 64])                       # STRIDE < 64: two blocks copy into one element


def test_copies_to_and_from_global_memory_take_part():
    assert tilepy_verify.verify(copies).ok and tilepy_verify.verify(copies, RD=0).ok
    (f,) = tilepy_verify.verify(copies, STRIDE=60).errors
    assert f.check == "global_race" and "writes element" in f.message
    (f,) = tilepy_verify.verify(copies, RD=32).errors
    assert f.check == "global_race" and "reads" in f.message
    assert f.counterexample["block"] != f.counterexample["other_block"]


@tp.kernel(threads=64)
def phase_blocks(X: tp.Tensor[tp.f32, 64], Y: tp.Tensor[tp.f32, 4096], PHASES: tp.constexpr = 4):
    """Blocks along axis 2 are phases; only the first 4 store (an inline mask ANDing block-id conditions into
    the element mask). Phase ph writes row p * 4 + ph % 4: phases 0 and 4 share a row when phase 4 stores."""
    p = tp.block_id(0)
    ph = tp.block_id(2)
    row = p * 4 + ph % 4
    tp.store(Y[row * 64 + tp.arange(64)], tp.load(X[0:64]), mask=(tp.arange(64) < 64) & (p < 16) & (ph < PHASES))


def test_an_inline_mask_with_block_conditions_restricts_the_writes():
    """A mask written inline (not through a variable) restricts the elements the race check considers when it
    holds no memory op: the block conditions in it keep phases >= 4 from writing (was a false race between
    blocks z = 0 and z = 4); letting phase 4 store is a real race, shown on the interpreter."""
    clean = tilepy_verify.verify(phase_blocks, target="sm_90a", checks=["global_race"], PHASES=4)
    assert not clean.findings, [str(f) for f in clean.findings]
    racy = tilepy_verify.verify(phase_blocks, target="sm_90a", checks=["global_race"], PHASES=5)
    f = next(f for f in racy.findings if f.check == "global_race")
    x = np.ones(64, np.float32)
    writers = _writers(phase_blocks, (2, 1, 6), (x, np.zeros(4096, np.float32)), PHASES=5)
    assert any(len(b) > 1 for b in writers.values()), f
    assert all(len(b) == 1 for b in _writers(phase_blocks, (2, 1, 6), (x, np.zeros(4096, np.float32)),
                                             PHASES=4).values())
