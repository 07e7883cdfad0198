"""benchmarks/gemm_f32out_large.py's forms of the large class's f32-out GEMM (G40, issue 15): each one the script
times on the policy's kernel (all but the DEFER_K ones, which need benchmarks/profile/g40_defer_k.patch) is a valid
set of gemm_persistent constexprs at the shapes it serves, and the held-piece / four-buffer forms it timed write every
element once, right against float64 on the interpreter (ragged M, N and K, several tiles a block, rings
turning over)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import tilepy as tp
from stdlib_kernels import gemm_hopper
from tilepy.dtypes import round_bf16

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import gemm_f32out_large as bench  # noqa: E402

PATCHED = ("dk2", "dk3")        # gemm_persistent DEFER_K: not in the kernel (slower; benchmarks/NOTES.md, G40)


@pytest.mark.parametrize("shape", bench.SHAPES)
def test_the_forms_plan_the_persistent_f32_kernel(shape):
    M, N, K = shape
    base = gemm_hopper.policy(M, N, K, tp.f32, fixup=True)
    assert base == {**base, **gemm_hopper.LARGE_PERSISTENT_F32}     # the policy these forms are measured against
    for name, form in bench.FORMS.items():
        if name in PATCHED:
            continue
        kernel, kp = gemm_hopper.plan_kernel(M, N, tp.f32, {**base, **form}, K)
        assert kernel is gemm_hopper.kernel_for(tp.f32, persistent=True), name
        assert all(kp[k] == v for k, v in form.items() if k in kp), name


@pytest.mark.parametrize("name", ["held4", "s3_b4_held2", "s3_b4_held4", "s3_held2"])
def test_the_timed_forms_on_the_interpreter(name):
    m, k, n = 300, 330, 600       # 3 x 3 tiles of 128 x 256 on 2 blocks, 6 k-tiles a tile
    rng = np.random.default_rng(len(name))
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    c = np.full((m, n), np.nan, np.float32)
    p = {**gemm_hopper.PRESETS["sm_90a"], **gemm_hopper.LARGE_PERSISTENT_F32, **bench.FORMS[name], "NUM_SMS": 2,
         "GROUP_M": 2}
    gemm_hopper.launch(a, b, c, **p)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert not np.isnan(c).any(), "an output element was never written"
    assert float(np.linalg.norm(c - ref) / np.linalg.norm(ref)) < 1e-6
