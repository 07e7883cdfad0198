"""Dynamic tags: the actual tag of every element, observed while the CPU interpreter runs a kernel.

    from tests.verify.dynamic_tags import run
    trace, tracker = run(kir, grid, args)          # run_ir(..., tags=DynamicTagTracker())
    tracker.ok                                      # no tp.assert_tag failed
    tracker.violations                              # [Violation]: assertion, block, iteration, failing elements
    tracker.failed(block=(0, 0, 0), coords=(3, 5), iteration={"k": 1})

`DynamicTagTracker` implements the interpreter's `TagTracker` protocol (tilepy/interpreter.py) and its
optional data-movement hooks. It is the dynamic ground truth for the `tag_assertion` check: the verifier
proves the assertions for every block and iteration; the tracker observes them on one run. The semantics are
the ones docs/verification.md gives the verifier, computed on concrete values:

* `tp.tag(X, fn)` on a global tensor gives element X[c] the tag fn(*c), each time it runs (so in every
  block, as the verifier reads it); on a shared tile (stage 0 if no stage is selected) and on a register
  tile it tags every element by its tile coordinates.
* Tags live in memory next to the data: one tag array per global tensor and per shared allocation of the
  running block. Loads, `copy`, `copy_async` (at issue it reads the source's tags, when its `wait_async`
  retires the group they land), `copy_bulk` (land at the `mbarrier_wait`) and stores move tags exactly as
  the interpreter moves the data (same addresses, same per-thread views, only the slots that reach memory).
* Shared memory starts as "uninitialized" (`UNINIT`): an assertion that meets it fails. The verifier
  reports such a tag as "cannot be proved" where nothing wrote the stage, and as a `pipeline_hazard` where a
  write was issued but had not landed (its tags are those of the most recent write; the pipeline check proves
  separately that the write landed). A global tensor never tagged and never given tagged data is untagged.
* A masked-off or role-inactive element of a load keeps the tag at its address; an element outside its
  tensor gets fn(*its global coordinates) of the tensor's tag function (None if it has none), as the
  verifier's "a masked-off element keeps the tag of its coordinates".
* Elementwise ops (operators, where, maximum, math, ...) give the tuple of the operands' tags in argument
  order, None for a constant, a scalar or an untagged operand; when no operand is tagged the result is
  untagged. `cast`, `convert_layout`, `expand_dims` and `mma` (the accumulator's tags) pass tags through.
* A reduction's element has the set of the reduced elements' tags: an `Alts` (the verifier's alternatives);
  the assertion must hold for each, and an elementwise op over `Alts` gives the `Alts` of every combination.
* `mma` pairs operands as the instruction reads them, reusing the interpreter's fragment layouts: a shared
  operand is read by coordinate; a register operand whose layout differs from the instruction's fragment is
  reinterpreted per thread group (position (i, kk) of the group's A is whatever its thread holds in that
  register), exactly as `tilepy.interp_mma` computes the product. Each MMA execution records, for every
  accumulator element, the (a_tag, b_tag) of every k it multiplies; the result keeps the records of the
  accumulator it was computed from, so `tp.mma_operands(acc)` sees every MMA execution that produced acc.
* `tp.assert_tag(x, pred)` evaluates pred on the concrete tag of every element (each alternative); for
  `mma_operands` on every pair of every MMA execution not yet checked by that assertion. A predicate that
  raises (indexing a None tag, comparing a str with an int by `<`) fails, as the verifier treats it.

What the verifier assumes and the tracker does not: the verifier reads a global tensor's tags from its tag
function even where the kernel stored other data (docs: "does not cover tags through values loaded back from
global memory the kernel wrote"); the tracker follows the stores.
"""

from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass, field

import numpy as np

from tilepy import ir
from tilepy.instructions import ALL as ALL_INSTRS
from tilepy.interp_memops import _owner_coords
from tilepy.interp_memory import GlobalView, SharedRef, TensorBuf
from tilepy.interp_mma import _mma_layout, _MmaOps, _same_tv
from tilepy.operators import PY_BINOPS
from tilepy.types import RegType

__all__ = ["DynamicTagTracker", "Violation", "Alts", "UNINIT", "run"]


class _Uninit:
    def __repr__(self):
        return "<uninitialized>"


UNINIT = _Uninit()
_NONE, _UNINIT = 0, 1  # tag ids of None and UNINIT


