"""A third seeded-bug corpus (issue 17 item 7): ten more base kernels in realistic shapes (tiles of 32-256,
three to eight warps), each with a `BUG` constexpr whose value "none" is the correct twin and whose other
values each switch one line to a known bug. `CORPUS` lists every seeded kernel with the checks of which one
must report it and what the interpreter shows when it runs; `KNOWN_MISSES` lists bugs the verifier does not
report and `KNOWN_FALSE_ALARMS` twins it reports errors on (with the reasons), kept out of the totals'
"caught"; see tests/verify/test_corpus2.py and benchmarks/verify_corpus.py.

Families: attention with an online softmax over K/V tiles in a cp.async double buffer; a warp-specialized
producer/consumer ring over mbarrier arrays (`tp.mbarrier(1, stages=S)`); a 2-D five-point stencil with a
halo window in shared memory; a tiled transpose through a swizzled shared tile; a block reduction through
shared memory with a tree of barriers; a split-K GEMM that accumulates with atomics; a block scan through
shared memory; a gather / scatter with index tiles; a Hopper wgmma ring with one group in flight; two
consumer roles that release a stage through one mbarrier."""

import tilepy as tp

I16 = tp.nv.mma_m16n8k16_bf16
NEG = -1.0e30  # the running max before any key: finite, so exp(NEG - m) is 0, never NaN


# ----------------------------------------------------------------------------- attention, online softmax
@tp.kernel(threads=128, target="sm_80")
def flash(Q: tp.Tensor[tp.bf16, "M", 32], KT: tp.Tensor[tp.bf16, 32, "N"], V: tp.Tensor[tp.bf16, "N", 32],
          O: tp.Tensor[tp.f32, "M", 32], BM: tp.constexpr = 64, BN: tp.constexpr = 32, BUG: tp.constexpr = "none"):
    D = 32
    m0 = tp.block_id(0) * BM
    ACC_S = tp.accumulator(I16, (BM, BN), (4, 1))
    tp.tag(Q, lambda i, d: ("Q", i, d))
    if BUG == "ktag":
        tp.tag(KT, lambda d, j: ("K", j, d))                         # flash: K^T tagged as K
    else:
        tp.tag(KT, lambda d, j: ("K", d, j))
    tp.tag(V, lambda j, d: ("V", j, d))
    if BUG == "noswizzle":
        k_s = tp.shared((D, BN), tp.bf16, stages=2)                 # flash: 64-byte rows, 4-way conflicts
    else:
        k_s = tp.shared((D, BN), tp.bf16, stages=2, swizzle=tp.Swizzle(2, 3, 3))
    v_s = tp.shared((BN, D), tp.bf16, stages=2, swizzle=tp.Swizzle(2, 3, 3))
    q = tp.load(Q[m0:m0 + BM, 0:D], layout=tp.mma_layout(I16, "a", (BM, D), (4, 1)))
    o = tp.zeros((BM, D), tp.f32, layout=tp.accumulator(I16, (BM, D), (4, 1)))
    m_i = tp.max(tp.full((BM, BN), NEG, layout=ACC_S), axis=1)     # running row max
    l_i = tp.sum(tp.zeros((BM, BN), tp.f32, layout=ACC_S), axis=1)  # running row sum
    tp.copy_async(KT[0:D, 0:BN], k_s[0])
    tp.copy_async(V[0:BN, 0:D], v_s[0])
    tp.commit_async()
    for j in range(tp.cdiv(KT.shape[1], BN)):
        if BUG == "wait":
            tp.wait_async(1)                                        # flash: tile j may still be in flight
        else:
            tp.wait_async(0)
        if BUG != "nobarrier":
            tp.barrier()                                            # flash: tile j visible, stage j - 1 free
        nj = j + 1
        if BUG == "kstage":
            tp.copy_async(KT[0:D, nj * BN:(nj + 1) * BN], k_s[j % 2])       # flash: refills the stage being read
        elif BUG == "oob":
            tp.copy_async(KT[0:D, nj * BN:(nj + 1) * BN], k_s[nj])          # flash: no modulo
        elif BUG == "kshift":
            tp.copy_async(KT[0:D, nj * BN + 1:(nj + 1) * BN + 1], k_s[nj % 2])  # flash: keys one column off
        else:
            tp.copy_async(KT[0:D, nj * BN:(nj + 1) * BN], k_s[nj % 2])
        tp.copy_async(V[nj * BN:(nj + 1) * BN, 0:D], v_s[nj % 2])
        tp.commit_async()
        s = tp.zeros((BM, BN), tp.f32, layout=ACC_S)
        s = tp.mma(q, k_s[j % 2], s)
        tp.assert_tag(tp.mma_operands(s), lambda a, b: a[2] == b[1])  # flash: contraction over d
        # flash: column c of S is key j * BN + c
        tp.assert_tag(s, lambda t, c: t[1][2] == c, at=((j * BN + tp.arange(BN))[None, :],))
        m_new = tp.maximum(m_i, tp.max(s, axis=1))
        p = tp.exp(s - m_new[:, None])
        alpha = tp.exp(m_i - m_new)
        l_i = l_i * alpha + tp.sum(p, axis=1)
        m_i = m_new
        o = o * alpha[:, None]
        p16 = p.to(tp.bf16)
        tp.tag(p16, lambda i, c: ("P", i, c))                       # P[i, c] weighs key j * BN + c
        if BUG == "playout":
            pa = tp.convert_layout(p16, tp.blocked((BM, BN), 128, 4))          # flash: not the A fragment
        else:
            pa = tp.convert_layout(p16, tp.mma_layout(I16, "a", (BM, BN), (4, 1)))
        if BUG == "vstage":
            o = tp.mma(pa, v_s[nj % 2], o)                          # flash: V from the stage being refilled
        else:
            o = tp.mma(pa, v_s[j % 2], o)
        tp.assert_tag(tp.mma_operands(o), lambda a, b: a[0] == "P" and b[0] == "V" and a[2] == b[1] % BN)
    tp.store(O[m0:m0 + BM, 0:D], o / l_i[:, None])


