"""Lowerings of issue 12's last refused op classes, each against torch on the interpreter: the scatter family
(scatter, scatter_add, scatter_reduce, index_put / index_add / index_copy / masked assignment / F.fold), atan2
(and atan, asin, acos built on it), bit shifts. Exact where the op only moves or selects elements, float64
within fp32 tolerance where it sums."""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from argus_agent.lower import lower_model, render_program
from argus_agent.lower.ops_scatter import UNROLL

from .lowered import assert_close, run_lowered


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _exact(fn, inputs, tmp_path, name):
    """The lowered program's output and torch's own (same dtypes: integer ops, overwrites, selections)."""
    prog = lower_model(Fn(fn), inputs, "cpu")
    p = tmp_path / f"{name}.py"
    p.write_text(render_program(prog))
    spec = importlib.util.spec_from_file_location(f"scatter_{name}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        return mod.argus_forward(Fn(fn), *inputs), fn(*inputs), prog


def _f64(fn, inputs, tmp_path, name):
    """The lowered program's output and torch's in float64 (floating inputs promoted, index tensors kept)."""
    out, _, _ = _exact(fn, inputs, tmp_path, name)
    with torch.no_grad():
        ref = fn(*[x.double() if x.is_floating_point() else x for x in inputs])
    return out, ref


# --- scatter ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("j", [UNROLL - 3, 3 * UNROLL])      # written out / a reduction over the index line
def test_scatter_overwrite_takes_the_last_duplicate_as_torch_cpu(j, tmp_path):
    g = torch.Generator().manual_seed(j)
    x, idx, src = torch.randn(5, 29, generator=g), torch.randint(0, 29, (5, j), generator=g), torch.randn(5, j)
    assert (idx.sort(1).values.diff(dim=1) == 0).any()                     # duplicates present
    out, ref, _ = _exact(lambda x, i, s: x.scatter(1, i, s), [x, idx, src], tmp_path, f"scatter{j}")
    assert torch.equal(out, ref)


def test_scatter_value_and_a_smaller_index_and_src(tmp_path):
    """The index covers only part of the other dims (rows 0-2, columns 0-4 of src): the rest is x."""
    g = torch.Generator().manual_seed(1)
    x, idx, src = torch.randn(4, 30, generator=g), torch.randint(0, 30, (3, 5), generator=g), torch.randn(4, 6)
    out, ref, _ = _exact(lambda x, i, s: (x.scatter(1, i, s), x.scatter(1, i, -2.5)), [x, idx, src], tmp_path,
                         "scatter_part")
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])


def test_scatter_add_along_dim0_matches_float64(tmp_path):
    g = torch.Generator().manual_seed(2)
    x, idx, src = torch.randn(6, 9, generator=g), torch.randint(0, 6, (40, 9), generator=g), torch.randn(40, 9)
    out, ref = _f64(lambda x, i, s: x.scatter_add(0, i, s), [x, idx, src], tmp_path, "scatter_add0")
    assert_close(out, ref, 1e-5)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_matches_torch(reduce, include_self, tmp_path):
    g = torch.Generator().manual_seed(3)
    x, idx = torch.randn(4, 17, generator=g), torch.randint(0, 17, (4, 21), generator=g)
    src = torch.rand(4, 21, generator=g) + 0.5
    out, ref = _f64(lambda x, i, s: x.scatter_reduce(1, i, s, reduce, include_self=include_self), [x, idx, src],
                    tmp_path, f"sr_{reduce}_{include_self}")
    assert (torch.bincount(idx[0], minlength=17) == 0).any()               # untouched elements keep x
    assert_close(out, ref, 1e-5)


def test_scatter_reduce_mean_of_integers_floors_as_torch(tmp_path):
    g = torch.Generator().manual_seed(4)
    x, idx, src = torch.randint(-9, 9, (3, 11), generator=g), torch.randint(0, 11, (3, 14), generator=g), \
        torch.randint(-20, 20, (3, 14), generator=g)
    out, ref, _ = _exact(lambda x, i, s: x.scatter_reduce(1, i, s, "mean"), [x, idx, src], tmp_path, "sr_int")
    assert torch.equal(out, ref)


