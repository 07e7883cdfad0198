"""A warp-specialized ring over mbarrier arrays whose producer writes tile k into stage (k + D) % STAGES, arriving
NX times a tile on `full[(k + D) % STAGES]` (count NX), NB of them before the bulk copy, the rest after: the
element counts of tilepy_verify/symbolic_ring.py (the copy a consumer's wait lands, per element, without unrolling
the ring) at offsets, several arrivals a tile and arrivals before the copy. Tile k is the (k // STAGES)-th on its
element for every D, so the consumer waits `full[(k + D) % STAGES]` for phase k // STAGES.

BUG: "none" (correct), "rows" (stage 1's tiles copy the rows of tile k - 1: a wrong tag), "phase" (the consumer
waits one phase early on every element: it may read a stage before its copy lands), "elem" (one arrive a tile on
the next element, count and copies unchanged: phases complete early on one element, late on another).
tests/verify/test_symbolic_ring.py checks the switch-on verifier against the stage copies and the interpreter."""

import tilepy as tp


@tp.kernel(threads=160, target="sm_90a")
def ring(X: tp.Tensor[tp.f32, "R", 64], Y: tp.Tensor[tp.f32, "R", 64], BR: tp.constexpr = 32,
         STAGES: tp.constexpr = 3, D: tp.constexpr = 0, NX: tp.constexpr = 1, NB: tp.constexpr = 0,
         BUG: tp.constexpr = "none"):
    tp.tag(X, lambda r, c: ("X", r, c))
    buf = tp.shared((BR, 64), tp.f32, stages=STAGES)
    full = tp.mbarrier(NX, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    n = X.shape[0] // BR
    if tp.warp_id() == 0:                                           # producer warp
        for k in range(n):
            if k >= STAGES:
                tp.mbarrier_wait(empty[(k + D) % STAGES], k // STAGES - 1)
            for i in tp.static_range(NB):
                tp.mbarrier_arrive(full[(k + D) % STAGES])
            if BUG == "rows":
                if k % STAGES == 1:
                    tp.copy_bulk(X[(k - 1) * BR:k * BR, 0:64], buf[(k + D) % STAGES], full[(k + D) % STAGES])
                else:
                    tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[(k + D) % STAGES], full[(k + D) % STAGES])
            else:
                tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[(k + D) % STAGES], full[(k + D) % STAGES])
            for i in tp.static_range(NX - NB):
                if BUG == "elem" and i == 0:
                    tp.mbarrier_arrive(full[(k + D + 1) % STAGES])
                else:
                    tp.mbarrier_arrive(full[(k + D) % STAGES])
    else:                                                           # four consumer warps
        for k in range(n):
            if BUG == "phase":
                tp.mbarrier_wait(full[(k + D) % STAGES], k // STAGES - 1)
            else:
                tp.mbarrier_wait(full[(k + D) % STAGES], k // STAGES)
            x = tp.load(buf[(k + D) % STAGES], layout=tp.blocked((BR, 64), 128, 4))
            tp.assert_tag(x, lambda t, r: t[1] == r, at=((k * BR + tp.arange(BR))[:, None],))
            tp.store(Y[k * BR:(k + 1) * BR, 0:64], x * 2.0)
            tp.mbarrier_arrive(empty[(k + D) % STAGES])
