"""Rings over mbarrier arrays of the shapes tilepy_verify/symbolic_ring.py once left to the stage copies (issue 17
item 4), each with seeded bugs and a correct twin (BUG "none"); tests/verify/test_symbolic_ring_fallbacks.py checks
the switch-on verifier against the copies and the interpreter.

`self_ring`: one role fills the ring itself and reads it (layer_norm_ring's and rotary_ring's shape): the first
STAGES - 1 tiles by bulk copies before the loop, then tile k + STAGES - 1 in iteration k into the stage tile k - 1
was read from. BUG "stage" (the in-loop copy into the stage being read: the read may see the next tile's rows),
"rows" (the copies of stage 1 bring the rows of tile k - 1), "prologue" (the prologue's copy of tile 1 lands in
stage 0), "phase" (the wait a round early: the read may run before its copy lands).

`two_waits`: a producer / consumer ring whose consumer waits on `full` by two wait ops under complementary guards
(stage LATE's wait spelled out, as a kernel specializing one stage would). BUG "late" / "early" (that stage's wait a
round late / early: a deadlock / a read before the copy lands), "rows" (that stage's copy brings the rows of tile
k - 1: its wait is right, the tile wrong).

`unrolled`: conv_tma's shape: the ring's loop over rounds j with the stages unrolled by `static_range`, each
stage's copy, wait and arrive on a constant element (tile j * STAGES + s). BUG "stage" (stage 1's copy into stage 2),
"phase" (stage 1's wait a round early), "rows" (stage 2 copies tile k - 1)."""

import tilepy as tp