def test_a_small_scatter_is_fused_without_a_reduction_kernel(tmp_path):
    """A MoE-style gate (zeros.scatter(1, topk ids, weights), k <= UNROLL) is one pointwise expression."""
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(16, 8, generator=g)

    def gate(lg):
        w, ids = torch.topk(torch.softmax(lg, -1), 2, -1)
        return torch.zeros(16, 8).scatter(1, ids, w / w.sum(-1, keepdim=True)) * 3.0
    out, ref, prog = _exact(gate, [logits], tmp_path, "gate")
    assert torch.allclose(out, ref, atol=1e-6, rtol=1e-6)
    assert not any(str(getattr(k, "what", "")).startswith("aten.scatter") for k in prog.kernels)


# --- index_put: index_add, index_copy, x[i] = v, fold ---------------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1])
def test_index_add_with_alpha_matches_float64(dim, tmp_path):
    g = torch.Generator().manual_seed(6 + dim)
    x = torch.randn(30, 5, generator=g) if dim == 0 else torch.randn(5, 30, generator=g)
    idx = torch.randint(0, 30, (12,), generator=g)
    src = torch.randn(12, 5, generator=g) if dim == 0 else torch.randn(5, 12, generator=g)
    out, ref = _f64(lambda x, i, s: x.index_add(dim, i, s, alpha=2.0), [x, idx, src], tmp_path, f"index_add{dim}")
    assert_close(out, ref, 1e-5)


def test_index_copy_and_two_index_tensors(tmp_path):
    g = torch.Generator().manual_seed(8)
    x, perm, src = torch.randn(30, 4, generator=g), torch.randperm(30, generator=g)[:10], torch.randn(10, 4)
    rows, cols, v = torch.randint(0, 30, (25,), generator=g), torch.randint(0, 4, (25,), generator=g), torch.randn(25)
    out, ref, _ = _exact(lambda x, p, s, r, c, v: (x.index_copy(0, p, s), x.index_put((r, c), v),
                                                   x.index_put((r, c), v, accumulate=True)),
                         [x, perm, src, rows, cols, v], tmp_path, "index_put")
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])
    assert torch.allclose(out[2], ref[2], atol=1e-5, rtol=1e-5)


def test_masked_assignment_with_one_value(tmp_path):
    def fn(x, m):
        y = x.clone()
        y[m] = 0.5
        return y
    g = torch.Generator().manual_seed(9)
    x = torch.randn(7, 13, generator=g)
    out, ref, _ = _exact(fn, [x, x > 0.3], tmp_path, "mask")
    assert torch.equal(out, ref)


