"""H2: run a program with gemm_fp8_swap declared `unsigned_role_index=True` (G37's option) before the decorator says so,
as a pytest plugin or a script runner. Setting the flag before any render is what the decorator does
(Kernel.ir copies it into each specialization's KernelIR); the caches are cleared in case a render came first.

    PYTHONPATH=benchmarks/profile:$PYTHONPATH H2_MARK=DIR python3 -m pytest -p h2_on ...   (one file per process
                                                                                            in DIR: the flag took)
    python3 benchmarks/profile/h2_on.py tests/gpu/sanitize_gemm_fp8_swap.py g34
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def switch_on():
    from stdlib_kernels import gemm_fp8

    k = gemm_fp8.gemm_fp8_swap
    k.unsigned_role_index = True
    k._cache.clear()
    k._launchers.clear()
    mark = os.environ.get("H2_MARK")
    if mark:
        Path(mark).mkdir(parents=True, exist_ok=True)
        (Path(mark) / f"on-{os.getpid()}").write_text(str(k.ir("sm_90a", **gemm_fp8.kernel_of(
            gemm_fp8.policy(128, 4096, 4096))[1]).unsigned_role_index))
    return k


def pytest_configure(config):
    switch_on()


if __name__ == "__main__":
    switch_on()
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    runpy.run_path(script, run_name="__main__")
