"""fp32 attention (stdlib_kernels/attention_fp32.py) on the CPU interpreter against float64 numpy: ragged
sequence lengths (partial query and key tiles), causal and not, grouped-query attention, head dims 32/64/128,
the policy and its alternatives; its error is compared with float32 arithmetic's own (torch's CPU fp32 SDPA
on the same inputs); the log-sum-exp; clear refusals; the verifier's proof of the operand pairings and of the
consumers' hand-over of P through shared memory (a missing wait is a race it reports); the build's SASS
(HGMMA .TF32, no local memory) where NVRTC is installed. Outputs are poisoned with NaN first."""

import re

import numpy as np
import pytest
import torch

from stdlib_kernels import attention_fp32 as A


def _inputs(rng, bh, bhkv, sq, sk, d, scale=1.0):
    q = (rng.standard_normal((bh, sq, d)) * scale).astype(np.float32)
    k = (rng.standard_normal((bhkv, sk, d)) * scale).astype(np.float32)
    v = rng.standard_normal((bhkv, sk, d)).astype(np.float32)
    return q, k, v


def _run(q, k, v, causal, **constexprs):
    bh, sq, d = q.shape
    o = np.full((bh, sq, d), np.nan, np.float32)
    lse = np.full((bh, sq), np.nan, np.float32)
    A.launch(q, k, v, o, lse, causal=causal, **constexprs)
    assert not np.isnan(o).any() and not np.isnan(lse).any(), "some output element was never written"
    return o, lse


def _torch_fp32(q, k, v, causal):
    """torch's own fp32 SDPA on the CPU: what float32 arithmetic gives (the bar for fp32 accuracy)."""
    g = q.shape[0] // k.shape[0]
    tk, tv = (torch.from_numpy(x).repeat_interleave(g, 0) for x in (k, v))
    return torch.nn.functional.scaled_dot_product_attention(torch.from_numpy(q), tk, tv, is_causal=causal).numpy()


CASES = [
    # bh, bhkv, sq, sk, d, causal, constexprs
    (2, 1, 100, 150, 64, False, {}),                                  # GQA 2:1, ragged tiles, 128-row block
    (2, 1, 100, 150, 64, True, {}),
    (2, 2, 130, 130, 64, True, dict(CONSUMERS=1, STAGES=4)),          # one row past a 64-row block
    (2, 2, 97, 70, 64, True, dict(STAGES=3, PBUF=1)),                 # one P buffer: the extra hand-over
    (1, 1, 70, 203, 128, False, {}),                                  # keys not a multiple of 4 (V^T padding)
    (4, 1, 65, 40, 128, True, {}),                                    # GQA 4:1, fewer keys than queries
    (3, 3, 90, 33, 32, False, {}),                                    # one key past a tile
    (2, 1, 140, 140, 32, True, {}),
    (2, 1, 100, 150, 128, True, dict(PROMOTE=True)),                  # the head products in chains of their own
    (2, 1, 100, 150, 128, True, dict(LOLO=True, PV_LOLO=True)),       # the splits' fourth terms too
    (2, 2, 97, 70, 64, False, dict(LOLO=True)),
    (2, 1, 100, 150, 128, True, dict(PIECES=True)),                   # each 32-column piece of S in its own chain
    (2, 2, 97, 70, 64, False, dict(PIECES=True, LOLO=True)),
]


@pytest.mark.parametrize("bh,bhkv,sq,sk,d,causal,cfg", CASES)
def test_fp32_attention_on_the_interpreter(bh, bhkv, sq, sk, d, causal, cfg):
    rng = np.random.default_rng(sq * 7 + sk + d)
    q, k, v = _inputs(rng, bh, bhkv, sq, sk, d)
    o, lse = _run(q, k, v, causal, **cfg)
    ref_o, ref_lse = A.reference(q, k, v, causal)
    err = np.abs(o - ref_o).max()
    err_fp32 = np.abs(_torch_fp32(q, k, v, causal) - ref_o).max()
    # fp32 accuracy: within float32 arithmetic's own error (a TF32 product alone would be near 1e-3)
    assert err <= 4 * err_fp32 and err < 2e-6, (err, err_fp32)
    assert np.abs(lse - ref_lse).max() < 1e-5 * max(1.0, np.abs(ref_lse).max())


def test_large_scores_keep_the_softmax_stable():
    """Scores of several hundred: the running max and its rescale, the row's maximum in the last key tile."""
    rng = np.random.default_rng(4)
    q, k, v = _inputs(rng, 1, 1, 64, 150, 64, scale=4.0)
    k[0, 140] = q[0, 5] * 3
    o, lse = _run(q, k, v, False, CONSUMERS=1)
    ref_o, ref_lse = A.reference(q, k, v)
    assert ref_lse.max() > 100
    # scores of several hundred carry float32's absolute error of a few 1e-5 into exp: the bar is fp32's own
    err, err_fp32 = np.abs(o - ref_o).max(), np.abs(_torch_fp32(q, k, v, False) - ref_o).max()
    assert err <= 4 * err_fp32, (err, err_fp32)
    assert np.abs(lse - ref_lse).max() < 1e-5 * np.abs(ref_lse).max()


