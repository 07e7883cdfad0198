"""Recurrent cells, one time step per launch: LSTM, GRU and Elman (tanh / ReLU) in fp32.

A step computes, for a block of batch rows b and hidden units j, every gate's pre-activation
`x_t W_ih[g]^T + h_{t-1} W_hh[g]^T` as sums over the input and hidden axes (BK at a time, kept in a
(BB * BJ, BK) tile per gate and summed at the end), adds the biases and applies the cell:

- LSTM (PyTorch's gate order i, f, g, o): c = f * c' + i * g, h = o * tanh(c);
- GRU (r, z, n): n = tanh(x W_in^T + b_in + r * (h' W_hn^T + b_hn)), h = (1 - z) * n + z * h';
- Elman: h = tanh(...) or relu(...).

Every operand is a whole buffer read at run-time row offsets, so the host loop over time steps launches the
same compiled kernel at each step: x_t is row `x_row0 + b * X_RB` of X (batch-first or sequence-first, either
layer's input), h_{t-1} row `h_row0 + b * h_rb` from column `h_col0` (the initial state, or the previous
step's output row of this direction), and h_t goes to row `o_row0 + b * O_RB` of the output sequence from
column O_COL0 (a direction's half of a bidirectional output). The cell state ping-pongs between two (NB, H)
halves of one buffer. Accumulation is fp32 FMA (no tensor cores), as exact as PyTorch's fp32 cell.
"""

import numpy as np

import tilepy as tp

LSTM, GRU, RNN_TANH, RNN_RELU = 0, 1, 2, 3
GATES = {LSTM: 4, GRU: 3, RNN_TANH: 1, RNN_RELU: 1}


