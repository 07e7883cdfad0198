"""Lowerings added for the held-out breadth of issue 12 (topk, sort, logcumsumexp, max-pooling indices, ops
lowered through torch's own decompositions, long value chains), each against torch on the interpreter: exact
where the op only selects elements, float64 within fp32 tolerance otherwise."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from argus_agent.lower import LoweringError, lower_model

from .lowered import assert_close, run_lowered


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _run(fn, inputs, tmp_path, name):
    prog, src, out, ref = run_lowered(Fn(fn), inputs, tmp_path, name, target="cpu")
    return prog, src, out, ref


def _ties(shape, seed=0):
    """Floats with many repeats (small integers), a few infinities: ties decide the order."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-4, 5, shape, generator=g).float()
    x.view(-1)[:: 7] = float("inf")
    x.view(-1)[3:: 11] = float("-inf")
    return x


# --- topk -------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("k, dim, largest", [(5, -1, True), (3, 0, False), (1, 1, True)])
def test_topk_matches_torch(k, dim, largest, tmp_path):
    x = torch.randn(9, 23)
    _, _, (v, i), _ = _run(lambda x: torch.topk(x, k, dim=dim, largest=largest), [x], tmp_path, f"topk{k}{dim}")
    rv, ri = torch.topk(x, k, dim=dim, largest=largest)
    assert torch.equal(v, rv) and torch.equal(i, ri)       # distinct values: the indices are determined


def test_topk_with_ties_and_infinities(tmp_path):
    x = _ties((7, 31))
    _, _, (v, i), _ = _run(lambda x: torch.topk(x, 6, dim=1), [x], tmp_path, "topk_ties")
    rv, _ = torch.topk(x, 6, dim=1)
    assert torch.equal(v, rv)
    assert torch.equal(x.gather(1, i), v)                 # each index holds its value
    assert all(len(set(row.tolist())) == 6 for row in i)  # no element is picked twice
    for row, idx in zip(x, i):                            # ties: the first indices holding the value
        for val in set(row[idx].tolist()):
            want = [j for j, e in enumerate(row.tolist()) if e == val][: int((row[idx] == val).sum())]
            assert sorted(idx[row[idx] == val].tolist()) == want


@pytest.mark.parametrize("largest", [True, False])
def test_topk_of_a_large_k_is_the_sorted_lines_first_k(largest, tmp_path):
    """k > TOPK_MAX: the first k of the stable sort (NaN the largest, ties by first index), as torch."""
    x = _ties((5, 57), seed=3)
    x[1, 6] = float("nan")
    _, _, (v, i), _ = _run(lambda x: torch.topk(x, 40, dim=-1, largest=largest), [x], tmp_path, f"topk40{largest}")
    rv, _ = torch.topk(x, 40, dim=-1, largest=largest)
    assert torch.equal(v.isnan(), rv.isnan()) and torch.equal(v.nan_to_num(), rv.nan_to_num())
    assert torch.equal(x.gather(1, i).nan_to_num(), v.nan_to_num())        # each index holds its value
    assert all(len(set(row.tolist())) == 40 for row in i)                  # no element is picked twice


def test_topk_of_a_large_k_over_a_too_long_line_is_refused_naming_the_op_and_line(tmp_path):
    with pytest.raises(LoweringError) as e:
        lower_model(Fn(lambda x: torch.topk(x, 40, dim=-1).values), [torch.randn(2, 20000, dtype=torch.float64)],
                    "cpu")   # (float32 lines that long are sorted in runs and merged; float64 ones are refused)
    assert "aten.topk" in str(e.value) and "k = 40" in str(e.value)
    assert "test_lowering_breadth.py" in str(e.value)


# --- sort -------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dim, descending", [(-1, False), (-1, True), (0, False)])
def test_sort_is_stable_and_matches_torch(dim, descending, tmp_path):
    x = _ties((11, 29), seed=dim + 2 * descending)
    _, _, (v, i), _ = _run(lambda x: torch.sort(x, dim=dim, descending=descending), [x], tmp_path,
                           f"sort{dim}{descending}")
    rv, ri = torch.sort(x, dim=dim, descending=descending, stable=True)
    assert torch.equal(v, rv) and torch.equal(i, ri)


