"""global_race on stdlib_kernels.gemm_streamk (a warp-specialized ring over mbarrier arrays around a stream-K
fix-up) is decided on the kernel as written, not on the per-stage copies mbarrier_arrays.expand makes for the
mbarrier checks (tilepy_verify/__init__.py `_as_written`): each global access once instead of
STAGES times. The correct kernel proves clean, and each seeded bug of the ticket protocol
(tests/verify/streamk_ring_kernels.py: the part written after the ticket, the fix-up not masked by the
ticket, the ticket on the next tile's lock, a relaxed ticket) is a race naming two blocks, as on the
mbarrier-free fix-up of tests/verify/test_ticket_protocol.py."""

import pytest

import tilepy_verify as tv
from stdlib_kernels import gemm_streamk as sk
from tests.verify.streamk_ring_kernels import streamk
from tilepy_verify.domain import analyze
from tilepy_verify.mbarrier_arrays import expand


def test_copy_is_the_stdlib_kernel():
    from tilepy.printer import format_ir

    def body(k, fixup):
        lines = [x.split("  #")[0] for x in format_ir(k.ir("sm_90a", FIXUP=fixup)).splitlines()]
        return lines[next(i for i, x in enumerate(lines) if x.strip().startswith("a_s:")):]

    for fixup in (0, 1, 2):
        assert body(streamk, fixup) == body(sk.gemm_streamk, fixup)


def test_as_written_has_one_copy_of_each_access():
    kir = sk.gemm_streamk.ir("sm_90a")
    written = analyze(kir).global_accesses
    unrolled = analyze(expand(kir, [])).global_accesses
    lines = sorted(a.span.line for a in written)
    assert len(unrolled) > len(written)
    # every access of the unrolled form is a stage copy of one as written: same tensor, kind and line
    assert {(a.param, a.kind, a.span.line) for a in unrolled} == {(a.param, a.kind, a.span.line) for a in written}
    assert len(lines) == len(set(lines)) + 3        # the fix-up's MAX_PARTS = 4 loads share one line


@pytest.mark.parametrize("kernel", [sk.gemm_streamk, sk.gemm_streamk_bf16])
@pytest.mark.parametrize("fixup", [0, 1, 2])
def test_stdlib_kernel_is_race_free(kernel, fixup):
    report = tv.verify(kernel, target="sm_90a", checks=["global_race"], FIXUP=fixup)
    assert report.findings == [], [f.message for f in report.findings]
    assert 0 < report.stats["queries"] <= 20, report.stats     # one copy per access (54 queries unrolled)


@pytest.mark.parametrize("fixup", [0, 1])
@pytest.mark.parametrize("bug,params", [
    ("no_release", {"WS"}),
    ("no_acquire", {"WS", "C", "LOCKS"}),
    ("wrong_tile", {"WS", "C", "LOCKS"}),
    ("relaxed", {"WS", "LOCKS"}),
])
def test_seeded_ticket_bugs_are_races(bug, params, fixup):
    report = tv.verify(streamk, target="sm_90a", checks=["global_race"], BUG=bug, FIXUP=fixup)
    races = [f for f in report.findings if f.message.startswith("data race")]
    assert not report.ok and all(f.check == "global_race" for f in report.findings)
    found = {f.message.split("'")[1] for f in races}
    # a query of a tensor the bug also races on may end "not proven" under heavy load (an error, never a
    # proof); the workspace, whose parts the protocol orders, is always among the races
    assert found <= params and "WS" in found, [f.message for f in report.findings]
    if len(races) == len(report.findings):
        assert found == params, [f.message for f in report.findings]
    for f in races:
        cex = f.counterexample
        # the iteration is named by the kernel's own slot index s (not a round of per-stage copies)
        assert cex["block"] != cex["other_block"] and "s" in cex["iteration"], cex
