"""Before the analysis: mbarrier arrays and asynchronous wgmma groups, rewritten into forms the analysis knows.

The analysis names an mbarrier by its variable and counts a role's arrivals on it in program order. A kernel
that indexes an mbarrier array by a run-time stage (`full[k % STAGES]`, phase `k // STAGES`: a pipeline as one
flat loop over k) is rewritten here into the equivalent loop over rounds,

    for j in range(cdiv(stop - start, S)):        # S = the array's stages
        (unrolled for c in 0..S-1)
        if start + S * j + c < stop:
            body with k := start + S * j + c

where every `k % S`, `(k + d) % S` folds to a constant and `k // S` to an affine function of j, so each
`full[...]` names one mbarrier of the array (`full[0]`, `full[1]`, ...: one variable each, which is how the
analysis sees them) and each phase is affine in the round. Only loops whose index reaches an mbarrier array
are rewritten (start a constant, step 1); an array index that does not fold to a constant this way is an error
naming its line (index the array by the loop counter: `bars[k % S]` or `bars[(k - 1) % S]`). Each copy's `if`
carries `stage_copy = (S, c)`: the walker gives the points directly in it their iteration of the loop as written
(`events.Point.copy`), by which the deadlock check's hops take the latest iterations, not the latest rounds.

Asynchronous wgmma (`tp.mma_async`, `tp.mma_wait(n)`): a group's shared operands may be read by the tensor
cores until a wait retires it. The analysis records an mma's reads where the op is, so what it cannot see is
a stage released (mbarrier_arrive, which lets the producer refill it) while the group reading it is still in
flight. That is checked here, before the analysis: in a loop over k with one mma_async per iteration reading
stage (k - d0) % S, followed by `mma_wait(n)`, an arrive on `bars[(k - d) % S]` releases tile k - d's stage,
which is safe after the wait when (d - d0) mod S >= n (tiles k - n + 1 .. k may be in flight) and before it
when (d - d0) mod S >= n + 1; an arrive whose index is not of that form, an arrive after the loop before
`mma_wait(0)`, or a loop's groups never retired are pipeline hazards (reported as findings, with the mma as
the other op). With `mma_wait(0)` in the loop the mma is synchronous and nothing is added.
"""

from __future__ import annotations

from dataclasses import replace

from tilepy import dtypes as dt
from tilepy import ir
from tilepy.errors import UnsupportedConstructError
from tilepy.types import MBarrierType, ScalarType

I32 = ScalarType(dt.i32)
BOOL = ScalarType(dt.bool_)


def expand(kir, findings=None):
    """`kir` with mbarrier arrays split (or `kir` itself); releases of stages that an asynchronous wgmma group
    may still read are appended to `findings`."""
    arrays = {s.name: s.value.attrs.get("stages") for s in ir.walk(kir.body)
              if isinstance(s, ir.Assign) and isinstance(s.value, ir.Call) and s.value.op == "mbarrier"
              and s.value.attrs.get("stages") is not None}
    has_async = any(isinstance(s, ir.Assign) and isinstance(s.value, ir.Call) and s.value.op == "mma"
                    and s.value.attrs.get("async_") for s in ir.walk(kir.body))
    if not arrays and not has_async:
        return kir
    x = _Expander(kir, arrays)
    if has_async and findings is not None:
        x.releases(kir.body, findings)
    if not arrays:
        return kir
    body = x.stmts(kir.body, {})
    types = dict(kir.var_types)
    types.update(x.new_types)
    return replace(kir, body=body, var_types=types)


# ------------------------------------------------------------------------------------------ expressions


def _const(v, span):
    return ir.Const(I32, span, int(v))


def _bin(op, a, b, span, typ=I32):
    return ir.BinOp(typ, span, op, a, b)


def map_expr(e, fn):
    """A copy of `e` with `fn` applied bottom-up (fn returns a replacement or None to keep the node)."""
    if isinstance(e, ir.BinOp):
        out = ir.BinOp(e.type, e.span, e.op, map_expr(e.lhs, fn), map_expr(e.rhs, fn))
    elif isinstance(e, ir.UnOp):
        out = ir.UnOp(e.type, e.span, e.op, map_expr(e.operand, fn))
    elif isinstance(e, ir.Call):
        out = ir.Call(e.type, e.span, e.op, tuple(map_expr(a, fn) if isinstance(a, ir.Expr) else a for a in e.args),
                      dict(e.attrs))
    elif isinstance(e, ir.Const):
        out = ir.Const(e.type, e.span, e.value)
    elif isinstance(e, ir.Var):
        out = ir.Var(e.type, e.span, e.name)
    else:
        return e
    got = fn(out)
    return out if got is None else got


