"""stdlib_kernels/conv_igemm.py verifies clean (issue 17 item 1): its producer warpgroup gathers the im2col A
tile with plain stores and signals `full[s]`, which the verifier orders through happens-before (store ->
arrive -> wait -> read) instead of reporting a read of unwritten shared memory, for the geometries a lowering
hands it (direct and transposed, strided, padded, dilated, grouped, 1-D to 3-D; 3xTF32 and one TF32 pass;
2 or 3 stages). The interpreter's trace oracle agrees on a small convolution (no race, no hazard) and its
output matches torch's float64 convolution."""

import numpy as np
import pytest

import tilepy_verify as tv
from stdlib_kernels import conv_igemm as ci
from stdlib_kernels import gemm_fp32

from . import oracle

# (x shape, w shape, stride, padding, dilation, groups, transposed)
GEOMETRIES = [
    ((1, 4, 8, 8), (8, 4, 3, 3), 1, 1, 1, 1, False),
    ((2, 6, 9, 11), (8, 3, 3, 3), 2, 1, 1, 2, False),
    ((2, 3, 16, 16), (16, 3, 3, 3), 1, 0, 2, 1, False),
    ((1, 8, 20), (64, 8, 5), 1, 2, 1, 1, False),
    ((1, 2, 4, 6, 6), (4, 2, 3, 3, 3), 1, 1, 1, 1, False),
    ((1, 8, 5, 5), (8, 4, 3, 3), 2, 1, 1, 1, True),
]


def _params(xs, ws, stride, padding, dilation, groups, transposed, **over):
    y_shape = ci.reference(np.zeros(xs, np.float32), np.zeros(ws, np.float32), stride, padding, dilation, groups,
                           transposed).shape
    cog = ws[1] if transposed else ws[0] // groups
    p = {**ci.PRESETS["sm_90a"], **ci.tile_n(cog),
         **ci.geometry(xs, ws, y_shape, stride, padding, dilation, groups, transposed), **over}
    return p, y_shape, cog


@pytest.mark.parametrize("split", [True, False])
@pytest.mark.parametrize("geo", GEOMETRIES, ids=[f"g{i}" for i in range(len(GEOMETRIES))])
def test_conv_igemm_verifies_clean(geo, split):
    p, _, _ = _params(*geo, SPLIT=split)
    report = tv.verify(ci.conv_igemm, target="sm_90a", **p)
    assert report.ok and not report.errors, str(report)


@pytest.mark.parametrize("stages", [2, 4])
def test_conv_igemm_other_depths_verify_clean(stages):
    p, _, _ = _params(*GEOMETRIES[2], STAGES=stages)
    report = tv.verify(ci.conv_igemm, target="sm_90a", **p)
    assert report.ok, str(report)


def test_trace_oracle_agrees_on_a_small_convolution():
    geo = GEOMETRIES[0]
    p, y_shape, cog = _params(*geo, STAGES=2)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(geo[0]).astype(np.float32)
    w = rng.standard_normal(geo[1]).astype(np.float32)
    wh, wl = gemm_fp32.split(np.ascontiguousarray(ci.weight_gck(w, 1, False)), "nk")
    y = np.full(y_shape, np.nan, np.float32)
    kir = ci.conv_igemm.ir(target="sm_90a", **p)
    obs = oracle.run(kir, ci.grid(geo[0][0], p, cog, 1), [x.reshape(-1), wh, wl, y.reshape(1, 1, cog, -1)])
    assert obs.error is None and not obs.kinds(), (obs.race[:3], obs.pipeline_hazard[:3])
    ref = ci.reference(x, w, *geo[2:])
    assert np.abs(y - ref).max() <= 1e-5 * np.abs(ref).max()
    assert tv.verify(kir).ok


def test_lowered_conv_program_passes_the_verify_gate(tmp_path):
    """argus's verify gate on a lowered convolution program (conv_igemm with its fused epilogue, the weight
    split and gemm_fp32 kernels beside it): every kernel verifies, so `argus optimize` no longer rejects conv
    candidates on false alarms."""
    import importlib.util

    import torch
    import torch.nn as nn

    import tilepy as tp
    from argus_agent import gates
    from argus_agent.lower import lower_model, render_program

    model = nn.Sequential(nn.Conv2d(8, 32, 3, stride=2, padding=1, groups=2), nn.ReLU())
    x = torch.randn(2, 8, 22, 20)
    src = render_program(lower_model(model, (x,), "sm_90a"))
    p = tmp_path / "lowered_conv.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location("lowered_conv_gate", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    kernels = {k: v for k, v in vars(mod).items() if isinstance(v, tp.Kernel)}
    assert any(k.startswith("conv_igemm") for k in kernels), sorted(kernels)
    verdict = gates.verify_kernels(kernels, "sm_90a")
    assert verdict.ok, [f["message"][:300] for f in verdict.findings if f["severity"] == "error"]