def test_sort_puts_nan_last_ascending_and_first_descending(tmp_path):
    x = torch.randn(5, 17)
    x[0, 3] = x[2, 0] = x[2, 9] = float("nan")
    _, _, (v, i), _ = _run(lambda x: torch.sort(x, dim=1), [x], tmp_path, "sort_nan")
    rv, ri = torch.sort(x, dim=1, stable=True)
    assert torch.allclose(v, rv, equal_nan=True) and torch.equal(v.isnan(), rv.isnan())
    assert torch.equal(i, ri)
    _, _, (vd, id_), _ = _run(lambda x: torch.sort(x, dim=1, descending=True), [x], tmp_path, "sort_nan_d")
    rvd, rid = torch.sort(x, dim=1, descending=True, stable=True)
    assert torch.allclose(vd, rvd, equal_nan=True) and torch.equal(id_, rid)


def test_argsort_feeds_a_gather(tmp_path):
    """torch.argsort then take_along_dim: the sorted order used as an index tensor."""
    x, y = torch.randn(6, 19), torch.randn(6, 19)
    _, _, out, ref = _run(lambda x, y: torch.take_along_dim(y, torch.argsort(x, dim=1), dim=1), [x, y], tmp_path,
                          "argsort")
    assert torch.equal(out, ref.float())


# --- logcumsumexp -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [0, -1])
def test_logcumsumexp_matches_float64(dim, tmp_path):
    x = torch.randn(13, 1100) * 4     # rows longer than one scan segment
    _, _, out, ref = _run(lambda x: torch.logcumsumexp(x, dim=dim), [x], tmp_path, f"lcse{dim}")
    assert_close(out, ref, 1e-4)


def test_logcumsumexp_with_infinities(tmp_path):
    x = torch.randn(4, 9)
    x[0] = float("-inf")
    x[1, :3] = float("-inf")
    x[2, 5] = float("inf")
    _, _, out, _ = _run(lambda x: torch.logcumsumexp(x, dim=1), [x], tmp_path, "lcse_inf")
    ref = torch.logcumsumexp(x.double(), dim=1)
    assert torch.equal(out.isinf(), ref.isinf()) and torch.equal(out.isnan(), ref.isnan())
    fin = ref.isfinite()
    assert torch.allclose(out.double()[fin], ref[fin], atol=1e-5, rtol=1e-5)


# --- max pooling with indices -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn, shape", [
    (lambda x: F.max_pool2d(x, 3, stride=2, padding=1, dilation=2, ceil_mode=True, return_indices=True),
     (2, 3, 13, 16)),
    (lambda x: F.max_pool1d(x, 4, stride=3, padding=2, return_indices=True), (2, 5, 29)),
    (lambda x: F.max_pool3d(x, 2, stride=2, ceil_mode=True, return_indices=True), (1, 2, 5, 7, 9)),
    (lambda x: nn.AdaptiveMaxPool2d((4, 5), return_indices=True)(x), (2, 3, 11, 13)),
    (lambda x: F.max_pool2d(x, 6, stride=3, padding=2, return_indices=True), (2, 3, 20, 21)),
])
def test_max_pool_indices_match_torch(fn, shape, tmp_path):
    """Windows of up to POOL_TAPS taps take the written-out running argmax (pointwise kernels only), larger
    ones (6x6) the reduction; both match torch exactly, ties and -inf padding included."""
    from argus_agent.lower.ops_nn import POOL_TAPS

    x = _ties(shape) if len(shape) == 4 else torch.randn(shape)
    prog, _, (v, i), _ = _run(fn, [x], tmp_path, f"mpi{len(shape)}")
    rv, ri = fn(x)
    assert torch.equal(v, rv) and torch.equal(i, ri)
    kinds = {type(k).__name__ for k in prog.kernels}
    window = 36 if shape == (2, 3, 20, 21) else 1
    assert ("Reduction" in kinds) == (window > POOL_TAPS), kinds


def test_max_pool_indices_on_ties_take_the_first_window_element(tmp_path):
    x = torch.randint(0, 2, (2, 2, 9, 11)).float()
    fn = lambda x: F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)  # noqa: E731
    _, _, (v, i), _ = _run(fn, [x], tmp_path, "mpi_ties")
    rv, ri = fn(x)
    assert torch.equal(v, rv) and torch.equal(i, ri)


# --- ops lowered through torch's decompositions -----------------------------------------------------------------------

