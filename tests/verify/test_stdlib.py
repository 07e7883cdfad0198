"""Every stdlib kernel verifies clean (no errors), fast; the GEMM's contraction-index assertion is proved."""

from __future__ import annotations

import time

import pytest

import tilepy_verify as tv
from stdlib_kernels import gemm, rmsnorm, softmax, vector_add


@pytest.mark.parametrize("target", list(gemm.PRESETS))
def test_gemm_presets_verify_clean(target):
    t0 = time.perf_counter()
    report = tv.verify(gemm.gemm, target=target, **gemm.PRESETS[target])
    assert report.ok, str(report)
    assert time.perf_counter() - t0 < 30     # a hang guard: the 2 s bar is benchmarks/verify_speed.py's to measure
    assert report.stats["queries"] > 0


@pytest.mark.parametrize("target", list(gemm.PRESETS))
def test_gemm_tag_assertion_is_proved_not_skipped(target):
    """The assertion is checked (queries run) and proved; breaking it in the same kernel is caught."""
    kir = gemm.gemm.ir(target=target, **gemm.PRESETS[target])
    from tilepy_verify.domain import analyze

    analysis = analyze(kir)
    (assertion,) = analysis.assertions
    assert len(assertion.target.reg.pairs) == 1
    report = tv.verify_ir(kir, checks=["tag_assertion"])
    # its reachability, then one query for all its tag alternatives together (Solver_.none_of)
    assert report.ok and report.stats["queries"] >= 2


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_gemm_deeper_pipelines_verify_clean(stages):
    p = dict(gemm.PRESETS["sm_80"], STAGES=stages)
    assert tv.verify(gemm.gemm, target="sm_80", **p).ok


@pytest.mark.parametrize("kernel", [softmax.softmax, rmsnorm.rmsnorm, vector_add.vector_add])
def test_rowwise_kernels_verify_clean(kernel):
    report = tv.verify(kernel)
    assert report.ok and not report.findings, str(report)


def test_report_api_shapes():
    report = tv.verify(gemm.gemm, target="gfx942", **gemm.PRESETS["gfx942"])
    d = report.to_dict()
    assert d["ok"] is report.ok and d["kernel"] == "gemm" and isinstance(d["elapsed_s"], float)
    assert {id(f) for f in report.findings} == {id(f) for f in report.errors} | {id(f) for f in report.performance}
    for f in report.performance:
        assert f.severity == "performance" and f.check == "bank_conflict"
        assert "degree" in f.counterexample and "lanes" in f.counterexample
    import json

    json.loads(report.to_json())
    assert "gemm [gfx942]" in str(report)


def test_checks_subset_and_unknown_check():
    report = tv.verify(gemm.gemm, target="sm_80", checks=["race"], **gemm.PRESETS["sm_80"])
    assert report.checks == ("race",)
    with pytest.raises(ValueError):
        tv.verify(gemm.gemm, target="sm_80", checks=["nope"], **gemm.PRESETS["sm_80"])
