"""A second seeded-bug corpus (issue 17): kernels in realistic shapes, each with a `BUG` constexpr whose value
"none" is the correct twin and whose other values each switch one line to a known bug. `CORPUS` lists every
seeded kernel with the checks that must report it and what the interpreter shows when it runs; see
tests/verify/test_corpus.py and benchmarks/verify_corpus.py.

Families: an attention-like loop (S = Q K^T, a row softmax, O += P V over a cp.async double buffer), a
warp-specialized bulk-copy ring (producer warp, consumer warps, full/empty mbarriers), the all-threads TMA
loop of issue 17, a three-row stencil through a rolling window of shared tiles, a block reduction through
shared memory, an NT GEMM with a three-stage cp.async ring, and tile transposes through shared memory."""

import tilepy as tp

I16 = tp.nv.mma_m16n8k16_bf16


# ----------------------------------------------------------------------------- attention-like loop
@tp.kernel(threads=64, target="sm_80")
def attn(Q: tp.Tensor[tp.bf16, "M", 16], KT: tp.Tensor[tp.bf16, 16, "N"], V: tp.Tensor[tp.bf16, "N", 16],
         O: tp.Tensor[tp.f32, "M", 16], BM: tp.constexpr = 32, BN: tp.constexpr = 16, BUG: tp.constexpr = "none"):
    D = 16
    m0 = tp.block_id(0) * BM
    tp.tag(Q, lambda i, d: ("Q", i, d))
    if BUG == "ktag":
        tp.tag(KT, lambda d, j: ("K", j, d))                         # K^T tagged as K
    else:
        tp.tag(KT, lambda d, j: ("K", d, j))
    tp.tag(V, lambda j, d: ("V", j, d))
    k_s = tp.shared((D, BN), tp.bf16, stages=2)
    v_s = tp.shared((BN, D), tp.bf16, stages=2)
    q = tp.load(Q[m0:m0 + BM, 0:D], layout=tp.mma_layout(I16, "a", (BM, D), (2, 1)))
    acc = tp.zeros((BM, D), tp.f32, layout=tp.accumulator(I16, (BM, D), (2, 1)))
    tp.copy_async(KT[0:D, 0:BN], k_s[0])
    tp.copy_async(V[0:BN, 0:D], v_s[0])
    tp.commit_async()
    for t in range(tp.cdiv(KT.shape[1], BN)):
        if BUG == "wait":
            tp.wait_async(1)                                        # attn: tile t may still be in flight
        else:
            tp.wait_async(0)
        if BUG != "nobarrier":
            tp.barrier()                                            # attn: tile t visible, stage t-1 free
        nt = t + 1
        if BUG == "nextstage":
            tp.copy_async(KT[0:D, nt * BN:(nt + 1) * BN], k_s[t % 2])   # attn: refills the stage being read
        elif BUG == "oob":
            tp.copy_async(KT[0:D, nt * BN:(nt + 1) * BN], k_s[nt])      # attn: no modulo
        else:
            tp.copy_async(KT[0:D, nt * BN:(nt + 1) * BN], k_s[nt % 2])
        if BUG == "vtile":
            tp.copy_async(V[(nt + 1) * BN:(nt + 2) * BN, 0:D], v_s[nt % 2])  # attn: the V tile after next
        else:
            tp.copy_async(V[nt * BN:(nt + 1) * BN, 0:D], v_s[nt % 2])
        if BUG != "nocommit":
            tp.commit_async()
        s = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(I16, (BM, BN), (2, 1)))
        s = tp.mma(q, k_s[t % 2], s)
        tp.assert_tag(tp.mma_operands(s), lambda a, b: a[2] == b[1])    # attn: contraction over d
        p = tp.exp(s - tp.max(s, axis=1, keepdims=True))
        pa = tp.convert_layout(p.to(tp.bf16), tp.mma_layout(I16, "a", (BM, BN), (2, 1)))
        if BUG == "vstage":
            acc = tp.mma(pa, v_s[(t + 1) % 2], acc)                 # attn: V from the stage being refilled
        else:
            acc = tp.mma(pa, v_s[t % 2], acc)
        # attn: P's column j (S = Q K^T: its B operand is K^T[d, j]) meets V's row j
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[0][0][1][2] == b[1])
    tp.store(O[m0:m0 + BM, 0:D], acc)


