"""Building: NVRTC for sm_90a/sm_80 with SASS checks, an AMDGPU clang for gfx942 with MFMA checks, the disk
cache (corruption, concurrency, location), and C++ errors mapped back to the tilepy line."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import kernels as extra
import pytest
from kernels import stdlib_constexprs

import tilepy as tp
import tilepy_hip
from stdlib_kernels import KERNELS, gemm
from tilepy_hip import build
from tilepy_hip.cache import KernelCache

NV = build.nvidia_compiler()
AMD = build.find_amd_clang()
needs_nv = pytest.mark.skipif(NV is None, reason="no NVRTC or nvcc here (pip install nvidia-cuda-nvrtc)")
needs_amd = pytest.mark.skipif(
    AMD is None, reason="no AMDGPU-capable clang here (apt-get install clang-19 or pip install ziglang)"
)
needs_sass = pytest.mark.skipif(
    NV is None or build.find_cuobjdump() is None,
    reason="cuobjdump not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)",
)




def _no_local_memory(sass: str) -> bool:
    return not re.search(r"\b(LDL|STL)\b", sass)


@needs_nv
@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_stdlib_compiles_for_nvidia_without_spills(name, target):
    ck = tilepy_hip.compile(KERNELS[name], target=target, **stdlib_constexprs(name, target))
    r = ck.resources
    assert r["registers"] > 0 and r["spill_stores"] == 0 and r["spill_loads"] == 0 and r["stack_bytes"] == 0
    assert ck.binary[:4] == b"\x7fELF" and Path(ck.path).read_text() == ck.source


@needs_sass
def test_wgmma_gemm_sass_has_hgmma_and_no_local_memory():
    ck = tilepy_hip.compile(KERNELS["gemm"], target="sm_90a", **gemm.PRESETS["sm_90a"])
    sass = ck.sass()
    assert "HGMMA.64x64x16.F32.BF16" in sass
    assert _no_local_memory(sass)


@needs_sass
def test_sass_of_the_other_kernels():
    sass = tilepy_hip.compile(KERNELS["gemm"], target="sm_80", **gemm.PRESETS["sm_80"]).sass()
    assert "HMMA.16816.F32.BF16" in sass and "LDSM" in sass and "LDGSTS" in sass and _no_local_memory(sass)
    for name in ("vector_add", "softmax", "rmsnorm"):
        sass = tilepy_hip.compile(KERNELS[name], target="sm_90a").sass()
        assert "LDG.E.128" in sass and _no_local_memory(sass), name  # 16-byte vector loads


@needs_amd
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_stdlib_compiles_for_gfx942(name):
    ck = tilepy_hip.compile(KERNELS[name], target="gfx942", **stdlib_constexprs(name, "gfx942"))
    asm = ck.sass()
    assert ck.resources.get("scratch_bytes", 0) == 0 and ck.resources["spill_stores"] == 0
    if name == "gemm":
        assert "v_mfma_f32_32x32x8_bf16" in asm or "v_mfma_f32_32x32x8bf16_1k" in asm


@needs_amd
def test_mfma_16x16x16_variant():
    ck = tilepy_hip.compile(
        KERNELS["gemm"], target="gfx942", **{**gemm.PRESETS["gfx942"], "INSTR": tp.amd.mfma_f32_16x16x16_bf16}
    )
    assert re.search(r"v_mfma_f32_16x16x16_?bf16", ck.sass())


@needs_nv
def test_extra_kernels_compile():
    for name in ("bulk_ws", "producer_consumer", "big_smem", "col_stats", "row_math"):
        ck = tilepy_hip.compile(getattr(extra, name), target="sm_90a")
        assert ck.resources["spill_stores"] == 0, name
    assert tilepy_hip.compile(extra.big_smem, target="sm_90a").smem_bytes == 65536


# ------------------------------------------------------------------ cache
@needs_nv
def test_cache_hit_corruption_and_location(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    ck = tilepy_hip.compile(KERNELS["vector_add"], target="sm_90a")
    src, binary, meta = KernelCache(root).paths(ck.key)
    assert src.exists() and binary.exists() and json.loads(meta.read_text())["resources"]["registers"] > 0
    assert str(root) in ck.path  # TILEPY_HIP_CACHE chose the directory

    monkeypatch.setattr(build, "_MEMO", {})
    monkeypatch.setattr(type(NV), "compile", lambda *a, **k: pytest.fail("a cache hit must not compile"))
    again = tilepy_hip.compile(KERNELS["vector_add"], target="sm_90a")
    assert again.binary == ck.binary and again.resources == ck.resources
    monkeypatch.undo()

    monkeypatch.setenv("TILEPY_HIP_CACHE", str(root))
    monkeypatch.setattr(build, "_MEMO", {})
    binary.write_bytes(binary.read_bytes()[:100])  # a truncated entry
    calls = []
    real = type(NV).compile
    monkeypatch.setattr(type(NV), "compile", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    rebuilt = tilepy_hip.compile(KERNELS["vector_add"], target="sm_90a")
    # NVRTC is not byte-for-byte reproducible (an id in the ELF may differ), so compare what matters: it
    # recompiled, the entry on disk is the new complete binary, and it is the same size as the first build.
    assert calls and binary.read_bytes() == rebuilt.binary and len(rebuilt.binary) == len(ck.binary)


@needs_nv
def test_two_processes_compiling_at_once_do_not_clobber(tmp_path):
    root = tmp_path / "shared-cache"
    code = (
        "import tilepy_hip, stdlib_kernels as S; from stdlib_kernels.gemm import PRESETS; "
        "ck = tilepy_hip.compile(S.gemm.gemm, target='sm_90a', **PRESETS['sm_90a']); print(ck.key)"
    )
    env = {**os.environ, "TILEPY_HIP_CACHE": str(root)}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    keys = {p.communicate(timeout=600)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs) and len(keys) == 1
    key = keys.pop()
    assert KernelCache(root).load(key) is not None
    assert not list(root.rglob("*.tmp"))


# ------------------------------------------------------------------ errors
@needs_nv
def test_cxx_errors_name_the_source_file_and_the_tilepy_line(monkeypatch):
    real = build.render_kernel

    def broken(kir, target=None):
        src, smem, maps = real(kir, target)
        marker = "// tilepy: "
        i = src.index(marker, src.index(marker) + 1)  # the second statement
        j = src.index("\n", i)
        return src[: j + 1] + "  this_is_not_cxx;\n" + src[j + 1 :], smem, maps

    monkeypatch.setattr(build, "render_kernel", broken)
    with pytest.raises(build.BuildError) as err:
        tilepy_hip.compile(KERNELS["vector_add"], target="sm_90a")
    text = str(err.value)
    assert ".cu:" in text and "this_is_not_cxx" in text
    assert "vector_add.py:" in text and "x = tp.load(X" in text  # the second statement with code
    assert isinstance(err.value, tp.CompileError)


def test_missing_toolchain_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("TILEPY_HIP_CACHE", str(tmp_path))
    monkeypatch.setattr(build, "find_amd_clang", lambda: None)
    with pytest.raises(build.ToolchainMissing, match="AMDGPU-capable clang") as err:
        tilepy_hip.compile(KERNELS["vector_add"], target="gfx942", BLOCK=256)
    assert "tilepy-hip[amd]" in str(err.value)  # the extra that installs the toolchain
    monkeypatch.setattr(build, "nvidia_compiler", lambda: None)
    with pytest.raises(build.ToolchainMissing, match="no NVIDIA compiler") as err:
        tilepy_hip.compile(KERNELS["vector_add"], target="sm_90a", BLOCK=256)
    assert "tilepy-hip[nvidia]" in str(err.value)
