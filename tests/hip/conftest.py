import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Each test builds into its own cache directory (and never reuses another test's in-process memo)."""
    from tilepy_hip import build

    monkeypatch.setenv("TILEPY_HIP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(build, "_MEMO", {})
