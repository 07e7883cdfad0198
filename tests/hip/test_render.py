"""Rendering: every stdlib kernel on every target, the op tables cover the whole catalogue, and what a target
cannot do is a CompileError naming the op's line and the target."""

import kernels as extra
import pytest
from kernels import stdlib_constexprs

import tilepy as tp
import tilepy_hip
from stdlib_kernels import KERNELS, gemm
from tilepy.ops import OPS
from tilepy.targets import TARGETS
from tilepy_hip.render import RENDER_TARGETS, coverage

TARGET_NAMES = sorted(RENDER_TARGETS)




@pytest.mark.parametrize("target", TARGET_NAMES)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_every_stdlib_kernel_renders_on_every_target(name, target):
    kir = KERNELS[name].ir(target, **stdlib_constexprs(name, target))
    src = tilepy_hip.render(kir, target)
    assert 'extern "C" __global__' in src and f" {kir.name}(" in src
    assert "// tilepy: " in src and '#include "tilepy_hip.h"' in src
    # register tiles are per-thread arrays indexed by constants only
    for line in src.splitlines():
        if "[tp_" in line and "tp_smem" not in line:
            assert "tp_smem" in line or "((" in line or "tp_" in line


@pytest.mark.parametrize("target", TARGET_NAMES)
def test_the_table_covers_every_op_or_the_front_end_rejects_it(target):
    cov = coverage(RENDER_TARGETS[target])
    assert set(cov) == set(OPS)
    missing = {op for op, how in cov.items() if how is None}
    for op in missing:
        feature = OPS[op].feature
        assert feature and not TARGETS[target].has(feature), f"{op} has no rendering on {target}"


def test_target_tables_differ_as_data():
    sm90, sm80, amd = (RENDER_TARGETS[t] for t in ("sm_90a", "sm_80", "gfx942"))
    assert (sm90.warp_size, amd.warp_size) == (32, 64)
    assert "wgmma" in sm90.mma and "wgmma" not in sm80.mma and set(amd.mma) == {"mfma"}
    assert isinstance(sm80.ops["wait_async"], str) and "cp.async.wait_group" in sm80.ops["wait_async"]
    assert amd.ops["commit_async"] == "" and amd.ops["copy_bulk"] is None


def test_wave64_reductions_shuffle_across_64_lanes():
    src = tilepy_hip.render(KERNELS["softmax"].ir("gfx942"), "gfx942")
    assert "__shfl_xor(tp_r" in src and ", 32, 64)" in src
    src = tilepy_hip.render(KERNELS["softmax"].ir("sm_90a"), "sm_90a")
    assert ", 16, 32)" in src and ", 32, 32)" not in src


def test_mma_instructions_per_target():
    srcs = {t: tilepy_hip.render(KERNELS["gemm"].ir(t, **gemm.PRESETS[t]), t) for t in TARGET_NAMES}
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" in srcs["sm_90a"]
    assert "tp_gmma_desc(" in srcs["sm_90a"] and "tp_cp_async<16>" in srcs["sm_90a"]
    assert "tp_mma_m16n8k16_bf16(" in srcs["sm_80"] and "tp_ldmatrix_x4_trans(" in srcs["sm_80"]
    assert "__builtin_amdgcn_mfma_f32_32x32x8bf16_1k" in srcs["gfx942"] and "cp_async" not in srcs["gfx942"]


def test_unrepresentable_wgmma_operand_names_the_line_and_target():
    params = {**gemm.PRESETS["sm_90a"], "BK": 128}  # A rows of 256 bytes: no 128-byte swizzle atom fits
    kir = gemm.gemm.ir("sm_90a", **params)
    with pytest.raises(tp.CompileError) as err:
        tilepy_hip.render(kir, "sm_90a")
    text = str(err.value)
    assert "sm_90a" in text and "gemm.py:" in text and "acc = tp.mma(" in text
    assert "hint:" in text


def test_role_branches_render_over_the_role_threads():
    src = tilepy_hip.render(extra.producer_consumer.ir("sm_90a"), "sm_90a")
    assert "tp_tid - 128" in src and "tp_mbar_init(full_p, 128)" in src and "tp_mbar_wait(" in src
    src = tilepy_hip.render(extra.bulk_ws.ir("sm_90a"), "sm_90a")
    assert "tp_bulk_g2s(" in src and "tp_mbar_expect_tx(" in src


@pytest.mark.parametrize("target", TARGET_NAMES)
@pytest.mark.parametrize("name", ["big_smem", "col_stats", "row_math"])
def test_extra_kernels_render(name, target):
    src = tilepy_hip.render(getattr(extra, name).ir(target), target)
    assert "__syncthreads();" in src
