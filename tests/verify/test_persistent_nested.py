"""The persistent Hopper GEMM in its fast form (issue 17 item 4): `stdlib_kernels/gemm_hopper.py::gemm_persistent`
runs a tile loop `for t in range(first, tiles, step)` around the ring loop `for k in range(rounds * STAGES)`,
the ring's phase `turn + k // STAGES` with `turn = ((t - first) // step) * rounds`: a count over two nested
loops. Before the analysis, `mbarrier_arrays._flatten` writes the pair as one loop over the block's slots
J = n * rounds + j (n the tile, j the round; the ring unrolled by STAGES), where that phase is J itself, and
the single-loop machinery proves the ring (happens-before, deadlock, tags, the blocks' tiles disjoint).

`ring` below is that kernel's source with seeded bugs behind `BUG` (where BUG == "none" it is the stdlib
kernel statement for statement, `test_ring_is_the_stdlib_kernel` checks the IR):

* "tile_phase": both roles wait for phase k // STAGES, the round within the tile (the earlier tiles' turns
  forgotten): from a block's second tile on the consumers multiply stages the producer has not refilled
  (stale products on the interpreter, a pipeline hazard),
* "no_prerelease": the consumers never release the stages up front: the producer's first wait never returns
  (a deadlock),
* "early_refill": the producer waits for phase turn + k // STAGES - 1 of `empty`: one round early, it refills
  a stage the consumers may still read (a write-after-read hazard),
* "late_turn": the consumers count a tile's turns from 1, not 0 (`turn = (n + 1) * rounds`): they wait a whole
  tile ahead of the producer (a deadlock),
* "short_turn": the turn advances by one phase per tile, not `rounds` (`turn = n`): with more than one round
  per tile the consumers read stages of the wrong round (a pipeline hazard),
* "wrong_n0": the column tile is (t % in_group) // GROUP_M, not // group_m: two blocks store one tile of a
  ragged last group (a global race; on the interpreter another tile is never written).

Each bug is shown on the interpreter and reported by the verifier with a counterexample; the correct kernel
verifies clean at three tile configurations (tests/stdlib/test_gemm_hopper.py::test_persistent_verifies runs
the stdlib kernel itself)."""

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv
from stdlib_kernels import gemm_hopper
from stdlib_kernels.gemm_hopper import b_layout
from tilepy.dtypes import round_bf16
from tilepy.errors import InterpreterError

SMALL = dict(STAGES=2, BN=64, INSTR=tp.nv.wgmma_m64n64k16_bf16)


