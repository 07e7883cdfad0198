"""A warp-specialized ring over mbarrier arrays (`tp.mbarrier(1, stages=S)`) with seeded bugs that a summary of
the ring's stages could wrongly hide: most of them are wrong in ONE stage only (a guard `k % STAGES == c`),
so a proof that looked at one stage, or assumed the stages alike, would pass them. `BUG` "none" is the
correct twin. tests/verify/test_stage_ring_bugs.py verifies each (caught with a counterexample) and runs it on
the interpreter (the bug is real)."""

import tilepy as tp


@tp.kernel(threads=160, target="sm_90a")
def ring(X: tp.Tensor[tp.f32, "R", 64], Y: tp.Tensor[tp.f32, "R", 64], BR: tp.constexpr = 32,
         STAGES: tp.constexpr = 4, BUG: tp.constexpr = "none"):
    tp.tag(X, lambda r, c: ("X", r, c))
    buf = tp.shared((BR, 64), tp.f32, stages=STAGES)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    n = X.shape[0] // BR
    if tp.warp_id() == 0:                                           # ring: producer warp
        for k in range(n):
            if k >= STAGES:
                if BUG == "emptylate":
                    if k % STAGES == 2:
                        tp.mbarrier_wait(empty[k % STAGES], k // STAGES)    # ring: stage 2 waits a round late
                    else:
                        tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)
                else:
                    tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)    # ring: the consumer released it
            if BUG == "copyone":
                if k % STAGES == STAGES - 1:
                    tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[(k + 1) % STAGES], full[k % STAGES])  # ring: 0
                else:
                    tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[k % STAGES], full[k % STAGES])
            elif BUG == "copyall":
                tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[(k + 1) % STAGES], full[k % STAGES])  # ring: +1
            elif BUG == "rowsone":
                if k % STAGES == 1:
                    tp.copy_bulk(X[(k - 1) * BR:k * BR, 0:64], buf[k % STAGES], full[k % STAGES])  # ring: k-1
                else:
                    tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[k % STAGES], full[k % STAGES])
            else:
                tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[k % STAGES], full[k % STAGES])  # ring: producer
            if BUG == "twice":
                if k % STAGES == 0:
                    tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[k % STAGES], full[k % STAGES])  # ring: again
            tp.mbarrier_arrive(full[k % STAGES])
    else:                                                           # ring: four consumer warps
        for k in range(n):
            if BUG == "phaselate":
                if k % STAGES == 1:
                    tp.mbarrier_wait(full[k % STAGES], k // STAGES + 1)     # ring: stage 1 waits a round late
                else:
                    tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            elif BUG == "phaseearly":
                if k % STAGES == STAGES - 1:
                    tp.mbarrier_wait(full[k % STAGES], k // STAGES - 1)     # ring: the last stage a round early
                else:
                    tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            else:
                tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            x = tp.load(buf[k % STAGES], layout=tp.blocked((BR, 64), 128, 4))  # ring: consumer's read
            tp.assert_tag(x, lambda t, r: t[1] == r, at=((k * BR + tp.arange(BR))[:, None],))  # ring: rows
            tp.store(Y[k * BR:(k + 1) * BR, 0:64], x * 2.0)
            if BUG == "releaseone":
                if k % STAGES == 2:
                    tp.mbarrier_arrive(empty[(k + 1) % STAGES])     # ring: stage 2 releases stage 3
                else:
                    tp.mbarrier_arrive(empty[k % STAGES])
            else:
                tp.mbarrier_arrive(empty[k % STAGES])               # ring: consumer releases the stage


# (BUG, checks of which one must report it, what the interpreter shows)
BUGS = [
    ("copyone", {"pipeline_hazard", "tag_assertion"}, "wrong"),
    ("copyall", {"pipeline_hazard", "tag_assertion"}, "wrong"),
    ("rowsone", {"tag_assertion"}, "wrong"),
    ("twice", {"pipeline_hazard"}, "hazard"),
    ("phaselate", {"deadlock"}, "deadlock"),
    ("phaseearly", {"pipeline_hazard"}, "hazard"),
    ("emptylate", {"deadlock"}, "deadlock"),
    ("releaseone", {"pipeline_hazard", "deadlock"}, "deadlock"),
]