def map_top(e, fn):
    """A copy of `e` where `fn` is tried top down: a node it replaces is not visited further."""
    got = fn(e)
    if got is not None:
        return got
    if isinstance(e, ir.BinOp):
        return ir.BinOp(e.type, e.span, e.op, map_top(e.lhs, fn), map_top(e.rhs, fn))
    if isinstance(e, ir.UnOp):
        return ir.UnOp(e.type, e.span, e.op, map_top(e.operand, fn))
    if isinstance(e, ir.Call):
        return ir.Call(e.type, e.span, e.op, tuple(map_top(a, fn) if isinstance(a, ir.Expr) else a for a in e.args),
                       dict(e.attrs))
    return map_expr(e, lambda x: None)


def map_stmts(stmts, fn, top_down=False):
    """Fresh statements (every node a new object) with `fn` applied to every expression (bottom up, or top
    down: `map_top`)."""
    if top_down:
        return _map_stmts(stmts, lambda e: map_top(e, fn))
    return _map_stmts(stmts, lambda e: map_expr(e, fn))


def _map_stmts(stmts, mx):
    out = []
    for s in stmts:
        if isinstance(s, ir.Assign):
            out.append(ir.Assign(s.span, s.name, mx(s.value)))
        elif isinstance(s, ir.Eval):
            out.append(ir.Eval(s.span, mx(s.call)))
        elif isinstance(s, ir.For):
            out.append(ir.For(s.span, s.var, mx(s.start), mx(s.stop), mx(s.step),
                              _map_stmts(s.body, mx), s.kind, s.stages))
        elif isinstance(s, ir.If):
            out.append(ir.If(s.span, mx(s.cond), _map_stmts(s.then, mx), _map_stmts(s.orelse, mx), s.kind))
        else:
            out.append(s)
    return out


