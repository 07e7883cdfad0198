"""Recurrent cells, one time step per launch: LSTM, GRU and Elman (tanh / ReLU) in fp32.

The input's share of every gate, `GX = x W_ih^T` for all time steps at once, is one large GEMM before
the loop (the lowering's fp32 GEMM); a step computes only the recurrent product `h_{t-1} W_hh^T` for a block of
batch rows b and hidden units j, every gate of them, adds GX's row of (b, t), b_ih and b_hh, and applies the
cell:

- LSTM (PyTorch's gate order i, f, g, o): c = f * c' + i * g, h = o * tanh(c);
- GRU (r, z, n): n = tanh(gx_n + b_in + r * (h' W_hn^T + b_hn)), h = (1 - z) * n + z * h';
- Elman: h = tanh(...) or relu(...).

Two kernels of one signature. `rnn_step_tc` (sm_90a) multiplies on the tensor cores: mma.sync m16n8k8 .tf32
over a (16 * WM batch rows, 8 * WN) tile whose column n is gate n // 8 of hidden unit j0 + n % 8, so each warp
column computes one gate (a warp's serial chain is one gate's sum, not every gate's). Both operands are loaded
straight into the fragment layouts and split in registers into TF32 heads and tails (x = hi + lo): three
products per k-tile (lo hi + hi lo + hi hi) into a fresh accumulator added to the running sum with f32 adds, as
stdlib_kernels/gemm_fp32.py does: fp32-accurate (PASSES=3); PASSES=1 keeps hi hi only: TF32, what cuDNN
computes for fp32 RNNs while torch.backends.cudnn.allow_tf32. The next k-tile's operands are loaded before the
current one is multiplied. The gates' sums then meet in shared memory, and each thread applies the cell to one
(b, j). `rnn_step` is the portable form: fp32 FMA sums of (BB * BJ, BK) tiles.

Both directions of a bidirectional layer are one launch (grid z = direction d, ND directions): direction 1 runs
time backwards, so at step s direction d is at time t_d = s (d = 0) or T - 1 - s (d = 1). Every operand is a
whole buffer read at offsets derived from s (the only per-step argument, so the host loop over the steps
launches one compiled kernel with one scalar changing):
- GX: row b * X_RB + t_d * X_RT (batch-first or sequence-first), columns from d * G * H (the directions' W_ih
  stacked), gate g's from there + g * H;
- h_{t-1}: at step 0 row h0_row0 + d * NB + b of h0 (Hp); later the previous step's output row
  t_prev * O_RT + b * O_RB of this direction (Hp is the output), columns from d * H, t_prev = t_d -+ 1;
- W (D * G * H, H): the directions' W_hh stacked; Bi, Bh (D * G * H) their b_ih, b_hh;
- h_t: row t_d * O_RT + b * O_RB of Ho, columns from d * H (a direction's half of a bidirectional output);
- c (LSTM): at step 0 row h0_row0 + d * NB + b of c0 (Cp), later the (ND * NB)-row half of the ping-pong buffer
  the previous step wrote; written to half s % 2 of Co.
"""

import numpy as np

import tilepy as tp

LSTM, GRU, RNN_TANH, RNN_RELU = 0, 1, 2, 3
GATES = {LSTM: 4, GRU: 3, RNN_TANH: 1, RNN_RELU: 1}