class Alts:
    """The tag of a reduced element: each of `items` (distinct tags, in a canonical order)."""

    __slots__ = ("items",)

    def __init__(self, items: tuple):
        self.items = items

    def __eq__(self, other):
        return isinstance(other, Alts) and self.items == other.items

    def __hash__(self):
        return hash(("Alts", self.items))

    def __repr__(self):
        return "Alts(" + ", ".join(repr(x) for x in self.items) + ")"


class _Err:
    def __repr__(self):
        return "<error>"


_ERR = _Err()  # a predicate subterm Python cannot evaluate
_ERR_ID = 2


def _truthy(x) -> bool:
    if x is _ERR:
        return False
    try:
        return bool(x)
    except Exception:  # noqa: BLE001
        return False


class _Table:
    """Interned tags: tag arrays hold int ids into `objs`."""

    def __init__(self):
        self.objs: list = [None, UNINIT, _ERR]
        self.ids: dict = {(type(None), None): _NONE, (_Uninit, UNINIT): _UNINIT, (_Err, _ERR): _ERR_ID}
        self.is_alts: list = [False, False, False]
        self.has_uninit: list = [False, True, False]
        self._alt_ids: dict = {}  # Alts id -> ids of its items
        self._alts_of: dict = {}  # sorted item ids -> Alts id

    def intern(self, tag) -> int:
        key = (type(tag), tag)  # keeps 1, 1.0 and True apart
        try:
            i = self.ids.get(key)
        except TypeError:  # unhashable: a value no tag or predicate should produce
            return _ERR_ID
        if i is None:
            i = self.ids[key] = len(self.objs)
            self.objs.append(tag)
            self.is_alts.append(isinstance(tag, Alts))
            self.has_uninit.append(None)  # computed when a predicate meets it
        return i

    def uninit(self, ids: np.ndarray) -> np.ndarray:
        """Which of `ids` contain UNINIT."""
        first, inv = _rank(ids)
        flags = np.empty(first.size, dtype=bool)
        for j, i in enumerate(np.asarray(ids).ravel()[first].tolist()):
            f = self.has_uninit[i]
            if f is None:
                f = self.has_uninit[i] = _contains_uninit(self.objs[i])
            flags[j] = f
        return flags[inv].reshape(np.shape(ids))

    def alt_ids(self, i: int) -> tuple:
        """Ids of the alternatives of tag `i` (itself unless it is an Alts), cached."""
        if not self.is_alts[i]:
            return (i,)
        got = self._alt_ids.get(i)
        if got is None:
            got = self._alt_ids[i] = tuple(self.intern(x) for x in self.objs[i].items)
        return got

    def alts(self, ids) -> int:
        """Id of the set of tags `ids` (Alts flattened); a single tag stands for itself."""
        flat = set()
        for i in ids:
            flat.update(self.alt_ids(int(i)))
        if len(flat) == 1:
            return next(iter(flat))
        key = tuple(sorted(flat))
        got = self._alts_of.get(key)
        if got is None:
            got = self._alts_of[key] = self.intern(Alts(tuple(self.objs[i] for i in key)))
            self._alt_ids[got] = key
        return got

    def combine(self, ids: tuple) -> int:
        """Id of the elementwise tag: the tuple of the operands' tags (Alts distributed)."""
        parts = [self.objs[int(i)] for i in ids]
        if not any(isinstance(p, Alts) for p in parts):
            return self.intern(tuple(parts))
        choices = [[self.objs[j] for j in self.alt_ids(int(i))] for i in ids]
        return self.alts([self.intern(tuple(c)) for c in itertools.product(*choices)])

    def rows(self, stacked: np.ndarray, fn) -> np.ndarray:
        """fn(row of ids) -> id, for every row of an int array [n, k], evaluated once per distinct row."""
        if stacked.shape[0] == 0:
            return np.zeros(0, dtype=np.int64)
        first, inv = _unique_rows(list(stacked.T))
        out = np.fromiter((fn(tuple(r)) for r in stacked[first].tolist()), dtype=np.int64, count=first.size)
        return out[inv]


def _contains_uninit(t) -> bool:
    if t is UNINIT:
        return True
    if isinstance(t, Alts):
        t = t.items
    if isinstance(t, tuple):
        for x in t:
            if x is UNINIT or (isinstance(x, tuple | Alts) and _contains_uninit(x)):
                return True
    return False


@dataclass(eq=False)
class _MmaRecord:
    """One MMA execution: accumulator element coords[p] received a[p, kk] * b[p, kk] for every kk with both
    ids >= 0 (-1: the instruction's thread group does not hold that operand position)."""

    node: object
    block: tuple
    iteration: dict
    coords: np.ndarray  # [P, 2]
    threads: np.ndarray  # [P] real thread holding the accumulator element
    a: np.ndarray  # [P, K] tag ids
    b: np.ndarray  # [P, K]
    checked: set = field(default_factory=set)  # id(assert node) that checked this record


