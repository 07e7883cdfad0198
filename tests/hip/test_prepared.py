"""The launch fast path without a GPU: what the signature key depends on (so a changed call takes the checking
slow path), the grid normalization, and the prepared argument buffer against what `pack_values` packs for the
same arguments (pointers, symbolic dimensions, scalars, tensor maps re-pointed per address)."""

import ctypes
import importlib
from types import SimpleNamespace

import kernels as extra
import pytest
import torch

import tilepy as tp
from stdlib_kernels import KERNELS
from tilepy_hip import tensor_map as tmap
from tilepy_hip.prepared import build_prepared, normalize_grid, signature_key
from tilepy_hip.render import render_kernel

hip_launch = importlib.import_module("tilepy_hip.launch")


def _ck(kernel, target="sm_90a", **consts):
    """What a CompiledKernel tells the launch, from the IR and the renderer alone (no compiler needed)."""
    kir = kernel.ir(target, **consts)
    _, smem, maps = render_kernel(kir)
    return SimpleNamespace(name=kernel.name, params=kir.params, kir=kir, tensor_maps=maps,
                           num_threads=kir.num_threads, smem_bytes=smem)


def _prepared(ck, runtime, positions=None, launches=None):
    values, _, _ = hip_launch.pack_values(ck, runtime)
    values += tmap.launch_values(ck, runtime)
    record = (lambda *a: launches.append(a) or 0) if launches is not None else (lambda *a: 0)
    return build_prepared(ck, runtime, values, ctypes.c_void_p(0x1234), 0, positions, launch_fn=record,
                          stream_fn=lambda index: 77, on_error=None)


def _slot_bytes(prep, j, size) -> bytes:
    return ctypes.string_at(prep.params[j], size)


def test_signature_key_follows_what_the_checks_read():
    key = signature_key(KERNELS["softmax"].params)
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    base = key(None, {"BLOCK_N": 16}, x, y)
    assert key(None, {"BLOCK_N": 16}, torch.randn(4, 8), torch.empty(4, 8)) == base  # new tensors, same key
    changed = [
        key(None, {"BLOCK_N": 16}, x.double(), y),                  # dtype
        key(None, {"BLOCK_N": 16}, torch.randn(5, 8), y),           # shape
        key(None, {"BLOCK_N": 16}, torch.randn(8, 4).t(), y),       # layout (same shape, not contiguous)
        key(None, {"BLOCK_N": 32}, x, y),                           # constexpr value
        key(None, {}, x, y),                                        # constexpr left to its default
        key("sm_80", {"BLOCK_N": 16}, x, y),                        # target
    ]
    assert all(k != base for k in changed) and len(set(changed)) == len(changed)
    with pytest.raises(TypeError):
        key(None, {}, x)  # too few positional arguments: the slow path reports it
    with pytest.raises(AttributeError):
        key(None, {}, x.numpy(), y)  # not a tensor: the slow path reports it


def test_signature_key_scalars_by_type_constexprs_by_value():
    key = signature_key(KERNELS["rmsnorm"].params)
    x, w = torch.randn(2, 8), torch.randn(8)
    assert key(None, {}, x, w, x, 1e-6) == key(None, {}, x, w, x, 0.5)  # a scalar's value is filled per call
    assert key(None, {}, x, w, x, 1e-6) != key(None, {}, x, w, x, 1)    # its type is checked once per key
    assert key(None, {}, x, w, x, 1e-6, 16) != key(None, {}, x, w, x, 1e-6, 32)  # BLOCK_N by position


def test_normalize_grid():
    assert normalize_grid(5) == (5, 1, 1) and normalize_grid((2, 3)) == (2, 3, 1)
    assert normalize_grid((4, 0)) is None
    with pytest.raises(tp.LaunchError, match="1 to 3 non-negative"):
        normalize_grid((1, 1, 1, 1))
    with pytest.raises(tp.LaunchError, match="beyond CUDA's limits"):
        normalize_grid((1, 70000))


