"""The host program's per-call work: parameters bound through `runtime.flat` (one flat view per tensor, kept while
its storage is the same) and the templates' fixed-shape scratch tensors allocated once with the intermediates."""

from __future__ import annotations

import importlib.util
import re

import torch
import torch.nn as nn

from argus_agent import runtime

from .lowered import run_lowered


def test_flat_reuses_one_view_and_sees_in_place_updates():
    p = nn.Parameter(torch.randn(3, 4))
    v = runtime.flat(p)
    assert v.shape == (12,) and not v.requires_grad and torch.equal(v, p.detach().view(-1))
    assert runtime.flat(p) is v                      # cached: the same view object
    with torch.no_grad():
        p.mul_(2)                                    # an optimizer step: in place, the view sees it
    assert torch.equal(runtime.flat(p), p.detach().view(-1))


def test_flat_follows_new_data_and_copies_non_contiguous_tensors():
    p = nn.Parameter(torch.randn(3, 4))
    v = runtime.flat(p)
    p.data = torch.randn(3, 4)                       # new storage: a new view with the new values
    w = runtime.flat(p)
    assert w is not v and torch.equal(w, p.detach().view(-1))
    p.data = torch.randn(5, 2)                       # new shape
    assert torch.equal(runtime.flat(p), p.detach().reshape(-1))
    t = torch.randn(4, 3).t()                        # not contiguous: a copy on every call, never cached
    a = runtime.flat(t)
    t.mul_(3)
    assert torch.equal(runtime.flat(t), t.contiguous().view(-1)) and not torch.equal(a, t.contiguous().view(-1))


def test_flat_forgets_a_tensor_that_is_gone():
    p = torch.randn(6)
    runtime.flat(p)
    key = id(p)
    assert key in runtime._FLAT
    del p
    assert key not in runtime._FLAT


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 6 * 6, 5)

    def forward(self, x):
        return self.fc(torch.flatten(torch.relu(self.c2(torch.relu(self.c1(x)))), 1))


def test_scratch_tensors_are_allocated_once_and_calls_stay_correct(tmp_path, monkeypatch):
    # cuDNN's TF32 off: the convolutions take the fp32-accurate split (both halves of every scratch pair in use),
    # so a stale or shared scratch tensor shows at fp32 accuracy
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    torch.manual_seed(0)
    model = ConvNet().eval()
    x = torch.randn(2, 3, 6, 6)
    prog, src, out, ref = run_lowered(model, [x], tmp_path, "host_ws", target="sm_90a")
    assert torch.allclose(out.double(), ref, rtol=1e-5, atol=1e-5)
    body = src[src.index("def argus_forward"):]
    once, per_call = body[:body.index("= got")], body[body.index("= got"):]
    assert re.search(r"^            torch\.empty\(", once, re.M), "the intermediates, allocated once"
    # the weight's TF32 halves are made once per weight state (runtime.weight_split keeps them), not per call
    assert "weight_split(split_tf32, " in per_call and "launch(split_tf32" not in per_call
    assert not re.search(r"^    \w+ = torch\.empty\(\(", per_call, re.M), "a fixed-shape scratch tensor per call"
    assert "get_parameter" not in body and "('p', ('c1',), 'weight')" in body and "_parameters" not in body
    # a second and a third call with other inputs reuse the scratch tensors and still match float64
    path = tmp_path / "host_ws_again.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("host_ws_again", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for seed in (1, 2):
        x2 = torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            got = mod.argus_forward(model, x2)
            want = model.double()(x2.double())
        model.float()
        assert torch.allclose(got.double(), want, rtol=1e-5, atol=1e-5)
