"""Generated reductions and scans over several chunks assert their stores through the chunk loop (issue 17
item 6): the verifier summarizes a loop-carried accumulator as a fold (("fold", n, k, t) for each iteration k
of the n that folded t in), and the lowering states that the result folds exactly the chunks of its range,
iteration k reading chunk k of the right row: a row reduction over several chunks, split partials (partial s
covers [s C, s C + C)) and their combine, a column reduction, a per-output epilogue over a chunk loop, a
flat-index reduction, argmax/argmin (the value and the index lanes from the same row and range; a combine's
index from the same partial as its value), Welford's (count, mean, M2) (a combine's three from one partial),
logsumexp over long rows, scans
whose carry is the fold of exactly the chunks before each element (reverse, exclusive, columns, and long rows
scanned in segments after a per-segment sum). The correct kernels verify clean and match PyTorch on the
interpreter; each seeded wrong index map (a chunk loop that skips the last chunk, every iteration reading the
first chunk, a store shifted by one row, a combine reading partial p + 1 (of the index or the count beside
its value or mean of p), a carry never updated or updated
before its use, a segment carry over one segment too many or from the next segment) is a tag_assertion error
with a counterexample, and each such mutant computes other values on the interpreter (the bug is real)."""

import importlib.util
import re
from pathlib import Path

import pytest
import torch

import tilepy as tp
import tilepy_verify as tv
from argus_agent.lower import lower_model, render_program, render_tiled

from .test_lowering_store_tags import ColCumprod, Cumsum, ExclusiveCumsum, ReverseCumsum


class RowSum(torch.nn.Module):
    def forward(self, x):
        return x.sum(dim=-1)


class ColMax(torch.nn.Module):
    def forward(self, x):
        return x.amax(dim=1)


class MeanMiddle(torch.nn.Module):
    def forward(self, x):
        return x.mean(dim=1)


class ScaledRowSum(torch.nn.Module):
    def forward(self, x, b):
        return (x * 2.0 + b).sum(dim=-1)


class Argmax(torch.nn.Module):
    def forward(self, x):
        return x.argmax(dim=1)


class MinWithIndex(torch.nn.Module):
    def forward(self, x):
        v, i = torch.min(x, dim=1)
        return v + i.to(v.dtype)


class Var(torch.nn.Module):
    def forward(self, x):
        return x.var(dim=1)


class StdRow(torch.nn.Module):
    def forward(self, x):
        return x.std(dim=-1)


class LogSumExp(torch.nn.Module):
    def forward(self, x):
        return torch.logsumexp(x, dim=-1)


class Bmm(torch.nn.Module):
    """A flat-index (generic) reduction over several chunks of k."""

    def forward(self, q, k):
        return torch.bmm(q, k.transpose(1, 2))


class KLDiv(torch.nn.Module):
    """A flat reduction over every element reading each row's softmax statistics at r // row length."""

    def forward(self, p, q):
        return torch.nn.functional.kl_div(torch.log_softmax(p, -1), torch.softmax(q, -1), reduction="batchmean")


# name: (module, input shapes, no split: the outputs alone count as enough blocks)
CASES = {
    "row_sum_chunks": (RowSum, [(4, 10000)], True),
    "row_sum_split": (RowSum, [(2, 100000)], False),
    "col_max_split": (ColMax, [(3, 5000, 5)], False),
    "col_max_chunks": (ColMax, [(2, 3000, 40)], True),
    "mean_epilogue_chunks": (MeanMiddle, [(2, 3000, 7)], True),
    "mean_epilogue_split": (MeanMiddle, [(4, 5000, 5)], False),
    "scaled_row_sum_chunks": (ScaledRowSum, [(3, 9000), (9000,)], True),
    "argmax_chunks": (Argmax, [(2, 3000, 6)], True),
    "argmax_split": (Argmax, [(2, 40000, 3)], False),
    "min_index_split": (MinWithIndex, [(3, 20000, 2)], False),
    "var_chunks": (Var, [(2, 3000, 6)], True),
    "var_split": (Var, [(2, 40000, 3)], False),
    "std_row_split": (StdRow, [(4, 20000)], False),
    "logsumexp_long_rows": (LogSumExp, [(3, 20000)], False),
    "bmm_flat_chunks": (Bmm, [(2, 6, 700), (2, 7, 700)], False),
    "kl_div_flat_chunks": (KLDiv, [(37, 53), (37, 53)], False),
    "cumsum_chunks": (Cumsum, [(6, 700)], False),
    "cumsum_reverse_chunks": (ReverseCumsum, [(5, 600)], False),
    "cumsum_exclusive_chunks": (ExclusiveCumsum, [(4, 300)], False),
    "cumprod_col_chunks": (ColCumprod, [(2, 600, 5)], False),
    "cumsum_segments": (Cumsum, [(4, 5000)], False),
    "cumsum_reverse_segments": (ReverseCumsum, [(3, 4200)], False),
}
STORE_ASSERT = re.compile(r"tp\.assert_tag\((b_\w+), lambda t, (?:c0|i)\b")    # a store (pointwise: at i)