@dataclass(eq=False)
class MmaOperands:
    """What `tp.mma_operands(acc)` evaluates to under the tracker: the MMA executions that produced acc."""

    records: tuple


class _Tags:
    """The tags of a Violation's failures, rendered on demand: tags[i] is a dict naming each argument."""

    def __init__(self, table, names: tuple, ids: np.ndarray):
        self.table, self.names, self.ids = table, names, ids

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def __getitem__(self, i) -> dict:
        return {k: self.table.objs[int(x)] for k, x in zip(self.names, self.ids[i])}

    def __iter__(self):
        return (self[i] for i in range(len(self)))


@dataclass(eq=False)
class Violation:
    """The failures of one tp.assert_tag execution: one per block and iteration for an element assertion;
    for `mma_operands`, one per contributing MMA execution (`iteration` is then the MMA's, as in the
    verifier's counterexamples, and `assert_iteration` the assertion's)."""

    node: object  # the assert_tag Call
    kind: str  # "element" | "mma"
    block: tuple
    iteration: dict
    assert_iteration: dict
    coords: np.ndarray  # [n, rank] failing element coordinates (accumulator element for mma)
    threads: np.ndarray  # [n] real thread holding the element (-1: unknown)
    tags: _Tags  # tags[i]: {"x": tag} or {"a": tag, "b": tag} (the failing alternative of failure i)
    k_index: np.ndarray | None = None  # [n] contraction position (mma)
    mma_node: object = None

    @property
    def span(self):
        return self.node.span

    def __len__(self) -> int:
        return int(self.coords.shape[0])

    def example(self, i: int = 0) -> dict:
        out = {"block": self.block, "iteration": dict(self.iteration), "coords": tuple(int(c) for c in self.coords[i]),
               "thread": int(self.threads[i]), "tags": self.tags[i]}
        if self.k_index is not None:
            out["k_index"] = int(self.k_index[i])
        return out

    def __str__(self) -> str:
        ex = self.example()
        what = f"accumulator element {ex['coords']} (k={ex['k_index']})" if self.kind == "mma" else \
            f"element {ex['coords']}"
        return (f"{self.span}: tag assertion `{self.node.attrs['fn'].source}` fails for {what} in block "
                f"{self.block}, iteration {self.iteration}, thread {ex['thread']}: tags {ex['tags']} "
                f"({len(self)} failing)")


