"""Bulk tensor copies (TMA) on sm_90a: which copy_bulk calls become cp.async.bulk.tensor (swizzle modes, column
blocks, the per-row / per-element fallback), the kernel's tensor-map parameters, the host's tensor-map
arguments, and the warp-specialized GEMM's SASS (HGMMA, UTMALDG, no local memory)."""

import re

import kernels as extra
import pytest

import tilepy as tp
import tilepy_hip
from stdlib_kernels import gemm_hopper
from tilepy_hip import build
from tilepy_hip.render import render_kernel
from tilepy_hip.render.tma import TensorMapSpec
from tilepy_hip.tensor_map import tensor_map_args

needs_sass = pytest.mark.skipif(
    build.nvidia_compiler() is None or build.find_cuobjdump() is None, reason="no NVRTC/cuobjdump here"
)


@pytest.mark.parametrize(
    "bc,swizzle,mode",
    [(64, tp.Swizzle(3, 3, 3), 3), (32, tp.Swizzle(2, 3, 3), 2), (16, tp.Swizzle(1, 3, 3), 1),
     (8, tp.Swizzle(0, 3, 3), 0)],
)
def test_swizzle_modes_become_tensor_maps(bc, swizzle, mode):
    src, _, maps = render_kernel(extra.tma_tile.ir("sm_90a", BC=bc, SWIZZLE=swizzle))
    assert maps == [TensorMapSpec("X", "bf16", 2, (bc, 64), mode)]
    assert "const __grid_constant__ tp_tensor_map tp_tmap0" in src and "const unsigned tp_tma_ok" in src
    assert "tp_tma_load_2d(" in src and "if (tp_tma_ok & 1u && (((c0) & 7) == 0))" in src  # (c0: run-time)
    assert f"tp_mbar_expect_tx(bar_p, {bc * 64 * 2});" in src
    # the run-time fallback when the launch cannot encode the map: every thread copies (16-byte chunks when
    # aligned), fences the async proxy and meets the others at a barrier; no transaction bytes are expected
    fallback = src[src.index("else", src.index("if (tp_tma_ok & 1u")):]
    assert "tp_ldvec<tp_bf16, 8>(X + " in fallback and "fence.proxy.async.shared::cta" in fallback
    assert "__syncthreads();" in fallback and "tp_mbar_expect_tx" not in fallback


def test_rows_under_16_bytes_keep_the_fallback():
    src, _, maps = render_kernel(extra.tma_tile.ir("sm_90a", BC=4, SWIZZLE=tp.Swizzle(0, 3, 3)))
    assert maps == [] and "tp_tma_load" not in src and "tp_tmap" not in src
    src, _, maps = render_kernel(extra.bulk_ws.ir("sm_90a", BLOCK=2))  # 8-byte rows
    assert maps == [] and "tp_tma_load" not in src


def test_swizzle_wider_than_the_row_keeps_the_fallback():
    # 64-byte rows under the 128-byte swizzle: the copy engine's pattern would not be the tile's
    src, _, maps = render_kernel(extra.tma_tile.ir("sm_90a", BC=32, SWIZZLE=tp.Swizzle(3, 3, 3)))
    assert maps == [] and "tp_tma_load" not in src


def test_1d_bulk_copy_is_a_1d_tensor_copy():
    src, _, maps = render_kernel(extra.bulk_ws.ir("sm_90a", BLOCK=32))
    assert maps == [TensorMapSpec("X", "f32", 1, (32,), 0)] and "tp_tma_load_1d(" in src
    assert "tp_bulk_g2s(" in src  # per-row bulk copy as the aligned fallback


def test_gemm_hopper_copies_b_in_64_column_blocks():
    kir = gemm_hopper.gemm_hopper.ir("sm_90a", **{**gemm_hopper.PRESETS["sm_90a"], "BN": 256,
                                                  "INSTR": tp.nv.wgmma_m64n256k16_bf16})
    src, _, maps = render_kernel(kir)
    assert maps == [TensorMapSpec("A", "bf16", 2, (64, 128), 3), TensorMapSpec("B", "bf16", 2, (64, 64), 3)]
    # 4 column blocks, in one flat k loop whose stage is k % STAGES (mbarrier arrays: full_p + stage)
    assert len(re.findall(r"tp_tma_load_2d\([^;]*&tp_tmap1", src)) == 4
    assert "tp_mbar_init(full_p + tp_tid, 128);" in src and "if (tp_tid < 4)" in src
    assert "n0 + 192" in src
    # wgmma B descriptor: leading byte offset = one (64 x 64) block = 8192 bytes, stride 1024 (8 rows)
    assert "8192, 1024, 1)" in src
    # the consumer warpgroups count from the role's first thread
    assert "tp_tid - 128" in src