@pytest.mark.parametrize("kernel, stride", [(2, 1), (3, 3)])
def test_fold_matches_float64(kernel, stride, tmp_path):
    L = ((6 - kernel) // stride + 1) ** 2
    x = torch.randn(2, 2 * kernel * kernel, L, generator=torch.Generator().manual_seed(kernel))
    out, ref = _f64(lambda x: F.fold(x, (6, 6), kernel, stride=stride), [x], tmp_path, f"fold{kernel}")
    assert_close(out, ref, 1e-5)


# --- atan2 and the inverse trigonometric functions -------------------------------------------------------------------

def test_atan2_matches_float64_everywhere_including_signed_zeros_and_infinities(tmp_path):
    g = torch.Generator().manual_seed(10)
    y, x = torch.randn(40, 33, generator=g) * 5, torch.randn(40, 33, generator=g) * 5
    out, ref = _f64(torch.atan2, [y, x], tmp_path, "atan2")
    assert_close(out, ref, 1e-6)
    inf, nan = math.inf, math.nan
    sy = torch.tensor([[0., -0., 0., -0., 1., -1., inf, -inf, inf, nan, 2., 0., -inf, 5., -5., 1e-30, 3e38]])
    sx = torch.tensor([[0., 0., -0., -0., 0., -0., inf, inf, -inf, 1., nan, -3., -2., -inf, inf, -1e30, 1e-38]])
    out, ref, _ = _exact(torch.atan2, [sy, sx], tmp_path, "atan2_special")
    assert torch.equal(out.isnan(), ref.isnan())
    num = ~ref.isnan()
    assert torch.equal(torch.signbit(out[num]), torch.signbit(ref[num]))   # the sign of every zero too
    assert torch.allclose(out, ref, atol=3e-7, rtol=0, equal_nan=True)


@pytest.mark.parametrize("fn", [torch.atan, torch.asin, torch.acos], ids=["atan", "asin", "acos"])
def test_inverse_trigonometric_functions_match_float64(fn, tmp_path):
    g = torch.Generator().manual_seed(11)
    x = torch.rand(30, 41, generator=g) * 2.4 - 1.2           # asin / acos: NaN outside [-1, 1], as torch
    if fn is torch.atan:
        x = x * 50
    _, _, out, _ = run_lowered(Fn(fn), [x], tmp_path, fn.__name__, target="cpu")
    ref = fn(x.double())
    assert torch.equal(out.isnan(), ref.isnan())
    assert torch.allclose(out.double(), ref, atol=1e-6, rtol=1e-6, equal_nan=True)


# --- bit shifts -------------------------------------------------------------------------------------------------------

def test_bit_shifts_match_torch_including_out_of_range_amounts(tmp_path):
    g = torch.Generator().manual_seed(12)
    a, s = torch.randint(-2**40, 2**40, (8, 21), generator=g), torch.randint(-3, 70, (8, 21), generator=g)

    def fn(a, s):
        return a << s, a >> s, a.int() << s.int(), a.int() >> 3, a.to(torch.int8) << 3, a >> 64
    out, ref, _ = _exact(fn, [a, s], tmp_path, "shifts")
    for o, r in zip(out, ref):
        assert o.dtype == r.dtype and torch.equal(o, r)


# --- cummax / cummin, mode, searchsorted, pdist (ops_lines.py) --------------------------------------------------------

def _ties_with_nan(shape, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-3, 4, shape, generator=g).float()
    x[1, 4] = x[1, 9] = math.nan
    x[2, 0] = -math.inf
    x[3, 5] = math.inf
    return x


@pytest.mark.parametrize("op, dim", [(torch.cummax, 1), (torch.cummin, 1), (torch.cummax, 0), (torch.cummin, 0)])
def test_cummax_cummin_values_and_indices_match_torch(op, dim, tmp_path):
    """Ties move the index to the latest position; a NaN makes the rest NaN, indexed at the latest NaN."""
    x = _ties_with_nan((5, 23), dim)
    out, ref, _ = _exact(lambda x: tuple(op(x, dim)), [x], tmp_path, f"{op.__name__}{dim}")
    assert torch.equal(out[0].isnan(), ref[0].isnan())
    assert torch.equal(out[0].nan_to_num(), ref[0].nan_to_num()) and torch.equal(out[1], ref[1])


def test_cummax_of_integers(tmp_path):
    x = torch.randint(-50, 50, (4, 37), generator=torch.Generator().manual_seed(13))
    out, ref, _ = _exact(lambda x: tuple(torch.cummin(x, 1)), [x], tmp_path, "cummin_int")
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])


@pytest.mark.parametrize("dim, keepdim", [(1, False), (0, True)])
def test_mode_is_the_smallest_most_frequent_value(dim, keepdim, tmp_path):
    x = torch.randint(-3, 4, (6, 25), generator=torch.Generator().manual_seed(14)).float()
    out, ref, _ = _exact(lambda x: tuple(torch.mode(x, dim, keepdim=keepdim)), [x], tmp_path, f"mode{dim}")
    assert torch.equal(out[0], ref[0])
    idx = out[1] if keepdim else out[1].unsqueeze(dim)
    assert torch.equal(x.gather(dim, idx), out[0] if keepdim else out[0].unsqueeze(dim))  # an index of the mode


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_per_row_and_shared_with_ties(right, tmp_path):
    g = torch.Generator().manual_seed(15)
    seq = torch.randint(-10, 10, (4, 15), generator=g).float().sort(1).values    # repeated boundaries
    v = torch.randint(-12, 12, (4, 9), generator=g).float()
    out, ref, _ = _exact(lambda s, v: torch.searchsorted(s, v, right=right, out_int32=right), [seq, v], tmp_path,
                         f"ss{right}")
    assert out.dtype == ref.dtype and torch.equal(out, ref)
    s1 = torch.randn(37, generator=g).sort().values
    v1 = torch.cat([torch.randn(3, 8, generator=g), s1[:8].view(1, 8)])                 # exact hits too
    out, ref, _ = _exact(lambda s, v: torch.searchsorted(s, v, side="right" if right else "left"), [s1, v1],
                         tmp_path, f"ss1d{right}")
    assert torch.equal(out, ref)


