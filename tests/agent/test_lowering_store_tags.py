"""What the stores of generated reductions, scans and fused rows are computed from (issue 17 item 6): a tiled
reduction of one chunk asserts, on its output tensor, that each element stored at output index m is the
reduction of the lowering's value at m over the tile's reduction range; a scan of one chunk that each element
stored at (m, j) is the scan of its prefix j' <= j (j' < j exclusive; j' >= j reversed); a fused row kernel
(softmax, norms) that each element stored at (m, r) is its value there, each reduced stage it reads being
that stage's reduction over row m. The correct kernels verify
clean and match PyTorch; a store shifted by one output (a wrong row), a scan in the wrong direction or an
exclusive scan rendered inclusive is a tag_assertion error, and each such mutant writes other values on the
interpreter (the bug is real)."""

import importlib.util
import re
from pathlib import Path

import pytest
import torch

import tilepy as tp
import tilepy_verify as tv
from argus_agent.lower import lower_model, render_program


class RowSum(torch.nn.Module):
    def forward(self, x):
        return x.sum(dim=-1)


class ColMax(torch.nn.Module):
    def forward(self, x):
        return x.amax(dim=1)


class ScaledSum(torch.nn.Module):
    def forward(self, x, b):
        return (x * 2.0 + b).sum(dim=1)


class Cumsum(torch.nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=-1)


class ReverseCumsum(torch.nn.Module):
    def forward(self, x):
        return torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1])


class ExclusiveCumsum(torch.nn.Module):
    def forward(self, x):
        return torch.cumsum(torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], 1), 1)


class ColCumprod(torch.nn.Module):
    def forward(self, x):
        return torch.cumprod(x, dim=1)


class Bmm(torch.nn.Module):
    """A flat-index (generic) reduction: strided reads of k through index maps."""

    def forward(self, q, k):
        return torch.bmm(q, k.transpose(1, 2))


class MeanMiddle(torch.nn.Module):
    """A column reduction with a per-output epilogue (the division by the count) in the same kernel."""

    def forward(self, x):
        return x.mean(dim=1)


class Softmax(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


class LayerNorm(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.layer_norm(x, (x.shape[-1],))


class LogSumExp(torch.nn.Module):
    def forward(self, x):
        return torch.logsumexp(x, dim=-1)


CASES = {
    "row_sum_ragged": (RowSum, [(6, 20)]),
    "row_sum_exact": (RowSum, [(6, 32)]),
    "col_max": (ColMax, [(3, 7, 5)]),
    "scaled_sum": (ScaledSum, [(4, 12, 3), (3,)]),
    "cumsum": (Cumsum, [(6, 12)]),
    "cumsum_reverse": (ReverseCumsum, [(5, 11)]),
    "cumsum_exclusive": (ExclusiveCumsum, [(4, 9)]),
    "cumprod_col": (ColCumprod, [(3, 7, 5)]),
    "bmm_generic": (Bmm, [(2, 6, 4), (2, 7, 4)]),
    "mean_epilogue": (MeanMiddle, [(4, 9, 5)]),
    "softmax_rows": (Softmax, [(6, 20)]),
    "layer_norm_rows": (LayerNorm, [(5, 16)]),
    "logsumexp_rows": (LogSumExp, [(3, 10)]),
}
STORE_ASSERT = re.compile(r"tp\.assert_tag\((b_\w+), lambda t, c0")


def _module(source: str, tmp_path: Path, name: str):
    p = tmp_path / f"{name}.py"
    p.write_text(source)
    spec = importlib.util.spec_from_file_location(f"lowered_store_{name}_{abs(hash(source))}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _kernel(mod):
    (k,) = [v for v in vars(mod).values() if isinstance(v, tp.Kernel) and v.fn.__module__ == mod.__name__]
    return k


def _lower(case):
    cls, shapes = CASES[case]
    g = torch.Generator().manual_seed(3)
    inputs = [torch.rand(*s, generator=g) + 0.5 for s in shapes]
    return cls(), inputs, render_program(lower_model(cls(), inputs))


def _writes(mod, model, inputs):
    """The output tensor the program's one kernel writes, run on the interpreter."""
    with torch.no_grad():
        return mod.argus_forward(model, *inputs)


@pytest.mark.parametrize("case", list(CASES))
def test_reduction_and_scan_stores_are_asserted_and_proved(case, tmp_path):
    model, inputs, source = _lower(case)
    assert STORE_ASSERT.search(source), source
    mod = _module(source, tmp_path, case)
    report = tv.verify(_kernel(mod), target="sm_90a")
    assert report.ok and not report.errors, str(report)
    with torch.no_grad():
        assert torch.allclose(_writes(mod, model, inputs), model(*inputs), atol=1e-5, rtol=1e-5)


def _caught(source, bad, tmp_path, name, model, inputs):
    assert bad != source
    mod = _module(bad, tmp_path, name)
    found = [f for f in tv.verify(_kernel(mod), target="sm_90a").errors if f.check == "tag_assertion"]
    assert found and "stored at" in found[0].message, [str(f) for f in found]
    ref = _writes(_module(source, tmp_path, name + "_ref"), model, inputs)
    try:
        got = _writes(mod, model, inputs)
    except Exception:  # noqa: BLE001 - a mutant that reads or writes out of its tensor: wrong, as reported
        return
    assert not torch.equal(got, ref), "reported, but the mutant writes the same values"


@pytest.mark.parametrize("case", ["row_sum_ragged", "row_sum_exact", "col_max", "scaled_sum", "cumsum",
                                  "bmm_generic", "mean_epilogue", "softmax_rows", "layer_norm_rows",
                                  "logsumexp_rows"])
def test_a_store_shifted_by_one_output_is_caught(case, tmp_path):
    """Every load still reads what its index map says for its (m, r): only the store's tie to m is wrong."""
    model, inputs, source = _lower(case)
    lines = source.splitlines()
    (n,) = [n for n, line in enumerate(lines) if line.lstrip().startswith("tp.store(")]
    lines[n] = (lines[n].replace("[m0:m0 + BM", "[m0 + 1:m0 + 1 + BM")
                .replace("i0:i0 + BI]", "i0 + 1:i0 + 1 + BI]"))
    bad = "\n".join(lines) + "\n"
    _caught(source, bad, tmp_path, f"{case}_shift", model, inputs)


def test_a_scan_in_the_wrong_direction_is_caught(tmp_path):
    model, inputs, source = _lower("cumsum")
    bad = source.replace("tp.cumsum(v, axis=1)", "tp.cumsum(v, axis=1, reverse=True)")
    _caught(source, bad, tmp_path, "wrong_direction", model, inputs)


def test_an_exclusive_scan_rendered_inclusive_is_caught(tmp_path):
    model, inputs, source = _lower("cumsum_exclusive")
    assert "exclusive=True" in source
    bad = source.replace(", exclusive=True", "")
    _caught(source, bad, tmp_path, "inclusive", model, inputs)


def test_a_reversed_scan_rendered_forward_is_caught(tmp_path):
    model, inputs, source = _lower("cumsum_reverse")
    assert "reverse=True" in source
    bad = source.replace(", reverse=True", "")
    _caught(source, bad, tmp_path, "forward", model, inputs)
