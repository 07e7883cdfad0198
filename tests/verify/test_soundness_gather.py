"""Soundness and precision of the verifier on gathers, scatters and atomics, cross-checked against the
interpreter with Hypothesis (the pattern of test_soundness.py).

Scatter kernels (index tiles affine in the block id and the tile coordinate, then // or % by a constant,
masks, stores or atomic adds, one or two scatters into one tensor) run on the interpreter with recording:
every element two blocks write (one of them without an atomic), and every element one store writes twice,
must be a global_race finding; every global_race finding replays (the interpreter, launched with the
counterexample's grid and sizes, shows that element written by both blocks, or twice by the store).
Gather kernels (1-D and 2-D index tiles) assert a predicate on the tag of the gathered elements: the
verifier reports exactly when some element's index violates it (the indices do not depend on the block, so
the 16 or 32 elements of one block are every case)."""

import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilepy_verify as tv
from tilepy.kernel import kernels_from_source

SETTINGS = settings(max_examples=int(os.environ.get("VERIFY_EXAMPLES", 40)) // 2, deadline=None,
                    suppress_health_check=list(HealthCheck))

HEADER = "import tilepy as tp\n\n\n"

index_expr = st.builds(
    lambda a, b, c, post: f"(tp.block_id(0) * {a} + tp.arange(16) * {b} + {c}){post}",
    st.integers(0, 20), st.integers(-3, 3), st.integers(-4, 24),
    st.sampled_from(["", " // 2", " // 3", " % 16", " % 7"]))
scatter = st.tuples(index_expr, st.sampled_from(["store", "atomic_add"]), st.sampled_from([None, 4, 11, 16]))


def _source(scatters) -> str:
    body = ["    v = tp.load(X[0:16])"]
    for i, (idx, op, m) in enumerate(scatters):
        body.append(f"    idx{i} = {idx}")
        if m is not None:
            body.append(f"    m{i} = tp.arange(16) < {m}")
        mask = f", mask=m{i}" if m is not None else ""
        body.append(f"    tp.{op}(Y[idx{i}], v{mask})")
    return (HEADER + "@tp.kernel(threads=32)\n"
            "def scatter(X: tp.Tensor[tp.f32, 16], Y: tp.Tensor[tp.f32, \"N\"]):\n" + "\n".join(body) + "\n")


def _races(kernel, grid: int, n: int) -> list:
    """(element, kind) of the global races one interpreter run shows on Y."""
    trace = kernel[(grid,)](np.ones(16, np.float32), np.zeros(n, np.float32), record=True)
    acc = trace.accesses
    w = acc[acc["write"] & (acc["buffer"] == 1)]
    atomic = np.array([trace.ops[o].op.startswith("atomic") for o in w["op"]], dtype=bool)
    out = []
    for off in np.unique(w["offset"]):
        rows = w["offset"] == off
        plain = rows & ~atomic
        if not plain.any():
            continue
        if len(np.unique(w["block"][rows])) > 1:
            out.append((int(off), "blocks"))
        for b, o in {(int(b), int(o)) for b, o in zip(w["block"][plain], w["op"][plain])}:
            if (plain & (w["block"] == b) & (w["op"] == o)).sum() > 1:
                out.append((int(off), "duplicate"))
    return out


@SETTINGS
@given(scatters=st.lists(scatter, min_size=1, max_size=2), grid=st.integers(1, 4))
def test_global_races_are_reported_and_replay(scatters, grid):
    kernel = kernels_from_source(_source(scatters), f"scatter_{abs(hash(str(scatters)))}.py")["scatter"]
    report = tv.verify(kernel, checks=["global_race"])
    if _races(kernel, grid, 200):
        assert report.errors, f"the interpreter shows a race the verifier misses\n{_source(scatters)}"
    for f in report.errors:
        cex = f.counterexample
        blocks = [cex["block"][0]] + ([cex["other_block"][0]] if "other_block" in cex else [])
        n = max(int(cex.get("dims", {}).get("N", 0)), cex["element"][0] + 1)
        shown = _races(kernel, max(blocks) + 1, n)
        kind = "blocks" if "other_block" in cex else "duplicate"
        assert (cex["element"][0], kind) in shown, f"{f}\ndoes not replay: {shown}\n{_source(scatters)}"


def _gather_source(idx: str, pred: str, two_d: bool) -> str:
    if two_d:
        return (HEADER + "@tp.kernel(threads=32)\n"
                "def gather(X: tp.Tensor[tp.f32, \"H\", \"W\"], Z: tp.Tensor[tp.f32, \"M\", 8]):\n"
                "    tp.tag(X, lambda i, j: (\"x\", i, j))\n"
                f"    z = tp.load(X[{idx}])\n"
                f"    tp.assert_tag(z, lambda t: {pred}, message=\"p\")\n"
                "    tp.store(Z[tp.block_id(0) * 4:tp.block_id(0) * 4 + 4, 0:8], z)\n")
    return (HEADER + "@tp.kernel(threads=32)\n"
            "def gather(X: tp.Tensor[tp.f32, \"N\"], Z: tp.Tensor[tp.f32, \"M\"]):\n"
            "    tp.tag(X, lambda i: (\"x\", i))\n"
            f"    z = tp.load(X[{idx}])\n"
            f"    tp.assert_tag(z, lambda t: {pred}, message=\"p\")\n"
            "    tp.store(Z[tp.block_id(0) * 16:tp.block_id(0) * 16 + 16], z)\n")


affine = st.tuples(st.integers(-3, 3), st.integers(-5, 20), st.sampled_from([("", None), (" // 2", 2), (" % 5", 5)]))


def _values(n, b, c, post):
    v = np.arange(n) * b + c
    if post[1] is not None:
        v = v // post[1] if "//" in post[0] else v % post[1]
    return v


@SETTINGS
@given(rows=affine, cols=affine, two_d=st.booleans(), op=st.sampled_from(["<", ">=", "!="]), k=st.integers(-2, 20))
def test_a_gathered_elements_tag_is_the_tag_at_its_index(rows, cols, two_d, op, k):
    (b1, c1, p1), (b2, c2, p2) = rows, cols
    r = f"(tp.arange({4 if two_d else 16}) * {b1} + {c1}){p1[0]}"
    if two_d:
        idx = f"({r})[:, None], ((tp.arange(8) * {b2} + {c2}){p2[0]})[None, :]"
        pred = f"t[1] {op} {k} or t[2] == {c2 % 7}"
        ri, ci = _values(4, b1, c1, p1), _values(8, b2, c2, p2)
        holds = all(eval(f"{i} {op} {k} or {j} == {c2 % 7}") for i in ri for j in ci)  # noqa: S307
    else:
        idx, pred = r, f"t[1] {op} {k}"
        holds = all(eval(f"{i} {op} {k}") for i in _values(16, b1, c1, p1))  # noqa: S307
    src = _gather_source(idx, pred, two_d)
    kernel = kernels_from_source(src, f"gather_{abs(hash(src))}.py")["gather"]
    report = tv.verify(kernel, checks=["tag_assertion"])
    assert report.ok == holds, f"the predicate {'holds' if holds else 'fails'} on the indices\n{src}\n{report}"
