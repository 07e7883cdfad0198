"""tilepy names no GPU backend: a backend registers itself, or is found through the `tilepy.backends` entry
points; device tensors without one give a clear LaunchError."""

import sys

import numpy as np
import pytest

import tilepy as tp

kmod = sys.modules["tilepy.kernel"]


@tp.kernel(threads=32)
def double(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], B: tp.constexpr = 32):
    i = tp.block_id(0) * B
    tp.store(Y[i:i + B], tp.load(X[i:i + B]) * 2.0)


class FakeCuda(np.ndarray):
    is_cuda = True


@pytest.fixture
def no_backend(monkeypatch):
    monkeypatch.setattr(kmod, "_GPU_BACKEND", None)
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group=None: [])


def test_device_tensors_go_to_the_registered_backend(no_backend):
    calls = []

    class Backend:
        @staticmethod
        def launch(kernel, grid, *args, target=None, **constexprs):
            calls.append((kernel, grid, args, target, constexprs))
            return "launched"

    tp.register_gpu_backend(Backend)
    x = np.zeros(64, np.float32).view(FakeCuda)
    assert double[(2,)](x, x, target="sm_90a", B=32) == "launched"
    (kernel, grid, args, target, constexprs), = calls
    assert kernel is double and grid == (2,) and target == "sm_90a" and constexprs == {"B": 32}


def test_host_arrays_never_need_a_backend(no_backend):
    x = np.arange(64, dtype=np.float32)
    y = np.zeros_like(x)
    double[(2,)](x, y)
    np.testing.assert_array_equal(y, 2 * x)


def test_no_backend_is_a_clear_error(no_backend):
    x = np.zeros(64, np.float32).view(FakeCuda)
    with pytest.raises(tp.LaunchError, match="no tilepy GPU backend"):
        double[(2,)](x, x)


def test_the_backend_announces_itself_through_an_entry_point(monkeypatch):
    class EntryPoint:
        def load(self):
            tp.register_gpu_backend("found")

    monkeypatch.setattr(kmod, "_GPU_BACKEND", None)
    monkeypatch.setattr("importlib.metadata.entry_points",
                        lambda group=None: [EntryPoint()] if group == "tilepy.backends" else [])
    assert kmod.gpu_backend() == "found"