def test_gemm_hopper_fallback_is_cooperative():
    """When a map cannot be encoded, the producer warpgroup's 128 threads copy the tile (no single-thread element
    loop), fence the async proxy and sync on a named barrier of their own before arriving; the phase's TMA copies
    keep their expect_tx, the fallback adds no transaction bytes."""
    src, _, _ = render_kernel(gemm_hopper.gemm_hopper.ir("sm_90a", **gemm_hopper.PRESETS["sm_90a"]))
    body = src[src.index("if (tp_tma_ok & 2u"):]
    stage0 = body[: body.index("tp_mbar_arrive((full_p + (tp_mod<int>(k, 4))));")]
    tma, fallback = stage0[: stage0.index("else")], stage0[stage0.index("else"):]
    assert "if (tp_tid == 0)" in tma and "tp_mbar_expect_tx((full_p + (tp_mod<int>(k, 4))), 32768);" in tma
    assert "tp_mbar_expect_tx" not in fallback and "if (tp_tid == 0)" not in fallback
    assert "tp_ldvec<tp_bf16, 8>(B + " in fallback  # 16-byte chunks when aligned
    assert "tp_tid + (" in fallback and "* 128;" in fallback  # all 128 producer threads, coalesced
    sync = 'asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");\n'
    assert re.search(re.escape(sync) + r'\s*asm volatile\("bar.sync %0, %1;" :: "r"\((\d+)\), "r"\(128\)', fallback)
    assert "for (int tp_i" not in src  # no element loop run by one thread


def test_element_loop_only_where_the_role_is_unknown():
    src, _, _ = render_kernel(extra.bulk_ws.ir("sm_90a", BLOCK=2))  # warp 0 copies: a known role of 32
    assert "for (int tp_i" not in src and "__syncwarp();" in src


def test_tensor_map_arguments_and_run_time_refusals():
    spec = TensorMapSpec("A", "bf16", 2, (64, 128), 3)
    args, why = tensor_map_args(spec, (300, 200), 0x10000)
    assert why == "" and args["dims"] == [200, 300] and args["strides"] == [400] and args["box"] == [64, 128]
    assert args["dtype"] == 9 and args["swizzle"] == 3
    assert tensor_map_args(spec, (300, 200), 0x10002)[0] is None  # unaligned base: the fallback path
    args, why = tensor_map_args(spec, (300, 50), 0x10000)
    assert args is None and "multiple of 16" in why  # 100-byte rows
    spec3 = TensorMapSpec("X", "f32", 3, (4, 8, 1), 0)
    args, _ = tensor_map_args(spec3, (5, 6, 4), 0)
    assert args["dims"] == [4, 6, 5] and args["strides"] == [16, 96]


@needs_sass
@pytest.mark.parametrize("bn,stages,instr", [(128, 4, tp.nv.wgmma_m64n128k16_bf16),
                                             (256, 4, tp.nv.wgmma_m64n256k16_bf16)])
def test_gemm_hopper_sass(bn, stages, instr):
    ck = tilepy_hip.compile(gemm_hopper.gemm_hopper, target="sm_90a",
                            **{**gemm_hopper.PRESETS["sm_90a"], "BN": bn, "STAGES": stages, "INSTR": instr})
    sass = ck.sass()
    assert f"HGMMA.64x{bn}x16.F32.BF16" in sass and "UTMALDG.2D" in sass
    assert not re.search(r"\b(LDL|STL)\b", sass)
    r = ck.resources
    assert r["spill_stores"] == 0 and r["stack_bytes"] == 0 and ck.num_threads == 384
    assert len(ck.tensor_maps) == 2


def test_gemm_hopper_wait_group_1_and_setmaxnreg_render():
    p = {**gemm_hopper.PRESETS["sm_90a"], "IN_FLIGHT": 1, "PRODUCER_REGS": 56, "CONSUMER_REGS": 224}
    src, _, _ = render_kernel(gemm_hopper.gemm_hopper.ir("sm_90a", **p))
    assert 'wgmma.wait_group.sync.aligned %0;\\n" :: "n"(1)' in src
    assert 'wgmma.wait_group.sync.aligned %0;\\n" :: "n"(0)' in src
    loop = src[src.index("tp_mbar_arrive((empty_p + (0)));"):]
    assert "tp_wgmma_wait0();" not in loop[: loop.index('"n"(0)')]   # no wait_group 0 inside the k loop
    assert 'setmaxnreg.dec.sync.aligned.u32 %0;\\n" :: "n"(56)' in src
    assert 'setmaxnreg.inc.sync.aligned.u32 %0;\\n" :: "n"(224)' in src


