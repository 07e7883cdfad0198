"""The verifier's answers do not depend on the machine's load: every budget that steers a solver query (the first
try, the seeded tries, the witness questions' first try, the small-model search, tickets' quick checks, coverage's
query, the query itself) is a Z3 resource limit (`rlimit`, a count of Z3's own steps), and the one wall-clock
limit (TILEPY_VERIFY_QUERY_TIMEOUT) is a safety net no current kernel reaches. A query that runs out of its budget
is "unknown", never a proof, and the finding names the limit.

A loaded machine is simulated without timing anything: every wall-clock limit the verifier hands Z3 is divided by
1000, so each one buys a thousandth of the work (a machine a thousand times slower). With wall-clock budgets
(before) the first tries, quick checks and small-model searches ran out early there: other paths, other
counterexamples (and on some kernels other findings); with resource budgets the findings are the same."""

import json
import os
import subprocess
import sys

import pytest
import z3

from tilepy_verify.vc import AND, Solver_, SolverUnknown, cmp, query_rlimit

from .undecidable import FERMAT, X, stuck_race_errors


def test_rlimit_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("TILEPY_VERIFY_QUERY_RLIMIT", "2_500_000")
    assert query_rlimit() == 2_500_000
    monkeypatch.setenv("TILEPY_VERIFY_QUERY_RLIMIT", "0")
    assert query_rlimit() == 0  # no limit
    for bad in ("lots", "-5", "1.5"):
        monkeypatch.setenv("TILEPY_VERIFY_QUERY_RLIMIT", bad)
        with pytest.raises(ValueError, match="TILEPY_VERIFY_QUERY_RLIMIT"):
            query_rlimit()


def test_rlimit_is_a_budget_per_check_in_the_incremental_solver():
    """Z3's resource count belongs to the context (cumulative over every check and every solver of it); the
    `rlimit` parameter is a budget counted from the check's start. Three checks of one solver with the same
    budget each spend it (a cumulative limit would stop the second at once), and the safety net's timeout set
    with the budget stays in force."""
    s = Solver_()
    try:
        s.solver.push()
        s._assert(s.enc.formula(FERMAT))
        counts = [s._count()]
        for _ in range(3):
            assert s._try(200_000) == z3.unknown
            assert s._hit == ("rlimit", 200_000)
            counts.append(s._count())
        spent = [b - a for a, b in zip(counts, counts[1:])]
        assert all(200_000 <= d < 260_000 for d in spent), spent
        # an easy query after them still gets its answer within a small budget
        s.solver.pop()
        s.solver.push()
        s._assert(s.enc.formula(cmp("==", X, 5)))
        assert s._try(50_000) == z3.sat
        s.solver.pop()
    finally:
        s.close()


def test_an_exhausted_budget_is_unknown_naming_the_limit(monkeypatch):
    monkeypatch.setenv("TILEPY_VERIFY_QUERY_RLIMIT", "300000")
    monkeypatch.setenv("TILEPY_VERIFY_QUERY_TIMEOUT", "600")
    s = Solver_()
    try:
        with pytest.raises(SolverUnknown, match="resource limit 300000") as got:
            s.check(FERMAT, small=False)
        assert got.value.rlimit == 300_000 and got.value.seconds is None
        assert got.value.env == "TILEPY_VERIFY_QUERY_RLIMIT"
        # a decidable query still gets its answer on the same solver afterwards
        assert s.check(AND(cmp(">=", X, 3), cmp("<=", X, 2))) is None
        assert s.check(cmp("==", X, 5), want_vars=("x#0",))["x#0"] == 5
    finally:
        s.close()
    s = Solver_(unknown="possible")
    try:
        assert s.check(FERMAT, small=False) is not None  # None would mean "proven impossible"
    finally:
        s.close()


def test_a_query_past_its_first_try_names_the_query_budget(monkeypatch):
    """A budget above the first try's: the first try, then the rest of the budget as it is (FERMAT has no size to
    seed); unknown names the query's budget, not its last part's."""
    from tilepy_verify import vc

    monkeypatch.setattr(vc, "FIRST_TRY_RLIMIT", 200_000)
    monkeypatch.setenv("TILEPY_VERIFY_QUERY_RLIMIT", "500000")
    monkeypatch.setenv("TILEPY_VERIFY_QUERY_TIMEOUT", "600")
    s = Solver_()
    try:
        start = s._count()
        with pytest.raises(SolverUnknown, match="resource limit 500000"):
            s.check(FERMAT, small=False)
        assert 500_000 <= s._count() - start < 600_000  # the first try and the rest: the query's budget in all
    finally:
        s.close()


def test_an_undecided_check_names_the_resource_limit(monkeypatch):
    monkeypatch.setenv("TILEPY_VERIFY_QUERY_RLIMIT", "300000")
    monkeypatch.setenv("TILEPY_VERIFY_QUERY_TIMEOUT", "600")
    errs = stuck_race_errors(monkeypatch, BLOCK=32)
    assert "not proven" in errs[0].message and "resource limit 300000" in errs[0].message
    assert "TILEPY_VERIFY_QUERY_RLIMIT" in errs[0].message


# One verification in a fresh interpreter (fixed hash seed): the counterexamples' values depend on what ran before
# in the process (the shared Z3 context's terms) and on the order of Python sets, so idle and loaded runs are
# compared each in a process of its own. FACTOR > 1: every wall-clock limit handed to Z3 divided by it.
CHILD = r"""
import json, os, sys
import z3
FACTOR = int(sys.argv[3])


def scale(value):
    return value if str(value) == "4294967295" else max(1, int(value) // FACTOR)


if FACTOR > 1:
    ps, ss = z3.ParamsRef.set, z3.Solver.set
    z3.ParamsRef.set = lambda self, name, value: ps(self, name, scale(value) if name == "timeout" else value)

    def solver_set(self, *args, **keys):
        if len(args) == 2 and args[0] == "timeout":
            args = ("timeout", scale(args[1]))
        return ss(self, *args, **keys)

    z3.Solver.set = solver_set
import tilepy_verify
from tests.verify import seeded_corpus, seeded_corpus2
name, bug = sys.argv[1], sys.argv[2]
kernel = next(k for C in (seeded_corpus, seeded_corpus2) for k, b, *_ in C.CORPUS if k.name == name and b == bug)
rep = tilepy_verify.verify(kernel, BUG=bug)
print(json.dumps({"findings": sorted([f.check, f.severity, f.message, repr(sorted((f.counterexample or {}).items(),
                                                                                  key=str))] for f in rep.findings),
                  "queries": rep.stats["queries"]}))
"""


def _verify_in_child(name, bug, factor):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": root,
           "TILEPY_VERIFY_QUERY_TIMEOUT": "100000"}  # the safety net out of the way (100 s on the slowed machine)
    env.pop("TILEPY_VERIFY_QUERY_RLIMIT", None)
    out = subprocess.run([sys.executable, "-c", CHILD, name, bug, str(factor)], cwd=root, env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# a seeded bug whose counterexamples' search runs past the wall-clock budgets of a machine a thousand times slower
# (first tries past 2 ms, small-model searches past 5 ms): with those budgets its findings differed there
LOADED = [("two_consumers", "count")]


@pytest.mark.parametrize("name,bug", LOADED, ids=[f"{n}-{b}" for n, b in LOADED])
def test_findings_do_not_depend_on_the_machines_load(name, bug):
    idle = _verify_in_child(name, bug, 1)
    assert any(f[1] == "error" for f in idle["findings"]), idle  # a seeded bug: found
    assert _verify_in_child(name, bug, 1000) == idle
