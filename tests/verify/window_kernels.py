"""A three-stage rolling window of shared tiles (a vertical 3-row stencil): the tag-proof case of issue 17
(before per-read summaries: ~1 s and ~100 solver queries per variant here, 7.9 s and 1,330 queries in the
issue's larger form). Used by tests/verify/test_speed.py and benchmarks/verify_speed.py.

Each column strip is streamed row tile by row tile through `s[k % 3]`; iteration k reads the tiles of rows
k - 1, k and k + 1 from the three stages and asserts that they are consecutive row tiles of one column
strip, element by element. BUG="stage" reads the wrong stage for the bottom row."""

import tilepy as tp


@tp.kernel(threads=128, target="sm_80")
def window3(X: tp.Tensor[tp.f32, "R", "C"], Y: tp.Tensor[tp.f32, "R", "C"], BR: tp.constexpr = 8,
            BC: tp.constexpr = 64, STRIPS: tp.constexpr = 2, ASYNC: tp.constexpr = True,
            BUG: tp.constexpr = "none"):
    tp.tag(X, lambda r, c: ("X", r, c))
    s = tp.shared((BR, BC), tp.f32, stages=3)
    for strip in range(STRIPS):
        c0 = (tp.block_id(0) * STRIPS + strip) * BC
        for p in tp.static_range(2):                       # prologue: row tiles 0 and 1
            if ASYNC:
                tp.copy_async(X[p * BR:(p + 1) * BR, c0:c0 + BC], s[p])
                tp.commit_async()
            else:
                tp.copy(X[p * BR:(p + 1) * BR, c0:c0 + BC], s[p])
        for k in range(1, tp.cdiv(X.shape[0], BR) - 1):
            nk = k + 1
            if ASYNC:
                tp.copy_async(X[nk * BR:(nk + 1) * BR, c0:c0 + BC], s[nk % 3])
                tp.commit_async()
                tp.wait_async(0)
            else:
                tp.copy(X[nk * BR:(nk + 1) * BR, c0:c0 + BC], s[nk % 3])
            tp.barrier()
            up = tp.load(s[(k - 1) % 3])
            mid = tp.load(s[k % 3])
            if BUG == "stage":
                down = tp.load(s[(k + 2) % 3])                 # the oldest tile, not the newest
            else:
                down = tp.load(s[(k + 1) % 3])
            tp.assert_tag(up, lambda t: t[1] % BR == 0 or t[1] >= 0)
            tp.assert_tag(mid, lambda t: t[2] >= 0)
            y = up + mid + down
            tp.assert_tag(y, lambda t: (t[0][0][1] + BR == t[0][1][1] and t[0][1][1] + BR == t[1][1]
                                        and t[0][0][2] == t[1][2] and t[0][1][2] == t[1][2]))
            tp.store(Y[k * BR:(k + 1) * BR, c0:c0 + BC], y)
            tp.barrier()                                   # everyone read s[(k - 1) % 3] before it is refilled
        tp.barrier()