def test_setmaxnreg_over_the_register_file_is_refused():
    p = {**gemm_hopper.PRESETS["sm_90a"], "IN_FLIGHT": 1, "PRODUCER_REGS": 56, "CONSUMER_REGS": 232}
    with pytest.raises(tp.CompileError, match="66560 registers, over the 64512 the block launches with"):
        render_kernel(gemm_hopper.gemm_hopper.ir("sm_90a", **p))


@pytest.mark.parametrize("regs,ok", [((96, 208), False), ((64, 216), True), ((40, 232), True), ((56, 224), True)])
def test_setmaxnreg_fits_the_pool_the_block_launches_with(regs, ok):
    """384 threads launch with 168 registers each (64512): an increase draws only on what the other roles gave
    back. 96 / 208 needs 65536 (under the SM's 65536, over the block's 64512): it hung on the H100."""
    p = {**gemm_hopper.PRESETS["sm_90a"], "PRODUCER_REGS": regs[0], "CONSUMER_REGS": regs[1]}
    if ok:
        render_kernel(gemm_hopper.gemm_hopper.ir("sm_90a", **p))
    else:
        with pytest.raises(tp.CompileError, match="65536 registers, over the 64512"):
            render_kernel(gemm_hopper.gemm_hopper.ir("sm_90a", **p))


@needs_sass
@pytest.mark.parametrize("extra,regs", [(dict(IN_FLIGHT=1), None),
                                        (dict(IN_FLIGHT=1, PRODUCER_REGS=64, CONSUMER_REGS=216), (64, 216)),
                                        (dict(IN_FLIGHT=1, SPLIT_K=4, **gemm_hopper.SMALL_TILE), None)])
def test_gemm_hopper_policies_sass(extra, regs):
    ck = tilepy_hip.compile(gemm_hopper.gemm_hopper, target="sm_90a", **{**gemm_hopper.PRESETS["sm_90a"], **extra})
    sass = ck.sass()
    assert "HGMMA.64x" in sass and "WARPGROUP.DEPBAR.LE gsb0, 0x1" in sass
    assert not re.search(r"\b(LDL|STL)\b", sass) and ck.resources["spill_stores"] == 0
    if regs:
        assert sass.count("USETMAXREG") >= 2
    if extra.get("SPLIT_K"):
        assert "RED.E.ADD.F32" in sass or "REDG.E.ADD.F32" in sass


def test_tma_only_copy_has_no_fallback_path():
    """copy_bulk(..., fallback=False): the copy is the tensor copy alone (no tp_tma_ok guard, no per-row or
    per-element code), and its map is marked required for the launch."""
    src, _, maps = render_kernel(extra.tma_tile.ir("sm_90a", FALLBACK=False))
    assert maps == [TensorMapSpec("X", "bf16", 2, (64, 64), 3, required=True)]
    assert "tp_tma_load_2d(" in src and "if (tp_tma_ok &" not in src
    assert "tp_ldvec<tp_bf16, 8>(X + " not in src and "fence.proxy.async" not in src   # (s is read in vectors)
    with_fallback, _, _ = render_kernel(extra.tma_tile.ir("sm_90a"))
    assert "if (tp_tma_ok & 1u" in with_fallback and "tp_ldvec<tp_bf16, 8>(X + " in with_fallback


def test_tma_only_store_has_no_fallback_path():
    """store_bulk(..., fallback=False) (gemm_persistent's overlapped epilogue): the bulk tensor store alone, no
    tp_tma_ok guard and no cooperative copy beside it, its map required; the loads keep theirs."""
    k = gemm_hopper.kernel_for(tp.bf16, persistent=True)
    src, _, maps = render_kernel(k.ir("sm_90a", **{**gemm_hopper.PRESETS["sm_90a"], "STAGES": 3, "EPILOGUE": 2}))
    stores = [m for m in maps if m.param == "C"]
    assert stores and all(m.required for m in stores)
    assert src.count("cp.async.bulk.tensor.2d.global.shared::cta") == 2 * 4  # 4 column blocks, in and after the loop
    guards = {int(i) for i in re.findall(r"if \(tp_tma_ok & (\d+)u[) ]", src)}
    assert all(1 << maps.index(m) not in guards for m in stores)


