"""`tp.assert_tag(x, pred, at=(tiles...))` (issue 17 item 6): the predicate gets each element's index
values. Hypothesis draws index maps as the lowering builds them (a permuted view of a tensor, flattened:
`//`, `%` and strides), renders a kernel that loads through the map or through a mutated one (another
permutation, an offset, another divisor), and asserts the map at each output index. The interpreter is the
oracle: run on X = arange, the kernel's output says which element each index read; the verifier must report
exactly when some in-range index reads another element than the map names, with a counterexample that is
one of them, and the dynamic tag oracle (tests/verify/dynamic_tags.py, given the at= values) must agree."""

import importlib.util
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilepy_verify as tv
from argus_agent.lower.index import Var, flatten, unflatten

TEMPLATE = '''
import tilepy as tp


@tp.kernel(threads=128)
def k(X: tp.Tensor[tp.f32, {nx}], Y: tp.Tensor[tp.f32, {n}], BLOCK: tp.constexpr = {block}):
    tp.tag(X, lambda j: ("X", j))
    i0 = tp.block_id(0) * BLOCK
    i = i0 + tp.arange(BLOCK)
    t = tp.load(X[{kernel}])
    tp.assert_tag(t, lambda t, i: i >= {n} or t == ("X", {want}), at=(i,))
    tp.store(Y[i0:i0 + BLOCK], t)
'''


def _view(shape, perm):
    """The flat index into a `shape` tensor read at flat output index i of its `perm` permutation."""
    n = int(np.prod(shape))
    i = Var("i", n)
    coords = unflatten(i, [shape[p] for p in perm])
    src = [None] * len(shape)
    for k, p in enumerate(perm):
        src[p] = coords[k]
    return flatten(src, shape)


def _load(src, tmp_path, name):
    p = tmp_path / f"{name}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(f"tag_at_{name}_{abs(hash(src))}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.k