# ----------------------------------------------------------------------------- warp-specialized bulk-copy ring
@tp.kernel(threads=96, target="sm_90a")
def ws_ring(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "R", 64], BUG: tp.constexpr = "none"):
    B = 64
    tp.tag(X, lambda i: ("X", i))
    buf = tp.shared((B,), tp.f32, stages=2)
    if BUG == "count":
        full0 = tp.mbarrier(2)                                      # ring: two arrivals per phase, one comes
        full1 = tp.mbarrier(2)
    else:
        full0 = tp.mbarrier(1)
        full1 = tp.mbarrier(1)
    empty0 = tp.mbarrier(1)
    empty1 = tp.mbarrier(1)
    full = (full0, full1)
    empty = (empty0, empty1)
    rounds = X.shape[0] // (2 * B)
    if tp.warp_id() == 0:                                           # producer warp
        for j in range(rounds):
            for s in tp.static_range(2):
                k = 2 * j + s
                if j > 0:
                    if BUG == "lateempty":
                        tp.mbarrier_wait(empty[s], j)               # ring: producer waits one phase too late
                    elif BUG == "earlyempty":
                        tp.mbarrier_wait(empty[s], j - 2)           # ring: producer waits one phase too early
                    elif BUG != "noempty":
                        tp.mbarrier_wait(empty[s], j - 1)           # ring: producer waits for the release
                if BUG == "stage":
                    tp.copy_bulk(X[k * B:(k + 1) * B], buf[(s + 1) % 2], full[s])   # ring: into the other stage
                elif BUG == "tile":
                    tp.copy_bulk(X[(k + 1) * B:(k + 2) * B], buf[s], full[s])       # ring: the next tile
                else:
                    tp.copy_bulk(X[k * B:(k + 1) * B], buf[s], full[s])            # ring: producer's copy
                tp.mbarrier_arrive(full[s])
    else:                                                           # consumer warps
        for j in range(rounds):
            for s in tp.static_range(2):
                k = 2 * j + s
                if BUG == "phase":
                    tp.mbarrier_wait(full[s], j - 1)                # ring: consumer waits one phase too early
                elif BUG != "nowait":
                    tp.mbarrier_wait(full[s], j)                    # ring: consumer waits for stage s
                if BUG == "readstage":
                    x = tp.load(buf[(s + 1) % 2], layout=tp.blocked((B,), 64, 1))   # ring: the other stage
                else:
                    x = tp.load(buf[s], layout=tp.blocked((B,), 64, 1))             # ring: consumer's read
                tp.assert_tag(x, lambda t: t[1] % (2 * B) // B == s)  # noqa: B023 - ring: tile k = 2 j + s
                if BUG == "rolebarrier":
                    tp.barrier()                                    # ring: a block barrier inside a role
                tp.store(Y[k, 0:B], x)
                if BUG != "noarrive":
                    tp.mbarrier_arrive(empty[s])                    # ring: consumer releases stage s


# ----------------------------------------------------------------------------- all threads, one TMA buffer
@tp.kernel(threads=64, target="sm_90a")
def tma_loop(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "R", 64], BUG: tp.constexpr = "none"):
    B = 64
    tp.tag(X, lambda i: ("X", i))
    buf = tp.shared((B,), tp.f32)
    bar = tp.mbarrier(1)
    tp.copy_bulk(X[0:B], buf, bar)
    tp.mbarrier_arrive(bar)
    for k in range(X.shape[0] // B):
        if BUG == "phase":
            tp.mbarrier_wait(bar, k - 1)                            # tma: one phase too early
        elif BUG == "latephase":
            tp.mbarrier_wait(bar, k + 1)                            # tma: waits for its own next arrival
        else:
            tp.mbarrier_wait(bar, k)                                # tma: tile k landed
        y = tp.load(buf, layout=tp.blocked((B,), 64, 1))            # tma: every thread reads tile k
        tp.assert_tag(y, lambda t: t[0] == "X")
        tp.store(Y[k, 0:B], y)
        if BUG != "nobarrier":
            tp.barrier()                                            # tma: all reads done before the refill
        tp.copy_bulk(X[(k + 1) * B:(k + 2) * B], buf, bar)          # tma: thread 0 refills the buffer
        tp.mbarrier_arrive(bar)


# ----------------------------------------------------------------------------- stencil through a rolling window
@tp.kernel(threads=128, target="sm_80")
def stencil(X: tp.Tensor[tp.f32, "R", 64], Y: tp.Tensor[tp.f32, "R", 64], BUG: tp.constexpr = "none"):
    s = tp.shared((64,), tp.f32, stages=3)
    tp.tag(X, lambda r, c: ("X", r, c))
    tp.copy(X[0, 0:64], s[0])
    tp.copy(X[1, 0:64], s[1])
    for k in range(1, X.shape[0] - 1):
        if BUG == "shift":
            tp.copy(X[k + 2, 0:64], s[(k + 1) % 3])                 # stencil: one row too far down
        elif BUG == "oob":
            tp.copy(X[k + 1, 0:64], s[(k + 1) % 4])                 # stencil: ring of 4 on 3 stages
        else:
            tp.copy(X[k + 1, 0:64], s[(k + 1) % 3])                 # stencil: the new bottom row
        if BUG != "nobarrier":
            tp.barrier()                                            # stencil: the new row is visible
        up = tp.load(s[(k - 1) % 3], layout=tp.blocked((64,), 128, 1))
        if BUG == "stage":
            mid = tp.load(s[(k + 1) % 3], layout=tp.blocked((64,), 128, 1))   # stencil: the wrong stage
        else:
            mid = tp.load(s[k % 3], layout=tp.blocked((64,), 128, 1))
        down = tp.load(s[(k + 1) % 3], layout=tp.blocked((64,), 128, 1))
        y = up + mid + down
        tp.assert_tag(y, lambda t: t[0][0][1] + 1 == t[0][1][1] and t[0][1][1] + 1 == t[1][1])  # stencil: rows
        tp.store(Y[k, 0:64], y)
        if BUG != "nowar":
            tp.barrier()                                            # stencil: reads done before the refill


# ----------------------------------------------------------------------------- block reduction through shared
@tp.kernel(threads=128, target="sm_80")
def block_reduce(X: tp.Tensor[tp.f32, "R", 128], Y: tp.Tensor[tp.f32, "G", 4], BUG: tp.constexpr = "none"):
    part = tp.shared((4,), tp.f32)
    tp.tag(X, lambda r, c: ("X", r, c))
    w = tp.arange(4)
    tp.tag(w, lambda i: ("W", i))
    for it in range(2):
        b = tp.block_id(0) * 2 + it
        if BUG == "offset":
            x = tp.load(X[4 * b + 1:4 * b + 5, 0:128], layout=tp.blocked((4, 128), 128, 4))  # reduce: shifted rows
        else:
            x = tp.load(X[4 * b:4 * b + 4, 0:128], layout=tp.blocked((4, 128), 128, 4))      # warp i holds row i
        tp.store(part, tp.sum(x, axis=1))                           # reduce: one partial per warp
        if BUG == "rolebarrier":
            if tp.warp_id() == 0:
                tp.barrier()                                        # reduce: only warp 0 arrives
        elif BUG != "nobarrier":
            tp.barrier()                                            # reduce: partials visible
        p = tp.load(part, layout=tp.blocked((4,), 128, 1))          # reduce: read by other threads
        z = p + w.to(tp.f32)
        tp.assert_tag(z, lambda t: t[0][1] % 4 == t[1][1])          # reduce: partial i is row i
        tp.store(Y[b, 0:4], p)
        if BUG != "nowar":
            tp.barrier()                                            # reduce: reads done before the next store


# ----------------------------------------------------------------------------- NT GEMM, three-stage cp.async ring
@tp.kernel(threads=64, target="sm_80")
def gemm_nt(A: tp.Tensor[tp.bf16, "M", "K"], BT: tp.Tensor[tp.bf16, "N", "K"], C: tp.Tensor[tp.f32, "M", "N"],
            BM: tp.constexpr = 32, BN: tp.constexpr = 16, BK: tp.constexpr = 16, BUG: tp.constexpr = "none"):
    S = 3
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(BT, lambda j, k: ("B", k, j))                            # B^T[j, k] is B[k, j]
    a_s = tp.shared((BM, BK), tp.bf16, stages=S)
    b_s = tp.shared((BN, BK), tp.bf16, stages=S)
    acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(I16, (BM, BN), (2, 1)))
    k_tiles = tp.cdiv(A.shape[1], BK)
    prologue = 1 if BUG == "prologue" else S - 1
    for p in tp.static_range(prologue):
        tp.copy_async(A[m0:m0 + BM, p * BK:(p + 1) * BK], a_s[p])
        tp.copy_async(BT[n0:n0 + BN, p * BK:(p + 1) * BK], b_s[p])
        tp.commit_async()
    for k in range(k_tiles):
        if BUG == "wait":
            tp.wait_async(S - 1)                                    # nt: waits for one group too few
        else:
            tp.wait_async(S - 2)
        if BUG != "nobarrier":
            tp.barrier()
        nk = k + S - 1
        tp.copy_async(A[m0:m0 + BM, nk * BK:(nk + 1) * BK], a_s[nk % S])
        if BUG == "bstage":
            tp.copy_async(BT[n0:n0 + BN, nk * BK:(nk + 1) * BK], b_s[k % S])   # nt: refills the stage being read
        else:
            tp.copy_async(BT[n0:n0 + BN, nk * BK:(nk + 1) * BK], b_s[nk % S])
        tp.commit_async()
        a = tp.load(a_s[k % S], layout=tp.mma_layout(I16, "a", (BM, BK), (2, 1)))
        if BUG == "notranspose":
            b = tp.load(b_s[k % S], layout=tp.mma_layout(I16, "b", (BN, BK), (2, 1)))  # nt: B^T read as B
        else:
            b = tp.load(tp.transpose(b_s[k % S]), layout=tp.mma_layout(I16, "b", (BK, BN), (2, 1)))
        acc = tp.mma(a, b, acc)
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])    # nt: contraction indices agree
    tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)