# ----------------------------------------------------------------------------- warp-specialized mbarrier ring
@tp.kernel(threads=160, target="sm_90a")
def ws_pipe(X: tp.Tensor[tp.f32, "R", 64], Y: tp.Tensor[tp.f32, "R", 64], BR: tp.constexpr = 32,
            STAGES: tp.constexpr = 3, BUG: tp.constexpr = "none"):
    tp.tag(X, lambda r, c: ("X", r, c))
    buf = tp.shared((BR, 64), tp.f32, stages=STAGES)
    if BUG == "count":
        full = tp.mbarrier(2, stages=STAGES)                        # ws: two arrivals per phase, one comes
    else:
        full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    n = X.shape[0] // BR
    if tp.warp_id() == 0:                                           # ws: producer warp
        for k in range(n):
            if k >= STAGES:
                if BUG == "lateempty":
                    tp.mbarrier_wait(empty[k % STAGES], k // STAGES)        # ws: waits for its own next release
                elif BUG != "noempty":
                    tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)    # ws: the consumer released stage
            if BUG == "stage":
                tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[(k + 1) % STAGES], full[k % STAGES])  # ws: other
            elif BUG == "rows":
                tp.copy_bulk(X[k * BR + 1:(k + 1) * BR + 1, 0:64], buf[k % STAGES], full[k % STAGES])  # ws: +1
            elif BUG == "arrivefirst":
                tp.mbarrier_arrive(full[k % STAGES])                # ws: phase completes before the copy
                tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[k % STAGES], full[k % STAGES])
            else:
                tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[k % STAGES], full[k % STAGES])  # ws: producer
            if BUG != "arrivefirst":
                tp.mbarrier_arrive(full[k % STAGES])
    else:                                                           # ws: four consumer warps
        for k in range(n):
            if BUG == "phase":
                tp.mbarrier_wait(full[k % STAGES], k // STAGES - 1)         # ws: one phase too early
            elif BUG == "fullstage":
                tp.mbarrier_wait(full[(k + 1) % STAGES], k // STAGES)       # ws: waits for the next stage
            else:
                tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            if BUG == "earlyrelease":
                tp.mbarrier_arrive(empty[k % STAGES])               # ws: released before it is read
            x = tp.load(buf[k % STAGES], layout=tp.blocked((BR, 64), 128, 4))  # ws: consumer's read
            tp.assert_tag(x, lambda t, r: t[1] == r, at=((k * BR + tp.arange(BR))[:, None],))  # ws: rows
            if BUG == "rolebarrier":
                tp.barrier()                                        # ws: a block barrier inside a role
            tp.store(Y[k * BR:(k + 1) * BR, 0:64], x * 2.0)
            if BUG != "noarrive" and BUG != "earlyrelease":         # ws: noarrive never releases the stage
                tp.mbarrier_arrive(empty[k % STAGES])               # ws: consumer releases stage


# ----------------------------------------------------------------------------- 2-D stencil with a halo window
@tp.kernel(threads=128, target="sm_80")
def stencil2d(X: tp.Tensor[tp.f32, "H", "W"], Y: tp.Tensor[tp.f32, "H", "W"], BH: tp.constexpr = 16,
              BW: tp.constexpr = 64, BUG: tp.constexpr = "none"):
    c0 = tp.block_id(1) * BW
    tp.tag(X, lambda r, c: ("X", r, c))
    s = tp.shared((BH + 2, BW + 2), tp.f32, stages=2)               # the tile and a one-element halo
    cols = c0 + tp.arange(BW)
    for it in range(2):
        r0 = (tp.block_id(0) * 2 + it) * BH
        if BUG == "onestage":
            h = s[0]                                                # st2d: one buffer for both tiles
        elif BUG == "oob":
            h = s[it + 1]                                           # st2d: past the last stage
        else:
            h = s[it % 2]
        tp.copy(X[r0 - 1:r0 - 1 + BH, c0 - 1:c0 - 1 + BW], h[0:BH, 0:BW])
        if BUG == "halo":
            tp.copy(X[r0 + BH:r0 + BH + 2, c0 - 1:c0 - 1 + BW], h[BH:BH + 2, 0:BW])   # st2d: one row low
        else:
            tp.copy(X[r0 - 1 + BH:r0 + 1 + BH, c0 - 1:c0 - 1 + BW], h[BH:BH + 2, 0:BW])
        tp.copy(X[r0 - 1:r0 - 1 + BH, c0 - 1 + BW:c0 + 1 + BW], h[0:BH, BW:BW + 2])
        tp.copy(X[r0 - 1 + BH:r0 + 1 + BH, c0 - 1 + BW:c0 + 1 + BW], h[BH:BH + 2, BW:BW + 2])
        if BUG == "divergent":
            if tp.thread_id() < 64:
                tp.barrier()                                        # st2d: half the block arrives
        elif BUG != "nobarrier":
            tp.barrier()                                            # st2d: the halo tile is visible
        rows = (r0 + tp.arange(BH))[:, None]
        c = tp.load(h[1:1 + BH, 1:1 + BW])                          # st2d: read by other threads
        tp.assert_tag(c, lambda t, r, q: t[1] == r and t[2] == q, at=(rows, cols[None, :]))      # st2d: centre
        up = tp.load(h[0:BH, 1:1 + BW])
        tp.assert_tag(up, lambda t, r, q: t[1] == r - 1 and t[2] == q, at=(rows, cols[None, :]))  # st2d: north
        dn = tp.load(h[2:2 + BH, 1:1 + BW])
        tp.assert_tag(dn, lambda t, r, q: t[1] == r + 1 and t[2] == q, at=(rows, cols[None, :]))  # st2d: south
        if BUG == "west":
            we = tp.load(h[1:1 + BH, 1:1 + BW])                     # st2d: the centre for the west
        else:
            we = tp.load(h[1:1 + BH, 0:BW])
        tp.assert_tag(we, lambda t, r, q: t[1] == r and t[2] == q - 1, at=(rows, cols[None, :]))  # st2d: west
        ea = tp.load(h[1:1 + BH, 2:2 + BW])
        tp.assert_tag(ea, lambda t, r, q: t[1] == r and t[2] == q + 1, at=(rows, cols[None, :]))  # st2d: east
        y = c * 4.0 - up - dn - we - ea
        tp.store(Y[r0:r0 + BH, c0:c0 + BW], y)


# ----------------------------------------------------------------------------- transpose through a swizzled tile
@tp.kernel(threads=128, target="sm_80")
def transpose_swz(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, "N", "M"], T: tp.constexpr = 64,
                  BUG: tp.constexpr = "none"):
    m0 = tp.block_id(0) * T
    tp.tag(X, lambda i, j: ("X", i, j))
    if BUG == "noswizzle":
        s = tp.shared((T, T), tp.f32, stages=2)                     # tswz: column reads, 32-way conflict
    elif BUG == "halfswizzle":
        s = tp.shared((T, T), tp.f32, stages=2, swizzle=tp.Swizzle(2, 0, 6))   # tswz: spreads 4 rows only
    else:
        s = tp.shared((T, T), tp.f32, stages=2, swizzle=tp.Swizzle(5, 0, 6))   # row r XORs its bank
    rows = tp.arange(T)
    for it in range(2):
        n0 = (tp.block_id(1) * 2 + it) * T
        if BUG == "swap":
            x = tp.load(X[n0:n0 + T, m0:m0 + T], layout=tp.blocked((T, T), 128, 1))   # tswz: block coordinates swapped
        else:
            x = tp.load(X[m0:m0 + T, n0:n0 + T], layout=tp.blocked((T, T), 128, 1))   # tswz: coalesced rows
        if BUG == "oob":
            tp.store(s[it + 1], x)                                  # tswz: past the last stage
        elif BUG == "onestage":
            tp.store(s[0], x)                                       # tswz: one buffer for both tiles
        else:
            tp.store(s[it % 2], x)
        if BUG != "nobarrier":
            tp.barrier()                                            # tswz: the tile is in shared memory
        if BUG == "onestage":
            y = tp.load(tp.transpose(s[0]), layout=tp.blocked((T, T), 128, 1))
        elif BUG == "vecread":
            y = tp.load(tp.transpose(s[it % 2]), layout=tp.blocked((T, T), 128, 4))   # tswz: 4 rows per lane
        else:
            y = tp.load(tp.transpose(s[it % 2]), layout=tp.blocked((T, T), 128, 1))   # tswz: a column per warp
        # tswz: row j of y is column n0 + j of X, column i is row m0 + i
        tp.assert_tag(y, lambda t, j, i: t[1] == i and t[2] == j, at=((n0 + rows)[:, None], (m0 + rows)[None, :]))
        tp.store(Y[n0:n0 + T, m0:m0 + T], y)


# ----------------------------------------------------------------------------- tree reduction through shared
@tp.kernel(threads=128, target="sm_80")
def tree_reduce(X: tp.Tensor[tp.f32, "R", 256], Y: tp.Tensor[tp.f32, "R", 32], BUG: tp.constexpr = "none"):
    s = tp.shared((256,), tp.f32)
    tp.tag(X, lambda r, c: ("X", r, c))
    for it in range(2):
        b = tp.block_id(0) * 2 + it
        tp.store(s, tp.load(X[b, 0:256], layout=tp.blocked((256,), 128, 2)))
        if BUG != "nofirst":
            tp.barrier()                                            # tree: the row is in shared memory
        a0 = tp.load(s[0:128])                                      # tree: level 0, i meets i + 128
        c0 = tp.load(s[128:256])
        tp.assert_tag(a0 + c0, lambda t: t[0][2] + 128 == t[1][2])
        tp.barrier()                                                # tree: replicated reads done
        tp.store(s[0:128], a0 + c0)
        tp.barrier()                                                # tree: level 0 written
        a1 = tp.load(s[0:64])                                       # tree: level 1, i meets i + 64
        if BUG == "half":
            c1 = tp.load(s[65:129])                                 # tree: the upper half one element off
        else:
            c1 = tp.load(s[64:128])
        tp.assert_tag(a1 + c1, lambda t: t[0][0][2] + 64 == t[1][0][2] and t[0][1][2] + 64 == t[1][1][2])
        if BUG != "noread":
            tp.barrier()                                            # tree: replicated reads done
        tp.store(s[0:64], a1 + c1)
        if BUG != "nolevel":
            tp.barrier()                                            # tree: level 1 written
        a2 = tp.load(s[0:32])                                       # tree: level 2, i meets i + 32
        c2 = tp.load(s[32:64])
        tp.assert_tag(a2 + c2, lambda t: t[0][0][0][2] + 32 == t[1][0][0][2])
        tp.barrier()                                                # tree: replicated reads done
        tp.store(s[0:32], a2 + c2)
        if BUG == "divergent":
            if tp.warp_id() == 0:
                tp.barrier()                                        # tree: only the warp that holds the sums
        else:
            tp.barrier()                                            # tree: level 2 written
        tp.store(Y[b, 0:32], tp.load(s[0:32]))                      # tree: the 32 partial sums of row b
        if BUG == "lastwar":
            if it == 1:
                tp.barrier()                                        # tree: only after the last row
        elif BUG != "nowar":
            tp.barrier()                                            # tree: read before the next row lands


# ----------------------------------------------------------------------------- split-K GEMM with atomics
@tp.kernel(threads=128, target="sm_80")
def splitk(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"],
           KT: tp.i32, BM: tp.constexpr = 64, BN: tp.constexpr = 32, BK: tp.constexpr = 32,
           BUG: tp.constexpr = "none"):
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    kt0 = tp.block_id(2) * KT                                       # split z reduces K tiles z KT ... z KT + KT
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    a_s = tp.shared((BM, BK), tp.bf16, stages=2, swizzle=tp.Swizzle(2, 3, 3))
    b_s = tp.shared((BK, BN), tp.bf16, stages=2, swizzle=tp.Swizzle(2, 3, 3))
    acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(I16, (BM, BN), (2, 2)))
    tp.copy_async(A[m0:m0 + BM, kt0 * BK:(kt0 + 1) * BK], a_s[0])
    tp.copy_async(B[kt0 * BK:(kt0 + 1) * BK, n0:n0 + BN], b_s[0])
    tp.commit_async()
    for k in range(KT + 1 if BUG == "overlap" else KT):            # splitk: overlap reads the next split's tile
        if BUG != "nowait":
            tp.wait_async(0)                                        # splitk: tile k landed
        tp.barrier()
        nk = kt0 + k + 1
        if BUG == "oob":
            tp.copy_async(A[m0:m0 + BM, nk * BK:(nk + 1) * BK], a_s[k + 1])   # splitk: no modulo
        else:
            tp.copy_async(A[m0:m0 + BM, nk * BK:(nk + 1) * BK], a_s[(k + 1) % 2])
        if BUG == "bk":
            tp.copy_async(B[(nk + 1) * BK:(nk + 2) * BK, n0:n0 + BN], b_s[(k + 1) % 2])  # splitk: next B tile
        else:
            tp.copy_async(B[nk * BK:(nk + 1) * BK, n0:n0 + BN], b_s[(k + 1) % 2])
        tp.commit_async()
        if BUG == "alayout":
            a = tp.load(a_s[k % 2], layout=tp.mma_layout(I16, "b", (BM, BK), (2, 2)))   # splitk: B's fragment
        else:
            a = tp.load(a_s[k % 2], layout=tp.mma_layout(I16, "a", (BM, BK), (2, 2)))
        tp.assert_tag(a, lambda t, lo, hi: lo <= t[2] and t[2] < hi, at=(kt0 * BK, (kt0 + KT) * BK))  # splitk: own K
        acc = tp.mma(a, b_s[k % 2], acc)
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])    # splitk: contraction indices agree
    if BUG == "store":
        tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)                    # splitk: the splits overwrite each other
    elif BUG == "firststore":
        if tp.block_id(2) == 0:
            tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)                # splitk: split 0 stores, racing the adds
        else:
            tp.atomic_add(C[m0:m0 + BM, n0:n0 + BN], acc)
    else:
        tp.atomic_add(C[m0:m0 + BM, n0:n0 + BN], acc)               # splitk: the splits add up


