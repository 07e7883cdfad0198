"""A rolling window of STAGES shared row tiles (issue 17 item 4's case, with the stage count a parameter):
a column strip is streamed row tile by row tile through `s[k % STAGES]` (cp.async), and each iteration reads
all STAGES stages, the newest row tile and the STAGES - 1 before it, and asserts, for each adjacent pair, that
they are consecutive row tiles of one column strip, element by element. No mbarriers: nothing is unrolled per
stage before the analysis; each read's candidate writes are summarized once (reaching._summary).
BUG="stage": the oldest tile is read from the newest tile's stage."""

import tilepy as tp


@tp.kernel(threads=128, target="sm_80")
def window(X: tp.Tensor[tp.f32, "R", "C"], Y: tp.Tensor[tp.f32, "R", "C"], BR: tp.constexpr = 8,
           BC: tp.constexpr = 64, STAGES: tp.constexpr = 3, BUG: tp.constexpr = "none"):
    tp.tag(X, lambda r, c: ("X", r, c))
    s = tp.shared((BR, BC), tp.f32, stages=STAGES)
    c0 = tp.block_id(0) * BC
    for p in tp.static_range(STAGES - 1):                  # prologue: row tiles 0 .. STAGES - 2
        tp.copy_async(X[p * BR:(p + 1) * BR, c0:c0 + BC], s[p])
        tp.commit_async()
    for k in range(STAGES - 2, tp.cdiv(X.shape[0], BR) - 1):
        nk = k + 1
        tp.copy_async(X[nk * BR:(nk + 1) * BR, c0:c0 + BC], s[nk % STAGES])
        tp.commit_async()
        tp.wait_async(0)
        tp.barrier()
        y = tp.load(s[nk % STAGES])
        for i in tp.static_range(STAGES - 1):              # the pair (row tile nk - i, row tile nk - i - 1)
            newer = tp.load(s[(nk - i) % STAGES])
            if BUG == "stage" and i == STAGES - 2:
                older = tp.load(s[nk % STAGES])
            else:
                older = tp.load(s[(nk - i - 1) % STAGES])
            pair = newer + older
            tp.assert_tag(pair, lambda t: t[0][1] == t[1][1] + BR and t[0][2] == t[1][2])
            y = y + older
        tp.store(Y[k * BR:(k + 1) * BR, c0:c0 + BC], y)
        tp.barrier()                                       # every stage read before the next copy refills one
