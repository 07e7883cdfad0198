"""The implicit-GEMM convolution (stdlib_kernels/conv_igemm.py) on the CPU interpreter against torch in float64:
every form (1-3D, transposed, grouped, depthwise, strided, padded, dilated, output padding), 3xTF32 at fp32
accuracy and one TF32 pass at TF32 accuracy, ragged tiles and several k-tiles through fewer stages. Outputs are
poisoned with NaN first, so an element never written fails."""

import numpy as np
import pytest
import torch

from stdlib_kernels import conv_igemm
from tilepy.instructions import round_tf32

CASES = [
    # (x shape, w shape, stride, padding, dilation, groups, transposed, output_padding, constexprs)
    ((2, 5, 23), (7, 5, 4), 1, 2, 1, 1, False, 0, {}),                                    # 1-D
    ((2, 6, 9, 11), (8, 3, 3, 3), 2, 1, 1, 2, False, 0, dict(STAGES=2)),                 # 2-D grouped strided
    ((1, 4, 12, 10), (6, 4, 3, 2), (1, 2), (2, 0), (2, 3), 1, False, 0, {}),             # dilated, asymmetric
    ((1, 3, 5, 6, 7), (4, 3, 3, 2, 3), (1, 2, 1), 1, 1, 1, False, 0, {}),                 # 3-D
    ((2, 4, 7, 6), (4, 1, 3, 3), 1, 1, 1, 4, False, 0, {}),                               # depthwise
    ((1, 12, 6, 5), (10, 12, 3, 3), 1, 1, 1, 1, False, 0, dict(STAGES=2, BK=32)),        # K = 108: 4 k-tiles
    ((2, 5, 9), (5, 3, 4), 2, 1, 1, 1, True, 0, {}),                                      # transposed 1-D
    ((1, 4, 5, 6), (4, 3, 3, 3), 2, 1, 1, 1, True, 1, {}),                                # transposed, out pad
    ((1, 4, 6, 5), (4, 2, 3, 3), 1, 2, 2, 2, True, 0, {}),                                # transposed grouped dil.
    ((1, 2, 3, 4, 4), (2, 3, 2, 3, 3), (1, 2, 2), (0, 1, 1), 1, 1, True, 0, {}),          # transposed 3-D
    # strided transposed ones run PHASED (one direct GEMM per output phase): phases no tap reaches (K < S),
    # stride 3 with groups and unequal strides, a 3-D one with three strides, padding past the kernel
    ((2, 4, 5, 6), (4, 3, 1, 1), 2, 0, 1, 1, True, 1, {}),
    ((1, 6, 4, 5), (6, 4, 5, 4), (3, 2), (2, 1), 1, 2, True, (1, 0), {}),
    ((1, 3, 3, 4, 3), (3, 5, 3, 4, 2), (2, 2, 3), (1, 2, 0), 1, 1, True, 0, {}),
    ((2, 5, 9), (5, 3, 4), 2, 5, 1, 1, True, 0, {}),
    ((1, 16, 3, 5), (16, 8, 3, 3), 2, 1, 1, 1, True, 1, dict(STAGES=2)),          # CIG % BK == 0: one tap a k-tile
]


def _ids(c):
    return f"{len(c[0]) - 2}d{'T' if c[6] else ''}_g{c[5]}"


def _run(case, split):
    xs, ws, stride, padding, dilation, groups, transposed, opad, cx = case
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    ref = conv_igemm.reference(x, w, stride, padding, dilation, groups, transposed, opad)
    y = np.full(ref.shape, np.nan, np.float32)
    conv_igemm.launch(x, w, y, stride, padding, dilation, groups, transposed, split=split, **cx)
    assert not np.isnan(y).any(), "some output element was never written"
    return x, w, y, ref


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_conv_igemm_3xtf32_is_fp32_accurate(case):
    x, w, y, ref = _run(case, split=True)
    xs, ws, stride, padding, dilation, groups, transposed, opad, _ = case
    f32 = conv_igemm.reference(x, w, stride, padding, dilation, groups, transposed, opad).astype(np.float32)
    scale = np.abs(ref).max()
    assert np.abs(y - ref).max() <= 1e-5 * scale
    assert np.linalg.norm(y - ref) <= 4 * np.linalg.norm(f32 - ref) + 1e-7 * np.linalg.norm(ref)


