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
from tilepy_hip.prepared import build_prepared, fast_path, normalize_grid, signature_key
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
    base = key(None, {"BLOCK_N": 16}, (x, y))
    assert key(None, {"BLOCK_N": 16}, (torch.randn(4, 8), torch.empty(4, 8))) == base  # new tensors, same key
    changed = [
        key(None, {"BLOCK_N": 16}, (x.double(), y)),                  # dtype
        key(None, {"BLOCK_N": 16}, (torch.randn(5, 8), y)),           # shape
        key(None, {"BLOCK_N": 16}, (torch.randn(8, 4).t(), y)),       # layout (same shape, not contiguous)
        key(None, {"BLOCK_N": 32}, (x, y)),                           # constexpr value
        key(None, {}, (x, y)),                                        # constexpr left to its default
        key("sm_80", {"BLOCK_N": 16}, (x, y)),                        # target
    ]
    assert all(k != base for k in changed) and len(set(changed)) == len(changed)
    with pytest.raises(IndexError):
        key(None, {}, (x,))  # too few positional arguments: the slow path reports it
    with pytest.raises(AttributeError):
        key(None, {}, (x.numpy(), y))  # not a tensor: the slow path reports it


def test_signature_key_scalars_by_type_constexprs_by_value():
    key = signature_key(KERNELS["rmsnorm"].params)
    x, w = torch.randn(2, 8), torch.randn(8)
    assert key(None, {}, (x, w, x, 1e-6)) == key(None, {}, (x, w, x, 0.5))  # a scalar's value is filled per call
    assert key(None, {}, (x, w, x, 1e-6)) != key(None, {}, (x, w, x, 1))    # its type is checked once per key
    assert key(None, {}, (x, w, x, 1e-6, 16)) != key(None, {}, (x, w, x, 1e-6, 32))  # BLOCK_N by position


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
    assert prep.call((3,), (x, w, y, 0.25)) is ck
    want, _, _ = hip_launch.pack_values(ck, [x, w, y, 0.25])
    assert len(want) == len(prep.values)
    for j, v in enumerate(want):
        assert _slot_bytes(prep, j, ctypes.sizeof(v)) == bytes(v), f"slot {j}"
    assert launches[-1] == (0x1234, 3, 1, 1, ck.num_threads, ck.smem_bytes, 77, ctypes.addressof(prep.params))
    n = len(launches)
    assert prep.call((0,), (x, w, y, 0.25)) is ck and len(launches) == n  # an empty grid launches nothing


def test_prepared_callable_grid_sees_constexprs_and_dimensions():
    ck = _ck(KERNELS["vector_add"], BLOCK=256)
    launches = []
    x = torch.randn(1000)
    prep = _prepared(ck, [x, x, x], launches=launches)
    prep.call(lambda m: (tp.cdiv(m["N"], m["BLOCK"]),), (x, x, x))
    assert launches[-1][1:4] == (4, 1, 1)


def test_prepared_positions_skip_positional_constexprs():
    """Run-time argument i sits at positions[i] of the call (a constexpr passed by position sits between)."""
    ck = _ck(KERNELS["vector_add"], BLOCK=256)
    a, b, c = torch.randn(300), torch.randn(300), torch.randn(300)
    prep = _prepared(ck, [a, b, c], positions=(0, 2, 3))
    x, y, z = torch.randn(300), torch.randn(300), torch.randn(300)
    prep.call((1,), (x, 256, y, z))
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
    prep.call((1,), (x1, y))
    assert seen() == (x1.data_ptr(), 1)
    prep.call((1,), (x2, y))
    assert seen() == (x2.data_ptr(), 1)
    n = len(built)
    prep.call((1,), (x1, y))
    assert seen() == (x1.data_ptr(), 1) and len(built) == n  # looked up, not rebuilt
    odd = torch.randn(150 * 136 + 1).bfloat16()[1:].view(150, 136)  # 2 bytes past an aligned base
    prep.call((1,), (odd, y))
    assert seen()[1] == 0  # the kernel takes its fallback copy


def test_calls_with_keyword_or_default_runtime_arguments_are_not_cached():
    table = hip_launch._Signatures(KERNELS["rmsnorm"])
    x, w = torch.randn(2, 8), torch.randn(8)
    assert table.cacheable((x, w, x, 1e-6), {"BLOCK_N": 16})
    assert not table.cacheable((x, w, x), {"eps": 1e-6})  # by keyword: bound on the slow path each time
    assert not table.cacheable((x, w), {"Y": x})


def test_fast_path_runs_the_entry_of_the_call_signature_only():
    params = KERNELS["vector_add"].params
    key = signature_key(params)
    x = torch.randn(8)
    calls = []

    def own(*a):
        raise AssertionError("the fast path never calls launch itself")

    package = SimpleNamespace(launch=own)
    call = lambda grid, args, stream: calls.append((grid, args)) or "ck"  # noqa: E731
    entries = {key(None, {"BLOCK": 8}, (x, x, x)): (call,)}
    fast = fast_path(params, entries, package, own)
    y = torch.randn(8)
    assert fast((1,), None, {"BLOCK": 8}, (y, y, y)) == "ck" and calls[-1] == ((1,), (y, y, y))
    assert fast((1,), None, {"BLOCK": 16}, (y, y, y)) is None           # another constexpr
    assert fast((1,), None, {"BLOCK": 8}, (y, y, y.double())) is None   # another dtype
    assert fast((1,), None, {"BLOCK": 8}, (y, y)) is None               # too few arguments
    assert fast((1,), None, {"BLOCK": 8}, (y, y, y.numpy())) is None    # not a tensor
    assert fast((1,), None, {"BLOCK": [8]}, (y, y, y)) is None          # unhashable
    package.launch = lambda *a: None  # a guard wrapped tilepy_hip.launch: it must see every call
    assert fast((1,), None, {"BLOCK": 8}, (y, y, y)) is None and len(calls) == 1


