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


def test_launchers_are_made_once_per_grid_tuple_and_run_the_right_grid():
    """`kernel[grid]` keeps one launcher per grid tuple (the launch hot path allocates nothing); grid functions
    and unhashable grids get a fresh one; a retyped kernel has launchers of its own."""
    assert double[(2,)] is double[(2,)] and double[2] is double[2]
    assert double[(2,)] is not double[(1,)]
    f = lambda m: (2,)  # noqa: E731
    assert double[f] is not double[f] and double[[2]].grid == [2]
    x = np.arange(64, dtype=np.float32)
    for blocks in (1, 2):
        y = np.zeros(64, np.float32)
        double[(blocks,)](x, y)
        np.testing.assert_array_equal(y[: 32 * blocks], 2 * x[: 32 * blocks])
        assert not y[32 * blocks:].any()
    y = np.zeros(64, np.float32)
    double[f](x, y)
    np.testing.assert_array_equal(y, 2 * x)
    other = double.retyped(Y=tp.Tensor[tp.f64, "N"])
    assert other[(2,)] is not double[(2,)] and other[(2,)].kernel is other
