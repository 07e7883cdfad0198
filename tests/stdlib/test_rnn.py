"""stdlib_kernels/rnn.py: the recurrent steps (portable FMA `rnn_step`, tensor-core `rnn_step_tc`) on the
interpreter against float64 numpy, over several steps of a bidirectional layer (both directions in one
launch, the output rows of one step read back as the next step's state, the cell state's ping-pong), with
batch and hidden sizes that are not multiples of the tiles; tilepy-verify clean for every cell and row rule."""

from __future__ import annotations

import numpy as np
import pytest

import tilepy_verify
from stdlib_kernels import rnn


def _run(kernel, cell, B, H, I, T, D, batch_first, tc):
    """T steps of a D-direction layer the way ops_rnn's host loop launches them; the max error of every output
    row against float64 numpy stepping the same layer."""
    rng = np.random.default_rng(10 * cell + D)
    G = rnn.GATES[cell]
    rb, rt = (T, 1) if batch_first else (1, B)
    x = rng.standard_normal((T * B, I), dtype=np.float32)                  # row of (b, t): b * rb + t * rt
    wi = rng.standard_normal((D * G * H, I), dtype=np.float32) * 0.3
    wh = rng.standard_normal((D * G * H, H), dtype=np.float32) * 0.3
    bi, bh = (rng.standard_normal(D * G * H, dtype=np.float32) for _ in range(2))
    h0, c0 = (rng.standard_normal((D * B, H), dtype=np.float32) for _ in range(2))
    gx = (x.astype(np.float64) @ wi.T.astype(np.float64)).astype(np.float32)   # the lowering's GEMM
    out = np.full((T * B, D * H), np.nan, np.float32)
    cb = np.full((2 * D * B, H), np.nan, np.float32)
    p = rnn.policy_tc(B, H, G) if tc else rnn.policy(B, H)
    grid = (rnn.grid_tc if tc else rnn.grid)(B, H, p, D)
    for s in range(T):
        kernel[grid](gx, h0 if s == 0 else out, c0 if s == 0 else cb, wh, bi, bh, out, cb, s, 0, NB=B, T=T,
                     CELL=cell, G=G, ND=D, X_RB=rb, X_RT=rt, O_RB=rb, O_RT=rt, **p)
    err = 0.0
    for d in range(D):
        h, c = h0[d * B:(d + 1) * B], c0[d * B:(d + 1) * B]
        w = slice(d * G * H, (d + 1) * G * H)
        for t in (range(T) if d == 0 else range(T - 1, -1, -1)):
            rows = [b * rb + t * rt for b in range(B)]
            h, c = rnn.reference(cell, x[rows], h, c, wi[w], wh[w], bi[w], bh[w])
            err = max(err, float(np.abs(out[rows, d * H:(d + 1) * H] - h).max() / max(1.0, np.abs(h).max())))
        if cell == rnn.LSTM:
            half = (T - 1) % 2
            err = max(err, float(np.abs(cb[(half * D + d) * B:(half * D + d + 1) * B] - c).max()
                                 / max(1.0, np.abs(c).max())))
    return err


@pytest.mark.parametrize("tc", [False, True], ids=["fma", "tensor_cores"])
@pytest.mark.parametrize("cell", [rnn.LSTM, rnn.GRU, rnn.RNN_TANH, rnn.RNN_RELU])
def test_steps_of_a_bidirectional_layer_match_float64(cell, tc):
    kernel = rnn.rnn_step_tc if tc else rnn.rnn_step
    err = _run(kernel, cell, B=5, H=19, I=7, T=3, D=2, batch_first=cell % 2 == 0, tc=tc)
    assert err < 2e-6, err        # fp32: no TF32-sized (1e-3) error


@pytest.mark.parametrize("tc", [False, True], ids=["fma", "tensor_cores"])
def test_several_k_tiles_and_batch_tiles(tc):
    """H over two k-tiles of 32 (the tensor-core step's prefetch), B over several blocks of 16 x WM rows."""
    kernel = rnn.rnn_step_tc if tc else rnn.rnn_step
    err = _run(kernel, rnn.LSTM, B=70, H=40, I=9, T=2, D=1, batch_first=False, tc=tc)
    assert err < 2e-6, err


def test_the_tensor_core_step_is_fp32_accurate_not_tf32():
    """Operands with full 24-bit significands: one TF32 product per term would be off by ~1e-3 (2^-11 of
    pre-activations of ~2); the split (lo hi + hi lo + hi hi) stays at the FMA step's fp32 rounding."""
    fma = _run(rnn.rnn_step, rnn.RNN_TANH, B=16, H=64, I=4, T=1, D=1, batch_first=False, tc=False)
    err = _run(rnn.rnn_step_tc, rnn.RNN_TANH, B=16, H=64, I=4, T=1, D=1, batch_first=False, tc=True)
    assert err < max(2 * fma, 2e-6), (err, fma)


@pytest.mark.parametrize("cell", [rnn.LSTM, rnn.GRU, rnn.RNN_TANH, rnn.RNN_RELU])
@pytest.mark.parametrize("rb", [1, 7])
def test_every_cell_verifies_clean(cell, rb):
    for kernel, tiles in ((rnn.rnn_step, dict(BB=4, BJ=16, BK=32)),
                          (rnn.rnn_step_tc, dict(WM=2, WN=1 if cell >= rnn.RNN_TANH else 4, BK=32))):
        report = tilepy_verify.verify(kernel, target="sm_90a", NB=3, T=5, CELL=cell, G=rnn.GATES[cell], ND=2, X_RB=rb,
                                      X_RT=8 - rb, O_RB=rb, O_RT=8 - rb, **tiles)
        assert report.ok, [str(f) for f in report.findings]


@pytest.mark.parametrize("batch,hidden", [(1, 7), (10, 256), (64, 512)])
def test_the_policy_fits_the_register_estimate(batch, hidden):
    """Without a GPU the build gate judges by tilepy's estimate (every register tile live at once): the
    templates at their policies and at their defaults must fit, or the agent's CPU runs find no feasible
    candidate."""
    from argus_agent import gates

    for kernel, params in ((rnn.rnn_step, rnn.policy(batch, hidden)), (rnn.rnn_step, {}),
                           (rnn.rnn_step_tc, rnn.policy_tc(batch, hidden)), (rnn.rnn_step_tc, {}),
                           (rnn.rnn_step_tc, {**rnn.policy_tc(batch, hidden, 1), "CELL": rnn.RNN_TANH, "G": 1})):
        res = gates.estimate(kernel, "sm_90a", params)
        assert not gates.fits(res, "sm_90a"), (kernel.__name__, params, res)
