"""GPU tests launch through tilepy_hip; import it so it registers as tilepy's GPU backend even where the
packages are on PYTHONPATH rather than installed (no entry points then). A GPU test module starts with
`torch = cuda_torch()` (gpu_prologue.py): skipped, with the reason, where torch or a CUDA GPU is missing."""

import pytest

import tilepy_hip  # noqa: F401


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A module skipped by gpu_prologue.cuda_torch is reported at the module, not at the helper's line: the skip
    summary then names every skipped module (pytest-xdist also counts same-location collection skips once)."""
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and isinstance(rep.longrepr, tuple) and rep.longrepr[0].endswith("gpu_prologue.py"):
        rep.longrepr = (str(collector.path), 1, rep.longrepr[2])