def test_prepared_buffer_matches_pack_values_for_new_arguments():
    ck = _ck(KERNELS["rmsnorm"], BLOCK_N=16)
    launches = []
    prep = _prepared(ck, [torch.randn(3, 8), torch.randn(8), torch.randn(3, 8), 1e-6], launches=launches)
    x, w, y = torch.randn(3, 8), torch.randn(8), torch.empty(3, 8)
    assert prep((3,), (x, w, y, 0.25)) is ck
    want, _, _ = hip_launch.pack_values(ck, [x, w, y, 0.25])
    assert len(want) == len(prep.values)
    for j, v in enumerate(want):
        assert _slot_bytes(prep, j, ctypes.sizeof(v)) == bytes(v), f"slot {j}"
    (func, gx, gy, gz, bx, by, bz, smem, stream, params, extra_) = launches[-1]
    assert (func.value, gx, gy, gz, bx, by, bz, smem, stream) == (0x1234, 3, 1, 1, ck.num_threads, 1, 1,
                                                                   ck.smem_bytes, 77)
    assert params is prep.params and extra_ is None
    n = len(launches)
    assert prep((0,), (x, w, y, 0.25)) is ck and len(launches) == n  # an empty grid launches nothing


def test_prepared_callable_grid_sees_constexprs_and_dimensions():
    ck = _ck(KERNELS["vector_add"], BLOCK=256)
    launches = []
    x = torch.randn(1000)
    prep = _prepared(ck, [x, x, x], launches=launches)
    prep(lambda m: (tp.cdiv(m["N"], m["BLOCK"]),), (x, x, x))
    assert launches[-1][1:4] == (4, 1, 1)


def test_prepared_positions_skip_positional_constexprs():
    """Run-time argument i sits at positions[i] of the call (a constexpr passed by position sits between)."""
    ck = _ck(KERNELS["vector_add"], BLOCK=256)
    a, b, c = torch.randn(300), torch.randn(300), torch.randn(300)
    prep = _prepared(ck, [a, b, c], positions=(0, 2, 3))
    x, y, z = torch.randn(300), torch.randn(300), torch.randn(300)
    prep.fill((x, 256, y, z))
    assert [int.from_bytes(_slot_bytes(prep, j, 8), "little") for j in (0, 2, 4)] == [
        x.data_ptr(), y.data_ptr(), z.data_ptr()]


def test_prepared_tensor_maps_follow_the_addresses(monkeypatch):
    """Each distinct address gets its own map (built once, then looked up); an unaligned one clears its ok bit."""
    built = []

    def fake_encode(args):
        built.append(args["ptr"])
        buf = (ctypes.c_uint8 * tmap.TENSOR_MAP_BYTES)()
        ctypes.c_uint64.from_buffer(buf).value = args["ptr"]
        return buf, ""

    monkeypatch.setattr(tmap, "_encode", fake_encode)
    monkeypatch.setattr(tmap, "_CACHE", {})
    ck = _ck(extra.tma_tile, BC=64, SWIZZLE=tp.Swizzle(3, 3, 3))
    assert len(ck.tensor_maps) == 1
    x0, y = torch.randn(150, 136).bfloat16(), torch.empty(150, 136)
    prep = _prepared(ck, [x0, y])
    map_slot, ok_slot = len(prep.values) - 2, len(prep.values) - 1

    def seen():
        return (int.from_bytes(_slot_bytes(prep, map_slot, 8), "little"),
                int.from_bytes(_slot_bytes(prep, ok_slot, 4), "little"))

    x1, x2 = torch.randn(150, 136).bfloat16(), torch.randn(150, 136).bfloat16()
    prep.fill((x1, y))
    assert seen() == (x1.data_ptr(), 1)
    prep.fill((x2, y))
    assert seen() == (x2.data_ptr(), 1)
    n = len(built)
    prep.fill((x1, y))
    assert seen() == (x1.data_ptr(), 1) and len(built) == n  # looked up, not rebuilt
    odd = torch.randn(150 * 136 + 1).bfloat16()[1:].view(150, 136)  # 2 bytes past an aligned base
    prep.fill((odd, y))
    assert seen()[1] == 0  # the kernel takes its fallback copy


def test_calls_with_keyword_or_default_runtime_arguments_are_not_cached():
    table = hip_launch._Signatures(KERNELS["rmsnorm"])
    x, w = torch.randn(2, 8), torch.randn(8)
    assert table.cacheable((x, w, x, 1e-6), {"BLOCK_N": 16})
    assert not table.cacheable((x, w, x), {"eps": 1e-6})  # by keyword: bound on the slow path each time
    assert not table.cacheable((x, w), {"Y": x})
