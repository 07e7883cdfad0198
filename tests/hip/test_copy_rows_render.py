"""Shared -> global copies into rows off 16 bytes (tilepy_hip/render/copies.py `_store_rows_realigned`): the
render keeps the aligned 16-byte path and adds, in its place of the element-by-element store, each row's body in
16-byte stores of two shared chunks shifted by the row's misalignment (tp_shift_pack: no registers indexed at run
time, so no local memory) and its head and tail by element. Built for sm_90a (SASS) and gfx942 (no scratch); the
values are checked on the GPU (tests/gpu/test_gpu_copy_rows.py)."""

import re

import kernels as extra
import pytest

import tilepy_hip
from tilepy_hip import build

NV, AMD = build.nvidia_compiler(), build.find_amd_clang()
CASES = [(extra.rows_out_bf16, {}), (extra.rows_out_bf16, dict(SWIZZLED=0, C0=3)), (extra.rows_out_f32, {}),
         (extra.rows_out_e4m3, {})]
IDS = ["bf16_swizzled", "bf16_from_column_3", "f32", "e4m3"]


@pytest.mark.skipif(NV is None or build.find_cuobjdump() is None, reason="no NVRTC / nvcc with cuobjdump here")
@pytest.mark.parametrize("kernel,kw", CASES, ids=IDS)
def test_rows_off_16_bytes_store_16_byte_vectors(kernel, kw):
    ck = tilepy_hip.compile(kernel, target="sm_90a", **kw)
    src = ck.source
    assert "tp_shift_pack" in src and "tp_aligned(Y, 16)" in src
    # the element-by-element loop over the whole tile is gone: every element store is under a segment's limit
    assert not re.search(r"if \(\(unsigned\).*\) Y\[", src)
    sass = ck.sass()
    # the realigned body's (and the aligned path's, unless the first column rules it out at compile time)
    assert sass.count("STG.E.128") >= (1 if kw.get("C0", 0) % 8 else 2)
    assert not re.search(r"\b(LDL|STL)\b", sass)


@pytest.mark.skipif(AMD is None, reason="no AMDGPU-capable clang (apt-get install clang-19 or pip install ziglang)")
@pytest.mark.parametrize("kernel,kw", CASES, ids=IDS)
def test_rows_off_16_bytes_build_for_gfx942(kernel, kw):
    ck = tilepy_hip.compile(kernel, target="gfx942", **kw)
    assert "tp_shift_pack" in ck.source
    assert ck.resources.get("scratch_bytes", 0) == 0 and ck.resources["spill_stores"] == 0