# ----------------------------------------------------------------------------- transpose through shared memory
@tp.kernel(threads=128, target="sm_80")
def transpose(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, "N", "M"], BUG: tp.constexpr = "none"):
    T = 32
    m0 = tp.block_id(0) * T
    n0 = tp.block_id(1) * T
    tp.tag(X, lambda i, j: ("X", i, j))
    rows = tp.arange(T)
    cols = tp.arange(T)
    tp.tag(rows, lambda r: ("r", r))
    tp.tag(cols, lambda c: ("c", c))
    if BUG == "nopad":
        s = tp.shared((T, T), tp.f32, stages=2)                     # transpose: column reads conflict
    else:
        s = tp.shared((T, T), tp.f32, stages=2, layout=tp.Layout((T, T), (T + 1, 1)))   # padded rows
    for rep in range(2):
        if BUG == "shift":
            x = tp.load(X[m0:m0 + T, n0 + 1:n0 + 1 + T])            # transpose: one column off
        else:
            x = tp.load(X[m0:m0 + T, n0:n0 + T])
        if BUG == "stage":
            tp.store(s[(rep + 1) % 2], x)                           # transpose: the other stage
        elif BUG == "oob":
            tp.store(s[rep + 1], x)                                 # transpose: past the last stage
        else:
            tp.store(s[rep % 2], x)
        if BUG != "nobarrier":
            tp.barrier()                                            # transpose: the tile is in shared memory
        if BUG == "notranspose":
            y = tp.load(s[rep % 2])                                 # transpose: read untransposed
        else:
            y = tp.load(tp.transpose(s[rep % 2]))                   # transpose: y[j, i] is X[m0 + i, n0 + j]
        z = y + rows[:, None].to(tp.f32) + cols[None, :].to(tp.f32)
        tp.assert_tag(z, lambda t: t[0][0][2] % T == t[0][1][1] and t[0][0][1] % T == t[1][1])  # transpose: tags
        tp.store(Y[n0:n0 + T, m0:m0 + T], y)
        if BUG == "nowar":
            tp.store(s[rep % 2], x * 2.0)                           # transpose: overwritten while others read


