"""The optimize loop on the GPU: the template candidate of a problem is built, verified, tested on inputs drawn
on the device by both the sandbox's parent and child, judged and timed (issue 12 item 5)."""

from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the sandbox's GPU path)")

PROBLEMS = Path(__file__).resolve().parents[1] / "problems"


# one problem per kind of embedded stdlib template (the candidate policy refused gemm_fp32's, attention's and
# gemm_hopper's embedded sources at one point: tests/agent/test_lowered_sources_policy.py checks them on the CPU)
@pytest.mark.parametrize("name", ["level1/001_relu", "level2/056_gemm_bias_relu_divide",
                                  "level2/007_conv2d_relu_bias_add", "level1/088_matmul_bf16",
                                  "level1/133_sdpa_cross_bf16"])
def test_the_template_candidate_is_correct_and_timed_on_the_gpu(name, tmp_path):
    from argus_agent.loop import Session

    s = Session(PROBLEMS / f"{name}.py", "sm_90a", work_dir=tmp_path, warmup=2, runs=5)
    assert s.gpu, s.gpu_why
    out = s.check(s.first_source())
    assert out.outcome == "correct", f"{out.outcome}: {out.message}"
    assert out.evaluation.speedup and out.evaluation.speedup > 0
    assert set(out.stage_seconds) >= {"build", "verify", "test", "time"}


def test_a_wrong_candidate_is_judged_wrong_on_the_gpu(tmp_path):
    from argus_agent.loop import Session

    s = Session(PROBLEMS / "level1/001_relu.py", "sm_90a", work_dir=tmp_path, warmup=2, runs=5)
    src = s.first_source()
    assert "tp.maximum(" in src, "the ReLU template is expected to hold its max with 0"
    out = s.check(src.replace("tp.maximum(", "tp.minimum(", 1))
    assert out.outcome == "test-failed" and "wrong result" in out.message, out.message
