"""stdlib_kernels.gemm_streamk with the ticket protocol's seeded bugs (tests/verify/test_streamk_global_race.py):
the warp-specialized ring over mbarrier arrays and the fix-up of both FIXUP policies, as in the stdlib kernel
(BUG="none" is the stdlib kernel's IR, which the test checks), and

* "no_release": the part is written after the ticket (FIXUP=1: stored into its slot; FIXUP=0: added into the
  tile's workspace rows), so the last arriver may read it before it lands;
* "no_acquire": the fix-up's accesses are not masked by `ticket == E` (every contributor reads the parts and
  stores C);
* "wrong_tile": the ticket is taken on the next tile's lock (the reset stays on the tile's own);
* "relaxed": the ticket has no release / acquire order (no fence around it)."""

import tilepy as tp
from stdlib_kernels.gemm_hopper import b_layout


@tp.kernel(threads=lambda c: 128 * (1 + c["CONSUMERS"]), target="sm_90a")
def streamk(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"],
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
                elif FIXUP == 2:
                    tp.atomic_add(C[m0:m0 + BM, n0:n0 + BN], acc)
                elif FIXUP == 0:
                    parts = ((first + k_tiles) * grid - 1) // total - ((first + 1) * grid - 1) // total + 1
                    if BUG != "no_release":
                        tp.atomic_add(WS[t * BM:t * BM + BM, 0:BN], acc)
                    ticket = tp.atomic_add(LOCKS[t + 1 if BUG == "wrong_tile" else t:
                                                 t + 2 if BUG == "wrong_tile" else t + 1], 1,
                                           sem="relaxed" if BUG == "relaxed" else "acq_rel")
                    if BUG == "no_release":
                        tp.atomic_add(WS[t * BM:t * BM + BM, 0:BN], acc)
                    last = ticket >= 0 if BUG == "no_acquire" else ticket == parts - 1
                    whole = tp.load(WS[t * BM:t * BM + BM, 0:BN], mask=last[:, None])
                    tp.store(C[m0:m0 + BM, n0:n0 + BN], whole, mask=last[:, None])
                    tp.store(WS[t * BM:t * BM + BM, 0:BN], 0.0, mask=last[:, None])
                    tp.store(LOCKS[t:t + 1], 0, mask=last)
                else:
                    lo = ((first + 1) * grid - 1) // total
                    hi = ((first + k_tiles) * grid - 1) // total
                    me = tp.block_id(0)
                    mine = 2 * me if first <= begin else 2 * me + 1
                    if BUG != "no_release":
                        tp.store(WS[mine * BM:mine * BM + BM, 0:BN], acc)
                    ticket = tp.atomic_add(LOCKS[t + 1 if BUG == "wrong_tile" else t:
                                                 t + 2 if BUG == "wrong_tile" else t + 1], 1,
                                           sem="relaxed" if BUG == "relaxed" else "acq_rel")
                    if BUG == "no_release":
                        tp.store(WS[mine * BM:mine * BM + BM, 0:BN], acc)
                    last = ticket >= 0 if BUG == "no_acquire" else ticket == hi - lo
                    if MAX_PARTS == 0:
                        for i in range(hi - lo + 1):
                            j = lo + i
                            theirs = 2 * j if first <= j * total // grid else 2 * j + 1
                            acc += tp.load(WS[theirs * BM:theirs * BM + BM, 0:BN], mask=(last & (j != me))[:, None],
                                           layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
                    else:
                        for i in tp.static_range(MAX_PARTS):
                            j = lo + i
                            theirs = 2 * j if first <= j * total // grid else 2 * j + 1
                            acc += tp.load(WS[theirs * BM:theirs * BM + BM, 0:BN],
                                           mask=(last & (j != me) & (j <= hi))[:, None],
                                           layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
                    tp.store(C[m0:m0 + BM, n0:n0 + BN], acc, mask=last[:, None])
                    tp.store(LOCKS[t:t + 1], 0, mask=last)
                acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
