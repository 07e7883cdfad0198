"""L7's lowerings on a real GPU: EmbeddingBag of one bag size on stdlib_kernels/embedding_bag.py (vectorized row
gathers, aligned and unaligned rows), the gather loads' run-time vector path (consecutive, aligned offsets) and
its element fallback, and convolutions whose input expression (reflect / circular / replicate padding, an
activation) is computed in conv_tma's channels-last copy; against float64. Skips without a GPU."""

from __future__ import annotations

import importlib.util

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

import torch.nn as nn  # noqa: E402

from argus_agent.lower import lower_model, render_program  # noqa: E402
from stdlib_kernels.embedding_bag import embedding_bag, grid  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


def _lowered(model, inputs, tmp_path, name):
    prog = lower_model(model, inputs, "sm_90a")
    src = render_program(prog)
    p = tmp_path / f"{name}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(f"gpu_slow7_{name}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, src


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("V,D,B,S,BJ,BD", [(1000, 512, 300, 64, 8, 512), (500, 70, 33, 13, 16, 128),
                                          (300, 601, 17, 5, 8, 512), (64, 8, 9, 40, 32, 32)])
def test_embedding_bag_kernel_against_float64(mode, V, D, B, S, BJ, BD):
    """D = 70 / 601 / 8: rows not 16-byte aligned, so some or all row groups take the element loads."""
    g = torch.Generator(device="cpu").manual_seed(V + D)
    w = torch.randn(V, D, generator=g).to(DEV)
    ids = torch.randint(-V, V, (B, S), generator=g).to(DEV)       # negative ids wrap once
    y = torch.full((B, D), float("nan"), device=DEV)
    embedding_bag[grid(B, D, BD)](w, ids, y, MODE=mode, BJ=BJ, BD=BD)
    rows = w.double()[torch.where(ids < 0, ids + V, ids)]
    ref = rows.sum(1) if mode == 0 else rows.mean(1) if mode == 1 else rows.amax(1)
    torch.testing.assert_close(y.double(), ref, atol=1e-5, rtol=1e-5)


class Bag(nn.Module):
    def __init__(self, n, d, mode):
        super().__init__()
        self.bag = nn.EmbeddingBag(n, d, mode=mode)

    def forward(self, i):
        return self.bag(i)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_lowered_embedding_bag_against_eager(mode, tmp_path):
    torch.manual_seed(3)
    model = Bag(4096, 256, mode).to(DEV)
    idx = torch.randint(0, 2048, (512, 32), device=DEV)
    mod, src = _lowered(model, [idx], tmp_path, f"bag_{mode}")
    assert "launch(embedding_bag" in src
    with torch.no_grad():
        out = mod.argus_forward(model, idx)
        ref = model.double()(idx)
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)


class Gathers(nn.Module):
    """Row gathers (index_select of whole rows, aligned and not), a flat gather of reversed rows (consecutive
    offsets never: the element loads) and a strided one."""

    def forward(self, x, i):
        return x.index_select(0, i) * 2.0, x[:, :-1].index_select(0, i).flip(1), x[i][:, ::3]


@pytest.mark.parametrize("cols", [512, 77])
def test_gathers_take_the_vector_path_only_where_offsets_are_consecutive(cols, tmp_path):
    torch.manual_seed(4)
    x = torch.randn(300, cols, device=DEV)
    i = torch.randint(0, 300, (1000,), device=DEV)
    mod, src = _lowered(Gathers(), [x, i], tmp_path, f"gathers_{cols}")
    with torch.no_grad():
        outs = mod.argus_forward(Gathers(), x, i)
    for o, r in zip(outs, Gathers()(x.double(), i)):
        torch.testing.assert_close(o.double(), r, atol=1e-6, rtol=1e-6)


class PaddedConv(nn.Module):
    def __init__(self, conv, act=False):
        super().__init__()
        self.conv, self.act = conv, act

    def forward(self, x):
        return self.conv(torch.relu(x) * 0.5 if self.act else x)


PADDED = [
    ("reflect2d", lambda: nn.Conv2d(64, 64, 3, padding="same", padding_mode="reflect"), (2, 64, 37, 45), False),
    ("circular2d", lambda: nn.Conv2d(32, 48, 3, padding=1, padding_mode="circular"), (2, 32, 30, 33), False),
    ("replicate2d", lambda: nn.Conv2d(32, 16, (3, 5), padding=(1, 2), padding_mode="replicate"), (1, 32, 20, 41),
     False),
    ("reflect1d_dil", lambda: nn.Conv1d(32, 32, 3, padding=2, dilation=2, padding_mode="reflect"), (4, 32, 300),
     False),
    ("relu_pad1", lambda: nn.Conv2d(32, 32, 3, padding=1), (2, 32, 19, 23), True),
]


@pytest.mark.parametrize("tf32", [False, True])
@pytest.mark.parametrize("name,make,xs,act", PADDED, ids=[p[0] for p in PADDED])
def test_conv_input_computed_in_the_channels_last_copy(name, make, xs, act, tf32, tmp_path):
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = tf32
    try:
        torch.manual_seed(5)
        model = PaddedConv(make(), act).to(DEV)
        x = torch.randn(xs, device=DEV)
        mod, src = _lowered(model, [x], tmp_path, f"conv_{name}_{tf32}")
        assert "_ndhwc, (" in src and "launch(to_ndhwc," not in src
        with torch.no_grad():
            out = mod.argus_forward(model, x)
            out2 = mod.argus_forward(model, x)
            ref = model.double()(x.double())
    finally:
        torch.backends.cudnn.allow_tf32 = old
    tol = 1e-2 if tf32 else 1e-4
    torch.testing.assert_close(out.double(), ref, atol=tol, rtol=tol)
    assert torch.equal(out, out2)