class DynamicTagTracker:
    """The interpreter's TagTracker that computes the actual tag of every element (see the module doc).
    Use one tracker per run."""

    def __init__(self):
        self.table = _Table()
        self.violations: list[Violation] = []
        self.checked = 0  # element / operand-pair instances the assertions were evaluated on
        self.mma_records: list[_MmaRecord] = []  # every MMA execution, in order
        self._vals: dict = {}  # id(value) -> (ref, tag ids or None, mma records)
        self._args: dict = {}  # id(node) -> evaluated args of the node being evaluated
        self._reads: dict = {}  # id(node) -> (coords, slot tag ids or None) from on_read
        self._global: dict = {}  # buffer index -> (TensorBuf, flat tag ids)
        self._gfn: dict = {}  # buffer index -> tag function (python callable) for out-of-bounds coordinates
        self._shared: dict = {}  # allocation index -> (SharedBuf, flat tag ids)
        self._fn_ids: dict = {}  # (id(fn), shape) -> ids
        self._keep: list = []  # objects whose id() is used as a key

    # ------------------------------------------------------------------------------------ results
    @property
    def ok(self) -> bool:
        return not self.violations

    def failed(self, block=None, coords=None, iteration=None, node=None, span=None, k_index=None) -> bool:
        """Did some assertion fail at this block / element coordinates / iteration / assertion (node, or its
        source line) / contraction index of an MMA pair (each optional)?"""
        for v in self.violations:
            if block is not None and tuple(v.block) != tuple(block):
                continue
            if node is not None and v.node is not node:
                continue
            if span is not None and (v.span.file, v.span.line) != (span.file, span.line):
                continue
            if iteration is not None and any(v.iteration.get(k) != x for k, x in dict(iteration).items()):
                continue
            hit = np.ones(len(v), dtype=bool)
            if coords is not None:
                hit &= (v.coords == np.asarray(coords, dtype=np.int64)).all(axis=1)
            if k_index is not None and v.k_index is not None:
                hit &= v.k_index == int(k_index)
            if hit.any():
                return True
        return False

    def operand_pairs(self, record, coords) -> list:
        """[(a_tag, b_tag) or None] per contraction index kk: what MMA execution `record` (one of
        `mma_records`) multiplied into accumulator element `coords` (None: a position no thread of the
        element's group holds)."""
        p = np.nonzero((record.coords == np.asarray(coords)).all(axis=1))[0][0]
        return [(self.table.objs[a], self.table.objs[b]) if a >= 0 and b >= 0 else None
                for a, b in zip(record.a[p].tolist(), record.b[p].tolist())]

    def value_tags(self, value) -> np.ndarray | None:
        """The tags of a register value as an object array (None: untagged)."""
        ids, _ = self._get(value)
        return None if ids is None else self._objects(ids)

    def memory_tags(self, buffer) -> np.ndarray | None:
        """Tags of a global tensor (TensorBuf, or its parameter index) in its shape, as an object array."""
        idx = buffer.index if isinstance(buffer, TensorBuf) else int(buffer)
        e = self._global.get(idx)
        if e is None:
            return None
        return self._objects(e[1]).reshape(e[0].shape)

    def _objects(self, ids) -> np.ndarray:
        objs = np.empty(len(self.table.objs), dtype=object)
        for i, o in enumerate(self.table.objs):
            objs[i] = o
        return objs[np.asarray(ids, dtype=np.int64)]

    # ------------------------------------------------------------------------------------ values
    def _get(self, v):
        e = self._vals.get(id(v))
        if e is not None and e[0]() is v:
            return e[1], e[2]
        return None, ()

    def _tags(self, v):
        return self._get(v)[0]

    def _set(self, v, ids, pairs=()):
        if v is None or isinstance(v, bool | int):
            return
        key = id(v)
        if ids is None and not pairs:
            self._vals.pop(key, None)
            return
        try:
            ref = weakref.ref(v, lambda r, k=key, vals=self._vals: vals.pop(k, None) if vals.get(k, (None,))[0]
                              is r else None)
        except TypeError:  # a Python/numpy scalar: keep it alive so that its id stays its own
            ref = (lambda v=v: v)
        self._vals[key] = (ref, None if ids is None else np.asarray(ids, dtype=np.int64), tuple(pairs))

    # ------------------------------------------------------------------------------------ memory
    def _global_mem(self, buf: TensorBuf, create: bool):
        e = self._global.get(buf.index)
        if e is None or e[0] is not buf:
            if not create:
                return None
            e = self._global[buf.index] = (buf, np.zeros(buf.flat.size, dtype=np.int64))
        return e[1]

    def _shared_mem(self, buf):
        e = self._shared.get(buf.index)
        if e is None or e[0] is not buf:  # a new block: shared memory starts uninitialized
            e = self._shared[buf.index] = (buf, np.full(buf.array.size, _UNINIT, dtype=np.int64))
        return e[1]

    def _fn_tags(self, fn, shape) -> np.ndarray:
        key = (id(fn), tuple(shape))
        ids = self._fn_ids.get(key)
        if ids is None:
            self._keep.append(fn)
            f = fn.fn
            n = int(np.prod(shape, dtype=np.int64))
            ids = np.fromiter((self.table.intern(f(*(int(c) for c in idx))) for idx in np.ndindex(*shape)),
                              dtype=np.int64, count=n).reshape(shape)
            self._fn_ids[key] = ids
        return ids

    def _view_slot_tags(self, view: GlobalView, coords, threads):
        mem = self._global_mem(view.buf, create=False)
        if mem is None:
            return None
        off, inb = view.locate(coords, threads)
        ids = mem[np.where(inb, off, 0)]
        if not inb.all():
            ids = np.array(ids, dtype=np.int64)
            fn = self._gfn.get(view.buf.index)
            bad = ~inb
            if fn is None:
                ids[bad] = _NONE
            else:
                it = iter(coords)
                g = []
                for d in range(len(view.buf.shape)):
                    st = view.starts[d]
                    if isinstance(st, np.ndarray):
                        st = st[threads]
                    g.append(np.broadcast_to(st if view.squeeze[d] else st + next(it), inb.shape)[bad])
                ids[bad] = [self.table.intern(fn(*(int(x) for x in pt))) for pt in zip(*g)]
        return ids

    def _shared_slot_tags(self, ref: SharedRef, coords):
        off = ref.offsets(coords) if coords else ref.offsets(None)
        return self._shared_mem(ref.buf)[np.asarray(off)]

    # ------------------------------------------------------------------------------------ interpreter hooks
    def on_args(self, node, args, info):
        self._args[id(node)] = args

    def on_read(self, node, src, coords, threads, info):
        if isinstance(src, GlobalView):
            ids = self._view_slot_tags(src, coords, threads)
        elif isinstance(src, SharedRef):
            ids = self._shared_slot_tags(src, coords)
        else:
            ids = None
        self._reads[id(node)] = (coords, ids)

    def on_write(self, node, dst, coords, threads, offsets, written, info):
        if node.op == "store":
            args = self._args.get(id(node)) or [None, None]
            ids = self._tags(args[1])
            if ids is not None:
                full = np.broadcast_to(ids, tuple(dst.shape)) if np.shape(ids) != tuple(dst.shape) else ids
                ids = full[tuple(coords)] if coords else np.broadcast_to(full, np.shape(offsets))
        else:  # copy: what its read of the source saw, slot for slot
            ids = self._reads.pop(id(node), (None, None))[1]
        if isinstance(dst, GlobalView):
            mem = self._global_mem(dst.buf, create=ids is not None)
        else:
            mem = self._shared_mem(dst.buf)
        if mem is None:
            return
        slot = np.zeros(np.shape(offsets), dtype=np.int64) if ids is None else np.broadcast_to(ids, np.shape(offsets))
        mem[np.asarray(offsets)[written]] = slot[written]

    def on_pending(self, node, pending, info):
        ids = self._reads.pop(id(node), (None, None))[1]
        n = np.shape(pending.offsets)
        pending.tags = np.zeros(n, dtype=np.int64) if ids is None else np.array(np.broadcast_to(ids, n))

    def on_land(self, pending):
        if pending.tags is not None:
            self._shared_mem(pending.buf)[pending.offsets] = pending.tags

    def tag(self, node, value, info):
        fn = node.attrs["fn"]
        if isinstance(value, TensorBuf):
            mem = self._global_mem(value, create=True)
            mem[:] = self._fn_tags(fn, value.shape).ravel()
            self._gfn[value.index] = fn.fn
        elif isinstance(value, SharedRef):
            ref = value
            if ref.stage is None and ref.buf.stages > 1:
                ref = SharedRef(ref.buf, ref.type, 0)
            self._shared_mem(ref.buf)[ref.offsets(None)] = self._fn_tags(fn, ref.shape)
        elif isinstance(value, np.ndarray):
            self._set(value, self._fn_tags(fn, value.shape), self._get(value)[1])

    def mma_operands(self, node, acc, info):
        return MmaOperands(self._get(acc)[1])

    def assert_tag(self, node, value, info):
        fn = node.attrs["fn"]
        it = dict(info.iteration)
        if isinstance(value, MmaOperands):
            for rec in value.records:
                if id(node) in rec.checked:
                    continue
                rec.checked.add(id(node))
                self._check_pairs(node, fn, rec, it)
            return
        t = node.args[0].type
        args = self._args.pop(id(node), None) or []
        if not isinstance(t, RegType) or not isinstance(value, np.ndarray):
            return  # as the verifier: only register tiles (and mma_operands) are asserted on
        ids = self._tags(value)
        shape = tuple(t.shape)
        at = [np.asarray(a) for a in args[1:len(node.args)]]   # at= tiles: their element values follow the tag
        for a in at:
            shape = tuple(np.broadcast_shapes(shape, a.shape)) if a.ndim else shape
        ids = np.zeros(shape, dtype=np.int64) if ids is None else np.broadcast_to(ids, shape)
        cols = [ids.ravel()]
        for a in at:
            vals = np.broadcast_to(a, shape).ravel()
            cols.append(np.array([self.table.intern(int(v)) for v in vals], dtype=np.int64))
        ok, failing = self._predicate(fn, cols)
        if ok.all():
            return
        rows = np.nonzero(~ok)[0]
        where = np.stack(np.unravel_index(rows, shape), axis=1) if shape else np.zeros((len(rows), 0), np.int64)
        holder = self._holders(t.layout, shape, info)
        thr = holder[tuple(where.T)] if holder is not None else np.full(len(where), -1)
        self.violations.append(Violation(node, "element", tuple(info.block), it, it, where, thr,
                                         _Tags(self.table, ("x",) + tuple(fn.params[1:len(cols)]),
                                               failing[rows])))

    def on_value(self, node, out, info):
        args = self._args.pop(id(node), None)
        if isinstance(node, ir.BinOp | ir.UnOp):
            if isinstance(node.type, RegType):
                self._elementwise(args or [], out)
            return
        op = node.op
        if op in _NO_TAGS:
            return
        h = getattr(self, "_v_" + op, None)
        if h is not None:
            h(node, args or [], out, info)
        elif isinstance(node.type, RegType) and isinstance(out, np.ndarray):
            ops = [a for a, e in zip(args or [], node.args) if isinstance(e, ir.Expr)]
            self._elementwise(ops, out)

    # ------------------------------------------------------------------------------------ value ops
    def _elementwise(self, operands, out):
        if not isinstance(out, np.ndarray):
            return
        parts = [self._tags(v) for v in operands]
        if all(p is None for p in parts):
            self._set(out, None)
            return
        shape = out.shape
        arrays = [np.broadcast_to(_NONE if p is None else p, shape).ravel() for p in parts]
        ids = self.table.rows(np.stack(arrays, axis=1), self.table.combine)
        self._set(out, ids.reshape(shape))

    def _v_load(self, node, args, out, info):
        coords, slot = self._reads.pop(id(node), (None, None))
        if slot is None or not isinstance(out, np.ndarray):
            self._set(out, None)
            return
        ids = np.zeros(out.shape, dtype=np.int64)
        if coords:
            ids[tuple(coords)] = slot
        else:
            ids[()] = np.asarray(slot).ravel()[0]
        self._set(out, ids)

    def _pass(self, node, args, out, info):
        if not args or out is args[0]:
            return
        ids, pairs = self._get(args[0])
        self._set(out, None if ids is None else np.broadcast_to(ids, np.shape(out)), pairs)

    _v_cast = _v_convert_layout = _pass

    def _v_expand_dims(self, node, args, out, info):
        ids, pairs = self._get(args[0])
        self._set(out, None if ids is None else np.expand_dims(ids, int(node.attrs.get("axis", 0))), pairs)

    def _reduce(self, node, args, out, info):
        ids = self._tags(args[0])
        if ids is None or not isinstance(out, np.ndarray):
            return
        axis = node.attrs.get("axis")
        x = np.asarray(ids)
        rows = x.reshape(1, -1) if axis is None else np.moveaxis(x, int(axis), -1).reshape(-1, x.shape[int(axis)])
        self._set(out, self.table.rows(np.sort(rows, axis=1), self.table.alts).reshape(out.shape))

    _v_sum = _v_max_reduce = _v_min_reduce = _reduce

    # ------------------------------------------------------------------------------------ mma
    def _v_mma(self, node, args, out, info):
        a, b, acc = args[:3]
        instr = node.attrs.get("instr")
        if isinstance(instr, str):
            instr = ALL_INSTRS[instr if "." in instr else next(k for k in ALL_INSTRS if k.endswith("." + instr))]
        tc = node.args[2].type
        M, N = tc.shape
        K = (a.shape if isinstance(a, SharedRef) else np.shape(a))[1]
        warps = tuple(node.attrs["warps"]) if node.attrs.get("warps") else _MmaOps._mma_warps(
            None, instr, tc.layout, node.span)
        Lc = _mma_layout(instr, "c", (M, N), warps)
        A = self._operand(instr, "a", a, node.args[0].type, (M, K), warps)
        B = self._operand(instr, "b", b, node.args[1].type, (K, N), warps)
        rt = node.type if isinstance(node.type, RegType) else tc
        Lr = rt.layout or Lc
        Tf = instr.threads
        coords, rows, cols, thr = [], [], [], []
        for g in range(warps[0] * warps[1]):
            sl = slice(g * Tf, (g + 1) * Tf)
            Ag, Bg = _group_matrix(A, sl, (M, K)), _group_matrix(B, sl, (K, N))
            ci, cj = (c[sl].ravel() for c in Lc.coords)
            rows.append(Ag[ci, :])
            cols.append(Bg[:, cj].T)
            coords.append(np.stack([c[sl].ravel() for c in Lr.coords], axis=1))
            thr.append(np.repeat(np.arange(sl.start, sl.stop), Lc.num_values))
        t = np.concatenate(thr)
        real = np.asarray(info.threads)[t] if Lr.num_threads <= len(info.threads) else t
        rec = _MmaRecord(node, tuple(info.block), dict(info.iteration), np.concatenate(coords), real,
                         np.concatenate(rows), np.concatenate(cols))
        self.mma_records.append(rec)
        ids, pairs = self._get(acc)
        self._set(out, ids, tuple(pairs) + (rec,))

    def _operand(self, instr, which, x, t, shape, warps):
        """('full', tag ids in the operand's logical shape) or ('regs', ids per [thread, value], the
        instruction's fragment layout), as interp_mma._MmaOps._reg_operand reads it."""
        if isinstance(x, SharedRef):
            return ("full", self._shared_mem(x.buf)[x.offsets(None)])
        ids = self._tags(x)
        ids = np.zeros(shape, dtype=np.int64) if ids is None else np.broadcast_to(ids, shape)
        Lact = t.layout if isinstance(t, RegType) else None
        if Lact is None or instr.operand(which) is None:
            return ("full", ids)
        Lexp = _mma_layout(instr, which, tuple(shape), warps)
        if _same_tv(Lact, Lexp):
            return ("full", ids)
        return ("regs", ids[Lact.coords], Lexp)

    def _check_pairs(self, node, fn, rec: _MmaRecord, assert_it):
        p, kk = np.nonzero((rec.a >= 0) & (rec.b >= 0))
        if p.size == 0:
            return
        ok, failing = self._predicate(fn, [rec.a[p, kk], rec.b[p, kk]])
        if ok.all():
            return
        rows = np.nonzero(~ok)[0]
        self.violations.append(Violation(node, "mma", rec.block, rec.iteration, assert_it, rec.coords[p[rows]],
                                         rec.threads[p[rows]], _Tags(self.table, ("a", "b"), failing[rows]),
                                         kk[rows], rec.node))

    # ------------------------------------------------------------------------------------ predicates
    def _predicate(self, fn, cols: list):
        """Evaluate the predicate `fn` (an ir.TagFn) on rows of tag ids (one int array per parameter).
        Returns (ok per row, [n, args] tag ids of a failing alternative of each failing row). The predicate's expression
        tree is evaluated bottom up, each node once per distinct combination of its operands' values (so
        `a[2] == b[1]` over 10^5 operand pairs costs a few thousand Python operations), with Python's own
        semantics: the result of calling the lambda on every row. A tag that contains UNINIT fails; an Alts
        tag must satisfy the predicate in every alternative."""
        T = self.table
        n = cols[0].size if cols else 0
        is_alts = np.array(T.is_alts, dtype=bool)
        orig = np.arange(n)
        if any(is_alts[c].any() for c in cols):  # one row per combination of alternatives
            cols, orig = _expand_alts(T, cols)
        m = orig.size
        self.checked += m
        if len(fn.params) != len(cols):
            good = np.zeros(m, dtype=bool)
        else:
            res = self._tree(fn.body, dict(zip(fn.params, cols)), m)
            uniq, inv = np.unique(res, return_inverse=True)
            truth = np.array([_truthy(T.objs[int(i)]) for i in uniq], dtype=bool)
            good = truth[np.asarray(inv).ravel()]
        for c in cols:
            good &= ~T.uninit(c)
        ok = np.ones(n, dtype=bool)
        np.logical_and.at(ok, orig, good)
        bad = np.nonzero(~good)[0]
        rows, at = np.unique(orig[bad], return_index=True)  # the first failing alternative of each row
        failing = np.zeros((n, len(cols)), dtype=np.int64)
        failing[rows] = np.stack([c[bad[at]] for c in cols], axis=1) if cols else failing[rows]
        return ok, failing

    def _tree(self, t, env, n) -> np.ndarray:
        """Tag ids of a predicate subtree over n rows (_ERR where Python would raise)."""
        kind = t[0]
        if kind == "const":
            return np.full(n, self.table.intern(t[1]), dtype=np.int64)
        if kind == "name":
            return env[t[1]]
        if kind == "tuple":
            return self._apply([self._tree(x, env, n) for x in t[1]], lambda *xs: tuple(xs), n)
        if kind == "index":
            return self._apply([self._tree(t[1], env, n), self._tree(t[2], env, n)], lambda b, i: b[i], n)
        if kind in ("bin", "cmp"):
            return self._apply([self._tree(t[2], env, n), self._tree(t[3], env, n)], PY_BINOPS[t[1]], n)
        if kind == "bool":
            a, b = self._tree(t[2], env, n), self._tree(t[3], env, n)
            if t[1] == "and":
                return self._apply([a, b], lambda x, y: y if x else x, n, strict=False)
            return self._apply([a, b], lambda x, y: x if x else y, n, strict=False)
        if kind == "not":
            return self._apply([self._tree(t[1], env, n)], lambda x: not x, n)
        return np.full(n, _ERR_ID, dtype=np.int64)

    def _apply(self, kids, f, n, strict=True) -> np.ndarray:
        """f over rows of operand ids, once per distinct row. `strict`: an _ERR operand gives _ERR (for
        and/or only the first operand must be defined: Python short-circuits the second)."""
        T = self.table
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        first, inv = _unique_rows(kids)
        out = np.empty(first.size, dtype=np.int64)
        for j, row in enumerate(zip(*(k[first].tolist() for k in kids))):
            xs = [T.objs[i] for i in row]
            if xs[0] is _ERR or (strict and any(x is _ERR for x in xs)):
                out[j] = _ERR_ID
                continue
            try:
                r = f(*xs)
                out[j] = T.intern(r) if r is not _ERR else _ERR_ID
            except Exception:  # noqa: BLE001 - Python raises here: the predicate fails
                out[j] = _ERR_ID
        return out[inv]

    def _holders(self, layout, shape, info):
        if layout is None:
            return None
        t_idx, coords = _owner_coords(layout)
        holder = np.full(shape, -1, dtype=np.int64)
        real = np.asarray(info.threads)[t_idx] if layout.num_threads <= len(info.threads) else t_idx
        if coords:
            holder[coords] = real
        return holder