def test_the_launch_extension_compiles():
    import shutil
    import sysconfig
    from pathlib import Path

    from tilepy_hip import native

    if not (shutil.which("cc") or shutil.which("gcc")) or not (Path(sysconfig.get_paths()["include"]) /
                                                                "Python.h").exists():
        pytest.skip("no C compiler or Python headers here (the launch falls back to ctypes)")
    path = native.compile_extension()
    assert path.exists() and path == native.compile_extension()  # built once, then cached


def _extension_or_skip():
    import shutil
    import sysconfig
    from pathlib import Path

    from tilepy_hip import native

    if not (shutil.which("cc") or shutil.which("gcc")) or not (Path(sysconfig.get_paths()["include"]) /
                                                                "Python.h").exists():
        pytest.skip("no C compiler or Python headers here (the launch falls back to ctypes)")
    return native._load(native.compile_extension())


@pytest.mark.parametrize("name", ["softmax", "rmsnorm", "vector_add"])
def test_the_c_fast_path_keys_calls_exactly_as_the_python_one(name):
    """Entries are stored under Python-built keys; the extension's lookup must find exactly those (records that
    are not `simple` are handed back to their Python call, which needs no GPU)."""
    from tilepy_hip.prepared import kinds

    ext = _extension_or_skip()
    params = KERNELS[name].params
    key = signature_key(params)
    x2, x1 = torch.randn(4, 8), torch.randn(8)
    calls = {
        "softmax": [((x2, x2), {"BLOCK_N": 16}), ((x2, x2), {}), ((x2.double(), x2), {"BLOCK_N": 16}),
                    ((torch.randn(8, 4).t(), x2), {"BLOCK_N": 16}), ((x2, x2, 32), {})],
        "rmsnorm": [((x2, x1, x2, 1e-6), {}), ((x2, x1, x2, 1), {}), ((x2, x1, x2, 1e-6, 64), {"x": 1})],
        "vector_add": [((x1, x1, x1), {"BLOCK": 8}), ((x1, x1, x1.double()), {"BLOCK": 8}),
                       ((x1, x1, x1), {"BLOCK": 8, "target": None})],
    }[name]
    entries = {}
    for i, (args, kw) in enumerate(calls):
        record = (lambda grid, a, stream, i=i: ("python path", i, grid, stream),) + (None,) * 11
        entries[key("sm_90a", kw, args)] = (record[0], "ck", False, *record[3:])
    k = kinds(params)
    for i, (args, kw) in enumerate(calls):
        assert ext.fast(entries, k, "sm_90a", kw, args, (2,), 5) == ("python path", i, (2,), 5)
        fresh = tuple(torch.randn_like(a) if isinstance(a, torch.Tensor) else a for a in args)
        assert ext.fast(entries, k, "sm_90a", kw, fresh, (2,), None)[1] == i  # new tensors, same signature
        assert ext.fast(entries, k, None, kw, args, (2,), None) is None          # another target
    short = calls[0][0][:-1] if len(k) == len(calls[0][0]) else calls[0][0][: len(k) - 1]
    assert ext.fast(entries, k, "sm_90a", calls[0][1], short, (2,), None) is None
    assert ext.fast(entries, k, "sm_90a", {"BLOCK": [1]}, calls[0][0], (2,), None) is None  # unhashable
    numpy_args = tuple(a.numpy() if isinstance(a, torch.Tensor) else a for a in calls[0][0])
    assert ext.fast(entries, k, "sm_90a", calls[0][1], numpy_args, (2,), None) is None


def test_the_c_fast_path_without_a_driver_says_so():
    ext = _extension_or_skip()
    if ext.driver_found():
        pytest.skip("this machine has a CUDA driver")
    with pytest.raises(RuntimeError, match="libcuda"):
        ext.launch(0, 1, 1, 1, 32, 0, 0, 0)


def test_the_bound_c_fast_path_steps_aside_while_launch_is_wrapped():
    """`fast_path` over the extension is one C call (a functools.partial of `bound_fast`): it finds the entry
    like the Python lookup, passes grid and stream through, and returns None while `package.launch` is not the
    launch it was bound to (a wrapper must see every call)."""
    import types

    from tilepy_hip.prepared import fast_path

    ext = _extension_or_skip()
    params = KERNELS["vector_add"].params
    x1 = torch.randn(8)
    args, kw = (x1, x1, x1), {"BLOCK": 8}

    def own(*a, **k):
        raise AssertionError("not called")

    package = types.SimpleNamespace(launch=own)
    entries = {signature_key(params)(None, kw, args): (lambda grid, a, stream: ("python path", grid, stream), "ck",
                                                       False, *(None,) * 9)}
    fast = fast_path(params, entries, package, own, ext.bound_fast)
    assert fast((3,), None, kw, args) == ("python path", (3,), None)
    assert fast((3,), None, kw, args, 7) == ("python path", (3,), 7)
    assert fast((3,), None, {"BLOCK": 16}, args) is None            # another constexpr: no entry
    assert fast((3,), "sm_80", kw, args) is None                   # another target
    package.launch = lambda *a, **k: None                           # wrapped (a profiler, a launch counter)
    assert fast((3,), None, kw, args) is None
    package.launch = own
    assert fast((3,), None, kw, args)[0] == "python path"
    with pytest.raises(TypeError, match="bound_fast"):
        ext.bound_fast(package, own, entries)
