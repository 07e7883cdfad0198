"""stdlib_kernels/rnn.py: one recurrent step of each cell on the interpreter against float64 numpy, with
batch and hidden sizes that are not multiples of the tiles, and tilepy-verify clean for every cell and row
stride."""

from __future__ import annotations

import numpy as np
import pytest

import tilepy_verify
from stdlib_kernels import rnn


@pytest.mark.parametrize("cell", [rnn.LSTM, rnn.GRU, rnn.RNN_TANH, rnn.RNN_RELU])
def test_one_step_matches_float64(cell):
    rng = np.random.default_rng(cell)
    B, I, H, G = 3, 37, 19, rnn.GATES[cell]
    x = rng.standard_normal((B, I), dtype=np.float32)
    h, c = (rng.standard_normal((B, H), dtype=np.float32) for _ in range(2))
    wi = rng.standard_normal((G * H, I), dtype=np.float32) * 0.3
    wh = rng.standard_normal((G * H, H), dtype=np.float32) * 0.3
    bi, bh = (rng.standard_normal(G * H, dtype=np.float32) for _ in range(2))
    ho, co = np.zeros((B, H), np.float32), np.zeros((B, H), np.float32)
    p = rnn.policy(B, H)
    rnn.rnn_step[rnn.grid(B, H, p)](x, h, c, wi, wh, bi, bh, ho, co, 0, 0, 1, 0, 0, 0, 0, NB=B, CELL=cell, **p)
    rh, rc = rnn.reference(cell, x, h, c, wi, wh, bi, bh)
    np.testing.assert_allclose(ho, rh, rtol=1e-5, atol=2e-6)
    if cell == rnn.LSTM:
        np.testing.assert_allclose(co, rc, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("cell", [rnn.LSTM, rnn.GRU, rnn.RNN_TANH, rnn.RNN_RELU])
@pytest.mark.parametrize("o_rb", [1, 7])
def test_every_cell_verifies_clean(cell, o_rb):
    report = tilepy_verify.verify(rnn.rnn_step, target="sm_90a", NB=3, CELL=cell, X_RB=o_rb, O_RB=o_rb, O_COL0=5,
                                  BB=4, BJ=16, BK=32)
    assert report.ok, [str(f) for f in report.findings]


@pytest.mark.parametrize("batch,hidden", [(1, 7), (10, 256), (64, 512)])
def test_the_policy_fits_the_register_estimate(batch, hidden):
    """Without a GPU the build gate judges by tilepy's estimate (every register tile live at once): the
    template at its policy and at its defaults must fit, or the agent's CPU runs find no feasible candidate."""
    from argus_agent import gates

    for params in (rnn.policy(batch, hidden), {}):
        res = gates.estimate(rnn.rnn_step, "sm_90a", params)
        assert not gates.fits(res, "sm_90a"), (params, res)
