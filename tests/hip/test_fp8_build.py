"""e4m3 in the CUDA backend (NVRTC, no GPU): the scaled fp8 GEMM's policies build with QGMMA (e4m3 x e4m3 ->
f32) and bulk tensor copies through uint8 tensor maps, no local memory; e4m3 casts render through tp_e4m3;
the launch maps e4m3 onto torch.float8_e4m3fn and the tensor map onto CU_TENSOR_MAP_DATA_TYPE_UINT8; gfx942
builds e4m3 storage and casts (OCP e4m3fn in integer code)."""

import re

import pytest

import tilepy as tp
import tilepy_hip
from stdlib_kernels import gemm_fp8
from tilepy_hip import build
from tilepy_hip.launch import _TORCH_DTYPES
from tilepy_hip.render import render_kernel
from tilepy_hip.render.tma import TensorMapSpec
from tilepy_hip.tensor_map import tensor_map_args

needs_sass = pytest.mark.skipif(
    build.nvidia_compiler() is None or build.find_cuobjdump() is None, reason="no NVRTC/cuobjdump here"
)
needs_amd = pytest.mark.skipif(build.find_amd_clang() is None, reason="no AMDGPU-capable clang here")


def test_gemm_fp8_renders_tensor_maps_and_descriptors():
    p = gemm_fp8.policy(4096, 4096, 4096, forms=False)     # gemm_fp8's own large row (not the persistent form)
    src, _, maps = render_kernel(gemm_fp8.gemm_fp8.ir("sm_90a", **p))
    # 128-byte rows (128 e4m3) under the 128-byte swizzle: one box per operand and stage; the large policy's bf16
    # tile leaves through the TMA store (EPILOGUE=2: 64-column blocks of 128-byte rows)
    assert maps == [TensorMapSpec("A", "e4m3", 2, (128, 128), 3), TensorMapSpec("B", "e4m3", 2, (128, 256), 3),
                    TensorMapSpec("C", "bf16", 2, (64, 128), 3)]
    assert "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3" in src
    assert "tp_e4m3* A" in src and "tp_bf16* C" in src


def test_tensor_map_of_e4m3_is_uint8_and_torch_dtype_is_float8():
    args, why = tensor_map_args(TensorMapSpec("A", "e4m3", 2, (128, 128), 3), (4096, 4096), 1 << 20)
    assert why == "" and args["dtype"] == 0 and args["strides"] == [4096]      # 1-byte elements
    _, why = tensor_map_args(TensorMapSpec("A", "e4m3", 2, (128, 128), 3), (64, 40), 1 << 20)
    assert "16" in why                                                          # 40-byte rows: the fallback
    assert _TORCH_DTYPES["e4m3"] == "float8_e4m3fn"


@needs_sass
@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (128, 4096, 4096)])
def test_gemm_fp8_sass_has_qgmma_and_no_local_memory(shape):
    p = gemm_fp8.policy(*shape)
    kernel, kp = gemm_fp8.kernel_of(p)          # at 4096^3 the large class's persistent form (gemm_fp8_persistent_tma)
    ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
    sass = ck.sass()
    assert f"QGMMA.64x{p['INSTR'].n}x32.F32.E4M3.E4M3" in sass   # (swap-AB at 128 rows: the instruction's N is BM)
    assert "UTMALDG" in sass
    assert not re.search(r"\b(LDL|STL)\b", sass)
    r = ck.resources
    assert r["spill_stores"] == 0 and r["stack_bytes"] == 0


@needs_sass
def test_gemm_fp8_tma_store_and_register_budgets_build_without_spills():
    """EPILOGUE=2 with setmaxnreg 96 / 200: QGMMA, the bulk tensor store (UTMASTG), USETMAXREG, no local memory
    (a producer budget under 80 spills its grouped-order indices: 64 / 216 spills ~400 bytes)."""
    p = {**gemm_fp8.PRESETS["sm_90a"], "STAGES": 3, "EPILOGUE": 2, "PRODUCER_REGS": 96, "CONSUMER_REGS": 200}
    ck = tilepy_hip.compile(gemm_fp8.gemm_fp8, target="sm_90a", **p)
    sass = ck.sass()
    assert "QGMMA.64x256x32.F32.E4M3.E4M3" in sass and "UTMASTG" in sass and "USETMAXREG" in sass
    assert not re.search(r"\b(LDL|STL)\b", sass)
    assert ck.resources["spill_stores"] == 0


@needs_sass
def test_e4m3_casts_use_the_hardware_conversions():
    @tp.kernel(threads=64)
    def cast(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.e4m3, "N"], Z: tp.Tensor[tp.f32, "N"]):
        x = tp.load(X[0:256])
        tp.store(Y[0:256], x.to(tp.e4m3))
        tp.store(Z[0:256], tp.load(Y[0:256]).to(tp.f32))

    ck = tilepy_hip.compile(cast, target="sm_90a")
    assert "tp_e4m3(" in ck.source
    sass = ck.sass()
    assert "F2FP.SATFINITE.E4M3.F32.PACK_AB" in sass and "F2FP.F16.E4M3.UNPACK_B" in sass


@needs_amd
def test_gfx942_builds_e4m3_storage_and_casts():
    @tp.kernel(threads=64)
    def cast(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.e4m3, "N"]):
        tp.store(Y[0:256], tp.load(X[0:256]).to(tp.e4m3))

    ck = tilepy_hip.compile(cast, target="gfx942")
    assert ck.binary and ck.resources["scratch_bytes"] == 0


@tp.kernel(threads=128)
def _rowsum(X: tp.Tensor[tp.e4m3, "M", "N"], Y: tp.Tensor[tp.e4m3, "M"]):
    tp.store(Y[0:16], tp.sum(tp.load(X[0:16, 0:64]), axis=1))


def test_e4m3_reductions_accumulate_in_f32_as_the_interpreter_does():
    import numpy as np

    from tilepy import dtypes as dt

    x = dt.round_e4m3(np.random.default_rng(0).standard_normal((16, 64)).astype(np.float32) * 2)
    y = np.zeros(16, np.float32)
    _rowsum[(1,)](x, y)
    np.testing.assert_array_equal(y, dt.round_e4m3(x.astype(np.float64).sum(1).astype(np.float32)))
    src, _, _ = render_kernel(_rowsum.ir("sm_90a"))
    assert re.search(r"float tp_r\d+\[", src) and not re.search(r"tp_e4m3 tp_r\d+\[", src)