@pytest.mark.parametrize("name, fn, shape", [
    ("nearest2d_size", lambda x: F.interpolate(x, size=(17, 10), mode="nearest"), (2, 3, 7, 9)),
    ("nearest1d", lambda x: F.interpolate(x, scale_factor=3, mode="nearest"), (2, 3, 11)),
    ("nearest3d", lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), (1, 2, 3, 4, 5)),
    ("bilinear_aligned", lambda x: F.interpolate(x, scale_factor=2.5, mode="bilinear", align_corners=True),
     (2, 3, 7, 9)),
    ("bilinear", lambda x: F.interpolate(x, size=(5, 13), mode="bilinear"), (2, 3, 7, 9)),
    ("bicubic", lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"), (1, 2, 6, 7)),
    ("trilinear", lambda x: F.interpolate(x, scale_factor=2, mode="trilinear"), (1, 2, 3, 4, 5)),
    ("repeat", lambda x: x.repeat(2, 1, 3) * 2.0, (3, 4, 5)),
    ("roll", lambda x: torch.roll(x, shifts=(2, -3), dims=(0, 1)), (6, 11)),
    ("diag_embed", lambda x: torch.diag_embed(x), (3, 7)),
    ("pixel_unshuffle_reflect_pad", lambda x: F.pad(F.pixel_unshuffle(x, 2), (1, 1, 1, 1), mode="reflect"),
     (2, 3, 8, 10)),
])
def test_ops_lowered_through_torch_decompositions(name, fn, shape, tmp_path):
    x = torch.randn(shape)
    _, _, out, ref = _run(fn, [x], tmp_path, name)
    assert_close(out, ref, 1e-5)


class Histogram(nn.Module):
    def forward(self, x):
        return torch.histc(x, bins=10) * 2.0


def test_an_op_with_neither_lowering_nor_decomposition_names_itself_and_the_line(tmp_path):
    with pytest.raises(LoweringError) as e:
        lower_model(Histogram(), [torch.randn(4, 9)], "cpu")
    msg = str(e.value)
    assert "aten.histc" in msg and "test_lowering_breadth.py" in msg and "torch.histc(x, bins=10)" in msg


# --- long chains ----------------------------------------------------------------------------------------

def test_long_chains_of_reused_values_lower_and_run(tmp_path):
    """Each op reads its operand twice (leaky_relu, gelu): written as a tree, a store's tag doubles per op;
    after a row reduction (logsumexp) and after a GEMM too. The kernels build and run."""
    def chain(x, w):
        h = torch.logsumexp(x @ w, dim=1, keepdim=True)
        for _ in range(12):
            h = F.gelu(F.leaky_relu(h, 0.01))
        y = x
        for _ in range(40):
            y = F.leaky_relu(y * 1.01, 0.02)
        return h + y.sum(dim=1, keepdim=True)
    _, _, out, ref = _run(chain, [torch.randn(6, 9), torch.randn(9, 5)], tmp_path, "chain")
    assert_close(out, ref, 1e-4)


# --- scatters into slices, copies, empty, eval RReLU, hypot, median / kthvalue ---------------------------------------

@pytest.mark.parametrize("name, fn, shapes", [
    ("circular_pad", lambda x: F.pad(x, (1, 2, 2, 1), mode="circular") * 1.5, [(2, 3, 6, 7)]),
    ("replicate_pad", lambda x: F.pad(x, (2, 1), mode="replicate"), [(2, 3, 9)]),
    ("conv_circular", lambda x, w: F.conv2d(F.pad(x, (1, 1, 1, 1), mode="circular"), w), [(2, 3, 7, 8), (4, 3, 3, 3)]),
    ("slice_scatter_step", lambda x, s: torch.slice_scatter(x, s, dim=1, start=1, end=10, step=3), [(4, 11), (4, 3)]),
    ("select_scatter", lambda x, s: torch.select_scatter(x, s, 0, -2), [(5, 6), (6,)]),
    ("rrelu_eval", lambda x: F.rrelu(x, 0.1, 0.4, training=False), [(5, 9)]),
    ("hypot", lambda a, b: torch.hypot(a, b), [(5, 9), (9,)]),
    ("one_hot", lambda x: F.one_hot((x.abs() * 2).long().clamp(max=4), 5).float().sum(1), [(4, 6)]),
])
def test_scatters_copies_and_pointwise_extras(name, fn, shapes, tmp_path):
    inputs = [torch.randn(s) for s in shapes]
    _, _, out, ref = _run(fn, inputs, tmp_path, name)
    assert_close(out, ref.double(), 1e-5)


