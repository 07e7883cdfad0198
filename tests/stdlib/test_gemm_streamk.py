"""Stream-K GEMM (stdlib_kernels/gemm_streamk.py) on the CPU: the interpreter against float64 on ragged shapes
(partial tiles in M, N and K, shares that split tiles two and more ways, grids of 1 to 13 blocks), in any order
of the blocks (the fix-up's last contributor is then another block), twice through one plan (the workspace and
tickets are left zero); the verifier; and seeded bugs in the fix-up protocol.

`fixup` below is the kernel's source with bugs behind `BUG` (this copy must stay the stdlib kernel's statements
where BUG == "none": `test_fixup_copy_is_the_stdlib_kernel` compares the IR):

* "first_ticket": the FIRST contributor (ticket 0) stores the tile: the later contributions are lost,
* "no_ticket": no ticket at all, every contributor stores what the workspace holds when it gets there,
* "no_reset": the ticket is not reset: the next call's tickets start past the count, no block is last and the
  split tiles of C are never written,
* "no_zero" (FIXUP=0): the workspace is not zeroed: the next call adds onto the last call's sums,
* "opening_slots" (FIXUP=1): the last contributor reads every contributor's opening slot (2j), also the first
  contributor's whose part of the tile closes its share (slot 2j + 1).

Each is caught on the interpreter (wrong or missing output), "first_ticket" and "no_ticket" with FIXUP=0 only:
with FIXUP=1 the interpreter's one-block-at-a-time order heals them (the contributor that runs last sums every
slot and stores last), so only a concurrent schedule shows them. A ticket taken with sem="relaxed" (no fence)
the interpreter cannot show (it runs one block at a time); global_race reports it as a race
(tests/verify/test_ticket_protocol.py).
"""

import random

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv
from stdlib_kernels import gemm_streamk as sk
from stdlib_kernels.gemm_hopper import b_layout
from tilepy.dtypes import round_bf16

T64 = dict(BM=64, BN=64, BK=64, STAGES=2, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n64k16_bf16)
T128 = dict(BM=128, BN=64, BK=64, STAGES=3, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n64k16_bf16)


def _inputs(m, k, n, seed):
    rng = np.random.default_rng(seed)
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    return a, b


def _rel(out, ref):
    out = np.asarray(out, np.float64)
    assert not np.isnan(out).any(), "some output element was never written"
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("m,k,n,params,sms", [
    (100, 200, 150, T64, 5),      # 2 x 3 tiles of 4 k-tiles on 5 blocks: 4.8 k-tiles each, tiles split 2 ways
    (70, 520, 129, T64, 7),       # 9 k-tiles (the last partial), 6 tiles on 7 blocks
    (130, 330, 70, T128, 3),      # 2 x 2 tiles of 6 k-tiles on 3 blocks: a share holds a whole tile and parts
    (40, 700, 64, T64, 13),       # one tile of 11 k-tiles: 2 blocks (shares of at least 4 k-tiles)
    (200, 64, 200, T64, 4),       # one k-tile per tile: every tile whole, no fix-up
    (90, 300, 90, T64, 1),        # one block: every tile whole
])
@pytest.mark.parametrize("out,fixup_policy", [(tp.f32, 1), (tp.bf16, 1), (tp.f32, 0), (tp.bf16, 0), (tp.f32, 2),
                                              (tp.bf16, 2)])
def test_streamk_on_the_interpreter(m, k, n, params, sms, out, fixup_policy):
    a, b = _inputs(m, k, n, m + k + n)
    ref = sk.reference(a, b)
    sk._PLANS.clear()
    for call in range(2):   # the second call reuses the plan's workspace and tickets
        c = np.full((m, n), np.nan, np.float32)
        sk.launch(a, b, c, out_dtype=out, num_sms=sms, FIXUP=fixup_policy, **params)
        if out == tp.f32:
            assert _rel(c, ref) < 1e-6, call
        else:
            assert not np.isnan(c).any()
            np.testing.assert_array_equal(c, round_bf16(c))      # the stores rounded to bf16
            assert np.abs(c - ref).max() <= 2.0**-8 * np.abs(ref).max(), call
    (plan,) = sk._PLANS.values()
    ws, locks = next(iter(plan.bufs.values()))
    assert not locks.any() and (fixup_policy == 1 or not ws.any())   # left zero for the next call