# ----------------------------------------------------------------------------- block scan through shared
@tp.kernel(threads=128, target="sm_80")
def block_scan(X: tp.Tensor[tp.f32, "G", 4, 128], Y: tp.Tensor[tp.f32, "G", 4, 128], BUG: tp.constexpr = "none"):
    part = tp.shared((4,), tp.f32)
    tp.tag(X, lambda g, r, c: ("X", g, r, c))
    w = tp.arange(4)
    for it in range(2):
        b = tp.block_id(0) * 2 + it
        if BUG == "rows":
            x = tp.load(X[b, 0:4, 0:128], layout=tp.blocked((4, 128), 128, 4))
            tot = tp.sum(tp.load(X[b + 1, 0:4, 0:128], layout=tp.blocked((4, 128), 128, 4)), axis=1)  # scan: b+1
        else:
            x = tp.load(X[b, 0:4, 0:128], layout=tp.blocked((4, 128), 128, 4))     # scan: warp i holds row i
            tot = tp.sum(x, axis=1)
        tp.store(part, tot)                                         # scan: one total per warp
        if BUG == "divergent":
            if tp.lane_id() == 0:
                tp.barrier()                                        # scan: one lane per warp arrives
        elif BUG != "nobarrier":
            tp.barrier()                                            # scan: the totals are visible
        p = tp.load(part, layout=tp.blocked((4,), 128, 1))          # scan: read by other threads
        tp.assert_tag(p, lambda t, i, g: t[1] == g and t[2] == i, at=(w, b))   # scan: total i is row i of b
        if BUG == "inclusive":
            off = tp.cumsum(p, axis=0)                              # scan: row i counted in its own offset
        else:
            off = tp.cumsum(p, axis=0, exclusive=True)              # scan: rows before row i
        tp.assert_tag(off, lambda t, i: t[2] < i, at=(w,))          # scan: offset i sums rows < i only
        y = tp.cumsum(x, axis=1) + tp.convert_layout(off, tp.blocked((4,), 128, 1))[:, None]
        tp.store(Y[b, 0:4, 0:128], y)
        if BUG != "nowar":
            tp.barrier()                                            # scan: totals read before the next store