@pytest.mark.parametrize("name, fn", [
    ("median_dim", lambda x: torch.median(x, 1)),
    ("median_dim0_keepdim", lambda x: torch.median(x, 0, keepdim=True)),
    ("kthvalue", lambda x: torch.kthvalue(x, 4, dim=1)),
    ("kthvalue_keepdim", lambda x: torch.kthvalue(x, 1, dim=0, keepdim=True)),
])
def test_median_and_kthvalue(name, fn, tmp_path):
    for x in (torch.randn(7, 12), _ties((7, 12), seed=3)):
        _, _, (v, i), _ = _run(fn, [x], tmp_path, name + str(int(x.isinf().any())))
        rv, ri = fn(x)
        assert torch.equal(v, rv) and v.shape == rv.shape and i.shape == ri.shape
        dim = 1 if "dim0" not in name and "keepdim" not in name else 0
        picked = x.gather(dim, i if i.dim() == x.dim() else i.unsqueeze(dim))
        assert torch.equal(picked.view(-1), v.view(-1))          # ties: any index holding the value


def test_median_of_all_elements(tmp_path):
    x = torch.randn(5, 8)
    _, _, out, _ = _run(lambda x: torch.median(x), [x], tmp_path, "median_all")
    assert out.shape == () and torch.equal(out, torch.median(x))


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, float("inf"), 1.5])
def test_cdist_matches_float64(p, tmp_path):
    a, b = torch.randn(2, 7, 5), torch.randn(1, 9, 5)
    b[0, 3] = a[1, 2]                          # a zero distance (p = 0 counts differing features)
    _, _, out, ref = _run(lambda a, b: torch.cdist(a, b, p=p), [a, b], tmp_path, f"cdist{p}")
    assert_close(out, ref, 1e-5)


# --- tensor constants made inside forward -----------------------------------------------------------------------------

class Constants(nn.Module):
    def forward(self, x):
        scale = torch.tensor([1.0, -2.0, 0.5, float("inf"), 3.0])
        bounds = torch.tensor([-1.0, 0.0, 1.0])
        rows = torch.tensor([4, 0, 2])
        y = torch.clamp(x * scale, max=1e3) + torch.bucketize(x, bounds).float()
        return torch.index_select(y, 0, rows)


class BigConstant(nn.Module):
    def forward(self, x):
        return x + torch.tensor([0.5] * 100).view(20, 5).sum(0)


def test_small_tensor_constants_are_lowered_as_values(tmp_path):
    """torch.tensor([...]) inside forward: no buffer, no host code (a host program may not build tensors from
    data); the values are selected by index inside the kernels."""
    x = torch.randn(6, 5)
    prog, src, out, ref = run_lowered(Constants(), [x], tmp_path, "constants", target="cpu")
    assert "torch.tensor" not in src and "lifted" not in src
    assert_close(out, ref, 1e-6)


def test_a_large_tensor_constant_is_refused_naming_the_line():
    with pytest.raises(LoweringError) as e:
        lower_model(BigConstant(), [torch.randn(3, 5)], "cpu")
    assert "register it as a buffer" in str(e.value)
    assert "test_lowering_breadth.py" in str(e.value)


# --- nn.EmbeddingBag --------------------------------------------------------------------------------------------------

class _Bag2d(nn.Module):
    def __init__(self, mode, pad=None):
        super().__init__()
        self.e = nn.EmbeddingBag(10, 4, mode=mode, padding_idx=pad)

    def forward(self, i):
        return self.e(i)


