"""Kernels with seeded bugs for the verifier's tests. Each kernel takes a `BUG` constexpr: "none" is the fixed
twin; every other value switches one line to a known bug (the comment names the line the finding points at)."""

import tilepy as tp

I16 = tp.nv.mma_m16n8k16_bf16


# ----------------------------------------------------------------------------- pipelined GEMM (cp.async ring)
@tp.kernel(threads=64)
def pipe_gemm(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"],
              BM: tp.constexpr = 32, BN: tp.constexpr = 16, BK: tp.constexpr = 16, STAGES: tp.constexpr = 2,
              BUG: tp.constexpr = "none"):
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    if BUG == "oob_alloc":
        a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES - 1)       # one stage too few
    else:
        a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES)
    b_s = tp.shared((BK, BN), tp.bf16, stages=STAGES)
    acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(I16, (BM, BN), (2, 1)))
    tp.tag(A, lambda i, k: ("A", i, k))
    if BUG == "tag_fn":
        tp.tag(B, lambda k, j: ("B", j, k))                         # B tagged transposed
    else:
        tp.tag(B, lambda k, j: ("B", k, j))
    k_tiles = tp.cdiv(A.shape[1], BK)
    for s in tp.static_range(STAGES - 1):
        tp.copy_async(A[m0:m0 + BM, s * BK:(s + 1) * BK], a_s[s])
        tp.copy_async(B[s * BK:(s + 1) * BK, n0:n0 + BN], b_s[s])
        tp.commit_async()
    for k in tp.pipeline(k_tiles, stages=STAGES):
        if BUG == "wait":
            tp.wait_async(STAGES - 1)                               # waits for one group too few
        else:
            tp.wait_async(STAGES - 2)
        if BUG != "nobarrier":
            tp.barrier()
        nk = k + STAGES - 1
        if BUG == "stage":
            tp.copy_async(A[m0:m0 + BM, nk * BK:(nk + 1) * BK], a_s[k % STAGES])   # refills the stage being read
        elif BUG == "oob_index":
            tp.copy_async(A[m0:m0 + BM, nk * BK:(nk + 1) * BK], a_s[nk])           # no modulo
        else:
            tp.copy_async(A[m0:m0 + BM, nk * BK:(nk + 1) * BK], a_s[nk % STAGES])
        if BUG == "tag_tile":
            tp.copy_async(B[(nk + 1) * BK:(nk + 2) * BK, n0:n0 + BN], b_s[nk % STAGES])  # the wrong K tile
        else:
            tp.copy_async(B[nk * BK:(nk + 1) * BK, n0:n0 + BN], b_s[nk % STAGES])
        if BUG != "commit":
            tp.commit_async()
        if BUG == "oob_read":
            acc = tp.mma(a_s[k % STAGES + 1], b_s[k % STAGES], acc)   # stage index off by one
        elif BUG == "tag_stage":
            acc = tp.mma(a_s[k % STAGES], b_s[(k + 1) % STAGES], acc)  # B from the other stage
        else:
            acc = tp.mma(a_s[k % STAGES], b_s[k % STAGES], acc)
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
    tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)


# ----------------------------------------------------------------------------- staging through shared memory
@tp.kernel(threads=128)
def stage_copy(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, "M", "N"], T: tp.constexpr = 32,
               BUG: tp.constexpr = "none"):
    r0 = tp.block_id(0) * T
    s = tp.shared((T, T), tp.f32)
    for i in range(2):
        x = tp.load(X[r0:r0 + T, i * T:(i + 1) * T])
        tp.store(s, x)
        if BUG != "nobarrier":
            tp.barrier()
        y = tp.load(s, layout=tp.blocked((T, T), 128, 1))          # read by other threads than wrote
        tp.store(Y[r0:r0 + T, i * T:(i + 1) * T], y)
        if BUG != "loop_war":
            tp.barrier()                                            # before the next iteration overwrites s


@tp.kernel(threads=128)
def role_stage(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], BUG: tp.constexpr = "none"):
    i0 = tp.block_id(0) * 64
    s = tp.shared((64,), tp.f32)
    if BUG == "roles":
        if tp.warp_id() == 0:
            tp.store(s, tp.load(X[i0:i0 + 64]))                     # warp 0 writes while the others read
        else:
            tp.store(Y[i0:i0 + 64], tp.load(s))
    elif BUG == "two_writers":
        if tp.warp_id() == 0:
            tp.store(s, tp.load(X[i0:i0 + 64]))
        else:
            tp.store(s, tp.load(Y[i0:i0 + 64]))                     # warps 1-3 write the same elements
        tp.barrier()
        tp.store(Y[i0:i0 + 64], tp.load(s))
    else:
        if tp.warp_id() == 0:
            tp.store(s, tp.load(X[i0:i0 + 64]))
        tp.barrier()
        tp.store(Y[i0:i0 + 64], tp.load(s, layout=tp.blocked((64,), 128, 1)))