def _module(source: str, tmp_path: Path, name: str):
    p = tmp_path / f"{name}.py"
    p.write_text(source)
    spec = importlib.util.spec_from_file_location(f"lowered_fold_{name}_{abs(hash(source))}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _kernels(mod):
    return [v for v in vars(mod).values() if isinstance(v, tp.Kernel) and v.fn.__module__ == mod.__name__]


def _inputs(case):
    cls, shapes, _ = CASES[case]
    g = torch.Generator().manual_seed(5)
    # near 1: a cumprod of a few hundred terms stays finite
    return [torch.rand(*s, generator=g) * 0.02 + 0.99 if cls is ColCumprod else torch.rand(*s, generator=g) + 0.5
            for s in shapes]


def _lower(case, monkeypatch):
    cls, _, unsplit = CASES[case]
    if unsplit:
        monkeypatch.setattr(render_tiled, "TARGET_BLOCKS", 1)
    inputs = _inputs(case)
    return cls(), inputs, render_program(lower_model(cls(), inputs))


def _run(mod, model, inputs):
    with torch.no_grad():
        return mod.argus_forward(model, *inputs)


@pytest.mark.parametrize("case", list(CASES))
def test_chunk_loops_assert_their_stores_and_verify(case, tmp_path, monkeypatch):
    model, inputs, source = _lower(case, monkeypatch)
    mod = _module(source, tmp_path, case)
    kernels = _kernels(mod)
    assert "for k in range(" in source, "the case is meant to loop over chunks"
    # every kernel states what it stores (a combine of argmax / Welford partials: its accumulator lanes)
    asserted = STORE_ASSERT.findall(source) + re.findall(r"tp\.assert_tag\((acci|cnt), lambda t, c0", source)
    assert len(asserted) >= len(kernels), (asserted, source)
    assert any('"fold"' in line for line in source.splitlines() if "tp.assert_tag(" in line)
    for k in kernels:
        report = tv.verify(k, target="sm_90a")
        assert report.ok and not report.errors, str(report)
    with torch.no_grad():
        ref = model(*[x.double() for x in inputs])
    assert torch.allclose(_run(mod, model, inputs).double(), ref.double(), rtol=1e-4, atol=1e-4)


def _caught(case, mutate, tmp_path, monkeypatch, name):
    model, inputs, source = _lower(case, monkeypatch)
    bad = mutate(source)
    assert bad != source, "the mutation applies"
    mod = _module(bad, tmp_path, name)
    found = []
    for k in _kernels(mod):
        found += [f for f in tv.verify(k, target="sm_90a").errors if f.check == "tag_assertion"]
    assert found, "not caught"
    cex = found[0].counterexample
    if "stored at" in found[0].message:
        assert cex.get("index") is not None and cex["tags"].get("stored") is not None, cex
    else:   # a load's own assertion: the element it reads at its (o, i, r)
        assert cex.get("at") is not None and cex["tags"].get("x") is not None, cex
    ref = _run(_module(source, tmp_path, name + "_ref"), model, inputs)
    try:
        got = _run(mod, model, inputs)
    except Exception:  # noqa: BLE001 - a mutant that reads or writes out of its tensor: wrong, as reported
        return found[0]
    assert not torch.equal(got, ref), "reported, but the mutant computes the same values"
    return found[0]


def _skip_last(s):
    return s.replace("for k in range(tp.cdiv(C, BR)):", "for k in range(tp.cdiv(C, BR) - 1):")


def _first_chunk_only(s):
    return re.sub(r"r0 = (s \* C \+ )?k \* BR", r"r0 = \g<1>0 * BR", s)


def _store_next_row(s):
    """The reduction's store one output on ([m0 + 1:...], [o, i0 + 1:...]); its loads unchanged."""
    return "\n".join(line.replace("m0:m0 + BM]", "m0 + 1:m0 + 1 + BM]").replace("i0:i0 + BI]", "i0 + 1:i0 + 1 + BI]")
                     if line.lstrip().startswith("tp.store(") else line for line in s.splitlines()) + "\n"


def _combine_reads_next_partial(s):
    """The combine kernel reads partial p + 1 where it means p (a window load's rows one on, or a flat index
    one partial on)."""
    windowed = re.sub(r"(tp\.load\(b_\w+_part\w*\[)([^:\]]+):\2 \+ BR", r"\g<1>\2 + 1:\2 + 1 + BR", s)
    if windowed != s:
        return windowed
    return re.sub(r"(tp\.load\(b_\w+_part\w*\[)\(", lambda m: m.group(1) + "(M + ", s)


def _skip_flat_last(s):
    return s.replace("for k in range(tp.cdiv(R, BR)):", "for k in range(tp.cdiv(R, BR) - 1):")


def _combine_index_of_next_partial(s):
    """An argmax/argmin combine keeps the index partial of p + 1 beside the value partial of p."""
    return re.sub(r"(tp\.load\(b_argidx_part\w*\[)([^:\]]+):\2 \+ BR", r"\g<1>\2 + 1:\2 + 1 + BR", s)


def _combine_count_of_next_partial(s):
    """A Welford combine folds partial p's mean with partial p + 1's count."""
    return re.sub(r"(tp\.load\(b_\w+_cnt\w*\[)([^:\]]+):\2 \+ BR", r"\g<1>\2 + 1:\2 + 1 + BR", s)


REDUCTION_MUTANTS = [
    ("row_sum_chunks", _skip_last), ("row_sum_chunks", _first_chunk_only), ("row_sum_chunks", _store_next_row),
    ("row_sum_split", _skip_last), ("row_sum_split", _first_chunk_only),
    ("row_sum_split", _combine_reads_next_partial),
    ("col_max_chunks", _skip_last), ("col_max_chunks", _store_next_row),
    ("col_max_split", _skip_last), ("col_max_split", _combine_reads_next_partial),
    ("mean_epilogue_chunks", _skip_last), ("mean_epilogue_chunks", _first_chunk_only),
    ("scaled_row_sum_chunks", _skip_last), ("bmm_flat_chunks", _skip_flat_last),
    ("kl_div_flat_chunks", _skip_flat_last),
    ("argmax_chunks", _skip_last), ("argmax_chunks", _first_chunk_only), ("argmax_split", _skip_last),
    ("argmax_split", _combine_index_of_next_partial), ("min_index_split", _combine_index_of_next_partial),
    ("var_chunks", _skip_last), ("var_chunks", _store_next_row), ("var_split", _first_chunk_only),
    ("var_split", _combine_count_of_next_partial), ("std_row_split", _skip_last),
    ("logsumexp_long_rows", _skip_last), ("logsumexp_long_rows", _combine_reads_next_partial),
]


@pytest.mark.parametrize("case,mutate", REDUCTION_MUTANTS, ids=[f"{c}-{m.__name__}" for c, m in REDUCTION_MUTANTS])
def test_a_wrong_chunk_loop_or_partial_map_is_caught(case, mutate, tmp_path, monkeypatch):
    f = _caught(case, mutate, tmp_path, monkeypatch, f"{case}{mutate.__name__}")
    tags = f.counterexample["tags"]
    if "stored" in tags:    # a store: the fold it stored, or the partial a combine read
        assert "fold" in repr(tags) or "_part" in repr(tags), tags


def test_skipping_the_last_chunk_names_the_iteration_count(tmp_path, monkeypatch):
    f = _caught("row_sum_chunks", _skip_last, tmp_path, monkeypatch, "skip_count")
    stored = f.counterexample["tags"]["stored"]
    assert stored[0] == "fold" and stored[1] == 2, stored     # 2 of the 3 chunks of the 10000-long row


def _no_carry_update(s):
    return re.sub(r"carry = carry ([+*]) tp\.(sum|prod)\(v.*\)", "carry = carry", s)


def _carry_updated_before_use(s):
    """The chunk's own sum folded into the carry before its scan reads it (c = scan(v) + carry)."""
    lines = s.splitlines()
    (j,) = [n for n, line in enumerate(lines) if re.match(r"\s*carry = carry [+*] tp\.(sum|prod)\(", line)]
    update = lines.pop(j)
    (i,) = [n for n, line in enumerate(lines) if re.match(r"\s*c = tp\.cum", line)]
    lines.insert(i, update)
    return "\n".join(lines) + "\n"


def _chunks_from_one(s):
    return s.replace("k * BN", "(k + 1) * BN")


def _one_segment_too_many(s):
    return s.replace("for q in range(s):", "for q in range(s + 1):")


def _next_segment_sum(s):
    return s.replace("[q, m0:m0 + BM]", "[q + 1, m0:m0 + BM]")


SCAN_MUTANTS = [
    ("cumsum_chunks", _no_carry_update), ("cumsum_chunks", _carry_updated_before_use),
    ("cumsum_chunks", _chunks_from_one), ("cumsum_reverse_chunks", _no_carry_update),
    ("cumsum_exclusive_chunks", _carry_updated_before_use), ("cumprod_col_chunks", _no_carry_update),
    ("cumsum_segments", _one_segment_too_many), ("cumsum_segments", _next_segment_sum),
    ("cumsum_segments", _carry_updated_before_use),
]


@pytest.mark.parametrize("case,mutate", SCAN_MUTANTS, ids=[f"{c}-{m.__name__}" for c, m in SCAN_MUTANTS])
def test_a_wrong_scan_carry_is_caught(case, mutate, tmp_path, monkeypatch):
    _caught(case, mutate, tmp_path, monkeypatch, f"{case}{mutate.__name__}")