@pytest.mark.parametrize("case", [CASES[1], CASES[7]], ids=_ids)
def test_conv_igemm_single_tf32_matches_tf32_inputs(case):
    """SPLIT=False is one TF32 product: exactly the convolution of the TF32-rounded inputs (up to f32 sums),
    and visibly not fp32-accurate."""
    x, w, y, ref = _run(case, split=False)
    xs, ws, stride, padding, dilation, groups, transposed, opad, _ = case
    want = conv_igemm.reference(round_tf32(x), round_tf32(w), stride, padding, dilation, groups, transposed, opad)
    scale = np.abs(ref).max()
    assert np.abs(y - want).max() <= 1e-5 * scale
    assert np.abs(y - ref).max() > 1e-5 * scale


@pytest.mark.parametrize("case", [CASES[1], CASES[3], CASES[8], CASES[5],
                                  ((2, 16, 9, 11), (32, 16, 3, 3), 1, 1, 1, 1, False, 0, dict(STAGES=2))],
                         ids=["2d_grouped", "3d", "transposed_dilated", "4_k_tiles", "cig16_scalar_taps"])
def test_conv_igemm_taps_major_matches(case):
    """TAPS=True (k = tap * CIG + ci, the weight reordered by weight_taps; with CIG % BK == 0 one scalar tap per
    k-tile) computes the same convolution at fp32 accuracy."""
    xs, ws, stride, padding, dilation, groups, transposed, opad, cx = case
    rng = np.random.default_rng(11)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    ref = conv_igemm.reference(x, w, stride, padding, dilation, groups, transposed, opad)
    y = np.full(ref.shape, np.nan, np.float32)
    conv_igemm.launch(x, w, y, stride, padding, dilation, groups, transposed, split=True, TAPS=True, **cx)
    assert not np.isnan(y).any()
    assert np.abs(y - ref).max() <= 1e-5 * np.abs(ref).max()


