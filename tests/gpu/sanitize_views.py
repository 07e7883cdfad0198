"""compute-sanitizer target for issue 17's additions: run the transposes, halo windows and the corpus twins
once each (tests/gpu/device_run.sh-style: compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_views.py)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from tests.gpu import test_gpu_shared_views as T  # noqa: E402

T.test_transpose_views("fn")
T.test_halo_windows()
T.test_conditional_expressions(90)
for k in (T.S.transpose, T.S.gemm_nt, T.S.attn, T.S.stencil, T.S.block_reduce):
    T.test_corpus_twins(k)
print("sanitize_views: done")