def _group_matrix(op, sl, shape):
    """Tag ids of the operand matrix thread group `sl` feeds the instruction (-1 where it holds nothing), as
    interp_mma._MmaOps._group_matrix places the registers."""
    if op[0] == "full":
        return np.asarray(op[1])
    _, regs, L = op
    m = np.full(shape, -1, dtype=np.int64)
    m[tuple(c[sl] for c in L.coords)] = regs[sl]
    return m


def _expand_alts(T, cols: list):
    """Rows of tag ids with every Alts replaced by each of its alternatives (all combinations): the new
    columns and, per new row, the row it came from."""
    n = cols[0].size
    per = []  # per column: (number of alternatives per row, flat alternative ids, offset per row)
    for c in cols:
        first, inv = _rank(c)
        lists = [T.alt_ids(int(i)) for i in c[first].tolist()]
        lens = np.array([len(x) for x in lists], dtype=np.int64)
        offs = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
        flat = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=int(lens.sum()))
        per.append((lens[inv], flat, offs[inv]))
    total = np.ones(n, dtype=np.int64)
    for lens, _, _ in per:
        total *= lens
    orig = np.repeat(np.arange(n), total)
    pos = np.arange(orig.size) - np.repeat(np.cumsum(total) - total, total)
    out = [None] * len(cols)
    for j in range(len(cols) - 1, -1, -1):  # mixed radix: the last column varies fastest
        lens, flat, offs = per[j]
        ln = lens[orig]
        out[j] = flat[offs[orig] + pos % ln]
        pos = pos // ln
    return out, orig


