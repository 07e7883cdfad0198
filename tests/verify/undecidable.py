"""What the solver-budget tests share: a query Z3 can neither refute nor satisfy, and a small kernel to verify."""

import tilepy as tp
from tilepy.symbolic import Var
from tilepy_verify.vc import AND, cmp

X, Y, Z = Var("x#0"), Var("y#0"), Var("z#0")
# x^3 + y^3 = z^3 in positive integers: no solution (Fermat, n = 3), and nonlinear integer arithmetic that Z3
# neither refutes nor satisfies: it runs until a limit (time or resource) stops it with "unknown"
FERMAT = AND(cmp(">=", X, 1), cmp(">=", Y, 1), cmp(">=", Z, 1), cmp("<=", X, 1 << 20), cmp("<=", Y, 1 << 20),
             cmp("==", X * X * X + Y * Y * Y, Z * Z * Z))


@tp.kernel
def copy_kernel(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], BLOCK: tp.constexpr = 128):
    i0 = tp.block_id(0) * BLOCK
    tp.store(Y[i0:i0 + BLOCK], tp.load(X[i0:i0 + BLOCK]))


def stuck_race_errors(monkeypatch, **constexprs):
    """The error findings of copy_kernel verified with a race check that asks FERMAT (so it runs into the solver's
    limit) beside the out-of-bounds check."""
    from tilepy_verify import checks, verify

    def stuck_race(ctx):
        ctx.solver.check(FERMAT, small=False)
        return []

    monkeypatch.setitem(checks.ALL, "race", stuck_race)
    rep = verify(copy_kernel, checks=["race", "out_of_bounds"], **constexprs)
    errs = [f for f in rep.findings if f.severity == "error"]
    assert [f.check for f in errs] == ["race"], [str(f) for f in rep.findings]
    return errs
