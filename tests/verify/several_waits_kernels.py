"""A producer / consumer ring whose consumer waits on the copies' mbarrier twice an iteration (reaching.cross_role
with several wait ops on one mbarrier in the reading role: gemm_persistent DEFER=2's tile prologue waits on k-tile
0's stage before the ring waits on it again).

`twice`: the consumer waits for phase k // STAGES + FIRST, reads the stage (x, its rows claimed to be tile k's),
and from the second round on (k >= STAGES) waits again for phase k // STAGES + SECOND and reads it again (y, its
rows claimed to be tile k + CLAIM * STAGES's).
FIRST = SECOND = CLAIM = 0 is correct (the second wait returns at once). A phase one lower (-1) is a wait that
returns before that tile's copy has landed (a pipeline hazard when the read follows it with no higher wait
before); SECOND = -1 after FIRST = 0 is a wait for an older phase after the right one: harmless for the data
(the copy has landed), and CLAIM = -1 then claims the older tile for y: wrong, and proved if the verifier took the
latest wait (phase k // STAGES - 1) as the one that decides which copy y sees.

`prologue`: gemm_persistent DEFER=2's shape in one loop over tiles of two k-slices each, a ring of STAGES stages
over the block's slots: the tile's prologue waits for its first slot and reads it, then the tile's slots are
waited for and read in turn (the first again). BUG "stale": the prologue waits for the slot a ring turn earlier
(a pipeline hazard: the read may meet the copy in flight); "other": the prologue reads the stage of its second
slot after waiting for the first (a pipeline hazard / a wrong tile)."""

import tilepy as tp


@tp.kernel(threads=160, target="sm_90a")
def twice(X: tp.Tensor[tp.f32, "R", 64], Y: tp.Tensor[tp.f32, "R", 64], BR: tp.constexpr = 32,
          STAGES: tp.constexpr = 2, FIRST: tp.constexpr = 0, SECOND: tp.constexpr = 0, CLAIM: tp.constexpr = 0):
    tp.tag(X, lambda r, c: ("X", r, c))
    buf = tp.shared((BR, 64), tp.f32, stages=STAGES)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    n = X.shape[0] // BR
    if tp.warp_id() == 0:                                           # producer warp
        for k in range(n):
            if k >= STAGES:
                tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)
            tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[k % STAGES], full[k % STAGES])
            tp.mbarrier_arrive(full[k % STAGES])
    else:                                                           # four consumer warps
        for k in range(n):
            tp.mbarrier_wait(full[k % STAGES], k // STAGES + FIRST)
            x = tp.load(buf[k % STAGES], layout=tp.blocked((BR, 64), 128, 4))
            tp.assert_tag(x, lambda t, r: t[1] == r, at=((k * BR + tp.arange(BR))[:, None],))
            y = x
            if k >= STAGES:                                         # from the second round on: a ring turn back
                tp.mbarrier_wait(full[k % STAGES], k // STAGES + SECOND)
                y = tp.load(buf[k % STAGES], layout=tp.blocked((BR, 64), 128, 4))
                tp.assert_tag(y, lambda t, r: t[1] == r, at=(((k + CLAIM * STAGES) * BR + tp.arange(BR))[:, None],))
            tp.store(Y[k * BR:(k + 1) * BR, 0:64], x + y)
            tp.mbarrier_arrive(empty[k % STAGES])


@tp.kernel(threads=160, target="sm_90a")
def prologue(X: tp.Tensor[tp.f32, "R", "C"], Y: tp.Tensor[tp.f32, "R", "C"], BR: tp.constexpr = 32,
             STAGES: tp.constexpr = 2, BUG: tp.constexpr = "none"):
    tp.tag(X, lambda r, c: ("X", r, c))
    buf = tp.shared((BR, 64), tp.f32, stages=STAGES)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    tiles = X.shape[0] // BR                                        # a tile: BR rows, its slices 64 columns each
    slices = tp.maximum(X.shape[1] // 64, 1)
    rounds = tp.cdiv(slices, STAGES)                                # ring turns a tile
    rows = tp.arange(BR)[:, None]
    cols = tp.arange(64)[None, :]
    if tp.warp_id() == 0:                                           # producer warp
        for t in range(0, tiles, 1):
            turn = ((t - 0) // 1) * rounds
            for k in range(rounds * STAGES):
                tp.mbarrier_wait(empty[k % STAGES], turn + k // STAGES)
                if k < slices:
                    tp.copy_bulk(X[t * BR:(t + 1) * BR, k * 64:(k + 1) * 64], buf[k % STAGES], full[k % STAGES])
                tp.mbarrier_arrive(full[k % STAGES])
    else:                                                           # four consumer warps
        for s in tp.static_range(STAGES):
            tp.mbarrier_arrive(empty[s])
        for t in range(0, tiles, 1):
            turn = ((t - 0) // 1) * rounds
            if BUG == "stale":
                tp.mbarrier_wait(full[0], turn - 1)                 # a ring turn early
            else:
                tp.mbarrier_wait(full[0], turn)                     # the tile's first slot
            if BUG == "other":
                x = tp.load(buf[1], layout=tp.blocked((BR, 64), 128, 4))   # the second slot's stage
            else:
                x = tp.load(buf[0], layout=tp.blocked((BR, 64), 128, 4))
            tp.assert_tag(x, lambda t_, r, c: t_[1] == r and t_[2] == c, at=(t * BR + rows, cols))
            for k in range(rounds * STAGES):
                tp.mbarrier_wait(full[k % STAGES], turn + k // STAGES)
                if k < slices:
                    if k > 0:
                        z = tp.load(buf[k % STAGES], layout=tp.blocked((BR, 64), 128, 4))
                        tp.assert_tag(z, lambda t_, r, c: t_[1] == r and t_[2] == c,
                                      at=(t * BR + rows, k * 64 + cols))
                        tp.store(Y[t * BR:(t + 1) * BR, k * 64:(k + 1) * 64], z)
                tp.mbarrier_arrive(empty[k % STAGES])
            tp.store(Y[t * BR:(t + 1) * BR, 0:64], x)
