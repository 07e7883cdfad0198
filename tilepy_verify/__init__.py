"""tilepy_verify: a tilepy kernel's data choreography proved at compile time, with counterexamples.

    import tilepy_verify
    report = tilepy_verify.verify(stdlib_kernels.gemm.gemm, target="sm_80", BM=64, BN=64)
    report.ok            # no error-severity findings
    print(report)        # file:line, source line with a caret, the counterexample, the other op

Checks (all on by default; `checks=[...]` picks some): race, barrier_divergence, deadlock,
out_of_bounds, bank_conflict (performance), pipeline_hazard, mma_layout, tag_assertion. See docs/verification.md.
"""

from __future__ import annotations

import gc
import threading
import time
from contextlib import contextmanager

from . import symbolic_ring
from ._version import __version__
from .report import CHECKS, Finding, Report
from .undecided import _undecided

__all__ = ["verify", "verify_ir", "Report", "Finding", "CHECKS", "__version__"]

_CACHE: dict = {}


class Context:
    """What a check sees: the analysis, the solver, and helpers to name things."""

    def __init__(self, analysis, solver, as_written=None):
        self.analysis = analysis
        self.solver = solver
        self._as_written = as_written  # () -> Context of the kernel before its mbarrier arrays are unrolled, or None
        self._names = {}
        for s in _assignments(analysis.kir.body):
            v = getattr(s.value, "op", None)
            if v == "shared":
                self._names[id(s.value)] = s.name

    def as_written(self):
        """The Context of the kernel as written (each statement once, its ring not unrolled per stage:
        mbarrier_arrays.expand), or None where this one is already that (no mbarrier array) or the walk does not
        take that form. Built on first use, shared by the checks that need no mbarrier (global_race, the
        reachability of tag assertions, the per-stage checks)."""
        return self._as_written() if self._as_written is not None else None

    def name_of(self, alloc) -> str:
        return alloc.name

    def eval(self, term, model):
        from .vc import evaluate_term

        return evaluate_term(term, model)


def _assignments(stmts):
    from tilepy import ir

    for s in ir.walk(stmts):
        if isinstance(s, ir.Assign):
            yield s


def verify(kernel_or_ir, target=None, checks=None, **constexprs) -> Report:
    """Verify a `@tilepy.kernel` (specialized with `target` and `constexprs`) or a `KernelIR`.

    >>> from stdlib_kernels import gemm
    >>> verify(gemm.gemm, target="sm_80", **gemm.PRESETS["sm_80"]).ok
    True
    """
    from tilepy.ir import KernelIR

    if isinstance(kernel_or_ir, KernelIR):
        if constexprs:
            raise TypeError("constexprs apply to a kernel, not to an already specialized KernelIR")
        kir = kernel_or_ir
    else:
        kir = kernel_or_ir.ir(target, **constexprs)
    return verify_ir(kir, checks)


def verify_ir(kir, checks=None) -> Report:
    """Verify one specialized kernel IR (results cached per IR object and check list)."""
    from .checks import ALL

    names = tuple(checks) if checks is not None else CHECKS
    unknown = [c for c in names if c not in ALL]
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(unknown)}; known: {', '.join(CHECKS)}")
    key = (id(kir), names)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is kir:
        return hit[1]
    with _fewer_collections():
        return _verify_ir(kir, names, key)


GC_GEN0 = 100_000  # allocations between the young generation's collections during a run (CPython's default: 700)


@contextmanager
def _fewer_collections():
    """CPython's cyclic garbage collector runs less often during a verification: a run allocates millions of
    small terms (tuples, Syms) and keeps most of them in its memos until it ends, and a collection every 700
    allocations traversed them again and again (a fifth to a third of the CPU time of gemm_streamk narrow and
    attention_fwd d64 at 8 stages). Nothing is leaked (the collector still runs, and the memos are dropped when
    the run ends); the caller's thresholds are restored when the last of the runs in progress (threads) ends."""
    with _GC_LOCK:
        if _GC_RUNS[0] == 0:
            _GC_RUNS[1] = gc.get_threshold()
            gc.set_threshold(max(_GC_RUNS[1][0], GC_GEN0), *_GC_RUNS[1][1:])
        _GC_RUNS[0] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_RUNS[0] -= 1
            if _GC_RUNS[0] == 0:
                gc.set_threshold(*_GC_RUNS[1])


_GC_LOCK = threading.Lock()
_GC_RUNS: list = [0, None]  # runs in progress, the thresholds before the first of them


def _verify_ir(kir, names, key) -> Report:
    from .checks import ALL
    from .domain import analyze
    from .vc import Solver_, SolverUnknown, drop_memos

    t0 = time.perf_counter()
    from .mbarrier_arrays import expand

    early: list = []  # releases of stages an asynchronous wgmma group may still read (mbarrier_arrays.py)
    expanded = expand(kir, early)
    analysis = analyze(expanded)  # mbarrier arrays in the analysis's terms
    solver = Solver_()
    solver.facts.update(analysis.trip_facts)
    symbolic = symbolic_ring.enabled() and expanded is not kir
    written = _AsWritten(kir, symbolic) if expanded is not kir else None
    ctx = Context(analysis, solver, written)
    from .checks.cluster import findings as cluster_findings

    early += cluster_findings(kir, _remote_writes_awaited)  # thread-block clusters: releases reaching every multicast
    # target, cluster barriers
    findings = [f for f in early if f.check in names]
    try:
        for name in names:
            if name == "tag_assertion" and written is not None and written.symbolic:
                got = _tags_as_written(kir, written())
                if got is not None:  # the ring's reads matched by element terms (symbolic_ring.py)
                    findings.extend(got)
                    continue
            if name in AS_WRITTEN and written is not None:
                got = _as_written(name, written())
                if got is not None:  # the kernel as written: one copy of each access, not one per stage
                    findings.extend(got)
                    continue
            try:
                findings.extend(ALL[name](ctx))
            except SolverUnknown as e:  # neither proof nor counterexample: never reported clean
                findings.append(_undecided(kir, name, e))
    finally:
        solver.close()
        extra = written.close() if written is not None else 0
        drop_memos()
    findings = _dedupe(findings)
    report = Report(kir.name, kir.target, dict(kir.constexprs), findings, time.perf_counter() - t0, names,
                    {"queries": solver.queries + extra, "accesses": len(analysis.accesses)})
    _CACHE[key] = (kir, report)
    return report


