"""mbarrier synchronization between concurrently running roles: the producer/consumer ring of
docs/language.md with seeded bugs (a wrong phase, a missing wait, a refill without waiting on `empty`, a
missing arrive, a wrong arrival count). Each is reported by the right check at the right line with a
counterexample (threads, iteration, stage or phase) that the interpreter replays: wrong data (the poison of
unwritten shared memory, stale data, or a stage overwritten too early) or a deadlock (InterpreterError). The fixed twin
and the Hopper GEMM verify clean, and tags flow through the bulk copies to the consumer's reads."""


import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv
from tilepy.errors import InterpreterError
from tilepy.interpreter import run_ir

SRC = open(__file__).read().splitlines()


@tp.kernel(threads=64, target="sm_90a")
def ring(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, 128], BLOCK: tp.constexpr = 128,
         BUG: tp.constexpr = "none"):
    tp.tag(X, lambda i: ("X", i))
    buf = tp.shared((BLOCK,), tp.f32, stages=2)
    if BUG == "count":
        full0 = tp.mbarrier(2)                                      # two arrivals per phase; one comes
        full1 = tp.mbarrier(2)
    else:
        full0 = tp.mbarrier(1)
        full1 = tp.mbarrier(1)
    empty0 = tp.mbarrier(1)
    empty1 = tp.mbarrier(1)
    full = (full0, full1)
    empty = (empty0, empty1)
    pairs = X.shape[0] // (2 * BLOCK)
    if tp.warp_id() == 0:                                           # producer: warp 0
        for j in range(pairs):
            for s in tp.static_range(2):
                k = 2 * j + s
                if j > 0:
                    if BUG != "noempty":
                        tp.mbarrier_wait(empty[s], j - 1)           # waits for the consumer to release s
                tp.copy_bulk(X[k * BLOCK:(k + 1) * BLOCK], buf[s], full[s])
                tp.mbarrier_arrive(full[s])
    else:                                                           # consumer: warp 1
        acc = tp.zeros((BLOCK,), tp.f32)
        for j in range(pairs):
            for s in tp.static_range(2):
                if BUG == "phase":
                    tp.mbarrier_wait(full[s], j - 1)                # one phase too early
                elif BUG != "nowait":
                    tp.mbarrier_wait(full[s], j)
                x = tp.load(buf[s])                                 # the consumer's read
                tp.assert_tag(x, lambda t: t[1] % (2 * BLOCK) // BLOCK == s)  # noqa: B023
                acc += x
                if BUG != "noarrive":
                    tp.mbarrier_arrive(empty[s])                    # releases stage s
        tp.store(Y[0:BLOCK], acc)


def line_of(marker: str) -> int:
    lo = next(i for i, text in enumerate(SRC) if text.startswith("def ring("))
    hits = [i + 1 for i, text in enumerate(SRC) if marker in text and i > lo]
    assert hits, marker
    return hits[0]


# (BUG, check, marker of the line reported, marker of the other op or None, what the interpreter shows)
CASES = [
    ("phase", "pipeline_hazard", "the consumer's read", "tp.copy_bulk(X[", "wrong"),  # reads stale data
    ("nowait", "pipeline_hazard", "the consumer's read", "tp.copy_bulk(X[", "poison"),
    ("noempty", "pipeline_hazard", "the consumer's read", "tp.copy_bulk(X[", "wrong"),
    ("noempty", "pipeline_hazard", "tp.copy_bulk(X[", "tp.copy_bulk(X[", "wrong"),  # and the two copies
    ("noarrive", "deadlock", "waits for the consumer to release s", None, "deadlock"),
    ("noarrive", "pipeline_hazard", "the consumer's read", "tp.copy_bulk(X[", "deadlock"),
    ("count", "deadlock", "tp.mbarrier_wait(full[s], j)", "tp.mbarrier_arrive(full[s])", "deadlock"),
]


def replay(bug, cex):
    """Run the buggy kernel on the interpreter with enough data for the counterexample's iteration."""
    its = [*(cex.get("iteration") or {}).values(), *(cex.get("other_iteration") or {}).values(), 0]
    pairs = max(its) + 2
    x = np.arange(pairs * 256, dtype=np.float32)
    y = np.zeros(128, np.float32)
    kir = ring.ir(BUG=bug)
    try:
        run_ir(kir, (1,), [x, y])
    except InterpreterError as exc:
        return "deadlock" if "deadlock" in str(exc) else str(exc)
    if np.isnan(y).any():
        return "poison"
    return "ok" if np.array_equal(y, x.reshape(-1, 128).sum(0)) else "wrong"


@pytest.mark.parametrize("bug, check, marker, other, shows", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_seeded_mbarrier_bug(bug, check, marker, other, shows):
    report = tv.verify(ring, BUG=bug)
    assert not report.ok
    found = [f for f in report.errors if f.check == check and f.span.line == line_of(marker)
             and (other is None or f.other_span is not None and f.other_span.line == line_of(other))]
    assert found, str(report)
    f = found[0]
    cex = f.counterexample
    text = str(f)
    assert f"{f.span.file}:{f.span.line}" in text and "counterexample" in text
    assert "thread" in cex and "iteration" in cex and "roles" in cex
    if check == "pipeline_hazard":
        assert cex["stage"] in (0, 1) and "other_thread" in cex and "phase" in cex
        if marker != other:  # a read and a copy: the consumer's and the producer's warps
            assert {cex["thread"] // 32, cex["other_thread"] // 32} == {0, 1}
    else:
        assert "phase" in cex
    assert replay(bug, cex) == shows


def test_fixed_twin_is_clean_and_correct():
    report = tv.verify(ring)
    assert report.ok and not report.findings, str(report)
    assert replay("none", {}) == "ok"


def test_tags_flow_through_bulk_copies():
    """The assertion on the consumer's read is proved (the copy its wait lands), and it is not vacuous."""
    report = tv.verify(ring, checks=["tag_assertion", "pipeline_hazard"])
    assert report.ok and report.stats["queries"] > 0, str(report)


@pytest.mark.parametrize("params", [{}, {"STAGES": 2}, {"BN": 128, "INSTR": tp.nv.wgmma_m64n128k16_bf16},
                                    {"STAGES": 3, "BN": 128, "INSTR": tp.nv.wgmma_m64n128k16_bf16,
                                                      "CONSUMERS": 1, "BM": 64}])
def test_hopper_gemm_verifies_clean(params):
    from stdlib_kernels.gemm_hopper import PRESETS, gemm_hopper

    p = {**PRESETS["sm_90a"], **params}
    report = tv.verify(gemm_hopper, target="sm_90a", **p)
    assert report.ok, str(report)