class _Bag1d(nn.Module):
    def __init__(self, mode, last=False, weighted=False):
        super().__init__()
        self.e = nn.EmbeddingBag(10, 4, mode=mode, include_last_offset=last)
        self.weighted = weighted

    def forward(self, i, o, w):
        return self.e(i, o, per_sample_weights=w if self.weighted else None)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_matches_torch(mode, tmp_path):
    """Fixed-size bags (2-D input, with and without padding_idx) and run-time offsets (an empty bag,
    include_last_offset), against eager. A 2-D input's bags reduce over the bag alone (the offsets are an
    arange: lowering over every index with a bag test took 4 s for 4096 bags on the H100)."""
    g = torch.Generator().manual_seed(5)
    cases = [
        (_Bag2d(mode), [torch.randint(0, 10, (3, 5), generator=g)]),
        (_Bag2d(mode, 2), [torch.tensor([[2, 2, 2], [1, 2, 3], [4, 5, 2]])]),
        (_Bag1d(mode), [torch.randint(0, 10, (12,), generator=g), torch.tensor([0, 3, 3, 7]), torch.rand(12)]),
        (_Bag1d(mode, last=True), [torch.randint(0, 10, (12,), generator=g), torch.tensor([0, 3, 3, 7, 12]),
                                   torch.rand(12)]),
    ]
    if mode == "sum":
        cases.append((_Bag1d(mode, weighted=True), [torch.randint(0, 10, (12,), generator=g),
                                                    torch.tensor([0, 3, 3, 7]), torch.rand(12, generator=g)]))
    import importlib.util

    from argus_agent.lower import render_program

    for k, (model, inputs) in enumerate(cases):
        with torch.no_grad():
            want = model.eval()(*inputs)
        path = tmp_path / f"bag_{mode}{k}.py"
        prog = lower_model(model, inputs, "cpu")
        if k == 0:   # a 2-D input's bags are known when lowering: one reduction over the bag, no count kernel
            assert [kk.R for kk in prog.kernels if hasattr(kk, "R")] == [5]
        path.write_text(render_program(prog))
        spec = importlib.util.spec_from_file_location(f"bag_{mode}{k}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        with torch.no_grad():
            out = mod.argus_forward(model, *inputs)
        assert out.shape == want.shape and torch.allclose(out, want, atol=1e-6, rtol=1e-6), k


class _BagWide(nn.Module):
    def __init__(self, mode, n, d):
        super().__init__()
        self.e = nn.EmbeddingBag(n, d, mode=mode)

    def forward(self, i):
        return self.e(i) * 2.0


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_on_a_gpu_target_is_the_stdlib_row_gather(mode, tmp_path):
    """On a GPU target, bags of one size (a 2-D input) go to stdlib_kernels/embedding_bag.py (a block per bag,
    BJ rows gathered at a time) whatever D and S are (D = 70: columns past D masked; S = 13: rows past the bag
    masked; D = 600: two column blocks), and the consumer reads its result; run here on the interpreter
    against float64. Offsets given at run time and per-sample weights keep the reduction."""
    from argus_agent.lower.ops_views import EmbeddingBagTemplate

    g = torch.Generator().manual_seed(9)
    for n, d, shape in [(50, 70, (6, 13)), (40, 600, (3, 4)), (30, 8, (5, 1))]:
        model = _BagWide(mode, n, d)
        idx = torch.randint(0, n, shape, generator=g)
        prog, src, out, ref = run_lowered(model, [idx], tmp_path, f"bag_gpu_{mode}_{d}")
        assert sum(isinstance(k, EmbeddingBagTemplate) for k in prog.kernels) == 1, src
        assert "launch(embedding_bag" in src
        assert_close(out, ref, 1e-5)
    model = _Bag1d(mode)
    inputs = [torch.randint(0, 10, (12,), generator=g), torch.tensor([0, 3, 3, 7]), torch.rand(12)]
    prog = lower_model(model, inputs, "sm_90a")
    assert not any(isinstance(k, EmbeddingBagTemplate) for k in prog.kernels)


# --- min/max over a dim with their indices ----------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["values", "indices", "both"])
def test_min_dim_lowers_only_the_outputs_read(which, tmp_path):
    """torch.min(x, dim) whose indices nothing reads is a plain min reduction (no index lanes); read indices
    take the fused (value, index) kernel. NaN propagates to the value and wins the index, as torch."""
    def fn(x):
        v, i = torch.min(x, dim=1)
        return {"values": v, "indices": i, "both": (v, i)}[which]
    x = torch.randn(3, 37, 29)
    x[1, 5, 3] = float("nan")
    x[2, :, 7] = float("nan")
    prog, _, out, _ = _run(fn, [x], tmp_path, f"mind_{which}")
    kinds = {k.kind for k in prog.kernels}
    assert kinds == ({"min"} if which == "values" else {"argmin"}), kinds
    ref = fn(x)
    for o, r in zip(out if which == "both" else (out,), ref if which == "both" else (ref,)):
        assert torch.equal(o.isnan(), r.isnan()) if o.is_floating_point() else True
        assert torch.equal(torch.nan_to_num(o), torch.nan_to_num(r))


# --- gather from a computed tensor ------------------------------------------------------------------------------------

class _GatherOf(nn.Module):
    def __init__(self, case, c):
        super().__init__()
        self.case = case
        self.register_buffer("w", torch.rand(c, generator=torch.Generator().manual_seed(4)) + 0.5)

    def forward(self, x, t):
        if self.case == "cross_entropy_weighted":
            return F.cross_entropy(x, t, weight=self.w)
        if self.case == "gather_expr":
            return torch.gather(torch.tanh(x) * self.w, 1, t[:, None].expand(x.shape[0], 3))
        if self.case == "gather_padded":
            return torch.gather(F.pad(x, (2, 0)), 1, t[:, None])
        return torch.gather(x.view(x.shape[0], -1, 4).transpose(1, 2).reshape(x.shape[0], -1), 1, t[:, None])


@pytest.mark.parametrize("case", ["cross_entropy_weighted", "gather_expr", "gather_padded", "gather_permuted"])
def test_gather_of_an_expression_computes_only_the_gathered_elements(case, tmp_path):
    """A gather (cross entropy's pick of the target's log-probability) from a computed tensor evaluates the
    expression at the gathered positions: no temporary as large as the source (a padded source's reads are
    gathers, bounds-checked); a source that reads the gathered coordinate through div/mod (a permuted reshape)
    is written out first. All match torch in float64."""
    g = torch.Generator().manual_seed(4)
    n, c = 37, 53
    c = 52 if case == "gather_permuted" else c
    x = torch.randn(n, c - 2 if case == "gather_padded" else c, generator=g)
    t = torch.randint(0, c, (n,), generator=g)
    prog, _, out, ref = run_lowered(_GatherOf(case, c), [x, t], tmp_path, f"gx_{case}", target="cpu")
    temps = [b for b in prog.buffers if b.kind == "temp" and b.numel >= n * (c - 2)]
    assert bool(temps) == (case == "gather_permuted"), [(b.name, b.shape) for b in temps]
    assert torch.allclose(out.double(), ref, rtol=1e-5, atol=1e-6), (out.double() - ref).abs().max()


def test_a_reduction_over_gathered_table_rows_puts_the_row_along_the_fast_axis(tmp_path):
    """embedding(idx).mean(1): each reduced step gathers a whole table row, so the outputs (the row's
    columns) lie along the tile's fast axis ((BR, BM) tile: a warp reads one row, coalesced), and the
    result matches torch in float64."""
    class EmbMean(nn.Module):
        def __init__(self):
            super().__init__()
            self.e = nn.Embedding(50, 40)

        def forward(self, i):
            return self.e(i).mean(dim=1)
    idx = torch.randint(0, 50, (6, 9), generator=torch.Generator().manual_seed(2))
    prog, src, out, ref = run_lowered(EmbMean(), [idx], tmp_path, "emb_mean", target="cpu")
    assert "acc = tp.full((BR, BM)" in src
    assert torch.allclose(out.double(), ref, rtol=1e-6, atol=1e-6)



# --- erfinv, empty_permuted (2026-11-24 breadth probe) --------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_erfinv_matches_torch_at_its_precision_with_its_edges(dtype, tmp_path):
    """erfinv has no tilepy op: the lowering writes a polynomial start and one Newton step on erf. fp32 within a
    few ulp of float64, float64 within 1e-12; +-1 give +-inf, |x| > 1 NaN, as torch."""
    g = torch.Generator().manual_seed(5)
    x = torch.cat([torch.rand(3000, generator=g, dtype=torch.float64) * 2 - 1,
                   torch.tensor([1.0, -1.0, 0.0, 1 - 1e-7, -(1 - 1e-7), 1.5, -2.0, 1e-30, 0.5])]).to(dtype)
    _, _, out, _ = _run(lambda t: torch.erfinv(t), [x], tmp_path, f"erfinv_{str(dtype)[-2:]}")
    ref = torch.erfinv(x.double())
    assert out.dtype == dtype
    assert torch.equal(out.isnan(), ref.isnan()) and torch.equal(out.isinf() & (out > 0), ref.isinf() & (ref > 0))
    fin = ref.isfinite()
    # near |x| = 1 erfinv is ill-conditioned: one ulp of x moves it by eps |x| / erf'(y), so the bound is that
    # sensitivity (4 ulp of x) plus a relative part: 1e-6 for fp32, 1e-12 for float64
    eps, rel = (torch.finfo(dtype).eps, 1e-6 if dtype == torch.float32 else 1e-12)
    y, xd = ref[fin], x.double()[fin]
    slope = 2 / torch.pi ** 0.5 * torch.exp(-y * y)
    bound = rel * y.abs() + 4 * eps * xd.abs() / slope
    err = (out.double()[fin] - y).abs()
    assert (err <= bound).all(), (err / bound).max()


def test_losses_that_allocate_with_empty_permuted_lower(tmp_path):
    """cosine_embedding_loss and hinge_embedding_loss allocate through aten.empty_permuted in their
    decomposition; both match torch in float64."""
    g = torch.Generator().manual_seed(6)
    a, b = torch.randn(16, 10, generator=g), torch.randn(16, 10, generator=g)
    y = torch.randint(0, 2, (16,), generator=g).float() * 2 - 1
    _, _, out, ref = _run(lambda a, b, y: F.cosine_embedding_loss(a, b, y, margin=0.1), [a, b, y], tmp_path, "cel")
    assert torch.allclose(out.double(), ref, rtol=1e-5, atol=1e-6), (out, ref)
    y2 = torch.randint(0, 2, (16, 10), generator=g).float() * 2 - 1
    _, _, out, ref = _run(lambda a, y: F.hinge_embedding_loss(a, y, margin=0.7), [a, y2], tmp_path, "hel")
    assert torch.allclose(out.double(), ref, rtol=1e-5, atol=1e-6), (out, ref)


def test_a_branch_on_tensor_values_names_the_forward_line_and_what_to_do(tmp_path):
    """torch.export cannot capture a Python `if` on a tensor's value: the error names the reference's line in
    its own file and says how to write it instead."""
    import importlib.util

    src = tmp_path / "branchy_ref.py"
    src.write_text("import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                   "        if x.sum() > 0:\n            return x * 2\n        return x - 1\n")
    spec = importlib.util.spec_from_file_location("branchy_ref", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(LoweringError) as ei:
        lower_model(mod.Model(), [torch.randn(3, 4)], "cpu")
    msg = str(ei.value)
    assert "branchy_ref.py:6: `if x.sum() > 0:`" in msg and "torch.where" in msg, msg


@pytest.mark.parametrize("k,pad", [(1, 0), (3, 1)], ids=["1x1", "3x3_pad1"])
def test_a_conv_over_a_one_pixel_map_decides_its_constant_padding_checks(k, pad, tmp_path):
    """A conv on a 1x1 map (a squeeze-and-excitation gate after a global mean): its padding conditions have
    constant coordinates, decided at lowering time (all-true: no mask; false: the tap reads zeros); matches
    torch in float64."""
    conv = nn.Conv2d(6, 5, k, padding=pad)

    class SE(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = conv

        def forward(self, x):
            return x * torch.sigmoid(self.conv(F.silu(x.mean((2, 3), keepdim=True)))[:, :1])
    x = torch.randn(2, 6, 5, 4, generator=torch.Generator().manual_seed(8))
    _, src, out, ref = run_lowered(SE(), [x], tmp_path, f"se_{k}", target="cpu")
    assert "(0 >= 0)" not in src
    assert torch.allclose(out.double(), ref, rtol=1e-5, atol=1e-6), (out.double() - ref).abs().max()


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_an_index_of_an_index_expression_composes_into_one_gather(mode, tmp_path):
    """torch decomposes reflection padding into one aten.index per padded dim; an index of an expression that
    is not a buffer composes with it (the placeholder coordinate replaced by the index value), so the padding is
    one kernel, not one pass per dim. An index that reads its input many times over (a gather of rows fanned
    out) still realizes it first. Against float64 on the interpreter."""
    g = torch.Generator().manual_seed(12)
    x = torch.randn(2, 3, 9, 11, generator=g)

    def pad(x):
        return F.pad(x * 1.5 + 1.0, (2, 3, 1, 2), mode=mode).relu()
    prog, src, out, ref = run_lowered(Fn(pad), [x], tmp_path, f"compose_{mode}", "cpu")
    assert_close(out, ref, 1e-6)
    assert len(prog.kernels) == 1, [type(k).__name__ for k in prog.kernels]
    rows = torch.randint(0, 9, (40,), generator=g)

    def fan(x, i):
        return (x * 2.0)[:, :, i]
    prog, src, out, ref = run_lowered(Fn(fan), [x, rows], tmp_path, f"fan_{mode}", "cpu")
    assert_close(out, ref, 1e-6)
    assert len(prog.kernels) == 2                     # x * 2 realized, then the gather of it


@pytest.mark.parametrize("bias", [True, False])
def test_bilinear_layer_lowers_through_trilinear(bias, tmp_path):
    """nn.Bilinear is aten._trilinear (x1[b, i] W[o, i, j] x2[b, j] summed over i and j) plus the bias: one
    reduction of three-load products, against torch in float64; also with a leading batch dim."""
    class Bil(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.Bilinear(5, 6, 3, bias=bias)

        def forward(self, x, y):
            return self.layer(x, y)
    torch.manual_seed(9)
    model = Bil()
    g = torch.Generator().manual_seed(10)
    for shape in ((4,), (2, 3)):
        a, b = torch.randn(*shape, 5, generator=g), torch.randn(*shape, 6, generator=g)
        _, _, out, ref = run_lowered(model, [a, b], tmp_path, f"bil_{bias}_{len(shape)}", target="cpu")
        assert out.shape == ref.shape
        assert torch.allclose(out.double(), ref, rtol=1e-5, atol=1e-6), (out.double() - ref).abs().max()


# --- addbmm, copysign / signbit (a second CPU probe, 2026-11-24) ----------------------------------------------------

@pytest.mark.parametrize("beta, alpha", [(1, 1), (0.5, -1.5), (0, 2.0)])
def test_addbmm_folds_the_batch_into_k(beta, alpha, tmp_path):
    g = torch.Generator().manual_seed(2)
    c, a, b = torch.randn(5, 7, generator=g), torch.randn(3, 5, 4, generator=g), torch.randn(3, 4, 7, generator=g)
    prog, _, out, ref = _run(lambda c, a, b: torch.addbmm(c, a, b, beta=beta, alpha=alpha), [c, a, b], tmp_path,
                             f"addbmm{beta}{alpha}".replace(".", "_").replace("-", "m"))
    assert_close(out, ref, 1e-5)


def test_copysign_and_signbit_follow_negative_zeros(tmp_path):
    a = torch.tensor([[1.5, -2.0, 0.0, -0.0, 3.0, float("inf")]])
    b = torch.tensor([[-0.0, 0.0, -1.0, 2.0, -float("inf"), -3.0]])
    _, _, out, _ = _run(lambda a, b: torch.copysign(a, b), [a, b], tmp_path, "copysign")
    want = torch.copysign(a, b)
    assert torch.equal(out, want) and torch.equal(torch.signbit(out), torch.signbit(want))
    _, _, bits, _ = _run(lambda b: torch.signbit(b), [b], tmp_path, "signbit")
    assert torch.equal(bits, torch.signbit(b))


# --- special functions: lgamma, digamma (float64 inside), i0 ---------------------------------------------------------

_SPECIAL_X = torch.cat([torch.linspace(-6.7, 12.3, 381),
                        torch.tensor([0.0, -0.0, -1.0, -3.0, 1.0, 2.0, 1e-6, -2.5, -5.9857, 30.0, 100.5, 1e6])])


@pytest.mark.parametrize("fn", [torch.lgamma, torch.digamma], ids=["lgamma", "digamma"])
def test_lgamma_and_digamma_match_float64_with_their_poles(fn, tmp_path):
    _, _, out, _ = _run(fn, [_SPECIAL_X], tmp_path, fn.__name__)
    want = fn(_SPECIAL_X.double())
    assert torch.equal(torch.isnan(out), torch.isnan(want))
    assert torch.equal(torch.isinf(out), torch.isinf(want)) and torch.equal(out[torch.isinf(want)],
                                                                          want[torch.isinf(want)].float())
    fin = torch.isfinite(want)
    # float64 inside, the reflection's sine in fp32, rounded once: within two fp32 roundings of float64 (torch's
    # own fp32 digamma is off by up to 4.5e-7 here)
    assert torch.allclose(out[fin].double(), want[fin], rtol=2.5e-7, atol=2.5e-7)
    with pytest.raises(LoweringError, match="in float64"):
        lower_model(Fn(fn), [_SPECIAL_X.double()], "cpu")


def test_i0_matches_float64_and_refuses_float64(tmp_path):
    x = torch.linspace(-20, 20, 401)
    _, _, out, _ = _run(torch.special.i0, [x], tmp_path, "i0")
    want = torch.special.i0(x.double())
    assert torch.allclose(out.double(), want, rtol=3e-7, atol=0)      # Abramowitz & Stegun 9.8.1 / 9.8.2
    with pytest.raises(LoweringError, match="i0 in float64"):
        lower_model(Fn(torch.special.i0), [x.double()], "cpu")


def test_the_special_functions_render_for_the_gpu(tmp_path):
    """The sm_90a kernel renders to HIP C++ (the renderers have f64 exp / log / sqrt but no f64 sine: the
    reflections take their sine in fp32)."""
    import importlib.util

    from argus_agent.lower import render_program
    from tilepy_hip.render import render_source

    fn = Fn(lambda x: torch.lgamma(x) + torch.digamma(x) + torch.special.i0(x))
    src = render_program(lower_model(fn, [torch.randn(4096)], "sm_90a"))
    p = tmp_path / "special_gpu.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location("special_gpu", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    kernels = [v for v in vars(mod).values() if type(v).__name__ == "Kernel"]
    assert kernels
    for k in kernels:
        cpp, _ = render_source(k.ir(target="sm_90a"), "sm_90a")
        assert "double" in cpp and "tp_sinf" in cpp