class _AsWritten:
    """The kernel as written, before its mbarrier arrays are unrolled into one loop-body copy per stage
    (mbarrier_arrays.expand): its analysis and solver, made on the first call (None when the walk does not take
    that form), closed by `close` (which returns the queries asked)."""

    def __init__(self, kir, symbolic=False):
        self.kir = kir
        self.symbolic = symbolic  # name mbarrier array elements by term (symbolic_ring.py)
        self.ctx = None
        self.tried = False

    def __call__(self):
        if not self.tried:
            self.tried = True
            from .domain import analyze
            from .vc import Solver_

            try:
                analysis = analyze(self.kir, self.symbolic)
            except Exception:  # noqa: BLE001 - a form only the expanded walk takes: each check asks there
                return None
            solver = Solver_()
            solver.facts.update(analysis.trip_facts)
            self.ctx = Context(analysis, solver)
        return self.ctx

    def close(self) -> int:
        if self.ctx is None:
            return 0
        self.ctx.solver.close()
        return self.ctx.solver.queries


# The checks that need nothing the per-stage rewrite of mbarrier arrays is for (no mbarrier orders, no phase):
# global_race (global memory is not ordered by mbarriers), out_of_bounds (stage indices and in-stage offsets),
# bank_conflict (a warp's addresses in one stage), mma_layout (operand layouts and descriptors) and
# barrier_divergence (a block barrier under thread-dependent control flow). Where the kernel has mbarrier arrays
# they run on the kernel as written (each access, mma and barrier once, not once per stage copy); the race,
# deadlock and pipeline_hazard checks run on the copies (the reachability of an assertion's line as written:
# checks/tags.py), and tag_assertion too where a ring is not of the form symbolic_ring.py covers (or the switch
# is off): where it is, the tag proof runs as written (`_tags_as_written`).
AS_WRITTEN = ("global_race", "out_of_bounds", "bank_conflict", "mma_layout", "barrier_divergence")


def _as_written(name, ctx):
    """The findings of check `name` (one of AS_WRITTEN) on the kernel as written (`ctx`: _AsWritten's Context),
    or None where that form cannot be decided here (no such Context, or a query ends unknown: the check then runs
    on the expanded form as before).

    The rewrite keeps every statement and its order, only splitting a ring's loop index into round and stage, so
    both forms make the same accesses (blocks, iterations, threads, elements, masks, tickets), the same mma ops
    and the same barriers under the same conditions, and none of these checks reads an mbarrier. As written, each
    is one event instead of STAGES copies (gemm_streamk's global_race: 11 accesses and 15 queries instead of 44
    and 54), and a counterexample names the kernel's own loop index."""
    from .checks import ALL
    from .vc import SolverUnknown

    if ctx is None:
        return None
    try:
        return ALL[name](ctx)
    except SolverUnknown:
        return None


def _tags_as_written(kir, ctx):
    """The tag check's findings on the kernel as written with its rings' reads matched by element terms
    (symbolic_ring.py; TILEPY_VERIFY_SYMBOLIC_RINGS=0 turns it off), or None where a ring read is not of the
    covered form (the reason in a debug line; the check then runs on the stage copies), the walk does not take
    that form, or a query ends unknown."""
    from .checks import ALL
    from .vc import SolverUnknown

    if ctx is None:
        symbolic_ring.note_gaps(kir, ["the kernel as written does not walk"])
        return None
    if ctx.analysis.symbolic_gaps:
        symbolic_ring.note_gaps(kir, ctx.analysis.symbolic_gaps)
        return None
    try:
        return ALL["tag_assertion"](ctx)
    except SolverUnknown:
        symbolic_ring.note_gaps(kir, ["a query ended unknown"])
        return None


def _remote_writes_awaited(kir) -> bool:
    """checks/cluster.remote_writes_awaited on the walk of the kernel as written that names mbarrier array elements
    by term (the producer tail in place of the closing cluster barrier; asked only where that barrier is missing)."""
    from .checks.cluster import remote_writes_awaited
    from .domain import analyze
    from .vc import Solver_

    try:
        analysis = analyze(kir, symbolic=True)
    except Exception:  # noqa: BLE001 - a form the walk as written does not take: not proved
        return False
    solver = Solver_(unknown="possible")
    solver.facts.update(analysis.trip_facts)
    try:
        return remote_writes_awaited(kir, analysis, lambda t: solver.check(t, small=False))
    finally:
        solver.close()


def _dedupe(findings):
    seen, out = set(), []
    for f in findings:
        key = (f.check, str(f.span), str(f.other_span))
        if key in seen:
            continue
        seen.add(key)
        out.append(f)
    order = {c: i for i, c in enumerate(CHECKS)}
    out.sort(key=lambda f: (f.severity != "error", order[f.check], f.span.line))
    return out
