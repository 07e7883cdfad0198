"""Rendering prod/argmax/any, scans, permute and reshape on every target; compiling them where a toolchain is
here. A permute moves no data; scans and reshapes go through shared memory."""

import pytest

import tilepy as tp
import tilepy_hip
from tilepy_hip import build
from tilepy_hip.render import RENDER_TARGETS

NV = build.nvidia_compiler()
AMD = build.find_amd_clang()


@tp.kernel(threads=64)
def reduce_scan(X: tp.Tensor[tp.bf16, 16, 32], P: tp.Tensor[tp.f32, 16], I: tp.Tensor[tp.i32, 32],
                C: tp.Tensor[tp.f32, 16, 32], R: tp.Tensor[tp.bf16, 8, 64]):
    x = tp.load(X[0:16, 0:32])
    tp.store(P[0:16], tp.prod(x.to(tp.f32), axis=1))
    tp.store(I[0:32], tp.argmin(x, axis=0) + tp.any(x > 1.0, axis=0).to(tp.i32))
    tp.store(C[0:16, 0:32], tp.cumprod(x, axis=1, reverse=True, exclusive=True).to(tp.f32))
    tp.store(R[0:8, 0:64], tp.reshape(x, (8, 64)))


@tp.kernel(threads=64)
def transpose(X: tp.Tensor[tp.f32, 16, 32], T: tp.Tensor[tp.f32, 32, 16]):
    tp.store(T[0:32, 0:16], tp.load(X[0:16, 0:32]).T)


@pytest.mark.parametrize("target", sorted(RENDER_TARGETS))
def test_renders(target):
    src = tilepy_hip.render(reduce_scan.ir(target), target)
    # the 32-long reverse exclusive cumprod: per-thread segments (16 lines x 4 segments of 8 over 64 threads),
    # then the segments' totals; no per-element prefix loops
    assert src.count("for (int tp_w = tp_tid; tp_w < 64; tp_w += 64)") == 2
    assert src.count("tp_lo = tp_sg * 8") == 2 and "for (int tp_j = tp_hi - 1; tp_j >= tp_lo; --tp_j)" in src
    t = tilepy_hip.render(transpose.ir(target), target)
    assert "tp_smem +" not in t and "__syncthreads" not in t  # a layout change: no data moves


@pytest.mark.skipif(NV is None, reason="no NVRTC or nvcc here (pip install nvidia-cuda-nvrtc)")
@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_compiles_for_nvidia(target, tmp_path):
    for k in (reduce_scan, transpose):
        assert build.compile_ir(k.ir(target), cache_dir=tmp_path).binary[:4] == b"\x7fELF"


@pytest.mark.skipif(AMD is None, reason="no AMDGPU-capable clang here (apt-get install clang-19 or pip install "
                    "ziglang)")
def test_compiles_for_gfx942(tmp_path):
    for k in (reduce_scan, transpose):
        assert build.compile_ir(k.ir("gfx942"), cache_dir=tmp_path).binary
