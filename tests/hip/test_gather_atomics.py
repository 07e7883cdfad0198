"""Rendering gathers, scatters, strided windows and atomics on every target; compiling them where a toolchain
is here (NVRTC/nvcc for sm_90a and sm_80, an AMDGPU clang for gfx942)."""

import pytest

import tilepy as tp
import tilepy_hip
from tilepy_hip import build
from tilepy_hip.render import RENDER_TARGETS, coverage

NV = build.nvidia_compiler()
AMD = build.find_amd_clang()


@tp.kernel(threads=64)
def gather_scatter(W: tp.Tensor[tp.f32, "V", "D"], I: tp.Tensor[tp.i64, "N"], Y: tp.Tensor[tp.f32, "N", "D"],
                   S: tp.constexpr = 2):
    n0 = tp.block_id(0) * 16
    ids = tp.load(I[n0:n0 + 16])
    cols = tp.arange(32)
    g = W[ids[:, None], cols[None, :]]             # a gather view kept in a variable
    x = tp.load(g, mask=(ids >= 0)[:, None] & (cols < 30)[None, :], other=-1.0)
    x = x + tp.load(W[n0:n0 + 16 * S:S, 31:-1:-1])  # strided rows, flipped columns
    tp.store(Y[(n0 + tp.arange(16))[:, None], cols[None, :]], x)


def _atomics(dtype):
    @tp.kernel(threads=64)
    def atomics(Y: tp.Tensor[dtype, "M"], I: tp.Tensor[tp.i32, "N"], OLD: tp.Tensor[dtype, "N"]):
        i0 = tp.block_id(0) * 64
        idx = tp.load(I[i0:i0 + 64], other=-1)
        tp.atomic_add(Y[idx], 1, mask=idx % 2 == 0)
        tp.atomic_max(Y[idx], 2, sem="release")
        tp.atomic_min(Y[i0:i0 + 64], 3, sem="acquire")
        old = tp.atomic_cas(Y[idx], 0, 4, sem="acq_rel")
        tp.store(OLD[i0:i0 + 64], old)

    return atomics


KERNELS = {"gather_scatter": gather_scatter, **{f"atomics_{d}": _atomics(d) for d in (tp.f32, tp.bf16, tp.i32)}}


@pytest.mark.parametrize("target", sorted(RENDER_TARGETS))
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_renders(name, target):
    src = tilepy_hip.render(KERNELS[name].ir(target), target)
    if name.startswith("atomics"):
        for fn in ("tp_atomic_add(&Y[", "tp_atomic_max(&Y[", "tp_atomic_min(&Y[", "tp_atomic_cas(&Y["):
            assert fn in src
        assert src.count("tp_fence_device();") == 4  # release: before; acquire: after; acq_rel: both
    else:
        assert "(unsigned long long)" in src  # each gathered index is checked against its dimension


def test_the_atomics_are_in_every_target_table():
    for t in RENDER_TARGETS.values():
        cov = coverage(t)
        assert all(cov[op] == "emitter" for op in ("atomic_add", "atomic_max", "atomic_min", "atomic_cas"))
        assert cov["gather_view"] == "common"


def test_old_values_of_a_replicated_layout_come_from_the_updating_thread():
    @tp.kernel(threads=128)
    def replicated(Y: tp.Tensor[tp.f32, 32], O: tp.Tensor[tp.f32, 32]):
        tp.store(O[0:32], tp.atomic_add(Y[0:32], 1.0))  # 32 elements over 128 threads: replicated

    src = tilepy_hip.render(replicated.ir())
    updates = [ln for ln in src.splitlines() if "tp_atomic_add(" in ln]
    assert len(updates) == 4 and all("% 16 == 0" in ln for ln in updates)  # owners update (4 values each)
    assert "__syncthreads();" in src  # ... then the old values go to the other holders through shared memory
    assert "__syncthreads" not in tilepy_hip.render(scatter_only.ir())


@tp.kernel(threads=128)
def scatter_only(Y: tp.Tensor[tp.f32, 32]):
    tp.atomic_add(Y[0:32], 1.0)  # a statement: replicated holders are predicated off, no old values


