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


# ---------------------------------------------------------------- what the layouts prove at compile time
def _loads_of(src, ptr):
    return [ln.strip() for ln in src.splitlines() if any(f"tp_ldvec<float, {n}>({ptr} + " in ln for n in (2, 4))]


@pytest.mark.parametrize("neox", [True, False])
def test_a_gather_at_arange_columns_is_a_vector_load_proved_at_compile_time(neox):
    """rotary's cos / sin gather CS[p[:, None], cj]: cj is a function of tp.arange, so the renderer knows each
    thread's columns. neox (cj = c or c - HALF: 4 consecutive columns a group) and GPT-J (cj = c // 2: 8 slots of
    4 columns, each twice) are one 16-byte load a group, guarded only by bounds and alignment (no run-time test
    that the offsets are consecutive), and the rows the broadcast layout repeats are copied, not loaded again."""
    from stdlib_kernels import llm_ops as L

    src = tilepy_hip.render(L.rotary_ring.ir("sm_90a", HALF=64, BHQ=32, BHK=8, THREADS=256, NEOX=neox), "sm_90a")
    loads = _loads_of(src, "CS")
    guards = [ln for ln in src.splitlines() if ln.strip().startswith("if (") and "tp_aligned(CS + " in ln]
    assert loads and len(guards) == len(loads)
    for g in guards:
        assert " == " not in g and g.count("<") == 3          # the row, the first and the last column; aligned
    # q's (32, 128) tile, 16 values a thread (two rows of the same 8 columns), and k's: cos and sin each
    assert len(loads) == (8 if neox else 4)
    if not neox:   # pairs: each loaded cos feeds two slots
        q = loads[0].split("=")[0].split()[-1]
        assert src.count(f"= {q}.v[0];") >= 2
    assert "tp_ldvec<tp_bf16, 8>((q_s + " in src          # the ring buffers read back in 16-byte vectors


@tp.kernel(threads=64)
def flipped(W: tp.Tensor[tp.f32, "V", "D"], Y: tp.Tensor[tp.f32, "N", "D"]):
    n0 = tp.block_id(0) * 16
    cols = tp.arange(32)
    x = tp.load(W[(n0 + tp.arange(16))[:, None], (31 - cols)[None, :]])        # consecutive never: reversed
    x = x + tp.load(W[(n0 + tp.arange(16))[:, None], (cols // 4)[None, :]])     # four slots, one element
    tp.store(Y[n0:n0 + 16, 0:32], x)


def test_a_gather_proved_not_consecutive_has_no_run_time_test():
    """Reversed columns (31 - c) are proved never consecutive: element loads, no vector test; c // 4 repeats one
    element over a group of four slots: one load, copied."""
    src = tilepy_hip.render(flipped.ir("sm_90a"), "sm_90a")
    assert "tp_aligned(W + " not in src and "tp_ldvec<float" not in src.split("Y[")[0]
    assert src.count("const float tp_gv") >= 1                # one element for a group of slots


@tp.kernel(threads=64)
def smem_read(X: tp.Tensor[tp.f32, 32, 64], Y: tp.Tensor[tp.f32, 32, 64], Z: tp.Tensor[tp.f32, 64, 32]):
    s = tp.shared((32, 64), tp.f32)
    tp.copy(X[0:32, 0:64], s)
    tp.barrier()
    tp.store(Y[0:32, 0:64], tp.load(s, layout=tp.blocked((32, 64), 64, vec=4)) * 2.0)   # rows: 16-byte vectors
    tp.store(Z[0:64, 0:32], tp.permute(tp.load(s), (1, 0)))                           # the same, any layout


def test_shared_tiles_are_read_in_vectors_where_the_layouts_prove_it():
    """A register tile whose value slots are consecutive, aligned elements of a shared tile in every thread is
    read with one vector load a group (decided from the layouts at compile time); the interpreter and the GPU
    tests check the values."""
    src = tilepy_hip.render(smem_read.ir("sm_90a"), "sm_90a")
    assert "tp_ldvec<float, 4>(s + " in src or "tp_ldvec<float, 4>((s" in src


def test_a_masked_row_gather_tests_its_masks_in_the_guard():
    """embedding_bag's W[i, cols] with mask j < n: the rows come from memory (equal across a group: the index
    tile is broadcast along the columns) and the columns are arange, so the group is proved consecutive; its
    masks go into the vector load's guard (a masked group takes the element loads) rather than a select per
    slot after the load (which cost 7 registers and a third of level1/196's speed)."""
    from stdlib_kernels import embedding_bag as E

    src = tilepy_hip.render(E.embedding_bag.ir("sm_90a", MODE=1, BJ=8, BD=512), "sm_90a")
    guards = [ln for ln in src.splitlines() if ln.strip().startswith("if (") and "tp_aligned(W + " in ln]
    assert guards and all(" == " not in g and "tp_m" in g for g in guards)
    assert not [ln for ln in src.splitlines() if "? tp_q" in ln]    # no select on the loaded vector