# ----------------------------------------------------------------------------- gather / scatter, index tiles
@tp.kernel(threads=128, target="sm_80")
def gather_scatter(X: tp.Tensor[tp.f32, "N", 64], DST: tp.Tensor[tp.i32, "N"], Y: tp.Tensor[tp.f32, "M", 64],
                   Z: tp.Tensor[tp.f32, "N", 64], BR: tp.constexpr = 32, BUG: tp.constexpr = "none"):
    s = tp.shared((BR, 64), tp.f32)
    tp.tag(X, lambda r, c: ("X", r, c))
    cc = tp.arange(64)
    if BUG == "cols":
        src_c = 64 - cc                                             # gs: the reversal one column off
    else:
        src_c = 63 - cc                                             # gs: columns reversed
    for it in range(2):
        r0 = (tp.block_id(0) * 2 + it) * BR
        if BUG == "rows":
            rows = r0 + 1 + tp.arange(BR)                           # gs: the rows one off
        else:
            rows = r0 + tp.arange(BR)
        x = tp.load(X[rows[:, None], src_c[None, :]])               # gs: a gather
        # gs: element (r, c) is X[r, 63 - c]
        tp.assert_tag(x, lambda t, r, c: t[1] == r and t[2] == 63 - c,
                      at=((r0 + tp.arange(BR))[:, None], cc[None, :]))
        tp.store(s, x)
        if BUG != "nobarrier":
            tp.barrier()                                            # gs: the tile is in shared memory
        z = tp.load(s, layout=tp.blocked((BR, 64), 128, 1))         # gs: read by other threads
        dst = tp.load(DST[r0:r0 + BR])                              # gs: destinations loaded from memory
        if BUG == "store":
            tp.store(Y[dst[:, None], cc[None, :]], z)               # gs: rows with one destination collide
        else:
            tp.atomic_add(Y[dst[:, None], cc[None, :]], z)          # gs: scatter-add
        zr = r0 + tp.arange(BR)
        if BUG == "dup":
            tp.store(Z[(zr // 2)[:, None], cc[None, :]], z)         # gs: two rows to one
        elif BUG == "blockdup":
            tp.store(Z[(zr % BR)[:, None], cc[None, :]], z)         # gs: every block and tile to rows 0..BR-1
        else:
            tp.store(Z[zr[:, None], cc[None, :]], z)                # gs: a scatter to distinct rows
        if BUG != "nowar":
            tp.barrier()                                            # gs: reads done before the next tile


# ----------------------------------------------------------------------------- Hopper wgmma, one group in flight
@tp.kernel(threads=256, target="sm_90a")
def wgmma_ring(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"],
               BM: tp.constexpr = 64, BN: tp.constexpr = 64, BK: tp.constexpr = 64, STAGES: tp.constexpr = 2,
               BUG: tp.constexpr = "none"):
    W = tp.nv.wgmma_m64n64k16_bf16
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    if BUG == "swizzle":
        a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=tp.Swizzle(3, 2, 3))   # wg: no wgmma mode
    else:
        a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=tp.Swizzle(3, 3, 3))   # wg: 128-byte rows
    b_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=tp.Swizzle(3, 3, 3))
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    k_tiles = tp.cdiv(A.shape[1], BK)
    if tp.warpgroup_id() == 0:                                      # wg: producer warpgroup
        for k in range(k_tiles):
            tp.mbarrier_wait(empty[k % STAGES], k // STAGES)        # wg: the consumers released stage k % S
            k0 = k * BK
            tp.copy_bulk(A[m0:m0 + BM, k0:k0 + BK], a_s[k % STAGES], full[k % STAGES])
            if BUG == "bk":
                tp.copy_bulk(B[k0 + BK:k0 + 2 * BK, n0:n0 + BN], b_s[k % STAGES], full[k % STAGES])  # wg: next
            else:
                tp.copy_bulk(B[k0:k0 + BK, n0:n0 + BN], b_s[k % STAGES], full[k % STAGES])
            tp.mbarrier_arrive(full[k % STAGES])
    else:                                                           # wg: consumer warpgroup
        acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(W, (BM, BN)))
        if BUG != "noprerelease":
            for s in tp.static_range(STAGES - 1):
                tp.mbarrier_arrive(empty[s])                        # wg: every stage but the last is free
        for k in range(k_tiles):
            if BUG == "phase":
                tp.mbarrier_wait(full[k % STAGES], k // STAGES - 1)  # wg: one phase too early
            else:
                tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            acc = tp.mma_async(a_s[k % STAGES], b_s[k % STAGES], acc)   # wg: wgmma reads stage k % S
            if BUG == "early":
                tp.mbarrier_arrive(empty[(k + STAGES - 1) % STAGES])   # wg: released before its group retired
            if BUG == "inflight2":
                tp.mma_wait(2)                                      # wg: tile k - 1's group may still run
            else:
                tp.mma_wait(1)                                      # wg: tile k - 1's group retired
            if BUG == "release":
                tp.mbarrier_arrive(empty[k % STAGES])               # wg: the stage its own group still reads
            elif BUG != "early":                                    # ("early" released it above)
                tp.mbarrier_arrive(empty[(k + STAGES - 1) % STAGES])   # wg: tile k - 1's stage
        tp.mma_wait(0)
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])   # wg: contraction indices agree
        tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)


