"""Tags in the lowering's generated kernels (argus_agent/lower/tags.py, issue 17 item 6): every kernel
parameter is tagged with its flat coordinates and every load rendered from an index map asserts that it reads
the element the lowering's IExpr names for the output index (and the reduction index). The correct kernels
verify clean with the assertions proved; a wrong index in the generated source (a mutated divisor, stride,
offset or window) is a tag_assertion error whose counterexample names the index values and both elements, and
each mutant that is caught computes a wrong result on the interpreter (the bug is real), while a mutant that
verifies clean computes the right one."""

import importlib.util
import re
from pathlib import Path

import pytest
import torch

import tilepy as tp
import tilepy_verify as tv
from argus_agent.lower import lower_model, render_program


class PermuteAdd(torch.nn.Module):
    """A gather over a permuted view (index maps with // and %) plus a broadcast operand."""

    def forward(self, x, b):
        return x.permute(2, 0, 1).contiguous() * 2.0 + b


class BmmSoftmax(torch.nn.Module):
    """Reductions: q k^T (strided reads of k), a row max and a row sum of exponentials, then p v."""

    def forward(self, q, k, v):
        s = torch.bmm(q, k.transpose(1, 2)) * 0.5
        return torch.bmm(torch.softmax(s, dim=-1), v)


class SumMiddle(torch.nn.Module):
    """A reduction over a middle dimension and a mean over the last one."""

    def forward(self, x):
        return x.sum(dim=1) + x.mean(dim=(1, 2), keepdim=False)[:, None]


CASES = {
    "permute_add": (PermuteAdd, lambda g: [torch.randn(3, 5, 4, generator=g), torch.randn(5, generator=g)]),
    "bmm_softmax": (BmmSoftmax, lambda g: [torch.randn(2, 6, 4, generator=g), torch.randn(2, 7, 4, generator=g),
                                           torch.randn(2, 7, 3, generator=g)]),
    "sum_middle": (SumMiddle, lambda g: [torch.randn(3, 5, 6, generator=g)]),
}


