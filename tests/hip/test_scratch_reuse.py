"""Shared scratch reuse in tilepy_hip: small scratch (a kernel's total within SCRATCH_FRESH) stays as it was, bytes
of its own per op and no barrier added; past that, reductions across warps and layout conversions of successive
ops share one region (a barrier before each reuse), so a kernel of many (the bitonic sort's stages) needs only
its largest; scratch of one op that is still read (a segmented scan's totals) is not overlapped. The sort kernel
renders in one 64 KiB region at 8192 elements and builds with NVRTC where it is here."""

import re

import numpy as np
import pytest

import tilepy as tp
import tilepy_hip
from stdlib_kernels import sort as S
from tilepy_hip import build

NV = build.nvidia_compiler()


@tp.kernel(threads=256)
def two_reductions(X: tp.Tensor[tp.f32, 2, 256], Y: tp.Tensor[tp.f32, 2], Z: tp.Tensor[tp.f32, 2]):
    x = tp.load(X[0:2, 0:256], layout=tp.blocked((2, 256), 256, 1))
    tp.store(Y[0:2], tp.sum(x, axis=1))
    tp.store(Z[0:2], tp.max(x * 2.0, axis=1))


@tp.kernel(threads=1024)
def two_large_reductions(X: tp.Tensor[tp.f32, 16, 1024], Y: tp.Tensor[tp.f32, 16], Z: tp.Tensor[tp.f32, 16]):
    x = tp.load(X[0:16, 0:1024], layout=tp.blocked((16, 1024), 1024, 1))
    tp.store(Y[0:16], tp.sum(x, axis=1))
    tp.store(Z[0:16], tp.max(x * 2.0, axis=1))


def _smem(src: str) -> int:
    return int(re.search(r"dynamic shared memory: (\d+) bytes", src).group(1))


def _parts(src: str):
    parts = src.split("tp_warp;", 1)[1].split("// tilepy:")
    return parts[2], parts[3]


def test_small_scratch_stays_apart_without_extra_barriers():
    src = tilepy_hip.render(two_reductions.ir())
    first, second = _parts(src)
    offs = [set(re.findall(r"tp_smem \+ (\d+)", part)) for part in (first, second)]
    assert offs[0] and offs[1] and not offs[0] & offs[1]                   # bytes of its own each
    assert second.index("tp_smem") < second.index("__syncthreads()")       # no barrier before its writes
    assert _smem(src) == 2 * 256 * 2 * 4


def test_large_successive_reductions_share_scratch_with_a_barrier_between():
    src = tilepy_hip.render(two_large_reductions.ir())
    first, second = _parts(src)
    offs = [set(re.findall(r"tp_smem \+ (\d+)", part)) for part in (first, second)]
    assert offs[0] and offs[0] == offs[1]                                  # the same bytes
    assert second.index("__syncthreads()") < second.index("tp_smem")      # a barrier before the second writes
    assert _smem(src) == 1024 * 16 * 4        # one reduction's scratch (1024 threads x 16 partials), not two
    x = np.random.default_rng(0).standard_normal((16, 1024)).astype(np.float32)
    y, z = np.zeros(16, np.float32), np.zeros(16, np.float32)
    two_large_reductions[(1,)](x, y, z)
    assert np.allclose(y, x.sum(1), rtol=1e-5, atol=1e-4) and np.array_equal(z, (2 * x).max(1))


def test_segmented_scan_keeps_its_buffer_apart_from_its_totals():
    @tp.kernel(threads=128)
    def scan(X: tp.Tensor[tp.f32, 4, 512], Y: tp.Tensor[tp.f32, 4, 512], S2: tp.Tensor[tp.f32, 4]):
        x = tp.load(X[0:4, 0:512])
        tp.store(S2[0:4], tp.sum(x, axis=1))
        tp.store(Y[0:4, 0:512], tp.cumsum(x, axis=1))

    src = tilepy_hip.render(scan.ir())
    offs = sorted({int(o) for o in re.findall(r"tp_smem \+ (\d+)", src)})
    assert len(offs) >= 2                                     # the scan's buffer and its totals differ
    assert _smem(src) >= 4 * 512 * 4


def test_sort_kernel_scratch_is_one_region():
    L, VB, threads, rb = S.shape_of(8192)
    src = tilepy_hip.render(S.sort_rows.ir(L=L, VB=VB, THREADS=threads, RB=rb))
    # a cross-warp reduction of 8 int64 keys a thread: 1024 * 8 * 8 bytes, reused by all 30 of them
    assert _smem(src) == 1024 * 8 * 8
    assert src.count("__syncthreads()") >= 2 * 15


@pytest.mark.skipif(NV is None, reason="no NVRTC or nvcc here (pip install nvidia-cuda-nvrtc)")
@pytest.mark.parametrize("n", [64, 8192])
def test_sort_kernel_builds(n):
    L, VB, threads, rb = S.shape_of(n)
    ck = tilepy_hip.compile(S.sort_rows, target="sm_90a", L=L, VB=VB, THREADS=threads, RB=rb)
    r = ck.resources
    assert r["registers"] > 0 and r["dynamic_smem"] <= 1024 * 8 * 8
    if n <= 4096:                                             # 8 keys a thread within 255 registers: no spills
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0


def test_large_segmented_scan_keeps_its_buffer_apart_from_its_totals_when_reusing():
    @tp.kernel(threads=1024)
    def big_scan(X: tp.Tensor[tp.f32, 16, 1024], Y: tp.Tensor[tp.f32, 16, 1024], S2: tp.Tensor[tp.f32, 16]):
        x = tp.load(X[0:16, 0:1024], layout=tp.blocked((16, 1024), 1024, 1))
        tp.store(S2[0:16], tp.sum(x, axis=1))
        tp.store(Y[0:16, 0:1024], tp.cumsum(x, axis=1))

    src = tilepy_hip.render(big_scan.ir())
    scan_part = src.split("tp_warp;", 1)[1].split("// tilepy:")[3]
    offs = sorted({int(o) for o in re.findall(r"tp_smem \+ (\d+)", scan_part)})
    buf_bytes = (16 * 1024 + 16 * 1024 // 32 + 1) * 4
    assert offs[0] == 0 and len(offs) == 2 and offs[1] >= buf_bytes      # the totals after the live buffer
    assert scan_part.index("__syncthreads()") < scan_part.index("tp_smem")   # it reuses the reduction's bytes
