"""Every op of the catalogue (tilepy/ops.py) has its three consumers: an interpreter handler (the reference
semantics), a verifier handler (or a stated reason why it is no event of the analysis), and a rendering on every
target that has the op's feature. An op added to the catalogue without them fails here, naming what is missing."""

import pytest

from tilepy.interpreter import _Interpreter
from tilepy.ops import OPS, UNARY_MATH
from tilepy.targets import TARGETS
from tilepy_hip.render import RENDER_TARGETS, coverage
from tilepy_verify import domain

# the interpreter's one op outside its op table: a wait on an mbarrier suspends the role (a generator the role
# scheduler resumes), so its statement loop runs it
INTERPRETER_STATEMENT_OPS = {"mbarrier_wait": "_mbarrier_wait"}


def interpreter_handler(op: str):
    if op in INTERPRETER_STATEMENT_OPS:
        return getattr(_Interpreter, INTERPRETER_STATEMENT_OPS[op], None)
    if op in UNARY_MATH:
        return getattr(_Interpreter, "_math", None)
    return getattr(_Interpreter, f"_op_{op}", None)


@pytest.mark.parametrize("op", sorted(OPS))
def test_interpreter_handles_every_op(op):
    assert callable(interpreter_handler(op)), f"op '{op}' has no interpreter handler (_Interpreter._op_{op})"


def test_interpreter_handlers_are_ops():
    stale = sorted(n[4:] for n in dir(_Interpreter) if n.startswith("_op_") and n[4:] not in OPS)
    assert not stale, f"interpreter handlers for ops the catalogue does not have: {stale}"


@pytest.mark.parametrize("op", sorted(OPS))
def test_verifier_handles_every_op(op):
    how = domain.coverage()[op]
    assert how is not None, (f"op '{op}' has no verifier handler: add _Walker.op_{op} / eff_{op}, or list it in "
                             "domain.ELEMENTWISE or domain.NOT_EVENTS with the reason")


def test_verifier_tables_are_consistent():
    cov = domain.coverage()
    assert set(cov) == set(OPS)
    # the tables name catalogue ops only, and no op is both a method and in a table
    assert domain.ELEMENTWISE <= set(OPS) and set(domain.NOT_EVENTS) <= set(OPS)
    for op in domain.ELEMENTWISE | set(domain.NOT_EVENTS):
        assert cov[op] not in ("op", "effect"), f"{op} has a walker method and a table entry"
    methods = {n.split("_", 1)[1] for n in dir(domain._Walker) if n.startswith(("op_", "eff_"))}
    assert methods <= set(OPS), f"walker methods for ops the catalogue does not have: {sorted(methods - set(OPS))}"
    # effects are statements: an effect op's handler is eff_ or no event; value ops have op_ or elementwise
    for op, how in cov.items():
        if how == "effect":
            assert OPS[op].effect, f"{op} is a value op handled as an effect"


@pytest.mark.parametrize("target", sorted(RENDER_TARGETS))
def test_renderer_handles_every_op_its_target_has(target):
    cov = coverage(RENDER_TARGETS[target])
    assert set(cov) == set(OPS)
    for op, how in cov.items():
        if how is None:
            feature = OPS[op].feature
            assert feature and not TARGETS[target].has(feature), (
                f"op '{op}' has no rendering on {target} (a target without the op's feature rejects it in the "
                "front end; this one has it)")