def test_split_products_keep_the_tails():
    """Values whose TF32 tails matter: one TF32 product per operand pair would be off by ~1e-3 here."""
    rng = np.random.default_rng(8)
    q, k, v = _inputs(rng, 1, 1, 64, 64, 32)
    v = (v + np.float32(1 + 2**-12)).astype(np.float32)      # a bit below TF32's last place, in every value
    o, _ = _run(q, k, v, False)
    ref_o, _ = A.reference(q, k, v)
    assert np.abs(o - ref_o).max() < 2e-6


def test_bad_arguments_are_named():
    q = np.zeros((3, 64, 64), np.float32)
    k = np.zeros((2, 64, 64), np.float32)
    with pytest.raises(ValueError, match="multiple of KV heads"):
        A.launch(q, k, k, q.copy(), np.zeros((3, 64), np.float32))
    q96 = np.zeros((2, 64, 96), np.float32)
    with pytest.raises(ValueError, match="head dim 96 is not supported.*32, 64 or 128"):
        A.launch(q96, q96, q96, q96.copy(), np.zeros((2, 64), np.float32))
    with pytest.raises(ValueError, match="head dim 96"):
        A.policy(96)
    q4 = np.zeros((2, 64, 64), np.float32)
    with pytest.raises(ValueError, match="scale"):
        A.launch(q4, q4, q4, q4.copy(), np.zeros((2, 64), np.float32), scale=-1.0)


@pytest.mark.parametrize("d", A.HEAD_DIMS)
def test_presets_fit_a_block(d):
    assert A.smem_bytes(**A.PRESETS[d]) <= 227 * 1024


@pytest.mark.parametrize("cfg", [dict(A.PRESETS[64], CAUSAL=False), dict(A.PRESETS[128], CAUSAL=True, GROUP=4),
                                 dict(A.PRESETS[32], CAUSAL=True, GROUP=2),
                                 dict(A.PRESETS[64], CAUSAL=True, STAGES=3, PBUF=1),
                                 dict(A.PRESETS[64], CAUSAL=True, PROMOTE=True),
                                 dict(A.PRESETS[128], CAUSAL=False, LOLO=True, PV_LOLO=True),
                                 dict(A.PRESETS[128], CAUSAL=True, PIECES=True)])
def test_verifier_proves_the_kernel(cfg):
    tilepy_verify = pytest.importorskip("tilepy_verify")
    rep = tilepy_verify.verify(A.attention_fp32, target="sm_90a", **cfg)
    assert not rep.errors, str(rep)
    assert {"tag_assertion", "deadlock", "pipeline_hazard", "race"} <= set(rep.checks)


@pytest.mark.parametrize("mutation,pbuf", [("mbarrier_wait(pbar, j)", 2), ("mbarrier_wait(fbar, j)", 1)])
def test_verifier_catches_a_missing_hand_over(mutation, pbuf, tmp_path):
    """Without the consumers' wait after the P stores (or, with one P buffer, before them), a thread's wgmma
    reads rows of P another thread may not have written yet (or overwrites rows still being read): a race."""
    import importlib.util
    import inspect

    tilepy_verify = pytest.importorskip("tilepy_verify")
    src = inspect.getsource(A)
    line = next(x for x in src.splitlines() if f"tp.{mutation}" in x)
    mutated = src.replace(line, re.sub(r"tp\.mbarrier_wait\(.*", "pass", line))
    path = tmp_path / "attention_fp32_mutant.py"
    path.write_text(mutated)
    spec = importlib.util.spec_from_file_location("attention_fp32_mutant", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rep = tilepy_verify.verify(mod.attention_fp32, target="sm_90a", **dict(A.PRESETS[64], PBUF=pbuf))
    assert any(f.check == "race" and ("p_hi" in f.message or "p_lo" in f.message) for f in rep.errors), str(rep)


def test_build_uses_tensor_cores_without_local_memory(tmp_path):
    tilepy_hip = pytest.importorskip("tilepy_hip")
    from tilepy_hip.build import ToolchainMissing

    try:
        ck = tilepy_hip.compile(A.attention_fp32, target="sm_90a", cache_dir=tmp_path, **A.policy(64, 1024, True))
        sass = ck.sass()
    except (ToolchainMissing, FileNotFoundError, OSError) as e:
        pytest.skip(f"no NVRTC / cuobjdump here: {e}")
    assert "HGMMA.64x32x8.F32.TF32" in sass and "HGMMA.64x64x8.F32.TF32" in sass
    assert ck.resources["spill_stores"] == 0 and ck.resources["spill_loads"] == 0
    assert "LDL" not in sass and "STL" not in sass