def _reads(kernel, nx, n, block):
    """(the element each output index read, whether the dynamic tag oracle saw every assertion hold)."""
    from .dynamic_tags import run

    x = np.arange(nx, dtype=np.float32)
    y = np.full(n, -1, np.float32)
    _, tracker = run(kernel.ir(), (-(-n // block),), [x, y])
    return y.astype(np.int64), tracker.ok


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(1, 6), min_size=2, max_size=3), st.data())
def test_verifier_reports_exactly_the_index_maps_the_kernel_breaks(tmp_path_factory, shape, data):
    n = int(np.prod(shape))
    perm = data.draw(st.permutations(range(len(shape))), "perm")
    want = _view(shape, perm)
    kind = data.draw(st.sampled_from(["same", "perm", "offset", "div"]), "mutation")
    kernel = str(want)
    if kind == "perm":
        kernel = str(_view(shape, data.draw(st.permutations(range(len(shape))), "other perm")))
    elif kind == "offset":
        kernel = f"({kernel} + {data.draw(st.integers(1, 3), 'offset')}) % {n}"
    elif kind == "div" and "//" in kernel:
        d = re.search(r"// (\d+)", kernel)
        kernel = kernel[:d.start(1)] + str(int(d.group(1)) + 1) + kernel[d.end(1):]
    if "i" not in kernel:
        kernel = f"({kernel}) + 0 * i"     # a constant index still reads a tile (as the lowering renders it)
    block = 32 if n <= 32 else 128
    tmp = tmp_path_factory.mktemp("at")
    k = _load(TEMPLATE.format(nx=n, n=n, block=block, kernel=kernel, want=want), tmp, "k")
    reads, dynamic_ok = _reads(k, n, n, block)
    expect = eval(f"lambda i: {want} + 0 * i")(np.arange(n))            # the map, in numpy
    wrong = np.nonzero(reads != expect)[0]
    report = tv.verify(k)
    found = [f for f in report.errors if f.check == "tag_assertion"]
    assert bool(found) == bool(wrong.size), (kernel, str(want), wrong[:5], str(report))
    assert dynamic_ok == (not wrong.size)         # the interpreter's tag oracle, on one launch, agrees
    if found:
        (i,) = found[0].counterexample["at"]
        assert i in set(wrong.tolist()), (i, wrong[:10])
        assert found[0].counterexample["tags"]["x"] == ("X", int(reads[i]))
    else:
        assert not report.findings, str(report)


def test_at_values_broadcast_over_a_2d_tile_and_take_a_scalar(tmp_path):
    """A (4, 8) tile with a column tile, a row tile and a block-uniform scalar: the predicate gets all three
    per element; a predicate off by one in r fails at an element whose tag and index values show it."""
    src = '''
import tilepy as tp


@tp.kernel(threads=32)
def k(X: tp.Tensor[tp.f32, 3, 4, 8], Y: tp.Tensor[tp.f32, 3, 4, 8], BUG: tp.constexpr = 0):
    tp.tag(X, lambda a, b, c: ("X", a, b, c))
    o = tp.block_id(0)
    m = tp.arange(4)[:, None]
    r = tp.arange(8)[None, :]
    t = tp.load(X[o, 0:4, 0:8])
    tp.assert_tag(t, lambda t, o, m, r: t == ("X", o, m, r + BUG), at=(o, m, r))
    tp.store(Y[o, 0:4, 0:8], t)
'''
    k = _load(src, tmp_path, "bcast")
    assert tv.verify(k).ok
    report = tv.verify(k, BUG=1)
    (f,) = report.errors
    o, m, r = f.counterexample["at"]
    assert f.counterexample["tags"]["x"] == ("X", o, m, r) and f"r={r}" in f.message


@pytest.mark.parametrize("extra", [1, 2])
def test_predicate_arity_must_match_the_at_tiles(extra, tmp_path):
    import tilepy as tp

    src = TEMPLATE.format(nx=8, n=8, block=32, kernel="i % 8", want="i % 8").replace(
        "lambda t, i:", "lambda t, i" + "".join(f", q{j}" for j in range(extra)) + ":")
    with pytest.raises(tp.CompileError, match=f"takes {2 + extra} parameters"):
        _load(src, tmp_path, f"arity{extra}").ir()


STORE = '''
import tilepy as tp


@tp.kernel(threads=128)
def k(X: tp.Tensor[tp.f32, 60], W: tp.Tensor[tp.f32, 4], Y: tp.Tensor[tp.f32, 60], BLOCK: tp.constexpr = 64,
      BUG: tp.constexpr = "none"):
    tp.tag(X, lambda j: ("X", j))
    tp.tag(W, lambda j: ("W", j))
    tp.assert_tag(Y, lambda t, i: t == (("X", i), ("W", i % 4)))
    i0 = tp.block_id(0) * BLOCK
    i = i0 + tp.arange(BLOCK)
    x = tp.load(X[i0:i0 + BLOCK])
    w = tp.load(W[i % 4])
    if BUG == "swap":
        tp.store(Y[i0:i0 + BLOCK], w * x)
    elif BUG == "shift":
        tp.store(Y[i0 + 1:i0 + 1 + BLOCK], x * w)
    else:
        tp.store(Y[i0:i0 + BLOCK], x * w)
'''


def test_assertion_on_a_tensor_checks_every_store_into_it(tmp_path):
    """tp.assert_tag(Y, lambda t, i: ...): every element stored into Y carries a tag that satisfies the
    predicate at its coordinates in Y. Swapped operands and a store window shifted by one are caught; the
    counterexample names the element's index in Y and the stored tag."""
    k = _load(STORE, tmp_path, "store")
    assert tv.verify(k).ok
    (f,) = tv.verify(k, BUG="swap").errors
    (i,) = f.counterexample["index"]
    assert f.counterexample["tags"]["stored"] == (("W", i % 4), ("X", i)) and f"element ({i},)" in f.message
    (f,) = [f for f in tv.verify(k, BUG="shift").errors if f.check == "tag_assertion"]
    (i,) = f.counterexample["index"]
    assert f.counterexample["tags"]["stored"] == (("X", i - 1), ("W", (i - 1) % 4)) and 1 <= i < 60


def test_assertion_on_a_tensor_that_means_nothing_is_an_error(tmp_path):
    """No store into the tensor, or a predicate without one parameter per coordinate: errors with a hint."""
    src = STORE.replace("tp.assert_tag(Y, lambda t, i:", "tp.assert_tag(X, lambda t, i:")
    (f,) = tv.verify(_load(src, tmp_path, "nostore")).errors
    assert "cannot mean anything" in f.message and "no tp.store writes" in f.message and f.counterexample["hint"]
    src = STORE.replace("tp.assert_tag(Y, lambda t, i:", "tp.assert_tag(Y, lambda t, i, j:")
    (f,) = tv.verify(_load(src, tmp_path, "arity")).errors
    assert "cannot mean anything" in f.message and "1 coordinate" in f.message
