"""The PyTorch lowering: index algebra, every corpus problem at CPU sizes on the interpreter, verification of
the generated kernels, and clear errors for what is not lowered."""

import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from argus_agent.lower import LoweringError, lower_model, render_program
from argus_agent.lower.candidate import lower_problem
from argus_agent.lower.index import Div, Mod, Sum, Var, flatten, unflatten
from argus_agent.problem import load_problem

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((ROOT / "tests" / "problems").glob("level*/[0-9]*.py"))


def evaluate(e, env):
    """An index expression's value for loop variables bound in `env` (numpy arrays), by the definitions."""
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Div):
        return evaluate(e.x, env) // e.d
    if isinstance(e, Mod):
        return evaluate(e.x, env) % e.m
    if isinstance(e, Sum):
        out = np.full_like(next(iter(env.values())), e.c)
        for coef, a in e.terms:
            out = out + coef * evaluate(a, env)
        return out
    raise TypeError(e)


shapes = st.lists(st.integers(1, 7), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(shapes, st.data())
def test_views_compose_to_the_right_flat_index(shape, data):
    """permute / reshape / slice maps built from unflatten/flatten give numpy's element order, and a
    contiguous round trip simplifies back to the flat index itself."""
    n = int(np.prod(shape))
    i = Var("i", n)
    flat = np.arange(n)
    round_trip = flatten(unflatten(i, shape), shape)
    assert np.array_equal(evaluate(round_trip, {"i": flat}), flat)
    if n > 1:
        assert round_trip == i     # simplified away: the kernel reads a window, not a gather
    perm = data.draw(st.permutations(range(len(shape))))
    pshape = [shape[p] for p in perm]
    coords = unflatten(i, pshape)                     # coordinates in the permuted view
    src = [None] * len(shape)
    for k, p in enumerate(perm):
        src[p] = coords[k]
    got = evaluate(flatten(src, shape), {"i": flat})
    want = np.arange(n).reshape(shape).transpose(perm).reshape(-1)
    assert np.array_equal(got, want)
    split = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
    merged = flatten(unflatten(flatten(unflatten(i, (n // split, split)), (n // split, split)), shape), shape)
    assert np.array_equal(evaluate(merged, {"i": flat}), flat)


def _load(source: str, tmp_path: Path, name: str):
    p = tmp_path / f"{name}.py"
    p.write_text(source)
    spec = importlib.util.spec_from_file_location(f"lowered_{name}_{abs(hash(source))}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_corpus_problem_lowers_and_matches_eager(path, tmp_path):
    """Every corpus problem, lowered whole at its CPU sizes, matches eager PyTorch (in float64) on fresh inputs
    at the precision PyTorch computes it, and its host program does no arithmetic of its own."""
    problem = load_problem(path, cpu=True)
    first = lower_problem(problem)
    assert first.program.kernels, "every program runs at least one kernel"
    assert first.tol <= 1e-2
    mod = _load(first.source, tmp_path, path.stem)
    model = problem.make_model()
    gen = torch.Generator().manual_seed(11)
    inputs = problem.draw_inputs(problem.shapes(1)[0], gen)
    with torch.no_grad():
        ref = model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        out = mod.argus_forward(model, *inputs)
    refs, outs = (ref if isinstance(ref, tuple) else (ref,)), (out if isinstance(out, tuple) else (out,))
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype
        assert torch.allclose(o.double(), r.double(), atol=first.tol, rtol=first.tol, equal_nan=True), (
            f"max error {(o.double() - r.double()).abs().max():.3g} at tolerance {first.tol}")


@pytest.mark.parametrize("path", CORPUS[::20], ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_generated_kernels_verify_clean(path, tmp_path):
    """tilepy-verify proves the generated kernels race-free and in bounds (a sample of the corpus)."""
    from argus_agent.gates import verify_kernels

    problem = load_problem(path, cpu=True)
    mod = _load(lower_problem(problem).source, tmp_path, path.stem)
    import tilepy as tp

    kernels = {k: v for k, v in vars(mod).items() if isinstance(v, tp.Kernel)}
    verdict = verify_kernels(kernels, "sm_90a")
    assert verdict.ok, [f["message"] for f in verdict.findings if f["severity"] == "error"]


def test_fusion_makes_one_kernel_of_a_pointwise_chain_with_broadcast_parameters():
    class Chain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.randn(6, 1, 1))
            self.register_buffer("shift", torch.randn(1, 5, 1))

        def forward(self, x, y):
            return torch.nn.functional.gelu(x * self.scale + y) - self.shift * 2.0

    prog = lower_model(Chain(), [torch.randn(6, 5, 7), torch.randn(7)])
    assert len(prog.kernels) == 1


def test_softmax_over_dim0_and_reductions_over_any_dims(tmp_path):
    class Red(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=0) + x.sum(dim=(0, 2), keepdim=True) + x.amax(dim=1, keepdim=True)

    x = torch.randn(5, 6, 7)
    model = Red()
    mod = _load(render_program(lower_model(model, [x])), tmp_path, "red")
    assert torch.allclose(mod.argus_forward(model, x), model(x), atol=1e-5, rtol=1e-5)


def test_unsupported_op_names_the_op_and_the_reference_line():
    class Odd(torch.nn.Module):
        def forward(self, x):
            return torch.histc(x + 1, bins=7)

    with pytest.raises(LoweringError, match=r"test_lowering.py:\d+: .*aten\.histc"):
        lower_model(Odd(), [torch.randn(4)])


def test_plain_number_argument_is_checked_against_the_lowered_value(tmp_path):
    class Scale(torch.nn.Module):
        def forward(self, x, k: float):
            return x * k

    model = Scale()
    mod = _load(render_program(lower_model(model, [torch.randn(3), 2.5])), tmp_path, "scale")
    x = torch.randn(3)
    assert torch.equal(mod.argus_forward(model, x, 2.5), x * 2.5)
    with pytest.raises(ValueError, match="lower it again"):
        mod.argus_forward(model, x, 3.0)


def test_index_expressions_render_every_permutation_of_a_4d_tensor(tmp_path):
    for perm in itertools.islice(itertools.permutations(range(4)), 0, 24, 5):
        class Perm(torch.nn.Module):
            def forward(self, x, perm=perm):
                return x.permute(*perm).contiguous() * 2

        x = torch.randn(2, 3, 4, 5)
        model = Perm()
        mod = _load(render_program(lower_model(model, [x])), tmp_path, f"perm{''.join(map(str, perm))}")
        assert torch.equal(mod.argus_forward(model, x), model(x))


# ---------------------------------------------------------------- scans, tiled reductions, fused rows
def _run_lowered(model, inputs, tmp_path, name):
    prog = lower_model(model, inputs)
    mod = _load(render_program(prog), tmp_path, name)
    with torch.no_grad():
        return prog, mod, mod.argus_forward(model, *inputs)


def _kinds(prog):
    return [type(k).__name__ + ("" if not hasattr(k, "mode") else f":{k.mode}") for k in prog.kernels]


class _Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


@pytest.mark.parametrize("case", ["cumsum_last", "cumsum_dim0", "cumsum_mid", "cumprod", "reverse",
                                  "exclusive", "exclusive_prod", "reverse_col", "int_cumsum", "reverse_exp"])
def test_scans_are_linear_scan_kernels_matching_float64(case, tmp_path):
    """Every scan form lowers to one Scan kernel (no O(n^2) prefix reduction) and matches torch in float64;
    rows longer than one chunk carry across chunks (4500 > 2048), columns scan along a strided axis."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(5, 4500, generator=g)
    fns = {
        "cumsum_last": (lambda t: t.cumsum(-1), x),
        "cumsum_dim0": (lambda t: t.cumsum(0), torch.randn(300, 7, 9, generator=g)),
        "cumsum_mid": (lambda t: t.cumsum(1), torch.randn(3, 70, 33, generator=g)),
        "cumprod": (lambda t: torch.cumprod(1.0 + 0.001 * t, dim=1), x),
        "reverse": (lambda t: t.flip(1).cumsum(1).flip(1), x),
        "exclusive": (lambda t: torch.cat([torch.zeros_like(t[:, :1]), t[:, :-1]], dim=1).cumsum(1), x),
        "exclusive_prod": (lambda t: torch.cat([torch.ones_like(t[:, :1]), 1 + 0.001 * t[:, :-1]], 1).cumprod(1),
                           x),
        "reverse_col": (lambda t: t.flip(0).cumsum(0).flip(0), torch.randn(40, 3, 17, generator=g)),
        "int_cumsum": (lambda t: (t > 0).to(torch.int32).cumsum(1), x),
        # past the row's end the value would be exp(0) = 1, not the identity: the ragged last segment is masked
        "reverse_exp": (lambda t: torch.exp(0.01 * t).flip(1).cumsum(1).flip(1), x),
    }
    fn, inp = fns[case]
    model = _Fn(fn)
    prog, mod, out = _run_lowered(model, [inp], tmp_path, f"scan_{case}")
    assert [type(k).__name__ for k in prog.kernels] == ["Scan"]   # flips fold into the scan's direction
    scan = prog.kernels[0]
    assert scan.reverse == case.startswith("reverse") and scan.exclusive == case.startswith("exclusive")
    assert "_segments" in render_program(prog) if inp.shape[-1] == 4500 and "dim" not in case else True
    ref = fn(inp.double()) if case != "int_cumsum" else fn(inp)
    assert out.dtype == fn(inp).dtype
    assert torch.allclose(out.double(), ref.double(), rtol=1e-5, atol=1e-4), (out.double() - ref.double()).abs().max()


@pytest.mark.parametrize("case", ["sum_dim1", "amax_dim0", "argmax_dim1", "mean_dims_0_2", "var_dims_1_2",
                                  "all_dim0", "sum_all_split", "min_values"])
def test_reductions_tile_by_orientation_and_split(case, tmp_path):
    """Reductions over a leading or middle dim read windows along the kept contiguous dim ("col"), over the
    last dims along the reduced one ("row"); too few outputs split the reduction into partials and a combine
    kernel. Non-adjacent dims reduce the inner run first. Results match float64."""
    g = torch.Generator().manual_seed(5)
    cases = {
        "sum_dim1": (lambda t: t.sum(1), torch.randn(3, 700, 37, generator=g), {"Reduction:col"}),
        "amax_dim0": (lambda t: t.amax(0), torch.randn(20000, 5, generator=g), {"Reduction:col"}),
        "argmax_dim1": (lambda t: t.argmax(1), torch.randn(4, 300, 9, generator=g), {"Reduction:col"}),
        "mean_dims_0_2": (lambda t: t.mean((0, 2)), torch.randn(6, 11, 50, generator=g),
                          {"Reduction:row", "Reduction:col"}),
        "var_dims_1_2": (lambda t: t.var((1, 2), unbiased=False), torch.randn(2, 9, 13, 8, generator=g),
                         {"Reduction:col"}),
        "all_dim0": (lambda t: (t > -2.5).all(0), torch.randn(500, 33, generator=g), {"Reduction:col"}),
        "sum_all_split": (lambda t: t.sum(), torch.randn(3, 30000, generator=g), {"Reduction:row"}),
        "min_values": (lambda t: torch.min(t, dim=1).values, torch.randn(3, 50, 7, generator=g), {"Reduction:col"}),
    }
    fn, inp, kinds = cases[case]
    model = _Fn(fn)
    prog, mod, out = _run_lowered(model, [inp], tmp_path, f"red_{case}")
    assert set(_kinds(prog)) == kinds, _kinds(prog)
    if case in ("min_values", "all_dim0"):   # unread indices are not computed; the bool test is the epilogue
        assert len(prog.kernels) == 1
    ref = fn(inp.double()) if out.dtype.is_floating_point else fn(inp)
    assert out.shape == ref.shape and out.dtype == fn(inp).dtype
    assert torch.allclose(out.double(), ref.double(), rtol=1e-5, atol=1e-5), (out.double() - ref.double()).abs().max()
    if case in ("amax_dim0", "sum_all_split"):
        assert any(n.endswith("_combine") for n in vars(mod))


@pytest.mark.parametrize("case", ["softmax", "log_softmax", "layer_norm", "rms_norm", "var_last", "l2_normalize",
                                  "softmax_odd_rows", "bf16_log_softmax"])
def test_reduction_and_its_row_epilogue_are_one_kernel(case, tmp_path):
    """A reduction chain and the pointwise ops that follow it on the same rows become one row-persistent
    kernel (rows in registers, one read, one write); rows of 1000 (not a power of two) and bf16 included."""
    g = torch.Generator().manual_seed(9)
    x = torch.randn(6, 1000, generator=g) * 3
    w, b = torch.randn(1000, generator=g), torch.randn(1000, generator=g)
    cases = {
        "softmax": lambda t, w, b: torch.softmax(t, -1),
        "log_softmax": lambda t, w, b: torch.log_softmax(t, -1),
        "layer_norm": lambda t, w, b: torch.nn.functional.layer_norm(t, (1000,), w, b),
        "rms_norm": lambda t, w, b: t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
        "var_last": lambda t, w, b: t.var(-1),
        "l2_normalize": lambda t, w, b: torch.nn.functional.normalize(t, dim=-1),
        "softmax_odd_rows": lambda t, w, b: torch.softmax(t.view(3, 2, 1000), -1),
        "bf16_log_softmax": lambda t, w, b: torch.log_softmax(t, -1),
    }
    fn = cases[case]
    inp = x.to(torch.bfloat16) if case.startswith("bf16") else x
    prog, mod, out = _run_lowered(_Fn(fn), [inp, w, b], tmp_path, f"fused_{case}")
    assert [type(k).__name__ for k in prog.kernels] == ["RowFused"], _kinds(prog)
    ref = fn(inp.double(), w.double(), b.double())
    tol = 1e-2 if inp.dtype == torch.bfloat16 else 1e-5
    assert out.dtype == fn(inp, w, b).dtype
    assert torch.allclose(out.double(), ref, rtol=tol, atol=tol), (out.double() - ref).abs().max()


def test_fp32_tolerance_grows_with_a_scans_length():
    """A running sum of N terms carries an N-term sum's rounding: the fp32 tolerance follows the scan's
    length as it follows a reduction's (and never passes 1e-2)."""
    from argus_agent.lower.candidate import precision_of

    short = lower_model(_Fn(lambda t: t.cumsum(1)), [torch.randn(2, 100)])
    long = lower_model(_Fn(lambda t: t.cumsum(1)), [torch.randn(2, 8192)])
    assert precision_of(short, [], False)[1] == 1e-4
    assert precision_of(long, [], False)[1] == pytest.approx(8192 * 2.0**-24 * 8)


def test_rows_too_long_for_registers_keep_the_multi_kernel_form(tmp_path):
    """Rows longer than ROW_MAX are not fused (three kernels for a softmax) and stay correct."""
    from argus_agent.lower.sizes import ROW_MAX

    x = torch.randn(2, ROW_MAX + 5)
    prog, mod, out = _run_lowered(_Fn(lambda t: torch.softmax(t, -1)), [x], tmp_path, "long_softmax")
    assert [type(k).__name__ for k in prog.kernels] == ["Reduction", "Reduction", "Pointwise"]
    assert torch.allclose(out.double(), torch.softmax(x.double(), -1), rtol=1e-5, atol=1e-7)


def test_fused_stage_read_elsewhere_is_still_stored(tmp_path):
    """A row max that another output also needs is stored by the fused kernel as well."""
    x = torch.randn(4, 300)
    fn = lambda t: (torch.softmax(t, -1), t.amax(-1) * 2)   # noqa: E731
    prog, mod, out = _run_lowered(_Fn(fn), [x], tmp_path, "shared_stage")
    ref = fn(x.double())
    for o, r in zip(out, ref):
        assert torch.allclose(o.double(), r, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["row_split", "col_split", "welford_col_split"])
def test_split_reductions_keep_their_geometry_for_epilogues(case, tmp_path):
    """A split reduction's combine kernel runs over the same (rows | O x I columns) as its first pass, so an
    epilogue reading other tensors by those indices (a per-row or per-column scale) reads the right ones."""
    g = torch.Generator().manual_seed(6)
    cases = {
        "row_split": (lambda t, w: t.sum(1) * w, torch.randn(4, 70000, generator=g), torch.randn(4, generator=g)),
        "col_split": (lambda t, w: t.amax(1) * w, torch.randn(3, 9000, 5, generator=g), torch.randn(5, generator=g)),
        "welford_col_split": (lambda t, w: t.std(1) + w, torch.randn(3, 9000, 5, generator=g),
                              torch.randn(5, generator=g)),
    }
    fn, x, w = cases[case]
    prog, mod, out = _run_lowered(_Fn(fn), [x, w], tmp_path, f"split_epi_{case}")
    assert len(prog.kernels) == 1 and prog.kernels[0].epilogue is not None, _kinds(prog)
    assert "_combine" in render_program(prog)
    ref = fn(x.double(), w.double())
    assert torch.allclose(out.double(), ref, rtol=1e-5, atol=1e-4), (out.double() - ref).abs().max()


def test_intermediates_are_allocated_once_per_shape_and_outputs_are_fresh(tmp_path):
    """The host program keeps its intermediates between calls (per device and input shapes) but returns a
    new output tensor every call."""
    x = torch.randn(8, 40000)
    model = _Fn(lambda t: t.sum() + t.amax())
    prog, mod, out1 = _run_lowered(model, [x], tmp_path, "temps")
    assert len(mod._TEMPS) == 1
    temps = [id(t) for t in next(iter(mod._TEMPS.values()))]
    out2 = mod.argus_forward(model, x * 2)
    assert [id(t) for t in next(iter(mod._TEMPS.values()))] == temps
    assert out1.data_ptr() != out2.data_ptr()
    assert torch.allclose(out1.double(), (x.double().sum() + x.double().amax()), rtol=1e-5)
    assert torch.allclose(out2.double(), 2 * (x.double().sum() + x.double().amax()), rtol=1e-5)


def test_new_kernel_forms_verify_clean(tmp_path):
    """tilepy-verify proves the scan, column (split) reduction, one-pass argmax, Welford and fused-row kernels
    in bounds and race-free."""
    import tilepy as tp
    from argus_agent.gates import verify_kernels

    g = torch.Generator().manual_seed(1)
    fn = lambda a, b: (a.cumsum(1), b.amax(0), torch.softmax(a, -1), a.flip(1).cumsum(1).flip(1),  # noqa: E731
                       b.argmax(0), b.std(0), a.argmin(1))
    a, b = torch.randn(3, 300, generator=g), torch.randn(9000, 6, generator=g)
    mod = _load(render_program(lower_model(_Fn(fn), [a, b])), tmp_path, "verify_new")
    kernels = {k: v for k, v in vars(mod).items() if isinstance(v, tp.Kernel)}
    assert len(kernels) >= 5
    verdict = verify_kernels(kernels, "sm_90a")
    assert verdict.ok, [f["message"] for f in verdict.findings if f["severity"] == "error"]


@pytest.mark.parametrize("case", ["argmax_dim0_split", "argmin_mid", "max_dim_values_indices", "ties_nan_inf",
                                  "argmax_keepdim"])
def test_column_argmax_is_one_pass_with_torch_tie_and_nan_rules(case, tmp_path):
    """argmax/argmin (and max/min with indices) over a strided axis: one kernel keeps value and first index
    (plus a combine kernel when split); ties take the first index, a NaN is the extreme (its first index),
    an all -inf column gives index 0 — exactly torch's answers."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(20000, 6, generator=g)
    y = torch.randn(3, 70, 37, generator=g)
    t = torch.randint(0, 3, (300, 9), generator=g).float()          # many ties
    t[5, 2] = float("nan")
    t[17, 2] = float("nan")
    t[:, 4] = float("-inf")
    t[40:60, 6] = float("nan")
    cases = {
        "argmax_dim0_split": (lambda a: a.argmax(0), x),
        "argmin_mid": (lambda a: a.argmin(1), y),
        "max_dim_values_indices": (lambda a: torch.max(a, dim=1), y),
        "ties_nan_inf": (lambda a: (a.argmax(0), a.argmin(0)), t),
        "argmax_keepdim": (lambda a: a.argmax(1, keepdim=True), y),
    }
    fn, inp = cases[case]
    prog, mod, out = _run_lowered(_Fn(fn), [inp], tmp_path, f"arg_{case}")
    assert all(getattr(k, "kind", "").startswith("arg") for k in prog.kernels), _kinds(prog)
    ref = fn(inp)
    outs = out if isinstance(out, tuple) else (out,)
    refs = tuple(ref) if isinstance(ref, tuple) else (ref,)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype
        assert torch.equal(o, r) or torch.allclose(o, r, equal_nan=True), (o, r)


@pytest.mark.parametrize("case", ["var_dim0_split", "std_dim0_keepdim", "var_dims_1_2", "var_offset",
                                  "group_norm_long_rows", "layer_norm_long_rows", "var_mean_col"])
def test_one_pass_welford_variance_where_rows_do_not_fit(case, tmp_path):
    """Variance over a strided axis, or over rows longer than ROW_MAX, reads x once (Welford per lane, Chan's
    combination across lanes and split partials) and matches float64, also on data far from zero."""
    from argus_agent.lower.sizes import ROW_MAX

    g = torch.Generator().manual_seed(8)
    long = ROW_MAX * 2 + 3
    gn = torch.nn.GroupNorm(2, 4)
    cases = {
        "var_dim0_split": (lambda t: t.var(0), torch.randn(9001, 5, generator=g)),
        "std_dim0_keepdim": (lambda t: t.std(0, keepdim=True), torch.randn(700, 33, generator=g)),
        "var_dims_1_2": (lambda t: t.var((1, 2), unbiased=False), torch.randn(2, 9, 13, 8, generator=g)),
        "var_offset": (lambda t: (t + 1000.0).var(0), torch.randn(3000, 7, generator=g)),
        "group_norm_long_rows": (gn, torch.randn(2, 4, 9, long // 9 // 2 * 2, generator=g)),
        "layer_norm_long_rows": (lambda t: torch.nn.functional.layer_norm(t, (long,)),
                                 torch.randn(3, long, generator=g)),
        "var_mean_col": (lambda t: torch.var_mean(t, dim=0), torch.randn(500, 6, generator=g)),
    }
    fn, inp = cases[case]
    model = fn if isinstance(fn, torch.nn.Module) else _Fn(fn)
    prog, mod, out = _run_lowered(model, [inp], tmp_path, f"welford_{case}")
    assert any(getattr(k, "kind", "") == "welford" for k in prog.kernels), _kinds(prog)
    assert not any(getattr(k, "kind", "") == "sum" for k in prog.kernels)   # no second pass over x
    with torch.no_grad():
        ref = model.double()(inp.double()) if isinstance(fn, torch.nn.Module) else fn(inp.double())
    outs = out if isinstance(out, tuple) else (out,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape
        assert torch.allclose(o.double(), r, rtol=2e-5, atol=2e-5), (o.double() - r).abs().max()


@pytest.mark.parametrize("case", ["sum_dim1", "mean_dim1", "sort_last"])
def test_column_reductions_with_64_bit_indices_render_flat(case, tmp_path, monkeypatch):
    """A column-mode reduction whose indices pass int32 takes the flat renderer, which reads its outputs as the
    flat m (o = m // I, i = m % I); the limit is lowered here so CPU sizes take that path (a 4096 x 8192 sort
    did on the H100 and failed to build: `o` undefined)."""
    from argus_agent.lower import render_flat

    monkeypatch.setattr(render_flat, "INT32_MAX", 1000)
    g = torch.Generator().manual_seed(8)
    fn, inp = {"sum_dim1": (lambda t: t.sum(1), torch.randn(3, 70, 37, generator=g)),
               "mean_dim1": (lambda t: t.mean(1), torch.randn(3, 70, 37, generator=g)),   # its division an epilogue
               "sort_last": (lambda t: torch.sort(t, dim=-1, descending=True)[0],   # float64: the O(n^2) rank
                             torch.randn(5, 41, generator=g, dtype=torch.float64))}[case]   # form (no bitonic)
    prog, mod, out = _run_lowered(_Fn(fn), [inp], tmp_path, f"flat_{case}")
    assert "Reduction:col" in _kinds(prog)
    assert "tp.i64" in render_program(prog)
    ref = fn(inp.double())
    assert torch.allclose(out.double(), ref, rtol=1e-5, atol=1e-5), (out.double() - ref).abs().max()


def test_not_of_a_constant_folds_to_a_constant():
    """logical_not / invert of a constant fold when lowering: rendered, `~True` would be the integer -2."""
    from argus_agent.lower import values as vals

    t = vals.const(True, torch.bool)
    assert vals.call("logical_not", t) == vals.const(False, torch.bool)
    assert vals.call("invert", t) == vals.const(False, torch.bool)
    assert vals.call("invert", vals.const(5, torch.int32)) == vals.const(-6, torch.int32)