# (kernel, BUG, checks of which one must report it, what the interpreter shows: "wrong" (output differs from
# the reference), "hazard" (the trace oracle sees a race or pipeline hazard), "oob", "divergence",
# "deadlock", or None where nothing observable changes (a tag convention, a bank conflict))
CORPUS = [
    (attn, "wait", {"pipeline_hazard"}, "hazard"),
    (attn, "nobarrier", {"pipeline_hazard", "race"}, "hazard"),
    (attn, "nextstage", {"pipeline_hazard", "race"}, "hazard"),
    (attn, "oob", {"out_of_bounds"}, "oob"),
    (attn, "vtile", {"tag_assertion"}, "wrong"),
    (attn, "nocommit", {"pipeline_hazard"}, "wrong"),
    (attn, "vstage", {"pipeline_hazard", "race"}, "hazard"),
    (attn, "ktag", {"tag_assertion"}, None),
    (ws_ring, "phase", {"pipeline_hazard"}, "hazard"),
    (ws_ring, "noempty", {"pipeline_hazard"}, "hazard"),
    (ws_ring, "lateempty", {"deadlock"}, "deadlock"),
    (ws_ring, "earlyempty", {"pipeline_hazard"}, "hazard"),
    (ws_ring, "noarrive", {"deadlock"}, "deadlock"),
    (ws_ring, "count", {"deadlock"}, "deadlock"),
    (ws_ring, "stage", {"pipeline_hazard", "tag_assertion"}, "wrong"),
    (ws_ring, "readstage", {"pipeline_hazard", "tag_assertion"}, "wrong"),
    (ws_ring, "rolebarrier", {"barrier_divergence"}, "divergence"),
    (ws_ring, "tile", {"tag_assertion"}, "wrong"),
    (ws_ring, "nowait", {"pipeline_hazard"}, "wrong"),
    (tma_loop, "phase", {"pipeline_hazard"}, "hazard"),
    (tma_loop, "latephase", {"deadlock"}, "deadlock"),
    (tma_loop, "nobarrier", {"pipeline_hazard"}, "hazard"),
    (stencil, "shift", {"tag_assertion"}, "wrong"),
    (stencil, "oob", {"out_of_bounds"}, "oob"),
    (stencil, "nobarrier", {"race"}, "hazard"),
    (stencil, "stage", {"tag_assertion"}, "wrong"),
    (stencil, "nowar", {"race"}, "hazard"),
    (block_reduce, "offset", {"tag_assertion"}, "wrong"),
    (block_reduce, "rolebarrier", {"barrier_divergence"}, "divergence"),
    (block_reduce, "nobarrier", {"race"}, "hazard"),
    (block_reduce, "nowar", {"race"}, "hazard"),
    (gemm_nt, "prologue", {"pipeline_hazard"}, "hazard"),
    (gemm_nt, "wait", {"pipeline_hazard"}, "hazard"),
    (gemm_nt, "nobarrier", {"pipeline_hazard", "race"}, "hazard"),
    (gemm_nt, "bstage", {"pipeline_hazard", "race"}, "hazard"),
    (gemm_nt, "notranspose", {"tag_assertion"}, "wrong"),
    (transpose, "nopad", {"bank_conflict"}, None),
    (transpose, "shift", {"tag_assertion"}, "wrong"),
    (transpose, "stage", {"pipeline_hazard", "race", "tag_assertion"}, "hazard"),
    (transpose, "oob", {"out_of_bounds"}, "oob"),
    (transpose, "nobarrier", {"race"}, "hazard"),
    (transpose, "notranspose", {"tag_assertion"}, "wrong"),
    (transpose, "nowar", {"race"}, "hazard"),
]
KERNELS = [attn, ws_ring, tma_loop, stencil, block_reduce, gemm_nt, transpose]