@tp.kernel(threads=128)
def rnn_step(GX: tp.Tensor[tp.f32, "RX", "CX"], Hp: tp.Tensor[tp.f32, "RH", "CH"], Cp: tp.Tensor[tp.f32, "RC", "H"],
             W: tp.Tensor[tp.f32, "DGH", "H"], Bi: tp.Tensor[tp.f32, "DGH"], Bh: tp.Tensor[tp.f32, "DGH"],
             Ho: tp.Tensor[tp.f32, "RO", "CO"], Co: tp.Tensor[tp.f32, "RC2", "H"], s: tp.i32, h0_row0: tp.i32,
             NB: tp.constexpr = 1, T: tp.constexpr = 1, CELL: tp.constexpr = 0, G: tp.constexpr = 4,
             ND: tp.constexpr = 1, X_RB: tp.constexpr = 1, X_RT: tp.constexpr = 1, O_RB: tp.constexpr = 1,
             O_RT: tp.constexpr = 1, BB: tp.constexpr = 8, BJ: tp.constexpr = 8, BK: tp.constexpr = 16):
    n_h = W.shape[1]
    d = tp.block_id(2)
    td = s + d * (T - 1 - 2 * s)                      # this direction's time step
    nf = (s + T - 1) // T                             # 0 at step 0 (h0 / c0 are read), else 1
    h_row0 = (1 - nf) * h0_row0
    h_drow = (1 - nf) * NB
    h_rb = 1 + nf * (O_RB - 1)
    h_rt = nf * O_RT
    h_dcol = nf * n_h
    c_row0 = (1 - nf) * h0_row0 + nf * (ND * NB) * ((s + 1) % 2)
    co_row0 = (ND * NB) * (s % 2)
    q = tp.arange(BB * BJ)
    b = (tp.block_id(1) * BB + q // BJ)[:, None]      # (BB * BJ, 1): a batch row and a hidden unit per tile row
    j = (tp.block_id(0) * BJ + q % BJ)[:, None]
    live = (b < NB) & (j < n_h)
    kk = tp.arange(BK)[None, :]
    a0 = tp.zeros((BB * BJ, BK), tp.f32)
    a1 = tp.zeros((BB * BJ, BK), tp.f32)
    a2 = tp.zeros((BB * BJ, BK), tp.f32)
    a3 = tp.zeros((BB * BJ, BK), tp.f32)
    hr = h_row0 + d * h_drow + b * h_rb + (td - 1 + 2 * d) * h_rt
    hc = d * h_dcol
    wr = d * (G * n_h) + j
    for k0 in range(tp.cdiv(n_h, BK)):                 # h_{t-1} W_hh^T, gate by gate
        k = k0 * BK + kk
        ok = live & (k < n_h)
        h = tp.load(Hp[hr, hc + k], mask=ok)
        a0 = a0 + h * tp.load(W[wr, k], mask=ok)
        if CELL == 0 or CELL == 1:
            a1 = a1 + h * tp.load(W[wr + n_h, k], mask=ok)
            a2 = a2 + h * tp.load(W[wr + 2 * n_h, k], mask=ok)
        if CELL == 0:
            a3 = a3 + h * tp.load(W[wr + 3 * n_h, k], mask=ok)
    xr = b * X_RB + td * X_RT
    orow = td * O_RT + b * O_RB     # distinct rows per batch row (O_RB >= 1): no two lanes store one element
    # gate g's pre-activation: the input's share (GX + b_ih) and the recurrent one (the sum + b_hh)
    x0 = tp.load(GX[xr, wr], mask=live) + tp.load(Bi[wr], mask=live)
    s0 = tp.sum(a0, axis=1, keepdims=True) + tp.load(Bh[wr], mask=live)
    if CELL == 0 or CELL == 1:
        x1 = tp.load(GX[xr, wr + n_h], mask=live) + tp.load(Bi[wr + n_h], mask=live)
        s1 = tp.sum(a1, axis=1, keepdims=True) + tp.load(Bh[wr + n_h], mask=live)
        x2 = tp.load(GX[xr, wr + 2 * n_h], mask=live) + tp.load(Bi[wr + 2 * n_h], mask=live)
        s2 = tp.sum(a2, axis=1, keepdims=True) + tp.load(Bh[wr + 2 * n_h], mask=live)
    if CELL == 0:
        x3 = tp.load(GX[xr, wr + 3 * n_h], mask=live) + tp.load(Bi[wr + 3 * n_h], mask=live)
        s3 = tp.sum(a3, axis=1, keepdims=True) + tp.load(Bh[wr + 3 * n_h], mask=live)
        c = tp.sigmoid(x1 + s1) * tp.load(Cp[c_row0 + d * NB + b, j], mask=live) \
            + tp.sigmoid(x0 + s0) * tp.tanh(x2 + s2)
        tp.store(Co[co_row0 + d * NB + b, j], c, mask=live)
        tp.store(Ho[orow, d * n_h + j], tp.sigmoid(x3 + s3) * tp.tanh(c), mask=live)
    if CELL == 1:
        n = tp.tanh(x2 + tp.sigmoid(x0 + s0) * s2)
        z = tp.sigmoid(x1 + s1)
        tp.store(Ho[orow, d * n_h + j], (1.0 - z) * n + z * tp.load(Hp[hr, hc + j], mask=live), mask=live)
    if CELL == 2:
        tp.store(Ho[orow, d * n_h + j], tp.tanh(x0 + s0), mask=live)
    if CELL == 3:
        tp.store(Ho[orow, d * n_h + j], tp.maximum(x0 + s0, 0.0), mask=live)


def _tc_threads(c):
    return 32 * c["WM"] * c["WN"]


@tp.kernel(threads=_tc_threads, target="sm_90a")
def rnn_step_tc(GX: tp.Tensor[tp.f32, "RX", "CX"], Hp: tp.Tensor[tp.f32, "RH", "CH"],
                Cp: tp.Tensor[tp.f32, "RC", "H"], W: tp.Tensor[tp.f32, "DGH", "H"], Bi: tp.Tensor[tp.f32, "DGH"],
                Bh: tp.Tensor[tp.f32, "DGH"], Ho: tp.Tensor[tp.f32, "RO", "CO"], Co: tp.Tensor[tp.f32, "RC2", "H"],
                s: tp.i32, h0_row0: tp.i32, NB: tp.constexpr = 1, T: tp.constexpr = 1, CELL: tp.constexpr = 0,
                G: tp.constexpr = 4, ND: tp.constexpr = 1, X_RB: tp.constexpr = 1, X_RT: tp.constexpr = 1,
                O_RB: tp.constexpr = 1, O_RT: tp.constexpr = 1, WM: tp.constexpr = 1, WN: tp.constexpr = 4,
                BK: tp.constexpr = 16, PASSES: tp.constexpr = 3, INSTR: tp.constexpr = tp.nv.mma_m16n8k8_tf32):
    BM = 16 * WM                    # batch rows: WM warps of 16
    BN = 8 * WN                     # column n: gate n // 8 of hidden unit j0 + n % 8 (a warp column per gate)
    LA = tp.mma_layout(INSTR, "a", (BM, BK), (WM, WN))
    LB = tp.mma_layout(INSTR, "b", (BK, BN), (WM, WN))
    LC = tp.accumulator(INSTR, (BM, BN), (WM, WN))
    LE = tp.blocked((BM, 8), 32 * WM * WN)          # the cell: (b, j) elements spread over every thread
    n_h = W.shape[1]
    d = tp.block_id(2)
    td = s + d * (T - 1 - 2 * s)                     # this direction's time step
    nf = (s + T - 1) // T                            # 0 at step 0 (h0 / c0 are read), else 1
    b0 = tp.block_id(1) * BM
    j0 = tp.block_id(0) * 8
    # A (h_{t-1}: h0's rows h0_row0 + d * NB + b, or the previous step's output rows of this direction) and B
    # (W_hh^T: row d * G * H + gate * H + j of W) tiles' rows and columns in the fragment layouts
    ab = tp.zeros((BM, BK), tp.i32, layout=LA) + (b0 + tp.arange(BM))[:, None]
    ak = tp.zeros((BM, BK), tp.i32, layout=LA) + tp.arange(BK)[None, :]
    bk = tp.zeros((BK, BN), tp.i32, layout=LB) + tp.arange(BK)[:, None]
    bn = tp.zeros((BK, BN), tp.i32, layout=LB) + tp.arange(BN)[None, :]
    hr = (1 - nf) * (h0_row0 + d * NB + ab) + nf * ((td - 1 + 2 * d) * O_RT + ab * O_RB)
    hc = nf * d * n_h + ak
    wr = d * (G * n_h) + bn // 8 * n_h + j0 + bn % 8
    arow = ab < NB
    bcol = (j0 + bn % 8 < n_h) & (bn // 8 < G)
    acc = tp.zeros((BM, BN), tp.f32, layout=LC)
    # k-tile 0's operands; each iteration loads tile k + 1's before multiplying tile k's
    a = tp.load(Hp[hr, hc], mask=arow & (ak < n_h), layout=LA)
    w = tp.load(W[wr, bk], mask=bcol & (bk < n_h), layout=LB)
    for k0 in range(0, n_h, BK):
        kn = k0 + BK
        na = tp.load(Hp[hr, hc + kn], mask=arow & (ak + kn < n_h), layout=LA)
        nw = tp.load(W[wr, bk + kn], mask=bcol & (bk + kn < n_h), layout=LB)
        ahi = tp.round_tf32(a)
        hi = tp.round_tf32(w)
        part = tp.zeros((BM, BN), tp.f32, layout=LC)
        if PASSES == 3:
            part = tp.mma(tp.round_tf32(a - ahi), hi, part)
            part = tp.mma(ahi, tp.round_tf32(w - hi), part)
        part = tp.mma(ahi, hi, part)
        acc = acc + part
        a, w = na, nw
    # every gate of (b, j) to one thread: the recurrent sums through shared memory
    sums = tp.shared((BM, BN), tp.f32)
    tp.store(sums[0:BM, 0:BN], acc)
    tp.barrier()
    b = tp.zeros((BM, 8), tp.i32, layout=LE) + (b0 + tp.arange(BM))[:, None]
    j = tp.zeros((BM, 8), tp.i32, layout=LE) + (j0 + tp.arange(8))[None, :]
    live = (b < NB) & (j < n_h)
    xr = b * X_RB + td * X_RT
    xc = d * (G * n_h) + j
    orow = td * O_RT + b * O_RB     # distinct rows per batch row (O_RB >= 1): no two lanes store one element
    # gate g's pre-activation: the input's share (GX + b_ih) and the recurrent one (the product + b_hh)
    x0 = tp.load(GX[xr, xc], mask=live, layout=LE) + tp.load(Bi[xc], mask=live, layout=LE)
    s0 = tp.load(sums[0:BM, 0:8], layout=LE) + tp.load(Bh[xc], mask=live, layout=LE)
    if G > 1:
        x1 = tp.load(GX[xr, xc + n_h], mask=live, layout=LE) + tp.load(Bi[xc + n_h], mask=live, layout=LE)
        s1 = tp.load(sums[0:BM, 8:16], layout=LE) + tp.load(Bh[xc + n_h], mask=live, layout=LE)
        x2 = tp.load(GX[xr, xc + 2 * n_h], mask=live, layout=LE) + tp.load(Bi[xc + 2 * n_h], mask=live, layout=LE)
        s2 = tp.load(sums[0:BM, 16:24], layout=LE) + tp.load(Bh[xc + 2 * n_h], mask=live, layout=LE)
    if CELL == 0:
        x3 = tp.load(GX[xr, xc + 3 * n_h], mask=live, layout=LE) + tp.load(Bi[xc + 3 * n_h], mask=live, layout=LE)
        s3 = tp.load(sums[0:BM, 24:32], layout=LE) + tp.load(Bh[xc + 3 * n_h], mask=live, layout=LE)
        crow = (1 - nf) * (h0_row0 + d * NB + b) + nf * ((ND * NB) * ((s + 1) % 2) + d * NB + b)
        c = tp.sigmoid(x1 + s1) * tp.load(Cp[crow, j], mask=live, layout=LE) + tp.sigmoid(x0 + s0) * tp.tanh(x2 + s2)
        tp.store(Co[(ND * NB) * (s % 2) + d * NB + b, j], c, mask=live)
        tp.store(Ho[orow, d * n_h + j], tp.sigmoid(x3 + s3) * tp.tanh(c), mask=live)
    if CELL == 1:
        n = tp.tanh(x2 + tp.sigmoid(x0 + s0) * s2)
        z = tp.sigmoid(x1 + s1)
        hrow = (1 - nf) * (h0_row0 + d * NB + b) + nf * ((td - 1 + 2 * d) * O_RT + b * O_RB)
        hp = tp.load(Hp[hrow, nf * d * n_h + j], mask=live, layout=LE)
        tp.store(Ho[orow, d * n_h + j], (1.0 - z) * n + z * hp, mask=live)
    if CELL == 2:
        tp.store(Ho[orow, d * n_h + j], tp.tanh(x0 + s0), mask=live)
    if CELL == 3:
        tp.store(Ho[orow, d * n_h + j], tp.maximum(x0 + s0, 0.0), mask=live)


def policy(batch: int, hidden: int) -> dict:
    """rnn_step's (BB, BJ): 64 (batch row, hidden unit) pairs a block, BB batch rows of them (up to 8: the
    weight rows a block reads serve BB rows), BJ = 64 / BB hidden units."""
    bb = min(8, 1 << max(0, batch - 1).bit_length())
    return dict(BB=bb, BJ=64 // bb, BK=16)


def grid(batch: int, hidden: int, params: dict, directions: int = 1) -> tuple:
    return (tp.cdiv(hidden, params["BJ"]), tp.cdiv(batch, params["BB"]), directions)


def policy_tc(batch: int, hidden: int, gates: int = 4) -> dict:
    """rnn_step_tc's warps: WM (1 or 2) warps of 16 batch rows by WN warps, one per gate (4 for the GRU's 3:
    the cell's exchange spreads (16 * WM, 8) elements one per thread), 8 hidden units; k-tiles of 32 (16 for
    one gate: 32 is ~264 registers by tilepy's estimate, over the build gate's 255)."""
    return dict(WM=2 if batch >= 64 else 1, WN=1 if gates == 1 else 4, BK=16 if gates == 1 else 32)


def grid_tc(batch: int, hidden: int, params: dict, directions: int = 1) -> tuple:
    return (tp.cdiv(hidden, 8), tp.cdiv(batch, 16 * params["WM"]), directions)


def reference(cell: int, x, h, c, wi, wh, bi, bh):
    """One step in float64 numpy: (h_t, c_t) from x_t (B, I), h (B, H), c (B, H) (LSTM; else ignored)."""
    x, h, c, wi, wh, bi, bh = (np.asarray(a, np.float64) for a in (x, h, c, wi, wh, bi, bh))
    n_h = h.shape[1]
    gx, gh = x @ wi.T + bi, h @ wh.T + bh

    def sig(v):
        return 1 / (1 + np.exp(-v))
    if cell == LSTM:
        i, f, g, o = (gx[:, k * n_h:(k + 1) * n_h] + gh[:, k * n_h:(k + 1) * n_h] for k in range(4))
        c = sig(f) * c + sig(i) * np.tanh(g)
        return sig(o) * np.tanh(c), c
    if cell == GRU:
        r = sig(gx[:, :n_h] + gh[:, :n_h])
        z = sig(gx[:, n_h:2 * n_h] + gh[:, n_h:2 * n_h])
        n = np.tanh(gx[:, 2 * n_h:] + r * gh[:, 2 * n_h:])
        return (1 - z) * n + z * h, c
    pre = gx + gh
    return (np.tanh(pre) if cell == RNN_TANH else np.maximum(pre, 0)), c