def _affine(e, env):
    """{name: coef, 1: const} when `e` is an integer affine form of variables (env: known forms), else None."""
    if isinstance(e, ir.Const) and isinstance(e.value, int | bool) and not isinstance(e.value, float):
        return {1: int(e.value)}
    if isinstance(e, ir.Var):
        if e.name in env:
            return dict(env[e.name])
        return {e.name: 1, 1: 0}
    if isinstance(e, ir.UnOp) and e.op == "-":
        a = _affine(e.operand, env)
        return None if a is None else {k: -v for k, v in a.items()}
    if isinstance(e, ir.BinOp) and e.op in ("+", "-", "*", "%", "//"):
        a, b = _affine(e.lhs, env), _affine(e.rhs, env)
        if a is None or b is None:
            return None
        if e.op in ("+", "-"):
            sgn = 1 if e.op == "+" else -1
            out = dict(a)
            for k, v in b.items():
                out[k] = out.get(k, 0) + sgn * v
            return {k: v for k, v in out.items() if v or k == 1}
        if e.op == "*":
            if set(b) == {1}:
                return {k: v * b[1] for k, v in a.items()}
            if set(a) == {1}:
                return {k: v * a[1] for k, v in b.items()}
            return None
        if set(b) != {1} or b[1] <= 0:
            return None
        S = b[1]
        if any(v % S for k, v in a.items() if k != 1):
            return None
        if e.op == "%":
            return {1: a[1] % S}
        return {**{k: v // S for k, v in a.items() if k != 1}, 1: a[1] // S}
    return None


def _build(aff, span):
    """An expression for an affine form."""
    out = None
    for k, v in aff.items():
        if k == 1 or not v:
            continue
        term = ir.Var(I32, span, k)
        if v != 1:
            term = _bin("*", term, _const(v, span), span)
        out = term if out is None else _bin("+", out, term, span)
    c = aff.get(1, 0)
    if out is None:
        return _const(c, span)
    return _bin("+", out, _const(c, span), span) if c else out


def _simplify(env):
    """fn for map_expr: integer `%` and `//` nodes whose affine form is known become that form."""

    def fn(e):
        if isinstance(e, ir.BinOp) and e.op in ("%", "//") and isinstance(e.type, ScalarType) and e.type.dtype.is_int:
            a = _affine(e, env)
            if a is not None:
                return _build(a, e.span)
        if isinstance(e, ir.BinOp) and e.op in ("+", "-") and isinstance(e.type, ScalarType) and e.type.dtype.is_int:
            # a sum in which a variable cancels (a slot's first slot plus its round: (J - j) + j) as its affine
            # form: the solver then sees J itself, not two floor terms it must prove equal
            a = _affine(e, {})
            if a is not None and len(a) - 1 < sum(isinstance(x, ir.Var) for x in ir.walk_exprs(e)):
                return _build(a, e.span)
        return None

    return fn


# ------------------------------------------------------------------------------------------ the rewrite


class _Expander:
    def __init__(self, kir, arrays):
        self.kir = kir
        self.arrays = arrays  # array variable -> stages
        self.new_types: dict = {}
        self._n = 0

    def fresh(self, stem):
        self._n += 1
        return f"__{stem}{self._n}"

    def error(self, span, msg, hint=""):
        return UnsupportedConstructError(msg, span, hint)

    # -------------------------------------------------------------- mbarrier arrays
    def stmts(self, stmts, env):
        out = []
        for s in stmts:
            out.extend(self.stmt(s, env))
        return out

    def stmt(self, s, env):
        if isinstance(s, ir.Assign):
            v = s.value
            if isinstance(v, ir.Call) and v.op == "mbarrier" and s.name in self.arrays:
                out = []
                for i in range(self.arrays[s.name]):
                    name = f"{s.name}[{i}]"
                    attrs = {k: val for k, val in v.attrs.items() if k != "stages"}
                    out.append(ir.Assign(s.span, name, ir.Call(MBarrierType(v.type.count), v.span, "mbarrier", (),
                                                               attrs)))
                    self.new_types[name] = MBarrierType(v.type.count)
                return out
            value = self.expr(v, env)
            a = _affine(value, env) if isinstance(value.type, ScalarType) and value.type.dtype.is_int else None
            if a is not None and s.name not in a:
                env[s.name] = a
            else:
                env.pop(s.name, None)
            return [ir.Assign(s.span, s.name, value)]
        if isinstance(s, ir.Eval):
            return [ir.Eval(s.span, self.expr(s.call, env))]
        if isinstance(s, ir.If):
            inner_t, inner_e = dict(env), dict(env)
            out = ir.If(s.span, self.expr(s.cond, env), self.stmts(s.then, inner_t), self.stmts(s.orelse, inner_e),
                        s.kind)
            for name in _assigned(s.then) | _assigned(s.orelse):
                env.pop(name, None)
            return [out]
        if isinstance(s, ir.For):
            return self.loop(s, env)
        return [s]

    def expr(self, e, env):
        e = map_expr(e, _simplify(env))

        def at(x):
            if isinstance(x, ir.Call) and x.op == "mbarrier_at":
                arr, idx = x.args
                a = _affine(idx, env)
                if not isinstance(arr, ir.Var) or a is None or set(a) != {1}:
                    raise self.error(x.span, "the verifier cannot tell which mbarrier of the array this index "
                                     "names", "index an mbarrier array by a loop counter: bars[k % STAGES] or "
                                     "bars[(k - 1) % STAGES] in a loop `for k in range(...)` (step 1)")
                n = self.arrays.get(arr.name)
                if n is not None and not 0 <= a[1] < n:
                    raise self.error(x.span, f"mbarrier index {a[1]} is outside 0..{n - 1}")
                return ir.Var(x.type, x.span, f"{arr.name}[{a[1]}]")
            return None

        return map_expr(e, at)

    def loop(self, s: ir.For, env):
        env.pop(s.var, None)
        S = self._stages_reached(s, env)
        if S is None:
            flat = self._flatten(s, env)
            if flat is not None:
                return flat
        inner = dict(env)
        for name in _assigned(s.body):
            inner.pop(name, None)
        if S is None:
            start, stop, step = (self.expr(x, env) for x in (s.start, s.stop, s.step))
            body = self.stmts(s.body, inner)
            for name in _assigned(s.body):
                env.pop(name, None)
            return [ir.For(s.span, s.var, start, stop, step, body, s.kind, s.stages)]
        if not (isinstance(s.start, ir.Const) and isinstance(s.step, ir.Const) and s.step.value == 1):
            raise self.error(s.span, "a loop that indexes an mbarrier array by its counter must start at a constant "
                             "and step by 1 (for the verifier)", "write `for k in range(n)`")
        a0 = int(s.start.value)
        sp = s.span
        j = self.fresh(f"{s.var}_round")
        self.new_types[j] = I32
        stop = self.expr(s.stop, env)
        trips = _bin("//", _bin("+", _bin("-", stop, _const(a0, sp), sp), _const(S - 1, sp), sp), _const(S, sp), sp)
        rounds = []
        for c in range(S):
            kf = {j: S, 1: a0 + c}
            body_env = dict(inner)
            body_env[s.var] = kf
            subst_k = map_stmts(s.body, lambda x, kf=kf: _build(kf, x.span)
                                if isinstance(x, ir.Var) and x.name == s.var else None)
            body = [ir.Assign(sp, s.var, _build(kf, sp))] + self.stmts(subst_k, body_env)
            copy = ir.If(sp, _bin("<", _build(kf, sp), stop, sp, BOOL), body, [], "uniform")
            copy.stage_copy = (S, c)  # iteration k = S * round + c of the loop as written (events.Point.copy)
            rounds.append(copy)
        for name in _assigned(s.body):
            env.pop(name, None)
        return [ir.For(sp, j, _const(0, sp), trips, _const(1, sp), rounds, s.kind, s.stages)]

    # -------------------------------------------------------------- a ring nested in a tile loop
    def _flatten(self, s: ir.For, env):
        """A persistent tile loop around a ring loop (`for t in range(a, b, step): pre; for k in range(S * R):
        ring; post`, the ring's mbarrier arrays of S stages, R invariant in the tile loop) as one loop over
        the block's slots J = n * R + j (n the tile loop's iteration, j the ring round), with the ring unrolled
        by S as `loop` does:

            if R >= 1:
                for J in range(0, trips * R):
                    t = a + (J // R) * step;  j = J % R
                    pre (scalars every slot, the rest `if j == 0`)
                    (for c in 0..S-1) if S * j + c < S * R: ring with k := S * j + c
                    if j == R - 1: post
            else:
                the tile loop as written (its ring runs no iteration)

        and the tile loop's iteration index `(t - a) // step` written as J // R (a ring loop from a constant k0 > 0,
        its first slots in the prologue, is the same with the copies k < k0 skipped). A ring phase of the form
        `((t - a) // step) * R + k // S` is then an affine count of the slots (the analysis orders single
        loops); the two forms run the same statements in the same order. None when the loop is not of
        this form (the caller keeps it nested)."""
        inner = [x for x in s.body if isinstance(x, ir.For)]
        if len(inner) != 1 or any(isinstance(x, ir.For) for x in ir.walk(inner[0].body)):
            return None
        lp = inner[0]
        at = next(i for i, x in enumerate(s.body) if x is lp)
        pre, post = s.body[:at], s.body[at + 1:]
        if any(isinstance(x, ir.For) for x in ir.walk(pre + post)):
            return None
        assigned = _assigned(s.body) | {s.var}
        if any(_uses(e, assigned) for e in (s.start, s.stop, s.step, lp.stop)) or _uses_stmts(post, {lp.var}):
            return None
        if s.var in _assigned(s.body) or (isinstance(s.step, ir.Const) and not int(s.step.value) > 0):
            return None  # the tile index must be the loop's own, counted upward
        if not (isinstance(lp.start, ir.Const) and lp.start.value >= 0 and isinstance(lp.step, ir.Const)
                and lp.step.value == 1):
            return None
        S = self._stages_reached(lp, dict(env))
        if S is None:
            return None
        a = _affine(lp.stop, env)
        if a is None or any(v % S for v in a.values()) or set(a) == {1}:
            return None
        names = [x.name for x in pre if isinstance(x, ir.Assign)]
        if len(names) != len(set(names)):
            return None
        sp = s.span
        R0 = _build({k: v // S for k, v in a.items()}, sp)  # rounds of the ring per tile
        R = ir.Call(I32, sp, "max", (R0, _const(1, sp)), {})  # slots per tile (one when the ring runs none)
        start, stop, step = (self.expr(x, dict(env)) for x in (s.start, s.stop, s.step))
        J, j = self.fresh(f"{s.var}_{lp.var}_slot"), self.fresh(f"{lp.var}_round")
        self.new_types[J] = self.new_types[j] = I32
        t_expr = _bin("+", start, _bin("*", _bin("//", ir.Var(I32, sp, J), R, sp), step, sp), sp)
        index = _bin("//", ir.Var(I32, sp, J), R, sp)
        key_lhs, key_start, key_step = s.var, _fmt(s.start), _fmt(s.step)

        key_rounds = _fmt(R0)

        def is_index(e):  # (t - a) // step: the tile loop's iteration index
            return (isinstance(e, ir.BinOp) and e.op == "//" and _fmt(e.rhs) == key_step
                    and isinstance(e.lhs, ir.BinOp) and e.lhs.op == "-" and isinstance(e.lhs.lhs, ir.Var)
                    and e.lhs.lhs.name == key_lhs and _fmt(e.lhs.rhs) == key_start)

        def first_slot(e):  # index * R0: the tile's first slot
            return isinstance(e, ir.BinOp) and e.op == "*" and any(
                is_index(x) and _fmt(y) == key_rounds for x, y in ((e.lhs, e.rhs), (e.rhs, e.lhs)))

        def idx(e):
            if is_index(e):
                return map_expr(index, lambda x: None)
            return None

        # scalars the tile's prologue sets to its first slot (`turn = ((t - a) // step) * R0`), not set again
        later = [x.name for x in ir.walk([lp] + post) if isinstance(x, ir.Assign)]
        firsts = {x.name for x in pre if isinstance(x, ir.Assign) and first_slot(x.value) and x.name not in later}

        def in_ring(e):
            # the ring runs only where R0 >= 1 (k = S * j + c < S * R0), and there R = R0, so the tile's first
            # slot index * R0 = (J // R0) * R0 is J - j: a phase `turn + k // S` is the slot count J
            if first_slot(e) or (isinstance(e, ir.Var) and e.name in firsts):
                return _bin("-", ir.Var(I32, e.span, J), ir.Var(I32, e.span, j), e.span)
            return idx(e)

        def in_pre(e):
            # the tile's first slot in its prologue (a wait there on k-tile 0's stage: gemm_persistent DEFER=2):
            # index * R0 is J - j in every slot of the tile wherever R0 >= 1 (R = R0 there); elsewhere (the ring
            # runs no round) the product as written. where(R0 >= 1, J - j, index * R0): a linear term where the
            # product needed a nonlinear search in every query it reached (race 77 s, deadlock 117 s at 4 stages)
            if not first_slot(e):
                return idx(e)
            slot = _bin("-", ir.Var(I32, e.span, J), ir.Var(I32, e.span, j), e.span)
            return ir.Call(I32, e.span, "where", (_bin(">=", map_expr(R0, lambda x: None), _const(1, e.span), e.span,
                                                       BOOL), slot, map_top(e, idx)), {})

        def rewrite(stmts, fn=idx):  # top down: a product is matched before its index factor
            return map_stmts(stmts, fn, top_down=True)

        # a prologue scalar is recomputed every slot when that gives the value the ring and the epilogue saw
        # in the nested form: no effect, reads only loop invariants and earlier such scalars, never assigned
        # again in the tile (ring or epilogue), not read by a statement before it (which runs after it now)
        every, once, defined = [], [], set()
        again = _assigned([lp] + post)
        for x in rewrite(pre, in_pre):
            pure = (isinstance(x, ir.Assign) and isinstance(x.value.type, ScalarType) and _pure(x.value)
                    and not _uses(x.value, (_assigned(s.body) - defined) | {x.name}) and x.name not in again
                    and not _uses_stmts(once, {x.name}))
            if pure:
                every.append(x)
                defined.add(x.name)
            else:
                once.append(x)
        ring = ir.For(lp.span, lp.var, lp.start, lp.stop, lp.step, rewrite(lp.body, in_ring), lp.kind, lp.stages)
        body = [ir.Assign(sp, s.var, t_expr), ir.Assign(sp, j, _bin("%", ir.Var(I32, sp, J), R, sp))] + every
        if once:
            body.append(ir.If(sp, _bin("==", ir.Var(I32, sp, j), _const(0, sp), sp, BOOL), once, [], "uniform"))
        body.append(ring)
        if post:
            body.append(ir.If(sp, _bin("==", ir.Var(I32, sp, j), _bin("-", R, _const(1, sp), sp), sp, BOOL),
                              rewrite(post), [], "uniform"))
        # the slot loop's own walk: the ring unrolled by S with k := S * j + c
        benv = dict(env)
        for name in _assigned(s.body) | {s.var, J, j}:
            benv.pop(name, None)
        out = []
        for x in body:
            if x is ring:
                out.extend(self._unrolled(ring, S, {j: S}, benv))
            else:
                out.extend(self.stmt(x, benv))
        trips = _bin("//", _bin("+", _bin("-", stop, start, sp), _bin("-", step, _const(1, sp), sp), sp), step, sp)
        flat = ir.For(sp, J, _const(0, sp), _bin("*", trips, R, sp), _const(1, sp), out, lp.kind, lp.stages)
        for name in _assigned(s.body) | {s.var}:
            env.pop(name, None)
        return [flat]

    def _unrolled(self, s: ir.For, S, kbase, env):
        """The S copies of a ring body with k := kbase + c (an affine form), each under `if k < stop` (and
        `start <= k` where the loop starts at a constant start > c: gemm_persistent DEFER=1's ring from k = 1, its
        slot 0 in the tile's prologue)."""
        sp = s.span
        stop = self.expr(s.stop, env)
        a0 = int(s.start.value) if isinstance(s.start, ir.Const) else 0
        inner = dict(env)
        for name in _assigned(s.body):
            inner.pop(name, None)
        out = []
        for c in range(S):
            kf = dict(kbase)
            kf[1] = kf.get(1, 0) + c
            body_env = dict(inner)
            body_env[s.var] = kf
            subst_k = map_stmts(s.body, lambda x, kf=kf: _build(kf, x.span)
                                if isinstance(x, ir.Var) and x.name == s.var else None)
            body = [ir.Assign(sp, s.var, _build(kf, sp))] + self.stmts(subst_k, body_env)
            copy = ir.If(sp, _bin("<", _build(kf, sp), stop, sp, BOOL), body, [], "uniform")
            if c < a0:  # (k = S j + c: before the loop's start in the tile's first round)
                copy = ir.If(sp, _bin(">=", _build(kf, sp), _const(a0, sp), sp, BOOL), [copy], [], "uniform")
            out.append(copy)
        for name in _assigned(s.body) | {s.var}:
            env.pop(name, None)
        return out

    def loop_nested(self, s: ir.For, env):
        """`loop` without the flattening (the tile loop as written, its ring unrolled inside)."""
        start, stop, step = (self.expr(x, env) for x in (s.start, s.stop, s.step))
        inner = dict(env)
        for name in _assigned(s.body):
            inner.pop(name, None)
        body = self.stmts(s.body, inner)
        return [ir.For(s.span, s.var, start, stop, step, body, s.kind, s.stages)]

    def _stages_reached(self, s: ir.For, env):
        """The stage count of the mbarrier arrays this loop's counter indexes (directly in its body, through
        scalars assigned at its top level), or None."""
        deps = {s.var}
        found = set()

        def uses(e):
            return any(isinstance(x, ir.Var) and x.name in deps for x in ir.walk_exprs(e))

        def scan(stmts, top):
            for st in stmts:
                if isinstance(st, ir.Assign):
                    if top and isinstance(st.value.type, ScalarType) and uses(st.value):
                        deps.add(st.name)
                    exprs = [st.value]
                elif isinstance(st, ir.Eval):
                    exprs = [st.call]
                elif isinstance(st, ir.If):
                    scan(st.then, False)
                    scan(st.orelse, False)
                    continue
                elif isinstance(st, ir.For):
                    scan(st.body, False)
                    continue
                else:
                    continue
                for e in exprs:
                    for x in ir.walk_exprs(e):
                        if (isinstance(x, ir.Call) and x.op == "mbarrier_at" and isinstance(x.args[0], ir.Var)
                                and uses(x.args[1]) and x.args[0].name in self.arrays):
                            found.add(self.arrays[x.args[0].name])

        scan(s.body, True)
        if not found:
            return None
        if len(found) > 1:
            raise self.error(s.span, f"one loop indexes mbarrier arrays of different sizes {sorted(found)}",
                             "give the arrays of one pipeline the same stages")
        return found.pop()

    # -------------------------------------------------------------- async wgmma retirement
    def releases(self, stmts, out):
        """Findings for stage releases (mbarrier_arrive) that can come before the wait retiring the wgmma group
        that reads the stage (see `release_findings`)."""
        prev = None  # an async mma at this level not yet retired: (assign, its stage offset in the next loop)
        for i, s in enumerate(stmts):
            if isinstance(s, ir.For):
                in_flight = self._release_loop(s, prev, out)
                prev = None
                if in_flight:
                    # the loop's last groups stay in flight until the next wait at this level
                    self._until_wait(stmts[i + 1:], s, out)
                continue
            if isinstance(s, ir.If):
                self.releases(s.then, out)
                self.releases(s.orelse, out)
            if isinstance(s, ir.Assign) and _is_async(s.value):
                prev = s
                continue
            if isinstance(s, ir.Eval) and s.call.op == "mma_wait" and int(s.call.attrs.get("n", 0)) == 0:
                prev = None
            if prev is not None:
                for x in _arrives([s]):
                    out.append(self._premature(x, prev, "the group is retired by the next loop's or a later "
                                               "tp.mma_wait"))

    def _until_wait(self, rest, loop, out):
        for s in rest:
            if isinstance(s, ir.Eval) and s.call.op == "mma_wait" and int(s.call.attrs.get("n", 0)) == 0:
                return
            for x in _arrives([s]):
                mma = next(m for m in ir.walk(loop.body) if isinstance(m, ir.Assign) and _is_async(m.value))
                out.append(self._premature(x, mma, "the loop's last groups are in flight until tp.mma_wait(0)"))
        mma = next(m for m in ir.walk(loop.body) if isinstance(m, ir.Assign) and _is_async(m.value))
        out.append(_finding("pipeline_hazard", "an asynchronous mma group is never retired (no tp.mma_wait(0) "
                            "after the loop): its result is used while the tensor cores may still write it",
                            mma.span))

    def _release_loop(self, loop: ir.For, prev, out) -> int:
        """Check the releases in `loop`; returns how many of its groups may be in flight after it. A body that is
        `if k % P == c:` around the mma, its wait and every release of the loop (one of P consumer roles taking
        every P-th k-tile) issues a group every P iterations: the groups in flight are tiles k, k - P, ..."""
        body, stride = loop.body, 1
        alt = _alternation(loop)
        if alt is not None:
            stride, body = alt
        asyncs = [i for i, s in enumerate(body) if isinstance(s, ir.Assign) and _is_async(s.value)]
        nested = [s for s in ir.walk(body) if isinstance(s, ir.Assign) and _is_async(s.value)
                  and not any(s is body[i] for i in asyncs)]
        if not asyncs:
            self.releases(body, out)
            return 0
        if len(asyncs) > 1 or nested:
            sp = body[asyncs[1]].span if len(asyncs) > 1 else nested[0].span
            raise self.error(sp, "the verifier follows one mma_async per loop iteration, at the loop body's top "
                             "level", "issue the k-tile's wgmma as one tp.mma_async")
        mi = asyncs[0]
        mma = body[mi]
        env = {}
        for s in body[:mi]:
            if isinstance(s, ir.Assign) and isinstance(s.value.type, ScalarType):
                a = _affine(s.value, env)
                if a is not None:
                    env[s.name] = a
        d0 = self._offset(_unpermuted(mma.value.args[0]), loop.var, env, stage=True)
        waits = [i for i, s in enumerate(body) if i > mi and isinstance(s, ir.Eval) and s.call.op == "mma_wait"]
        if not waits:
            raise self.error(mma.span, "an mma_async in a loop needs a tp.mma_wait(n) after it in the same "
                             "iteration (n groups stay in flight)", "add tp.mma_wait(1) after the mma_async")
        wi = waits[0]
        n = int(body[wi].call.attrs.get("n", 0))
        if prev is not None and n > 1:
            out.append(_finding("pipeline_hazard", "the verifier follows a group issued before the loop only when "
                                "the loop's first wait retires it (tp.mma_wait(0) or (1))", prev.span))
        if prev is not None and d0 is not None:
            # the group before the loop must read the stage the loop's counter gives group start - 1
            ps = self._offset(_unpermuted(prev.value.args[0]), loop.var, {loop.var: {1: _const_start(loop) - 1}},
                              stage=True, absolute=True)
            want = (_const_start(loop) - 1 - d0)
            S = self._stages_of(_unpermuted(mma.value.args[0]))
            if ps is None or S is None or (ps - want) % S:
                out.append(_finding("pipeline_hazard", "the verifier follows a group issued before the loop as "
                                    "the loop's group start - 1: it must read that stage", prev.span))
        S = self._stages_of(_unpermuted(mma.value.args[0]))
        for i, s in enumerate(body):
            for x in _arrives([s]):
                d = self._offset(x.call.args[0], loop.var, env)
                held = n if i > wi else n + 1  # groups (tiles k, k - 1, ...) that may be in flight here
                if held == 0:
                    continue
                bars = x.call.args[0].args[0] if isinstance(x.call.args[0], ir.Call) else None
                T = self.arrays.get(bars.name) if isinstance(bars, ir.Var) else None
                ok = d is not None and d0 is not None and S is not None and T == S
                if not ok or any((d - d0 - i * stride) % S == 0 for i in range(held)):
                    why = (f"it releases the stage of tile k - {(d - d0) % S}, but tile k - {(held - 1) * stride}'s "
                           f"group may still be in flight here (tp.mma_wait({n}))" if ok else
                           "the verifier cannot tell which tile's stage it releases (index an mbarrier array by "
                           "the loop counter: empty[(k - 1) % STAGES])")
                    out.append(self._premature(x, mma, why))
        return n

    def _stages_of(self, e):
        if isinstance(e, ir.Call) and e.op == "stage":
            t = e.args[0].type
            return getattr(t, "stages", None)
        return None

    def _offset(self, e, var, env, stage=False, absolute=False):
        """d where `e` (a stage `x[idx]` or an mbarrier `bars[idx]`) has idx = (var - d) % S; None if unknown.
        absolute: the constant index itself."""
        if not (isinstance(e, ir.Call) and e.op in ("stage", "mbarrier_at")):
            return None
        idx = e.args[1]
        if isinstance(idx, ir.BinOp) and idx.op == "%":
            idx = idx.lhs
        a = _affine(idx, env)
        if a is None:
            return None
        if absolute:
            return a.get(1, 0) if set(a) == {1} else None
        if set(a) - {1} != {var} or a[var] != 1:
            return None
        return -a.get(1, 0)

    def _premature(self, x, mma, why):
        return _finding("pipeline_hazard", f"pipeline hazard: this mbarrier_arrive can release a shared stage that "
                        f"an asynchronous wgmma group still reads ({why})", x.span, mma.span)


def _alternation(loop):
    """(P, then-body) when `loop`'s body issues its mma_async under `if k % P == c:` (P, c constants, P >= 2, no
    else), the mma at that branch's top level and every arrive and mma of the body inside the branch, else None."""
    outer = [s for s in loop.body if not (isinstance(s, ir.Assign) and isinstance(s.value.type, ScalarType))]
    if len(outer) != 1 or not isinstance(outer[0], ir.If) or outer[0].orelse:
        return None
    s = outer[0]
    c = s.cond
    if not (isinstance(c, ir.BinOp) and c.op == "==" and isinstance(c.rhs, ir.Const)
            and isinstance(c.lhs, ir.BinOp) and c.lhs.op == "%" and isinstance(c.lhs.lhs, ir.Var)
            and c.lhs.lhs.name == loop.var and isinstance(c.lhs.rhs, ir.Const)):
        return None
    P = c.lhs.rhs.value
    if not isinstance(P, int) or P < 2 or not any(isinstance(x, ir.Assign) and _is_async(x.value) for x in s.then):
        return None
    return P, s.then


def _const_start(loop):
    return int(loop.start.value) if isinstance(loop.start, ir.Const) else 0


def _arrives(stmts):
    return [s for s in ir.walk(stmts) if isinstance(s, ir.Eval) and s.call.op == "mbarrier_arrive"]


def _finding(check, msg, span, other=None):
    from .report import Finding

    return Finding(check, "error", msg, span, {}, other)


def _unpermuted(e):
    """The stage a shared operand reads: `x[idx]` itself, or under a transposed view `x[idx].T` (swap-AB's A)."""
    while isinstance(e, ir.Call) and e.op == "shared_permute":
        e = e.args[0]
    return e


def _is_async(e) -> bool:
    return isinstance(e, ir.Call) and e.op == "mma" and bool(e.attrs.get("async_"))


def _assigned(stmts) -> set:
    return {s.name for s in ir.walk(stmts) if isinstance(s, ir.Assign)} | \
        {s.var for s in ir.walk(stmts) if isinstance(s, ir.For)}


def _fmt(e) -> str:
    from tilepy.printer import format_expr

    return format_expr(e)


def _uses(e, names) -> bool:
    return any(isinstance(x, ir.Var) and x.name in names for x in ir.walk_exprs(e))


def _uses_stmts(stmts, names) -> bool:
    for s in ir.walk(stmts):
        exprs = ([s.value] if isinstance(s, ir.Assign) else [s.call] if isinstance(s, ir.Eval) else
                 [s.cond] if isinstance(s, ir.If) else [s.start, s.stop, s.step] if isinstance(s, ir.For) else [])
        if any(_uses(e, names) for e in exprs):
            return True
    return False


PURE_SCALAR_OPS = frozenset({"minimum", "maximum", "min", "max", "cdiv", "dim", "block_id", "num_blocks", "where",
                             "cast"})


def _pure(e) -> bool:
    """No effect and no value that differs between two evaluations (a scalar the slot loop may recompute)."""
    return all(not isinstance(x, ir.Call) or x.op in PURE_SCALAR_OPS for x in ir.walk_exprs(e))