def test_conv_igemm_torch_tensors_and_weight_layouts():
    """torch CPU tensors run on the interpreter as well; the transposed weight reaches B as (G, Cout/G, K)."""
    w = torch.arange(2 * 3 * 2, dtype=torch.float32).reshape(2, 3, 2)     # (Cin, Cout/G, k), groups 1
    b = conv_igemm.weight_gck(w, 1, True)
    assert b.shape == (1, 3, 4) and torch.equal(b[0], w.permute(1, 0, 2).reshape(3, 4))
    x = torch.randn(1, 2, 5)
    ref = torch.nn.functional.conv_transpose1d(x.double(), w.double(), stride=2)
    y = torch.full(tuple(ref.shape), float("nan"))
    conv_igemm.launch(x, w, y, stride=2, transposed=True)
    assert torch.allclose(y.double(), ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("geometry", [dict(), dict(TRANSPOSED=True, ST=(1, 2, 2), SPLIT=False, BN=64,
                                                     INSTR=conv_igemm.tp.nv.wgmma_m64n64k8_tf32),
                                      dict(TRANSPOSED=True, PHASED=True, ST=(1, 2, 2), SPLIT=False, BN=64,
                                           INSTR=conv_igemm.tp.nv.wgmma_m64n64k8_tf32),
                                      dict(TRANSPOSED=True, PHASED=True, ST=(2, 2, 2), KS=(3, 3, 3), OS=(8, 8, 8),
                                           IS=(4, 4, 4), PA=(1, 1, 1), CI=32, CIG=16, **conv_igemm.policy(
                                               dict(IS=(4, 4, 4), KS=(3, 3, 3)), 32))],
                         ids=["direct", "transposed", "phased_2d", "phased_3d_grouped"])
def test_conv_igemm_verifies_clean(geometry):
    """tilepy-verify: no two blocks or tile elements write one output element, the wgmma operand layouts and
    the rest of the checks, for a direct and a transposed geometry. The pipeline check is left out: it does not
    yet see generic-proxy stores by a producer role as reaching the consumers through the mbarriers (it reports
    every such ring, e.g. a plain store/arrive/wait/load ring, as read-before-write); the interpreter runs the
    roles as coroutines and the tests above read every stage only after its producer wrote it."""
    import tilepy_verify

    checks = [c for c in tilepy_verify.CHECKS if c != "pipeline_hazard"]
    report = tilepy_verify.verify(conv_igemm.conv_igemm, target="sm_90a", checks=checks, **geometry)
    errors = [str(f) for f in report.findings if getattr(f, "severity", "error") == "error"]
    assert report.ok and not errors, errors


def _toolchain():
    try:
        from tilepy_hip import build
        return build.nvidia_compiler() is not None and build.find_cuobjdump() is not None
    except Exception:
        return False


@pytest.mark.skipif(not _toolchain(), reason="no NVRTC/cuobjdump here (pip install nvidia-cuda-nvrtc "
                                             "nvidia-cuda-cuobjdump): the SASS check needs them, not a GPU")
@pytest.mark.parametrize("geometry", [
    dict(OS=(1, 126, 126), CIG=32, NB=64, CI=32, IS=(1, 128, 128), SPLIT=False, BN=64,
         INSTR=conv_igemm.tp.nv.wgmma_m64n64k8_tf32),                                    # level2/007's conv
    dict(OS=(1, 256, 256), ST=(1, 2, 2), PA=(0, 1, 1), CIG=64, NB=16, CI=64, IS=(1, 128, 128), TRANSPOSED=True,
         SPLIT=True, BN=32, INSTR=conv_igemm.tp.nv.wgmma_m64n32k8_tf32),                 # level1/099's
    dict(OS=(1, 256, 256), ST=(1, 2, 2), PA=(0, 1, 1), CIG=64, NB=16, CI=64, IS=(1, 128, 128), TRANSPOSED=True,
         PHASED=True, SPLIT=False, BN=32, INSTR=conv_igemm.tp.nv.wgmma_m64n32k8_tf32, BM=64, CONSUMERS=1, BK=16,
         STAGES=4, SWIZZLE=conv_igemm.tp.Swizzle(2, 2, 3)),                              # in phases, policy tiles
], ids=["direct_tf32", "transposed_3xtf32", "phased_tf32"])
def test_conv_igemm_sass_has_hgmma_and_no_spills(geometry):
    """Built for sm_90a: the products are HGMMA and nothing spills to local memory (the gather's flat 32-bit
    offsets keep the producer in registers; a 5-D view's 64-bit strides spilled ~55 LDL)."""
    import re

    import tilepy_hip

    ck = tilepy_hip.compile(conv_igemm.conv_igemm, "sm_90a", **{**conv_igemm.PRESETS["sm_90a"], **geometry})
    sass = ck.sass()
    assert len(re.findall(r"\bHGMMA", sass)) >= 4
    assert not re.findall(r"\b(LDL|STL)\b", sass) and ck.resources["spill_stores"] == 0


@pytest.mark.skipif(not _toolchain(), reason="no NVRTC/cuobjdump here (pip install nvidia-cuda-nvrtc "
                                             "nvidia-cuda-cuobjdump): the SASS check needs them, not a GPU")
@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("xs,ws,stride,padding,transposed", [
    ((64, 32, 128, 128), (64, 32, 3, 3), 1, 0, False),           # level2/007's conv
    ((8, 32, 32, 64, 64), (64, 32, 3, 3, 3), 1, 1, False),      # a 3-D one
    ((16, 64, 128, 128), (64, 32, 3, 3), 2, 1, True),           # level1/099's transposed
], ids=["2d", "3d", "2dT"])
def test_conv_igemm_policy_fits_several_blocks_per_sm(xs, ws, stride, padding, transposed, split):
    """The policy's tiles (what `launch` and the lowering run) build spill-free with HGMMA, and for 2-D and 3-D
    convolutions in small enough a register and shared-memory footprint for at least two blocks per SM (the
    gather is latency-bound: one block of 384 threads per SM was 0.35x cuDNN on level2/007)."""
    import re

    import torch

    import tilepy_hip

    x, w = torch.empty(xs, device="meta"), torch.empty(ws, device="meta")
    fn = torch.nn.functional
    if transposed:
        y = fn.conv_transpose2d(x, w, stride=stride, padding=padding, output_padding=1)
    else:
        y = (fn.conv2d if len(xs) == 4 else fn.conv3d)(x, w, stride=stride, padding=padding)
    geo = conv_igemm.geometry(xs, ws, y.shape, stride, padding, 1, 1, transposed)
    params = {**conv_igemm.PRESETS["sm_90a"], **conv_igemm.policy(geo, int(y.shape[1]), split), **geo,
              "SPLIT": split}
    assert params["BM"] == 64 and params["CONSUMERS"] == 1
    ck = tilepy_hip.compile(conv_igemm.conv_igemm, "sm_90a", **params)
    sass = ck.sass()
    assert len(re.findall(r"\bHGMMA", sass)) >= 4
    assert not re.findall(r"\b(LDL|STL)\b", sass) and ck.resources["spill_stores"] == 0
    res = ck.resources
    regs_per_block = -(-res["registers"] // 8) * 8 * res["threads"]
    assert 2 * regs_per_block <= 65536, res
    assert 2 * (res["dynamic_smem"] + res["static_smem"]) <= 227 * 1024, res