@pytest.mark.skipif(NV is None, reason="no NVRTC or nvcc here (pip install nvidia-cuda-nvrtc)")
@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_compiles_for_nvidia(name, target, tmp_path):
    ck = build.compile_ir(KERNELS[name].ir(target), cache_dir=tmp_path)
    assert ck.binary[:4] == b"\x7fELF"


@pytest.mark.skipif(AMD is None, reason="no AMDGPU-capable clang here (apt-get install clang-19 or pip install "
                    "ziglang)")
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_compiles_for_gfx942(name, tmp_path):
    ck = build.compile_ir(KERNELS[name].ir("gfx942"), cache_dir=tmp_path)
    assert ck.binary


@tp.kernel(threads=128)
def rowsum(X: tp.Tensor[tp.bf16, "MR"], Y: tp.Tensor[tp.f32, "M"], M: tp.constexpr = 100, R: tp.constexpr = 300,
           BM: tp.constexpr = 8, BR: tp.constexpr = 64):
    m0 = tp.block_id(0) * BM
    m = (m0 + tp.arange(BM))[:, None]                  # index tiles in their own (1-D) layouts
    acc = tp.zeros((BM, BR), tp.f32)
    for k in range(tp.cdiv(R, BR)):
        r = (k * BR + tp.arange(BR))[None, :]
        acc = acc + tp.load(X[m * R + r], mask=(m < M) & (r < R)).to(tp.f32)
    tp.store(Y[m0:m0 + BM], tp.sum(acc, axis=1))


@tp.kernel(threads=64)
def carried(X: tp.Tensor[tp.bf16, 64], Y: tp.Tensor[tp.bf16, 4, 64], base: tp.i32, MOVE: tp.constexpr = True):
    b = base
    i = (b + tp.arange(64)) % 64                       # an i32 index tile; the stored bf16 tile has another layout
    for k in range(4):
        tp.store(Y[k, i], tp.load(X[0:64]))
        if MOVE:
            b = b + 1                                  # the next iteration's `b`: `i` must not be recomputed


def test_index_tiles_are_recomputed_in_the_layout_of_their_use():
    src = tilepy_hip.render(rowsum.ir("sm_90a"))
    loop = src[src.index("for (k = "):]
    assert "tp_smem +" not in loop.split("__syncthreads")[0]  # the loop body moves no index through smem


def test_an_index_tile_whose_inputs_change_in_the_loop_is_not_recomputed():
    moving = tilepy_hip.render(carried.ir("sm_90a", MOVE=True))
    fixed = tilepy_hip.render(carried.ir("sm_90a", MOVE=False))
    assert "tp_smem +" in moving and "tp_smem +" not in fixed.replace("extern __shared__", "")


@pytest.mark.parametrize("target", sorted(RENDER_TARGETS))
def test_a_row_gather_reads_consecutive_elements_as_one_vector(target):
    """A gather whose value slots run along the tile's last dimension (16-byte groups of the layout) reads a
    group with one vector load when, at run time, its offsets are consecutive, in bounds, unmasked and aligned;
    element loads otherwise (the same group, the same bounds and masks)."""
    src = tilepy_hip.render(gather_scatter.ir(target), target)
    vec = [ln for ln in src.splitlines() if "tp_ldvec<float, 4>(W + " in ln]
    assert vec, "the row gather W[ids[:, None], cols[None, :]] has no vector load"
    guards = [ln for ln in src.splitlines() if ln.strip().startswith("if (") and "tp_aligned(W + " in ln]
    assert len(guards) == len(vec)
    for g in guards:                                  # consecutive offsets, each slot in bounds and unmasked
        assert g.count(" == ") == 3 and g.count("(unsigned long long)") >= 4 * 2
    fallback = [ln for ln in src.splitlines() if "? W[" in ln]
    assert len(fallback) >= 4 * len(vec)              # the element loads of each group, kept for the else branch
    stores = tilepy_hip.render(scatter_only.ir(target), target)
    assert "tp_ldvec" not in stores                   # atomics and scatters stay element by element