@tp.kernel(threads=128, target="sm_90a")
def self_ring(X: tp.Tensor[tp.f32, "R", 64], Y: tp.Tensor[tp.f32, "R", 64], BR: tp.constexpr = 32,
              STAGES: tp.constexpr = 3, BUG: tp.constexpr = "none"):
    tp.tag(X, lambda r, c: ("X", r, c))
    buf = tp.shared((BR, 64), tp.f32, stages=STAGES)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    n = X.shape[0] // BR
    for s in tp.static_range(STAGES - 1):
        if s < n:
            if BUG == "prologue" and s == 1:
                tp.copy_bulk(X[s * BR:(s + 1) * BR, 0:64], buf[0], full[s])
            else:
                tp.copy_bulk(X[s * BR:(s + 1) * BR, 0:64], buf[s], full[s])
            tp.mbarrier_arrive(full[s])
    for k in range(n):
        if k + STAGES - 1 < n:
            if k >= 1:
                tp.mbarrier_wait(empty[(k + STAGES - 1) % STAGES], (k - 1) // STAGES)
            k2 = k + STAGES - 1
            if BUG == "stage":
                tp.copy_bulk(X[k2 * BR:(k2 + 1) * BR, 0:64], buf[k % STAGES], full[k2 % STAGES])
            elif BUG == "rows" and k2 % STAGES == 1:
                tp.copy_bulk(X[(k2 - 1) * BR:k2 * BR, 0:64], buf[k2 % STAGES], full[k2 % STAGES])
            else:
                tp.copy_bulk(X[k2 * BR:(k2 + 1) * BR, 0:64], buf[k2 % STAGES], full[k2 % STAGES])
            tp.mbarrier_arrive(full[k2 % STAGES])
        if BUG == "phase":
            tp.mbarrier_wait(full[k % STAGES], k // STAGES - 1)
        else:
            tp.mbarrier_wait(full[k % STAGES], k // STAGES)
        x = tp.load(buf[k % STAGES], layout=tp.blocked((BR, 64), 128, 4))
        tp.mbarrier_arrive(empty[k % STAGES])
        tp.assert_tag(x, lambda t, r: t[1] == r, at=((k * BR + tp.arange(BR))[:, None],))
        tp.store(Y[k * BR:(k + 1) * BR, 0:64], x * 2.0)


@tp.kernel(threads=160, target="sm_90a")
def two_waits(X: tp.Tensor[tp.f32, "R", 64], Y: tp.Tensor[tp.f32, "R", 64], BR: tp.constexpr = 32,
              STAGES: tp.constexpr = 3, LATE: tp.constexpr = 1, BUG: tp.constexpr = "none"):
    tp.tag(X, lambda r, c: ("X", r, c))
    buf = tp.shared((BR, 64), tp.f32, stages=STAGES)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    n = X.shape[0] // BR
    if tp.warp_id() == 0:
        for k in range(n):
            if k >= STAGES:
                tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)
            if BUG == "rows" and k % STAGES == LATE:
                tp.copy_bulk(X[(k - 1) * BR:k * BR, 0:64], buf[k % STAGES], full[k % STAGES])
            else:
                tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[k % STAGES], full[k % STAGES])
            tp.mbarrier_arrive(full[k % STAGES])
    else:
        for k in range(n):
            if k % STAGES == LATE:
                if BUG == "late":
                    tp.mbarrier_wait(full[k % STAGES], k // STAGES + 1)
                elif BUG == "early":
                    tp.mbarrier_wait(full[k % STAGES], k // STAGES - 1)
                else:
                    tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            else:
                tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            x = tp.load(buf[k % STAGES], layout=tp.blocked((BR, 64), 128, 4))
            tp.assert_tag(x, lambda t, r: t[1] == r, at=((k * BR + tp.arange(BR))[:, None],))
            tp.store(Y[k * BR:(k + 1) * BR, 0:64], x * 2.0)
            tp.mbarrier_arrive(empty[k % STAGES])


@tp.kernel(threads=160, target="sm_90a")
def unrolled(X: tp.Tensor[tp.f32, "R", 64], Y: tp.Tensor[tp.f32, "R", 64], BR: tp.constexpr = 32,
             STAGES: tp.constexpr = 3, BUG: tp.constexpr = "none"):
    tp.tag(X, lambda r, c: ("X", r, c))
    buf = tp.shared((BR, 64), tp.f32, stages=STAGES)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    n = X.shape[0] // BR
    rounds = tp.cdiv(n, STAGES)
    if tp.warp_id() == 0:
        for j in range(rounds):
            for s in tp.static_range(STAGES):
                k = j * STAGES + s
                if k < n:
                    if j > 0:
                        tp.mbarrier_wait(empty[s], j - 1)
                    if BUG == "stage" and s == 1:
                        tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[2], full[s])
                    elif BUG == "rows" and s == 2:
                        tp.copy_bulk(X[(k - 1) * BR:k * BR, 0:64], buf[s], full[s])
                    else:
                        tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[s], full[s])
                    tp.mbarrier_arrive(full[s])
    else:
        for j in range(rounds):
            for s in tp.static_range(STAGES):
                k = j * STAGES + s
                if k < n:
                    if BUG == "phase" and s == 1:
                        tp.mbarrier_wait(full[s], j - 1)
                    else:
                        tp.mbarrier_wait(full[s], j)
                    x = tp.load(buf[s], layout=tp.blocked((BR, 64), 128, 4))
                    tp.assert_tag(x, lambda t, r: t[1] == r, at=((k * BR + tp.arange(BR))[:, None],))
                    tp.store(Y[k * BR:(k + 1) * BR, 0:64], x * 2.0)
                    tp.mbarrier_arrive(empty[s])


@tp.kernel(threads=192, target="sm_90a")
def two_producers(X: tp.Tensor[tp.f32, "R", 64], Y: tp.Tensor[tp.f32, "R", 64], BR: tp.constexpr = 32,
                  STAGES: tp.constexpr = 4):
    """A ring two producer warps fill, warp 0 the even tiles and warp 1 the odd ones (STAGES even: each stage has
    one producer): `full` is arrived on by two roles, a shape the symbolic form leaves to the stage copies."""
    tp.tag(X, lambda r, c: ("X", r, c))
    buf = tp.shared((BR, 64), tp.f32, stages=STAGES)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    n = X.shape[0] // BR
    if tp.warp_id() == 0:
        for k in range(n):
            if k % 2 == 0:
                if k >= STAGES:
                    tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)
                tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[k % STAGES], full[k % STAGES])
                tp.mbarrier_arrive(full[k % STAGES])
    elif tp.warp_id() == 1:
        for k in range(n):
            if k % 2 == 1:
                if k >= STAGES:
                    tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)
                tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[k % STAGES], full[k % STAGES])
                tp.mbarrier_arrive(full[k % STAGES])
    else:
        for k in range(n):
            tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            x = tp.load(buf[k % STAGES], layout=tp.blocked((BR, 64), 128, 4))
            tp.assert_tag(x, lambda t, r: t[1] == r, at=((k * BR + tp.arange(BR))[:, None],))
            tp.store(Y[k * BR:(k + 1) * BR, 0:64], x * 2.0)
            tp.mbarrier_arrive(empty[k % STAGES])