# ----------------------------------------------------------------------------- two consumer roles, one release
@tp.kernel(threads=96, target="sm_90a")
def two_consumers(X: tp.Tensor[tp.f32, "R", 64], Y: tp.Tensor[tp.f32, "R", 64], BR: tp.constexpr = 32,
                  STAGES: tp.constexpr = 2, BUG: tp.constexpr = "none"):
    tp.tag(X, lambda r, c: ("X", r, c))
    buf = tp.shared((BR, 64), tp.f32, stages=STAGES)
    full = tp.mbarrier(1, stages=STAGES)
    if BUG == "count":
        empty = tp.mbarrier(3, stages=STAGES)                       # two: three releases awaited, two come
    else:
        empty = tp.mbarrier(2, stages=STAGES)                       # two: both consumer roles release a stage
    n = X.shape[0] // BR
    if tp.warp_id() == 0:                                           # two: producer warp
        for k in range(n):
            if k >= STAGES:
                tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)
            tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[k % STAGES], full[k % STAGES])
            tp.mbarrier_arrive(full[k % STAGES])
        for s in range(STAGES):                                     # two: drain: every stage released
            tp.mbarrier_wait(empty[s % STAGES], (n - s + STAGES - 1) // STAGES - 1)
    elif tp.warp_id() == 1:                                         # two: consumer of rows 0..15 of each tile
        for k in range(n):
            tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            x = tp.load(buf[k % STAGES][0:16, 0:64], layout=tp.blocked((16, 64), 32, 4))
            if BUG == "rolebarrier":
                tp.barrier()                                        # two: a block barrier inside a role
            tp.store(Y[k * BR:k * BR + 16, 0:64], x)
            tp.mbarrier_arrive(empty[k % STAGES])
    else:                                                           # two: consumer of rows 16..31
        for k in range(n):
            tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            if BUG == "releasefirst":
                tp.mbarrier_arrive(empty[k % STAGES])               # two: released before its read
            if BUG == "rows":
                x = tp.load(buf[k % STAGES][0:16, 0:64], layout=tp.blocked((16, 64), 32, 4))   # two: rows 0..15
            else:
                x = tp.load(buf[k % STAGES][16:32, 0:64], layout=tp.blocked((16, 64), 32, 4))
            tp.assert_tag(x, lambda t, r: t[1] == r, at=((k * BR + 16 + tp.arange(16))[:, None],))  # two: rows
            tp.store(Y[k * BR + 16:k * BR + 32, 0:64], x)
            if BUG == "lastskip":
                if k < n - 1:
                    tp.mbarrier_arrive(empty[k % STAGES])           # two: the last tile's stage never released
            elif BUG != "noarrive" and BUG != "releasefirst":
                tp.mbarrier_arrive(empty[k % STAGES])               # two: noarrive never releases


# (kernel, BUG, checks of which one must report it, what the interpreter shows: "wrong" (output differs from
# the reference), "hazard" (the trace oracle sees a race or pipeline hazard), "oob", "divergence",
# "deadlock", or None where nothing observable changes (a tag convention, a bank conflict, a race between
# blocks the interpreter runs one after another))
CORPUS = [
    (flash, "wait", {"pipeline_hazard"}, "hazard"),
    (flash, "nobarrier", {"pipeline_hazard", "race"}, "hazard"),
    (flash, "kstage", {"pipeline_hazard", "race"}, "hazard"),
    (flash, "oob", {"out_of_bounds"}, "oob"),
    (flash, "kshift", {"tag_assertion"}, "wrong"),
    (flash, "vstage", {"pipeline_hazard", "race"}, "hazard"),
    (flash, "playout", {"mma_layout"}, "wrong"),
    (flash, "ktag", {"tag_assertion"}, None),
    (flash, "noswizzle", {"bank_conflict"}, None),
    (ws_pipe, "phase", {"pipeline_hazard"}, "hazard"),
    (ws_pipe, "noempty", {"pipeline_hazard"}, "hazard"),
    (ws_pipe, "lateempty", {"deadlock"}, "deadlock"),
    (ws_pipe, "noarrive", {"deadlock"}, "deadlock"),
    (ws_pipe, "count", {"deadlock"}, "deadlock"),
    (ws_pipe, "stage", {"pipeline_hazard", "tag_assertion"}, "wrong"),
    (ws_pipe, "rows", {"tag_assertion"}, "wrong"),
    (ws_pipe, "rolebarrier", {"barrier_divergence"}, "divergence"),
    (ws_pipe, "earlyrelease", {"pipeline_hazard"}, "hazard"),
    (ws_pipe, "arrivefirst", {"pipeline_hazard"}, "hazard"),
    (ws_pipe, "fullstage", {"pipeline_hazard", "deadlock"}, "hazard"),
    (stencil2d, "nobarrier", {"race"}, "hazard"),
    (stencil2d, "onestage", {"race"}, "hazard"),
    (stencil2d, "oob", {"out_of_bounds"}, "oob"),
    (stencil2d, "halo", {"tag_assertion"}, "wrong"),
    (stencil2d, "west", {"tag_assertion"}, "wrong"),
    (stencil2d, "divergent", {"barrier_divergence"}, "divergence"),
    (transpose_swz, "noswizzle", {"bank_conflict"}, None),
    (transpose_swz, "halfswizzle", {"bank_conflict"}, None),
    (transpose_swz, "oob", {"out_of_bounds"}, "oob"),
    (transpose_swz, "swap", {"tag_assertion"}, "wrong"),
    (transpose_swz, "nobarrier", {"race"}, "hazard"),
    (transpose_swz, "onestage", {"race"}, "hazard"),
    (transpose_swz, "vecread", {"bank_conflict"}, None),
    (tree_reduce, "nofirst", {"race"}, "hazard"),
    (tree_reduce, "noread", {"race"}, "hazard"),
    (tree_reduce, "nolevel", {"race"}, "hazard"),
    (tree_reduce, "half", {"tag_assertion"}, "wrong"),
    (tree_reduce, "divergent", {"barrier_divergence"}, "divergence"),
    (tree_reduce, "nowar", {"race"}, "hazard"),
    (tree_reduce, "lastwar", {"race"}, "hazard"),
    (splitk, "store", {"global_race"}, "wrong"),
    (splitk, "nowait", {"pipeline_hazard"}, "wrong"),
    (splitk, "oob", {"out_of_bounds"}, "oob"),
    (splitk, "bk", {"tag_assertion"}, "wrong"),
    (splitk, "alayout", {"mma_layout"}, "wrong"),
    (splitk, "overlap", {"tag_assertion"}, "wrong"),
    (splitk, "firststore", {"global_race"}, None),
    (block_scan, "nobarrier", {"race"}, "hazard"),
    (block_scan, "nowar", {"race"}, "hazard"),
    (block_scan, "divergent", {"barrier_divergence"}, "divergence"),
    (block_scan, "rows", {"tag_assertion"}, "wrong"),
    (block_scan, "inclusive", {"tag_assertion"}, "wrong"),
    (gather_scatter, "store", {"global_race"}, "wrong"),
    (gather_scatter, "dup", {"global_race"}, "wrong"),
    (gather_scatter, "nobarrier", {"race"}, "hazard"),
    (gather_scatter, "nowar", {"race"}, "hazard"),
    (gather_scatter, "cols", {"tag_assertion"}, "wrong"),
    (gather_scatter, "rows", {"tag_assertion"}, "wrong"),
    (gather_scatter, "blockdup", {"global_race"}, "wrong"),
    (wgmma_ring, "phase", {"pipeline_hazard"}, "wrong"),
    (wgmma_ring, "release", {"pipeline_hazard", "deadlock"}, "deadlock"),
    (wgmma_ring, "early", {"pipeline_hazard"}, None),
    (wgmma_ring, "inflight2", {"pipeline_hazard"}, None),
    (wgmma_ring, "noprerelease", {"deadlock"}, "deadlock"),
    (wgmma_ring, "bk", {"tag_assertion"}, "wrong"),
    (wgmma_ring, "swizzle", {"mma_layout"}, None),
    (two_consumers, "noarrive", {"deadlock"}, "deadlock"),
    (two_consumers, "count", {"deadlock"}, "deadlock"),
    (two_consumers, "rolebarrier", {"barrier_divergence"}, "divergence"),
    (two_consumers, "rows", {"tag_assertion"}, "wrong"),
    (two_consumers, "lastskip", {"deadlock"}, "deadlock"),
    (two_consumers, "releasefirst", {"pipeline_hazard"}, "hazard"),
]
KERNELS = [flash, ws_pipe, stencil2d, transpose_swz, tree_reduce, splitk, block_scan, gather_scatter, wgmma_ring,
           two_consumers]
# (kernel, BUG, reason): seeded bugs the verifier does not report; not counted as caught
KNOWN_MISSES: list = []
# (kernel, reason): correct twins on which the verifier reports errors (false alarms); a bug of such a kernel
# counts as caught only by an expected check that does not also report on the twin
KNOWN_FALSE_ALARMS: list = []