def test_schedule_mirror():
    """parts_of (the host's view of the kernel's shares) covers every tile by consecutive blocks, and every
    block's share [b * total // G, (b + 1) * total // G) is non-empty when G <= total."""
    for m, n, k, params, grid in [(100, 150, 200, T64, 5), (70, 129, 520, T64, 7), (4096, 4096, 4096, sk.PRESETS[
            "wide"], 132), (16, 4096, 4096, sk.PRESETS["narrow"], 132)]:
        parts = sk.parts_of(m, n, k, params, grid)
        k_tiles = -(-k // params["BK"])
        total = len(parts) * k_tiles
        assert grid == sk.grid_of(m, n, k, params, grid)
        for b in range(grid):
            assert (b + 1) * total // grid > b * total // grid
        for t, blocks in enumerate(parts):
            share = {b for b in range(grid) for i in range(b * total // grid, (b + 1) * total // grid)
                     if i // k_tiles == t}
            assert sorted(share) == blocks


def _run_in_order(monkeypatch, order):
    """Run kernels with the blocks in `order(n)` (the fix-up's last contributor then differs)."""
    import tilepy.interpreter as interp

    def run_ir(kir, grid, args, *, record=False, tags=None):
        grid = interp._norm_grid(grid)
        it = interp._Interpreter(kir, grid, record, tags)
        writeback = it.bind(args)
        with np.errstate(all="ignore"):
            for lin in order(grid[0] * grid[1] * grid[2]):
                it.run_block(lin)
        for fn in writeback:
            fn()

    monkeypatch.setattr(interp, "run_ir", run_ir)


@pytest.mark.parametrize("order", ["reversed", "shuffled"])
def test_any_block_order(monkeypatch, order):
    rng = random.Random(5)
    _run_in_order(monkeypatch, (lambda n: list(range(n))[::-1]) if order == "reversed" else
                  (lambda n: rng.sample(range(n), n)))
    a, b = _inputs(130, 520, 129, 11)
    ref = sk.reference(a, b)
    for fixup_policy in (0, 1):
        sk._PLANS.clear()
        for _ in range(2):
            c = np.full((130, 129), np.nan, np.float32)
            sk.launch(a, b, c, num_sms=7, FIXUP=fixup_policy, **T64)
            assert _rel(c, ref) < 1e-6


def test_verifier_on_the_fix_up():
    """Every check but global_race proves the kernel clean (the pipeline's ring, deadlock, bounds, the tag
    assertion of the whole-tile store, the fix-up's masked accesses in bounds); its time is a benchmark's
    subject (0.4 s on the small tile on an idle CPU, not asserted under this load). global_race (the ticket
    protocol between blocks, about 1 s of CPU since it runs on the kernel as written) is proved in
    tests/verify/test_ticket_protocol.py and tests/verify/test_streamk_global_race.py."""
    checks = [c for c in tv.CHECKS if c != "global_race"]
    for k in (sk.gemm_streamk, sk.gemm_streamk_bf16):
        for fixup_policy in (0, 1, 2):
            report = tv.verify(k, target="sm_90a", checks=checks, FIXUP=fixup_policy, **T64)
            assert report.findings == [], [f.message for f in report.findings]


@tp.kernel(threads=lambda c: 128 * (1 + c["CONSUMERS"]), target="sm_90a")
def fixup(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"],
          WS: tp.Tensor[tp.f32, "WR", "WC"], LOCKS: tp.Tensor[tp.i32, "T"],
          BM: tp.constexpr = 128, BN: tp.constexpr = 128, BK: tp.constexpr = 64, STAGES: tp.constexpr = 4,
          CONSUMERS: tp.constexpr = 2, INSTR: tp.constexpr = tp.nv.wgmma_m64n128k16_bf16,
          SWIZZLE: tp.constexpr = tp.Swizzle(3, 3, 3), PRODUCER_REGS: tp.constexpr = 0,
          CONSUMER_REGS: tp.constexpr = 0, FIXUP: tp.constexpr = 1, MAX_PARTS: tp.constexpr = 4,
          BUG: tp.constexpr = "none"):
    a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
    b_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=SWIZZLE, layout=b_layout(BK, BN))
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    n_n = tp.cdiv(C.shape[1], BN)
    k_tiles = tp.cdiv(A.shape[1], BK)
    total = tp.cdiv(C.shape[0], BM) * n_n * k_tiles
    grid = tp.num_blocks(0)
    begin = tp.block_id(0) * total // grid
    end = (tp.block_id(0) + 1) * total // grid
    if tp.warpgroup_id() == 0:
        if PRODUCER_REGS > 0:
            tp.setmaxnreg(PRODUCER_REGS)
        for s in range(end - begin):
            t = (begin + s) // k_tiles
            k = (begin + s) % k_tiles
            m0 = (t // n_n) * BM
            n0 = (t % n_n) * BN
            tp.mbarrier_wait(empty[s % STAGES], s // STAGES)
            tp.copy_bulk(A[m0:m0 + BM, k * BK:k * BK + BK], a_s[s % STAGES], full[s % STAGES])
            tp.copy_bulk(B[k * BK:k * BK + BK, n0:n0 + BN], b_s[s % STAGES], full[s % STAGES])
            tp.mbarrier_arrive(full[s % STAGES])
    else:
        if CONSUMER_REGS > 0:
            tp.setmaxnreg(CONSUMER_REGS)
        for r in tp.static_range(STAGES):
            tp.mbarrier_arrive(empty[r])
        acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
        for s in range(end - begin):
            k = (begin + s) % k_tiles
            tp.mbarrier_wait(full[s % STAGES], s // STAGES)
            if k == 0 or s == 0:
                acc = tp.mma(a_s[s % STAGES], b_s[s % STAGES],
                             tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1))))
            else:
                acc = tp.mma(a_s[s % STAGES], b_s[s % STAGES], acc)
            tp.mbarrier_arrive(empty[s % STAGES])
            if k == k_tiles - 1 or s == end - begin - 1:
                t = (begin + s) // k_tiles
                m0 = (t // n_n) * BM
                n0 = (t % n_n) * BN
                first = t * k_tiles
                if first >= begin and first + k_tiles <= end:
                    tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
                    tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)
                elif FIXUP == 0:
                    parts = ((first + k_tiles) * grid - 1) // total - ((first + 1) * grid - 1) // total + 1
                    tp.atomic_add(WS[t * BM:t * BM + BM, 0:BN], acc)
                    if BUG == "no_ticket":
                        last = tp.full((1,), 1, tp.i32) == 1
                    else:
                        ticket = tp.atomic_add(LOCKS[t:t + 1], 1, sem="acq_rel")
                        last = ticket == (0 if BUG == "first_ticket" else parts - 1)
                    whole = tp.load(WS[t * BM:t * BM + BM, 0:BN], mask=last[:, None])
                    tp.store(C[m0:m0 + BM, n0:n0 + BN], whole, mask=last[:, None])
                    if BUG != "no_zero":
                        tp.store(WS[t * BM:t * BM + BM, 0:BN], 0.0, mask=last[:, None])
                    if BUG != "no_reset":
                        tp.store(LOCKS[t:t + 1], 0, mask=last)
                else:
                    lo = ((first + 1) * grid - 1) // total
                    hi = ((first + k_tiles) * grid - 1) // total
                    me = tp.block_id(0)
                    mine = 2 * me if first <= begin else 2 * me + 1
                    tp.store(WS[mine * BM:mine * BM + BM, 0:BN], acc)
                    if BUG == "no_ticket":
                        last = tp.full((1,), 1, tp.i32) == 1
                    else:
                        ticket = tp.atomic_add(LOCKS[t:t + 1], 1, sem="acq_rel")
                        last = ticket == (0 if BUG == "first_ticket" else hi - lo)
                    if MAX_PARTS == 0:
                        for i in range(hi - lo + 1):
                            j = lo + i
                            theirs = 2 * j if first <= j * total // grid else 2 * j + 1
                            acc += tp.load(WS[theirs * BM:theirs * BM + BM, 0:BN], mask=(last & (j != me))[:, None],
                                           layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
                    else:
                        for i in tp.static_range(MAX_PARTS):
                            j = lo + i
                            if BUG == "opening_slots":
                                theirs = 2 * j
                            else:
                                theirs = 2 * j if first <= j * total // grid else 2 * j + 1
                            acc += tp.load(WS[theirs * BM:theirs * BM + BM, 0:BN],
                                           mask=(last & (j != me) & (j <= hi))[:, None],
                                           layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
                    tp.store(C[m0:m0 + BM, n0:n0 + BN], acc, mask=last[:, None])
                    if BUG != "no_reset":
                        tp.store(LOCKS[t:t + 1], 0, mask=last)
                acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))


def test_fixup_copy_is_the_stdlib_kernel():
    from tilepy.printer import format_ir

    def body(k, fixup_policy):
        lines = [x.split("  #")[0] for x in format_ir(k.ir("sm_90a", **T64, FIXUP=fixup_policy)).splitlines()]
        return lines[next(i for i, x in enumerate(lines) if x.strip().startswith("a_s:")):]

    for f in (0, 1):      # (FIXUP=2, split-K's reduction into C, has no protocol to seed bugs in)
        assert body(fixup, f) == body(sk.gemm_streamk, f)


def _fixup_calls(bug, calls=2, m=100, k=520, n=150, sms=5, fixup_policy=0):
    """C after each of `calls` launches of the seeded kernel through one workspace, and the reference."""
    a, b = _inputs(m, k, n, 3)
    params = {**T64, "BUG": bug, "FIXUP": fixup_policy}
    ws = np.zeros(((2 * sms if fixup_policy else sk._cdiv(m, 64) * sk._cdiv(n, 64)) * 64, 64), np.float32)
    locks = np.zeros(sk._cdiv(m, 64) * sk._cdiv(n, 64), np.int32)
    outs = []
    for _ in range(calls):
        c = np.full((m, n), np.nan, np.float32)
        fixup[(sms,)](a, b, c, ws, locks, **params)
        outs.append(c)
    return outs, sk.reference(a, b)


@pytest.mark.parametrize("fixup_policy", [0, 1])
def test_seeded_none_is_right(fixup_policy):
    outs, ref = _fixup_calls("none", fixup_policy=fixup_policy)
    assert all(_rel(c, ref) < 1e-6 for c in outs)


@pytest.mark.parametrize("bug", ["first_ticket", "no_ticket"])
def test_seeded_early_store_is_caught(bug):
    (c,), ref = _fixup_calls(bug, calls=1, fixup_policy=0)
    assert not np.isnan(c).any()
    assert np.abs(c - ref).max() > 1e-2 * np.abs(ref).max()    # split tiles miss later contributions


def test_seeded_opening_slots_is_caught():
    """Reading every contributor's opening slot: the first contributor's part of a tile that starts inside
    its share is in its closing slot, so the sum takes a stale (here: never written, zero) slot instead."""
    (c,), ref = _fixup_calls("opening_slots", calls=1, fixup_policy=1)
    assert np.abs(c - ref).max() > 1e-2 * np.abs(ref).max()


@pytest.mark.parametrize("fixup_policy", [0, 1])
def test_seeded_no_reset_is_caught(fixup_policy):
    (c1, c2), ref = _fixup_calls("no_reset", fixup_policy=fixup_policy)
    assert _rel(c1, ref) < 1e-6
    assert np.isnan(c2).any()                  # no block is last in the second call: split tiles never stored


def test_seeded_no_zero_is_caught():
    (c1, c2), ref = _fixup_calls("no_zero")
    assert _rel(c1, ref) < 1e-6
    assert np.abs(c2 - ref).max() > 1e-2 * np.abs(ref).max()   # the second call adds onto the first's sums


def test_release_ticket_syncs_the_role_before_the_update():
    """The rendered ticket (CUTLASS's semaphore pattern): the consumer role's named barrier (every thread's
    workspace stores are done), then the one updating thread's fence and atomic, its fence again, and the
    barrier of the old value's exchange before any thread reads the workspace. Without the first barrier a
    fast thread's ticket could publish a slower thread's part before it is written."""
    import re

    import tilepy_hip

    src = tilepy_hip.render(sk.gemm_streamk.ir("sm_90a", **T64), "sm_90a")
    ticket = src.index("tp_atomic_add(&LOCKS[")
    before = src[src.rindex("bar.sync", 0, ticket):ticket]
    owner_fence = r"if \(\(tp_tid % 128 == 0\)\) \{ tp_fence_device\(\); \}"
    assert re.search(r'"r"\(128\) : "memory"\);\s+' + owner_fence, before), before
    after = src[ticket:src.index("bar.sync", ticket)]
    assert "if ((tp_tid % 128 == 0)) { tp_fence_device(); }" in after, after