def test_tma_only_copy_that_cannot_be_a_tensor_copy_is_a_compile_error():
    with pytest.raises(tp.CompileError, match=r"fallback=False.*cannot be a bulk tensor copy") as e:
        render_kernel(extra.tma_tile.ir("sm_90a", BC=4, SWIZZLE=tp.Swizzle(0, 3, 3), FALLBACK=False))
    assert e.value.span.line > 0 and "fallback=True" in str(e.value)


def test_required_map_refuses_an_undescribable_tensor_at_launch():
    """A required map whose tensor cannot be encoded (a base off 16 bytes) is a clear error before any launch,
    naming the tensor and what to do; an optional one just leaves its bit clear."""
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    from tilepy_hip.tensor_map import TensorMapRefused, launch_values

    x = torch.zeros(64 * 64 + 1, dtype=torch.bfloat16)[1:].view(64, 64)   # 2 bytes past an aligned base
    param = SimpleNamespace(name="X")
    ck = SimpleNamespace(params=[param], tensor_maps=[TensorMapSpec("X", "bf16", 2, (64, 64), 3, required=True)])
    with pytest.raises(TensorMapRefused, match=r"tensor 'X'.*16-byte aligned.*fallback=True"):
        launch_values(ck, [x])
    ck.tensor_maps = [TensorMapSpec("X", "bf16", 2, (64, 64), 3)]
    values = launch_values(ck, [x])
    assert values[-1].value == 0   # the fallback path's bit stays clear


@needs_sass
@pytest.mark.parametrize("d,sq,causal", [(128, 4096, False), (64, 512, True)])
def test_attention_policies_have_no_local_memory(d, sq, causal):
    """With TMA-only copies (FALLBACK=False, what launch picks for contiguous aligned inputs) the producer's
    small setmaxnreg budget holds its code: no spills, no local memory anywhere in the kernel."""
    from stdlib_kernels import attention

    ck = tilepy_hip.compile(attention.attention_fwd, target="sm_90a", **attention.policy(d, sq, causal))
    sass = ck.sass()
    assert "HGMMA.64x" in sass and "UTMALDG" in sass
    assert not re.search(r"\b(LDL|STL)\b", sass) and ck.resources["spill_stores"] == 0


# ------------------------------------------------------------------- a first column on a 16-byte boundary
@pytest.mark.parametrize("kernel", [extra.load_at, extra.store_at])
def test_a_literal_first_column_off_16_bytes_is_no_bulk_copy(kernel):
    """The copy engine faults on a box that starts off a 16-byte boundary (H100: an illegal instruction, loads and
    stores): a literal start of 1, 4 or 5 bf16 columns takes the cooperative copy, no map; 0 and 8 the TMA."""
    for c0 in (1, 4, 5):
        src, _, maps = render_kernel(kernel.ir("sm_90a", C0=c0))
        assert maps == [] and "cp.async.bulk.tensor" not in src and "tp_tma_load_2d(" not in src
    for c0 in (0, 8):
        src, _, maps = render_kernel(kernel.ir("sm_90a", C0=c0))
        assert len(maps) == 1 and "if (tp_tma_ok & 1u)" in src   # (a literal start on 16 bytes: no run-time test)


@pytest.mark.parametrize("kernel", [extra.load_dyn, extra.store_dyn])
def test_a_run_time_first_column_is_tested_beside_the_map_bit(kernel):
    src, _, maps = render_kernel(kernel.ir("sm_90a"))
    assert len(maps) == 1 and "if (tp_tma_ok & 1u && (((c0) & 7) == 0))" in src


def test_a_tma_only_store_at_a_literal_column_off_16_bytes_is_a_compile_error():
    @tp.kernel(threads=128, target="sm_90a")
    def off_store(X: tp.Tensor[tp.bf16, "M", "N"], Y: tp.Tensor[tp.bf16, "M", "N"]):
        s = tp.shared((64, 64), tp.bf16, swizzle=tp.Swizzle(3, 3, 3))
        tp.store(s, tp.load(X[0:64, 3:67]))
        tp.barrier()
        tp.store_bulk(s, Y[0:64, 3:67], fallback=False)
        tp.store_bulk_wait(s)

    with pytest.raises(tp.CompileError, match=r"first column \(3\) is not on a 16-byte boundary") as e:
        render_kernel(off_store.ir("sm_90a"))
    assert e.value.span.line > 0 and "fallback=True" in str(e.value)