@tp.kernel(threads=lambda c: 128 * (1 + c["CONSUMERS"]), target="sm_90a")
def ring(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"],
         BM: tp.constexpr = 128, BN: tp.constexpr = 256, BK: tp.constexpr = 64, STAGES: tp.constexpr = 4,
         CONSUMERS: tp.constexpr = 2, INSTR: tp.constexpr = tp.nv.wgmma_m64n256k16_bf16,
         SWIZZLE: tp.constexpr = tp.Swizzle(3, 3, 3), PRODUCER_REGS: tp.constexpr = 0,
         CONSUMER_REGS: tp.constexpr = 0, GROUP_M: tp.constexpr = 8, BUG: tp.constexpr = "none"):
    a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
    b_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=SWIZZLE, layout=b_layout(BK, BN))
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    n_m = tp.cdiv(C.shape[0], BM)
    n_n = tp.cdiv(C.shape[1], BN)
    in_group = GROUP_M * n_n
    k_tiles = tp.cdiv(A.shape[1], BK)
    rounds = tp.cdiv(k_tiles, STAGES)
    first = tp.block_id(0)
    step = tp.num_blocks(0)
    if tp.warpgroup_id() == 0:
        if PRODUCER_REGS > 0:
            tp.setmaxnreg(PRODUCER_REGS)
        for t in range(first, n_m * n_n, step):
            first_m = (t // in_group) * GROUP_M
            group_m = tp.minimum(n_m - first_m, GROUP_M)
            m0 = (first_m + (t % in_group) % group_m) * BM
            n0 = ((t % in_group) // group_m) * BN
            if BUG == "tile_phase":
                turn = 0
            elif BUG == "short_turn":
                turn = (t - first) // step
            else:
                turn = ((t - first) // step) * rounds
            for k in range(rounds * STAGES):
                if BUG == "early_refill":
                    tp.mbarrier_wait(empty[k % STAGES], turn + k // STAGES - 1)
                else:
                    tp.mbarrier_wait(empty[k % STAGES], turn + k // STAGES)
                if k < k_tiles:
                    tp.copy_bulk(A[m0:m0 + BM, k * BK:k * BK + BK], a_s[k % STAGES], full[k % STAGES])
                    if BUG == "b_later_tiles":
                        kb = k + tp.minimum(t - first, 1)
                        tp.copy_bulk(B[kb * BK:kb * BK + BK, n0:n0 + BN], b_s[k % STAGES], full[k % STAGES])
                    else:
                        tp.copy_bulk(B[k * BK:k * BK + BK, n0:n0 + BN], b_s[k % STAGES], full[k % STAGES])
                tp.mbarrier_arrive(full[k % STAGES])
    else:
        if CONSUMER_REGS > 0:
            tp.setmaxnreg(CONSUMER_REGS)
        if BUG != "no_prerelease":
            for s in tp.static_range(STAGES):
                tp.mbarrier_arrive(empty[s])
        for t in range(first, n_m * n_n, step):
            first_m = (t // in_group) * GROUP_M
            group_m = tp.minimum(n_m - first_m, GROUP_M)
            m0 = (first_m + (t % in_group) % group_m) * BM
            if BUG == "wrong_n0":
                n0 = ((t % in_group) // GROUP_M) * BN
            else:
                n0 = ((t % in_group) // group_m) * BN
            if BUG == "tile_phase":
                turn = 0
            elif BUG == "late_turn":
                turn = ((t - first) // step + 1) * rounds
            elif BUG == "short_turn":
                turn = (t - first) // step
            else:
                turn = ((t - first) // step) * rounds
            acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
            for k in range(rounds * STAGES):
                if BUG == "next_round":
                    tp.mbarrier_wait(full[k % STAGES], turn + k // STAGES + 1)
                elif BUG == "early_round":
                    tp.mbarrier_wait(full[k % STAGES], turn + k // STAGES - 1)
                else:
                    tp.mbarrier_wait(full[k % STAGES], turn + k // STAGES)
                if k < k_tiles:
                    acc = tp.mma(a_s[k % STAGES], b_s[k % STAGES], acc)
                tp.mbarrier_arrive(empty[k % STAGES])
            tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
            tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)


def _run(bug, m=260, k=320, n=192, grid=2, **constexprs):
    """C from the interpreter (NaN where nothing was stored) and the float64 reference. 3 x 3 tiles on 2
    blocks, 5 k-tiles in 2 stages: 3 rounds per tile, the last with an empty slot."""
    rng = np.random.default_rng(m + k + n)
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    c = np.full((m, n), np.nan, np.float32)
    ring[(grid,)](a, b, c, target="sm_90a", BUG=bug, GROUP_M=2, **{**SMALL, **constexprs})
    return c, gemm_hopper.reference(a, b)


def _findings(bug, **constexprs):
    return tv.verify(ring, target="sm_90a", BUG=bug, **{**SMALL, **constexprs}).findings


def test_ring_is_the_stdlib_kernel():
    """BUG == "none" is gemm_persistent itself (same statements: what is proved of one holds of the other)."""
    from tilepy.printer import format_ir

    def body(k):
        lines = [x.split("  #")[0] for x in format_ir(k.ir("sm_90a", **SMALL)).splitlines()]
        return lines[next(i for i, x in enumerate(lines) if x.strip().startswith("a_s:")):]

    assert body(ring) == body(gemm_hopper.gemm_persistent)


def test_correct_ring_on_the_interpreter():
    c, ref = _run("none")
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-6


@pytest.mark.parametrize("params", [SMALL, {}, dict(BN=128, STAGES=5, INSTR=tp.nv.wgmma_m64n128k16_bf16)])
def test_correct_ring_verifies_clean(params):
    report = tv.verify(ring, target="sm_90a", **params)
    assert report.ok and not report.findings, str(report)
    assert report.stats["queries"] > 0


def test_the_ring_is_one_slot_loop():
    """The rewrite the proof rests on: each role's tile loop and ring loop become one loop whose waits are
    for phase J (the slot count), and the tile loop's index is J // max(rounds, 1)."""
    from tilepy.printer import format_ir
    from tilepy_verify.mbarrier_arrays import expand

    text = format_ir(expand(gemm_hopper.gemm_persistent.ir("sm_90a", **SMALL)))
    loops = [x.strip() for x in text.splitlines() if x.strip().startswith("for ")]
    assert len(loops) == 2 and all("max(rounds, 1)" in x for x in loops), loops
    waits = [x.strip() for x in text.splitlines() if "mbarrier_wait" in x]
    assert len(waits) == 4 and all(w.split(", ")[1].startswith("__t_k_slot") for w in waits), waits


@pytest.mark.parametrize("m, k, n, grid, bug", [(260, 320, 192, 2, "none"), (130, 64, 70, 3, "none"),
                                                 (200, 0, 100, 2, "none"), (260, 320, 192, 2, "short_turn"),
                                                 (130, 200, 300, 4, "tile_phase")])
def test_slot_loop_computes_what_the_nested_loops_do(m, k, n, grid, bug):
    """The rewrite is exact: the interpreter runs the rewritten IR (one slot loop per role) to the same output,
    bit for bit, as the kernel as written, with K = 0 (no ring round: one slot per tile, zeros stored) and with
    a seeded bug (the same wrong products)."""
    from tilepy.interpreter import run_ir
    from tilepy_verify.mbarrier_arrays import expand

    rng = np.random.default_rng(m + k + n)
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    kir = ring.ir("sm_90a", BUG=bug, GROUP_M=2, **SMALL)
    flat = expand(kir)
    assert flat is not kir
    outs = []
    for x in (kir, flat):
        c = np.full((m, n), np.nan, np.float32)
        run_ir(x, (grid,), [a, b, c])
        outs.append(c)
    np.testing.assert_array_equal(outs[1], outs[0])
    if bug == "none":
        ref = gemm_hopper.reference(a, b)
        assert np.abs(outs[0] - ref).max() <= 1e-5 * max(1.0, np.abs(ref).max())


@pytest.mark.parametrize("bug", ["tile_phase", "short_turn"])
def test_stale_stage_bug_computes_wrong_products_and_is_a_hazard(bug):
    c, ref = _run(bug)
    assert np.nanmax(np.abs(c - ref)) > 1e-2 or np.isnan(c).any()
    fs = _findings(bug)
    hz = [f for f in fs if f.check in ("pipeline_hazard", "tag_assertion")]
    assert hz and all(f.counterexample for f in hz), [f.check for f in fs]


@pytest.mark.parametrize("bug", ["no_prerelease", "late_turn"])
def test_deadlock_bug_deadlocks_and_is_reported(bug):
    with pytest.raises(InterpreterError, match="deadlock"):
        _run(bug)
    fs = _findings(bug)
    dl = [f for f in fs if f.check == "deadlock"]
    assert dl and dl[0].counterexample, [f.check for f in fs]


def test_early_refill_is_a_war_hazard():
    c, ref = _run("early_refill")
    assert np.isnan(c).sum() == 0 and np.max(np.abs(c - ref)) > 1e-2   # refilled under the consumers' reads
    fs = _findings("early_refill")
    hz = [f for f in fs if f.check == "pipeline_hazard"]
    assert hz and all(f.counterexample for f in hz), [f.check for f in fs]


def test_wrong_n0_is_a_global_race():
    c, _ = _run("wrong_n0")
    assert np.isnan(c).any()                                        # a tile of the last group is never written
    fs = _findings("wrong_n0")
    races = [f for f in fs if f.check == "global_race"]
    assert races, [f.check for f in fs]
    cex = races[0].counterexample
    assert cex["block"] != cex["other_block"] and cex["element"], cex


@tp.kernel(threads=96)
def tiles(X: tp.Tensor[tp.f32, "T", "KK", 32], Y: tp.Tensor[tp.f32, "T", 32], Z: tp.Tensor[tp.i32, "T", 4],
          STAGES: tp.constexpr = 2):
    buf = tp.shared((32,), tp.f32, stages=STAGES)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    n_t = X.shape[0]
    kk = X.shape[1]
    rounds = tp.cdiv(kk, STAGES)
    first = tp.block_id(0)
    step = tp.num_blocks(0)
    if tp.warp_id() == 0:
        for t in range(first, n_t, step):
            turn = ((t - first) // step) * rounds
            for k in range(rounds * STAGES):
                tp.mbarrier_wait(empty[k % STAGES], turn + k // STAGES)
                if k < kk:
                    tp.copy_bulk(X[t, k, :], buf[k % STAGES], full[k % STAGES])
                tp.mbarrier_arrive(full[k % STAGES])
    else:
        for s in tp.static_range(STAGES):
            tp.mbarrier_arrive(empty[s])
        cnt = 0
        for t in range(first, n_t, step):
            w = cnt * 3                       # reads the carried count before it changes: once per tile
            x = t * 2                         # pure: every slot
            cnt = cnt + 1                     # carried: once per tile
            acc = tp.zeros((32,), tp.f32)
            y = x + first                     # pure, after a once statement
            turn = ((t - first) // step) * rounds
            for k in range(rounds * STAGES):
                tp.mbarrier_wait(full[k % STAGES], turn + k // STAGES)
                if k < kk:
                    acc = acc + tp.load(buf[k % STAGES])
                tp.mbarrier_arrive(empty[k % STAGES])
            tp.store(Y[t, :], acc)
            tp.store(Z[t, :], tp.full((4,), 1, tp.i32) * (x + y * 1000 + w * 100000 + cnt * 10000000))


@pytest.mark.parametrize("n_t, kk, grid", [(5, 5, 2), (4, 0, 3), (7, 3, 1)])
def test_slot_loop_keeps_the_prologue_order(n_t, kk, grid):
    """A tile loop whose prologue mixes scalars recomputed every slot (x = t * 2, y = x + first), statements kept
    once per tile (w reads the carried count before `cnt = cnt + 1` changes it, the accumulator's zeros) and a
    ring of a run-time number of rounds (0 when kk = 0): the rewritten IR stores the same on the interpreter,
    and the kernel verifies clean."""
    from tilepy.interpreter import run_ir
    from tilepy_verify.mbarrier_arrays import expand

    x = np.random.default_rng(n_t + kk).standard_normal((n_t, kk, 32)).astype(np.float32)
    kir = tiles.ir(None)
    outs = []
    for ir_ in (kir, expand(kir)):
        y, z = np.full((n_t, 32), np.nan, np.float32), np.zeros((n_t, 4), np.int32)
        run_ir(ir_, (grid,), [x, y, z])
        outs.append((y, z))
    np.testing.assert_array_equal(outs[1][0], outs[0][0])
    np.testing.assert_array_equal(outs[1][1], outs[0][1])
    np.testing.assert_allclose(outs[0][0], x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
    blk = [np.arange(b, n_t, grid) for b in range(grid)]            # each block's tiles, in order
    want = np.zeros(n_t, np.int64)
    for b, ts in enumerate(blk):
        for i, t in enumerate(ts):
            want[t] = 2 * t + (2 * t + b) * 1000 + 3 * i * 100000 + (i + 1) * 10000000
    np.testing.assert_array_equal(outs[0][1][:, 0], want)
    report = tv.verify(tiles)
    assert report.ok and not report.findings, str(report)