# ----------------------------------------------------------------------------- barriers
@tp.kernel(threads=128)
def diverge(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], BUG: tp.constexpr = "none"):
    i0 = tp.block_id(0) * 512
    x = tp.load(X[i0:i0 + 512])
    if BUG == "warp0":
        if tp.warp_id() == 0:
            tp.barrier()                                            # only warp 0 arrives
    elif BUG == "else":
        if tp.thread_id() < 64:
            x = x + 1.0
        else:
            tp.barrier()                                            # only threads 64.. arrive
    elif BUG == "lane_loop":
        if tp.lane_id() == 0:
            for i in range(2):
                tp.barrier()                                        # one lane per warp
    else:
        tp.barrier()
    tp.store(Y[i0:i0 + 512], x)


# ----------------------------------------------------------------------------- bank conflicts
@tp.kernel(threads=128)
def columns(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, "M", "N"], BUG: tp.constexpr = "none"):
    r0 = tp.block_id(0) * 32
    if BUG == "noswizzle":
        s = tp.shared((32, 32), tp.f32)                              # column reads: 32-way conflict
    elif BUG == "wrongswizzle":
        s = tp.shared((32, 32), tp.f32, swizzle=tp.Swizzle(3, 3, 3))  # a bf16 swizzle on an f32 tile
    elif BUG == "halfswizzle":
        s = tp.shared((32, 32), tp.f32, swizzle=tp.Swizzle(2, 0, 5))  # spreads only 4 rows
    else:
        s = tp.shared((32, 32), tp.f32, swizzle=tp.Swizzle(5, 0, 5))
    tp.store(s, tp.load(X[r0:r0 + 32, 0:32]))
    tp.barrier()
    col = tp.TVLayout((32, 32), (32, 4), (8,), (((1, 0), (0,)), ((0, 8), (1,))), "columns")
    y = tp.load(s, layout=col)                                      # lane i reads row i of a column
    tp.store(Y[r0:r0 + 32, 0:32], y)


# ----------------------------------------------------------------------------- register-operand MMA
@tp.kernel(threads=32)
def reg_mma(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"],
            BUG: tp.constexpr = "none"):
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    if BUG == "blocked":
        a = tp.load(A[0:16, 0:16], layout=tp.blocked((16, 16), 32, 8))           # not the A fragment layout
    elif BUG == "transposed":
        a = tp.load(A[0:16, 0:16], layout=tp.mma_layout(I16, "b", (16, 16)))    # B's fragment for A
    else:
        a = tp.load(A[0:16, 0:16], layout=tp.mma_layout(I16, "a", (16, 16)))
    if BUG == "b_swap":
        b = tp.load(B[0:16, 0:16], layout=tp.mma_layout(I16, "a", (16, 16)))    # A's fragment for B
    else:
        b = tp.load(B[0:16, 0:16], layout=tp.mma_layout(I16, "b", (16, 16)))
    acc = tp.zeros((16, 16), tp.f32, layout=tp.accumulator(I16, (16, 16)))
    acc = tp.mma(a, b, acc)
    tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
    tp.store(C[0:16, 0:16], acc)


# ----------------------------------------------------------------------------- elementwise tags
@tp.kernel(threads=128)
def add_tags(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], Z: tp.Tensor[tp.f32, "N"],
             BLOCK: tp.constexpr = 512, BUG: tp.constexpr = "none"):
    i0 = tp.block_id(0) * BLOCK
    tp.tag(X, lambda i: ("x", i))
    tp.tag(Y, lambda i: ("y", i))
    x = tp.load(X[i0:i0 + BLOCK])
    if BUG == "shift":
        y = tp.load(Y[i0 + 1:i0 + 1 + BLOCK])                        # off by one element
    elif BUG == "other_block":
        y = tp.load(Y[i0 + BLOCK:i0 + 2 * BLOCK])                    # the next block's tile
    else:
        y = tp.load(Y[i0:i0 + BLOCK])
    z = x + y
    tp.assert_tag(z, lambda t: t[0][1] == t[1][1])
    tp.store(Z[i0:i0 + BLOCK], z)