def _rank(key: np.ndarray):
    """(index of one occurrence of each distinct value, rank of every entry among the distinct values) of
    an int array; dense bookkeeping when the values are small (tag ids, combined ranks), else a sort."""
    key = np.asarray(key, dtype=np.int64).ravel()
    if key.size == 0:
        return np.zeros(0, dtype=np.int64), key
    lo, hi = int(key.min()), int(key.max())
    if hi - lo < 32 * key.size + 4096:
        present = np.zeros(hi - lo + 1, dtype=bool)
        present[key - lo] = True
        inv = (np.cumsum(present) - 1)[key - lo]
        first = np.empty(int(present.sum()), dtype=np.int64)
        first[inv] = np.arange(key.size)  # any occurrence will do: equal keys are equal rows
        return first, inv
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    return first, np.asarray(inv).ravel()


def _unique_rows(cols: list):
    """(index of one row per distinct row, inverse) of the rows formed by equal-length int arrays `cols`."""
    first, key = _rank(cols[0])
    for c in cols[1:]:
        f2, r2 = _rank(c)
        first, key = _rank(key * f2.size + r2)
    return first, key


_NO_TAGS = frozenset({"view", "shared", "stage", "store", "copy", "copy_async", "copy_bulk", "commit_async",
                      "wait_async", "barrier", "mbarrier", "mbarrier_arrive", "mbarrier_wait", "tag",
                      "assert_tag", "mma_operands", "schedule", "zeros", "full", "arange", "block_id",
                      "num_blocks", "thread_id", "lane_id", "warp_id", "warpgroup_id", "dim", "cdiv"})


def run(kir, grid, args, record: bool = False):
    """Run `kir` on the interpreter with a fresh DynamicTagTracker: (Trace, tracker)."""
    from tilepy.interpreter import run_ir

    tracker = DynamicTagTracker()
    trace = run_ir(kir, grid, args, record=record, tags=tracker)
    return trace, tracker