def test_searchsorted_with_a_sorter(tmp_path):
    g = torch.Generator().manual_seed(16)
    seq, v = torch.randn(4, 15, generator=g), torch.randn(4, 6, generator=g)
    out, ref, _ = _exact(lambda s, o, v: torch.searchsorted(s, v, sorter=o), [seq, torch.argsort(seq, 1), v],
                         tmp_path, "ss_sorter")
    assert torch.equal(out, ref)


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, math.inf, 0.0])
def test_pdist_matches_float64(p, tmp_path):
    g = torch.Generator().manual_seed(17)
    x = torch.randn(23, 7, generator=g)
    if p == 0.0:
        x = x.round()
    out, ref = _f64(lambda x: torch.pdist(x, p), [x], tmp_path, f"pdist{p}")
    assert_close(out, ref, 1e-5)


def test_index_add_on_a_gpu_target_is_the_stdlib_atomic_row_scatter(tmp_path):
    """On a GPU target a row index_add (index_put with one 1-D index, accumulate) is a copy of x plus
    stdlib_kernels/scatter_add.py (O(N x D) atomics, not the pull's O(M x N x D)); negative rows wrap; the
    consumer reads the result. Run here on the interpreter against float64."""
    from argus_agent.lower.ops_scatter import ScatterAddTemplate

    g = torch.Generator().manual_seed(18)
    x, idx, src = torch.randn(30, 5, generator=g), torch.randint(-30, 30, (40,), generator=g), torch.randn(40, 5)

    def fn(x, i, s):
        return x.index_put((i,), s * 2.0, accumulate=True).relu()
    prog = lower_model(Fn(fn), [x, idx, src], "sm_90a")
    assert sum(isinstance(k, ScatterAddTemplate) for k in prog.kernels) == 1
    p = tmp_path / "index_add_gpu.py"
    p.write_text(render_program(prog))
    spec = importlib.util.spec_from_file_location("scatter_index_add_gpu", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        out = mod.argus_forward(Fn(fn), x, idx, src)
        again = mod.argus_forward(Fn(fn), x, idx, src)          # x itself is never written
    ref = fn(x.double(), idx, src.double())
    assert_close(out, ref, 1e-5)
    assert_close(again, ref, 1e-5)


@pytest.mark.parametrize("reduce", ["scatter_add", "scatter_reduce_sum"])
def test_scatter_add_on_a_gpu_target_is_one_atomic_add_per_index_element(reduce, tmp_path):
    """On a GPU target a long scatter_add (more than UNROLL candidates per element) is a copy of x plus one
    atomic add per (index, source) element at its flat offset (the stdlib row scatter-add, rows of one
    element); run here on the interpreter against float64, twice (x is never written)."""
    from argus_agent.lower.ops_scatter import ScatterAddTemplate

    g = torch.Generator().manual_seed(19)
    x, idx, src = torch.randn(6, 30, 5, generator=g), torch.randint(0, 30, (5, 40, 4), generator=g), \
        torch.randn(6, 41, 5, generator=g)

    def fn(x, i, s):
        y = x.scatter_add(1, i, s) if reduce == "scatter_add" else x.scatter_reduce(1, i, s, "sum")
        return y * 2.0
    prog = lower_model(Fn(fn), [x, idx, src], "sm_90a")
    assert sum(isinstance(k, ScatterAddTemplate) for k in prog.kernels) == 1
    p = tmp_path / f"{reduce}_gpu.py"
    p.write_text(render_program(prog))
    spec = importlib.util.spec_from_file_location(f"scatter_{reduce}_gpu", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ref = fn(x.double(), idx, src.double())
    with torch.no_grad():
        for _ in range(2):
            assert_close(mod.argus_forward(Fn(fn), x, idx, src), ref, 1e-5)