def _module(source: str, tmp_path: Path, name: str):
    p = tmp_path / f"{name}.py"
    p.write_text(source)
    spec = importlib.util.spec_from_file_location(f"lowered_tags_{name}_{abs(hash(source))}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _kernels(mod):
    return {k: v for k, v in vars(mod).items() if isinstance(v, tp.Kernel) and v.fn.__module__ == mod.__name__}


def _lower(case):
    cls, make = CASES[case]
    model = cls()
    inputs = make(torch.Generator().manual_seed(5))
    return model, inputs, render_program(lower_model(model, inputs))


def _tagged_loads(source: str) -> list:
    """0-based line numbers of loads followed by their tag assertion."""
    lines = source.splitlines()
    return [n for n, line in enumerate(lines[:-1]) if "tp.load(" in line and "tp.assert_tag(" in lines[n + 1]]


@pytest.mark.parametrize("case", list(CASES))
def test_generated_kernels_carry_tags_and_verify_clean(case, tmp_path):
    model, inputs, source = _lower(case)
    loads = _tagged_loads(source)
    assert loads, source
    mod = _module(source, tmp_path, case)
    asserted = 0
    for name, k in _kernels(mod).items():
        report = tv.verify(k, target="sm_90a")
        assert report.ok and not report.errors, str(report)
        n = k.source.count("tp.assert_tag(")
        asserted += n
        if n:
            # proved, not skipped (an assertion no block reaches is an error, so report.ok says each was checked;
            # obligations that coincide, e.g. two loads at one index map, may share a solver query)
            assert report.stats["queries"] >= 1
    assert asserted >= len(loads)     # one per load, and one per Pointwise output
    with torch.no_grad():
        assert torch.allclose(mod.argus_forward(model, *inputs), model(*inputs), atol=1e-5, rtol=1e-5)


def _index_text(line: str) -> tuple[int, int]:
    """Span of the subscript of the first `tp.load(NAME[...])` in `line`."""
    start = line.index("[", line.index("tp.load(")) + 1
    depth, j = 1, start
    while depth:
        depth += {"[": 1, "]": -1}.get(line[j], 0)
        j += 1
    return start, j - 1


def mutants(source: str):
    """(mutated source, line of the load, what changed): one change per mutant in one load's index: an
    integer literal plus one, or a loop variable / window start shifted by one."""
    lines = source.splitlines()
    for n in _tagged_loads(source):
        a, b = _index_text(lines[n])
        text = lines[n][a:b]
        if ":" in text:   # a window: shift one of its axes by one element (start and stop together)
            parts = text.split(", ")
            cands = []
            for k, p in enumerate(parts):
                w = re.fullmatch(r"(.+?):(.+?) \+ (\w+)", p)
                if w and w.group(1) == w.group(2):
                    q = f"({w.group(1)} + 1):({w.group(1)} + 1) + {w.group(3)}"
                    cands.append(", ".join(parts[:k] + [q] + parts[k + 1:]))
        else:
            edits = [(m.start(), m.end(), str(int(m.group()) + 1))
                     for m in re.finditer(r"(?<![\w.])\d+(?![\w.])", text)]
            for m in re.finditer(r"(?<![\w.])(i|m|r)(?![\w.(])", text):
                edits.append((m.start(), m.end(), f"({m.group()} + 1)"))
            cands = [text[:s] + new + text[e:] for s, e, new in edits]
        for mutated in cands[:4]:
            out = list(lines)
            out[n] = lines[n][:a] + mutated + lines[n][b:]
            yield "\n".join(out) + "\n", n, f"{text!r} -> {mutated!r}"


def _launches(mod, model, inputs) -> dict:
    """{kernel name: (grid, arguments before the launch, arguments after)} of one run of the program."""
    real, seen = mod.launch, {}

    def spy(kernel, grid, *args):
        before = [a.clone() for a in args]
        real(kernel, grid, *args)
        seen[kernel.name] = (grid, before, [a.clone() for a in args])

    mod.launch = spy
    try:
        with torch.no_grad():
            mod.argus_forward(model, *inputs)
    finally:
        mod.launch = real
    return seen


def _kernel_differs(mod, kname, launches) -> bool:
    """Whether the mutated kernel, run on the original kernel's inputs, writes other values than it did."""
    grid, before, after = launches[kname]
    args = [a.clone() for a in before]
    try:
        mod.launch(_kernels(mod)[kname], grid, *args)
    except Exception:  # noqa: BLE001 - a mutant that reads out of its tensor: wrong, not a test error
        return True
    return any(not torch.equal(a, b) for a, b in zip(args, after))


@pytest.mark.parametrize("case", list(CASES))
def test_a_wrong_index_in_the_generated_source_is_caught(case, tmp_path):
    """Each mutant the verifier reports writes other values than the correct kernel on the same inputs (the
    bug is real, even where the program's result hides it: a softmax is invariant to the row maximum it
    subtracts); each mutant it passes leaves the program's result right."""
    model, inputs, source = _lower(case)
    with torch.no_grad():
        ref = model(*inputs)
    launches = _launches(_module(source, tmp_path, f"{case}_orig"), model, inputs)
    caught = clean = 0
    for j, (src, n, what) in enumerate(mutants(source)):
        mod = _module(src, tmp_path, f"{case}_m{j}")
        line = src.splitlines()[n]
        kname = next(name for name, k in _kernels(mod).items() if line in k.source)
        report = tv.verify(_kernels(mod)[kname], target="sm_90a")
        found = [f for f in report.errors if f.check == "tag_assertion"]
        if not found:
            clean += 1
            try:
                with torch.no_grad():
                    right = torch.allclose(mod.argus_forward(model, *inputs), ref, atol=1e-5, rtol=1e-5)
            except Exception:  # noqa: BLE001
                right = False
            assert right, f"{what}: verified clean but computes a wrong result"
            continue
        caught += 1
        assert _kernel_differs(mod, kname, launches), f"{what}: reported but the kernel writes the same values"
        at_load = [f for f in found if f.span.line == n + 2]     # the assertion after the mutated load
        assert at_load, (what, [str(f) for f in found])
        f = at_load[0]
        assert f.other_span.line == n + 1, (what, str(f))           # names the load
        cex = f.counterexample
        assert "at" in cex and cex["tags"]["x"][0].startswith("b_"), str(f)
        assert "fails for element" in f.message
    assert caught >= 3 and caught >= 2 * clean, (caught, clean)


def test_counterexample_names_the_index_and_both_elements(tmp_path):
    """A divisor mutated in the permuted read: the counterexample gives the output index i and the element
    read; the predicate's map at that i names another one."""
    model, inputs, source = _lower("permute_add")
    lines = source.splitlines()
    n = next(n for n in _tagged_loads(source) if "//" in lines[n])
    a, b = _index_text(lines[n])
    text = lines[n][a:b]
    d = re.search(r"// (\d+)", text)
    lines[n] = lines[n][:a] + text[:d.start(1)] + str(int(d.group(1)) * 2) + text[d.end(1):] + lines[n][b:]
    mod = _module("\n".join(lines) + "\n", tmp_path, "cex")
    (k,) = [k for k in _kernels(mod).values() if lines[n] in k.source]
    report = tv.verify(k, target="sm_90a")
    (f,) = [f for f in report.errors if f.check == "tag_assertion" and "at" in f.counterexample]
    (i,) = f.counterexample["at"]
    buf, got = f.counterexample["tags"]["x"]
    pred = re.search(r't == \("(\w+)", (.*)\), at=', lines[n + 1])
    assert buf == pred.group(1)
    want = eval(pred.group(2), {"i": i})                        # the lowering's index map at that i
    mutated = eval(lines[n][a:b].replace("i0:i0 + BLOCK", "i"), {"i": i})
    assert got == mutated != want, (i, got, want)
    assert f"i={i}" in f.message


def test_at_tiles_that_mean_nothing_are_errors(tmp_path):
    """at= needs integer tiles whose values the verifier follows and a predicate with one parameter per
    tile: a loaded index tile is an error with a hint, never a proof."""
    src = '''
import tilepy as tp


@tp.kernel(threads=128)
def k(X: tp.Tensor[tp.f32, 64], I: tp.Tensor[tp.i32, 64], Y: tp.Tensor[tp.f32, 64]):
    tp.tag(X, lambda j: ("X", j))
    i = tp.arange(64)
    idx = tp.load(I[0:64])
    x = tp.load(X[i])
    tp.assert_tag(x, lambda t, j: t == ("X", j), at=(idx,))
    tp.store(Y[0:64], x)
'''
    mod = _module(src, tmp_path, "bad_at")
    report = tv.verify(mod.k)
    (f,) = report.errors
    assert f.check == "tag_assertion" and "cannot mean anything" in f.message and "not known" in f.message
    assert f.counterexample["hint"]
    with pytest.raises(tp.CompileError, match=r"takes 3 parameters; with 1 `at` tiles it takes 2"):
        _module(src.replace("lambda t, j:", "lambda t, j, q:"), tmp_path, "bad_arity").k.ir()


ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((ROOT / "tests" / "problems").glob("level*/[0-9]*.py"))


@pytest.mark.parametrize("path", CORPUS[7::20], ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_corpus_kernels_carry_proved_index_maps(path, tmp_path):
    """A sample of the corpus (the whole corpus: benchmarks/verify_lowered.py): every generated kernel that
    loads through an index map asserts it, and the assertions are proved."""
    from argus_agent.lower.candidate import lower_problem
    from argus_agent.problem import load_problem

    source = lower_problem(load_problem(path, cpu=True)).source
    mod = _module(source, tmp_path, path.stem)
    for name, k in _kernels(mod).items():
        assert "tp.load(" not in k.source or "tp.assert_tag(" in k.source, k.source
        report = tv.verify(k, target="sm_90a")
        assert report.ok, str(report)


@pytest.mark.parametrize("case", list(CASES))
def test_tags_emit_no_device_code(case, tmp_path, monkeypatch):
    """The CUDA each generated kernel renders to is the same with and without its tags and assertions."""
    from argus_agent.lower import tags
    from tilepy_hip.render import render_source

    def rendered(flag):
        monkeypatch.setattr(tags, "ENABLED", flag)
        _, _, source = _lower(case)
        mod = _module(source, tmp_path, f"{case}_{flag}")
        return source, {n: re.sub(r"//.*|#line.*", "", render_source(k.ir("sm_90a"), "sm_90a")[0])
                        for n, k in _kernels(mod).items()}

    with_src, with_tags = rendered(True)
    without_src, without = rendered(False)
    assert "tp.assert_tag(" in with_src and "tp.assert_tag(" not in without_src
    assert with_tags == without


def test_pointwise_store_is_asserted_and_a_shifted_store_window_is_caught(tmp_path):
    """A Pointwise kernel also asserts what each stored element is computed from (which inputs, combined by
    which operations); a store window shifted by one element is caught there (every load is still right for
    its i), and the mutant writes other values."""
    model, inputs, source = _lower("permute_add")
    assert re.search(r"tp\.assert_tag\(b_\w+, lambda t, i: i >= \d+ or t == ", source), source
    store = re.search(r"tp\.store\((\w+)\[i0:i0 \+ BLOCK\]", source)
    bad = source.replace(store.group(0), f"tp.store({store.group(1)}[i0 + 1:i0 + 1 + BLOCK]")
    mod = _module(bad, tmp_path, "shifted_store")
    (k,) = [k for k in _kernels(mod).values() if "i0 + 1:i0 + 1 + BLOCK" in k.source]
    found = [f for f in tv.verify(k, target="sm_90a").errors if f.check == "tag_assertion"]
    assert len(found) == 1 and "stored at" in found[0].message, [str(f) for f in found]
    (i,) = found[0].counterexample["index"]
    assert i >= 1 and found[0].other_span.line == next(
        n + 1 for n, line in enumerate(bad.splitlines()) if "i0 + 1:i0 + 1 + BLOCK" in line)
    launches = _launches(_module(source, tmp_path, "store_orig"), model, inputs)
    assert _kernel_differs(mod, k.name, launches)
