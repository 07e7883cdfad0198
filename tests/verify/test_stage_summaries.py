"""Issue 17 item 4: facts about a ring of STAGES shared stages (written at k % STAGES, read under phase
k // STAGES) should be proved once for a symbolic stage and round, so the number of solver queries does not
grow with STAGES. It still does: mbarrier arrays are unrolled into one loop-body copy per stage
(tilepy_verify/mbarrier_arrays.py; docs/verification.md, "Not summarized yet"). The query count is a
deterministic, load-independent measure; this test states the goal and fails loudly (strict xfail) once a
summary makes it hold."""

import pytest

import tilepy_verify as tv
from stdlib_kernels import gemm_hopper


def _queries(stages):
    params = {**gemm_hopper.PRESETS["sm_90a"], **gemm_hopper.SMALL_TILE, "STAGES": stages}
    report = tv.verify(gemm_hopper.gemm_hopper, target="sm_90a", **params)
    assert report.ok, str(report)
    return report.stats["queries"]


@pytest.mark.xfail(strict=True, reason="mbarrier-array rings are unrolled per stage: queries grow with STAGES")
def test_queries_do_not_grow_with_stages():
    q3, q6 = _queries(3), _queries(6)
    assert q6 <= q3 + 4, (q3, q6)