@tp.kernel(threads=128)
def rnn_step(X: tp.Tensor[tp.f32, "RX", "I"], Hp: tp.Tensor[tp.f32, "RH", "CH"], Cp: tp.Tensor[tp.f32, "RC", "H"],
             Wi: tp.Tensor[tp.f32, "GH", "I"], Wh: tp.Tensor[tp.f32, "GH", "H"], Bi: tp.Tensor[tp.f32, "GH"],
             Bh: tp.Tensor[tp.f32, "GH"], Ho: tp.Tensor[tp.f32, "RO", "CO"], Co: tp.Tensor[tp.f32, "RC2", "H"],
             x_row0: tp.i32, h_row0: tp.i32, h_rb: tp.i32, h_col0: tp.i32, c_row0: tp.i32, o_row0: tp.i32,
             co_row0: tp.i32, NB: tp.constexpr = 1, CELL: tp.constexpr = 0, X_RB: tp.constexpr = 1,
             O_RB: tp.constexpr = 1, O_COL0: tp.constexpr = 0,
             BB: tp.constexpr = 8, BJ: tp.constexpr = 8, BK: tp.constexpr = 16):
    n_in = X.shape[1]
    n_h = Wh.shape[1]
    q = tp.arange(BB * BJ)
    b = (tp.block_id(1) * BB + q // BJ)[:, None]      # (BB * BJ, 1): a batch row and a hidden unit per tile row
    j = (tp.block_id(0) * BJ + q % BJ)[:, None]
    live = (b < NB) & (j < n_h)
    kk = tp.arange(BK)[None, :]
    a0 = tp.zeros((BB * BJ, BK), tp.f32)
    a1 = tp.zeros((BB * BJ, BK), tp.f32)
    a2 = tp.zeros((BB * BJ, BK), tp.f32)
    a3 = tp.zeros((BB * BJ, BK), tp.f32)
    xr = x_row0 + b * X_RB
    for k0 in range(tp.cdiv(n_in, BK)):                # x_t W_ih^T
        k = k0 * BK + kk
        ok = live & (k < n_in)
        x = tp.load(X[xr, k], mask=ok)
        a0 = a0 + x * tp.load(Wi[j, k], mask=ok)
        if CELL == 0 or CELL == 1:
            a1 = a1 + x * tp.load(Wi[j + n_h, k], mask=ok)
            a2 = a2 + x * tp.load(Wi[j + 2 * n_h, k], mask=ok)
        if CELL == 0:
            a3 = a3 + x * tp.load(Wi[j + 3 * n_h, k], mask=ok)
    hr = h_row0 + b * h_rb
    for k0 in range(tp.cdiv(n_h, BK)):                 # h_{t-1} W_hh^T (GRU: the n gate's part apart, in a3)
        k = k0 * BK + kk
        ok = live & (k < n_h)
        h = tp.load(Hp[hr, h_col0 + k], mask=ok)
        a0 = a0 + h * tp.load(Wh[j, k], mask=ok)
        if CELL == 0 or CELL == 1:
            a1 = a1 + h * tp.load(Wh[j + n_h, k], mask=ok)
        if CELL == 0:
            a2 = a2 + h * tp.load(Wh[j + 2 * n_h, k], mask=ok)
            a3 = a3 + h * tp.load(Wh[j + 3 * n_h, k], mask=ok)
        if CELL == 1:
            a3 = a3 + h * tp.load(Wh[j + 2 * n_h, k], mask=ok)
    s0 = tp.sum(a0, axis=1, keepdims=True) + tp.load(Bi[j], mask=live) + tp.load(Bh[j], mask=live)
    orow = o_row0 + b * O_RB        # distinct rows per batch row (O_RB >= 1): no two lanes store one element
    if CELL == 0:
        s1 = tp.sum(a1, axis=1, keepdims=True) + tp.load(Bi[j + n_h], mask=live) + tp.load(Bh[j + n_h], mask=live)
        s2 = tp.sum(a2, axis=1, keepdims=True) + tp.load(Bi[j + 2 * n_h], mask=live) \
            + tp.load(Bh[j + 2 * n_h], mask=live)
        s3 = tp.sum(a3, axis=1, keepdims=True) + tp.load(Bi[j + 3 * n_h], mask=live) \
            + tp.load(Bh[j + 3 * n_h], mask=live)
        c = tp.sigmoid(s1) * tp.load(Cp[c_row0 + b, j], mask=live) + tp.sigmoid(s0) * tp.tanh(s2)
        tp.store(Co[co_row0 + b, j], c, mask=live)
        tp.store(Ho[orow, O_COL0 + j], tp.sigmoid(s3) * tp.tanh(c), mask=live)
    if CELL == 1:
        s1 = tp.sum(a1, axis=1, keepdims=True) + tp.load(Bi[j + n_h], mask=live) + tp.load(Bh[j + n_h], mask=live)
        nx = tp.sum(a2, axis=1, keepdims=True) + tp.load(Bi[j + 2 * n_h], mask=live)
        nh = tp.sum(a3, axis=1, keepdims=True) + tp.load(Bh[j + 2 * n_h], mask=live)
        n = tp.tanh(nx + tp.sigmoid(s0) * nh)
        z = tp.sigmoid(s1)
        tp.store(Ho[orow, O_COL0 + j], (1.0 - z) * n + z * tp.load(Hp[hr, h_col0 + j], mask=live), mask=live)
    if CELL == 2:
        tp.store(Ho[orow, O_COL0 + j], tp.tanh(s0), mask=live)
    if CELL == 3:
        tp.store(Ho[orow, O_COL0 + j], tp.maximum(s0, 0.0), mask=live)


def policy(batch: int, hidden: int) -> dict:
    """(BB, BJ): 64 (batch row, hidden unit) pairs a block, BB batch rows of them (up to 8: the weight rows a
    block reads serve BB rows), BJ = 64 / BB hidden units."""
    bb = min(8, 1 << max(0, batch - 1).bit_length())
    return dict(BB=bb, BJ=64 // bb, BK=16)


def grid(batch: int, hidden: int, params: dict) -> tuple:
    return (tp.cdiv(hidden, params["BJ"]), tp.cdiv(batch, params["BB"]))


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
