"""Hopper-only instructions (sm_90a): warpgroup MMA (wgmma.mma_async m64nNk16) on shared-memory descriptors,
mbarriers, and bulk copies (cp.async.bulk) that complete transactions on an mbarrier.

wgmma descriptors. A shared tile feeds wgmma when its layout is one of the instruction's canonical forms:
rows of exactly one swizzle atom (32, 64 or 128 bytes; tp.Swizzle(b, 3, 3) on 2-byte element offsets is the
hardware's 16<<b byte swizzle), 8-row groups `8 * atom` bytes apart (the stride byte offset), the tile's
stage aligned to 8 atoms. A is read K-major (row-major (M, K) tile, K == atom width) or, for 16-bit types, MN-major
(the transpose `s.T` of a (K, M) tile of atom-wide column blocks: the transpose bit; swap-AB); B either MN-major
(row-major (K, N) with N == atom width: the transpose bit) or K-major (a column-major (K, N) layout).
Within an atom, a k-step advances the start address by 32 bytes; across 8-row groups by the stride.
"""

from __future__ import annotations

import math
from dataclasses import replace

from tilepy import ir
from tilepy.instructions import mma_operand_layout
from tilepy.symbolic import Var

from . import tma
from .cexpr import cast, ctype, sym_c

_MODES = {3: 1, 2: 2, 1: 3}  # swizzle bits -> descriptor layout type (128B, 64B, 32B)


def _descriptor_form(r, sref, which: str, mn_extent: int):
    """(transpose bit, layout type, leading byte offset, stride byte offset, atom elements) or CompileError."""
    st = sref.stype
    eb = st.dtype.bytes
    stride = st.layout.stride
    sw = st.swizzle
    problem = None
    shape = st.layout.shape
    blocks = None  # MN-major B split into column blocks of one atom: ((atom, R) : (1, block stride))
    if (which == "b" and isinstance(stride, tuple) and len(stride) == 2 and isinstance(stride[1], tuple)
            and isinstance(shape[1], tuple) and len(shape[1]) == 2 and stride[1][0] == 1
            and isinstance(stride[0], int) and stride[0] == shape[1][0]):
        blocks = stride[1][1]
        stride = (stride[0], 1)
    # MN-major A, the transpose `s.T` of such a (K, M) tile of column blocks (swap-AB: B's tile as the instruction's
    # A): ((atom, R), K) : ((1, block stride), atom)
    if (which == "a" and isinstance(stride, tuple) and len(stride) == 2 and isinstance(stride[0], tuple)
            and isinstance(shape[0], tuple) and len(shape[0]) == 2 and stride[0][0] == 1
            and isinstance(stride[1], int) and stride[1] == shape[0][0]):
        blocks = stride[0][1]
        stride = (1, stride[1])
    if not (isinstance(stride, tuple) and len(stride) == 2 and all(isinstance(x, int) for x in stride)):
        problem = "it is not a 2-D strided layout (or (BK, (atom, BN // atom)) column blocks for B)"
    elif sw is None or sw.shift != 3 or (1 << sw.base) * eb != 16 or sw.bits not in _MODES:
        problem = (f"its swizzle {sw} is not a 32/64/128-byte wgmma swizzle (tp.Swizzle(1..3, "
                   f"{4 - (eb.bit_length() - 1)}, 3) for {eb}-byte {st.dtype})")
    if problem is None:
        atom = (16 << sw.bits) // eb  # elements per row of the swizzle atom
        s0, s1 = stride
        # (contiguous dim is K?) for each operand; rows are the other dim
        if which == "a":
            kmajor, pitch = (True, s0) if s1 == 1 else (False, s1) if s0 == 1 else (None, 0)
        else:
            kmajor, pitch = (True, s1) if s0 == 1 else (False, s0) if s1 == 1 else (None, 0)
        if kmajor is None:
            problem = "neither dimension is contiguous"
        elif pitch != atom:
            problem = (
                f"its rows are {pitch} elements apart, but the {16 << sw.bits}-byte swizzle atom holds "
                f"{atom}: the contiguous dimension must be exactly {atom} elements"
            )
        elif blocks is not None and (blocks * eb) % 1024:
            problem = f"its column blocks are {blocks * eb} bytes apart, not a multiple of 1024"
        elif not kmajor and mn_extent % atom:
            problem = f"the instruction's {'M' if which == 'a' else 'N'} extent {mn_extent} is not a multiple of {atom}"
        elif st.stage_elems * eb % (8 * atom * eb):
            problem = (f"a stage of {st.stage_elems * eb} bytes is not a multiple of the {8 * atom * eb}-byte "
                       "swizzle pattern")
    if problem is not None:
        shape = "(BM, BK)" if which == "a" else "(BK, BN)"
        raise r.error(
            f"wgmma operand {which.upper()} cannot be described to the hardware: {problem}",
            f"store {which.upper()} as a row-major {shape} shared tile whose last dimension is {128 // eb} "
            f"{st.dtype} (128 bytes) with swizzle=tp.Swizzle(3, {4 - (eb.bit_length() - 1)}, 3)",
        )
    sbo = 8 * atom * eb
    if kmajor:
        lbo = 1
    elif blocks is not None:
        lbo = blocks * eb  # between the atom-wide column blocks
    else:
        lbo = 8 * atom * eb * (st.shape[0] // 8 if which == "b" else 1)
    return (0 if kmajor else 1), _MODES[sw.bits], lbo, sbo, atom


def emit_wgmma(r, e, acc, a, b):
    instr = e.attrs["instr"]
    gm, gn = e.attrs["warps"]
    a_regs = hasattr(a, "layout")
    if hasattr(b, "layout") or a_regs != (instr.a is not None):
        raise r.error(f"{instr.name} reads A from {'registers' if instr.a is not None else 'shared memory'} and B "
                      "from shared memory", "pass a shared B (and for A, a shared tile or a register tile with an "
                      "_rs instruction)")
    M, N = acc.shape
    K = a.shape[1] if a_regs else a.stype.shape[1]
    n = instr.n
    kk = instr.k
    rep_r, rep_c, ksteps = M // (64 * gm), N // (n * gn), K // kk
    if a_regs:
        a_slots = _register_a_slots(r, a, instr, (M, K), (gm, gn))
    else:
        ta, mode_a, lbo_a, sbo_a, _ = _descriptor_form(r, a, "a", 64)
    tb, mode_b, lbo_b, sbo_b, _ = _descriptor_form(r, b, "b", n)
    fmt = instr.format
    transposable = fmt in ("bf16", "f16")  # the transpose bits exist for 16-bit types only
    if not a_regs and ta and not transposable:
        raise r.error(f"{instr.name} reads A K-major only, but this A tile is MN-major",
                      "store A as a row-major (BM, BK) tile (K contiguous)")
    if not transposable and tb:
        raise r.error(f"{instr.name} reads B K-major only, but this B tile is MN-major (row-major (K, N))",
                      "store B as a column-major (K, N) tile: layout=tp.Layout((BK, BN), (1, BK)) with the "
                      "swizzle of BK-element rows (an (N, K) weight copies in as it is)")
    eb = instr.ab.bytes
    em = r.em
    # The warpgroup's place in the warp grid counts from the first thread of the role running the mma (a
    # consumer role of warp specialization starts at warpgroup 1 or later).
    wg = r.hoist(f"{r.layout_tid(acc.layout)} / 128")
    wm = r.hoist(f"{wg} % {gm}") if gm > 1 else 0
    wn = r.hoist(f"{wg} / {gm}") if gn > 1 else 0
    em.open()
    sa, sb = r.tmp("sa"), r.tmp("sb")
    if not a_regs:
        em(f"const unsigned {sa} = tp_smem_addr({a.ptr});")
    em(f"const unsigned {sb} = tp_smem_addr({b.ptr});")
    # Register A: every fragment is packed before the fence; a register written between the fence and the
    # wgmma reading it would make ptxas wait for each wgmma before issuing the next.
    packed = {}
    if a_regs:
        for ks in range(ksteps):
            for rr in range(rep_r):
                da = packed[ks, rr] = r.tmp("da")
                base = instr.a.num_values * (rr + rep_r * ks)
                vals = [a_slots[base + i] for i in range(instr.a.num_values)]
                em(f"unsigned {da}[4];")  # four 32-bit registers in fragment order
                for i in range(4):
                    if instr.ab.bytes == 4:   # .tf32: one f32 value a register (the tensor cores ignore its low bits)
                        em(f"{da}[{i}] = __float_as_uint({a.name}[{vals[i]}]);")
                    else:                     # 16-bit types: two values a register
                        em(f"{da}[{i}] = tp_pack2({a.name}[{vals[2 * i]}], {a.name}[{vals[2 * i + 1]}]);")
    em("tp_wgmma_fence();")
    half = n // 2
    for ks in range(ksteps):
        for rr in range(rep_r):
            if a_regs:
                da = packed[ks, rr]
            else:
                da = r.tmp("da")
                a_off = sym_c(a.stype.layout((_v(wm) + gm * rr) * 64, ks * kk))
                em(
                    f"const unsigned long long {da} = "
                    f"tp_gmma_desc({sa} + ({a_off}) * {eb}, {lbo_a}, {sbo_a}, {mode_a});"
                )
            for rc in range(rep_c):
                b_off = sym_c(b.stype.layout(ks * kk, (_v(wn) + gn * rc) * n))
                db = r.tmp("db")
                em(
                    f"const unsigned long long {db} = "
                    f"tp_gmma_desc({sb} + ({b_off}) * {eb}, {lbo_b}, {sbo_b}, {mode_b});"
                )
                base = half * (rr + rep_r * rc)
                regs = ", ".join(f"%{i}" for i in range(half))
                outs = ", ".join(f'"+f"({acc.name}[{base + i}])' for i in range(half))
                if a_regs:  # A: %half..%half+3 (registers), B: %half+4, scale-d: %half+5; no A transpose
                    tail = f"p, 1, 1, {tb}" if transposable else "p, 1, 1"
                    ar = ", ".join(f"%{half + i}" for i in range(4))
                    ins = ", ".join(f'"r"({da}[{i}])' for i in range(4))
                    em(
                        f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{half + 5}, 0;\\n'
                        f"wgmma.mma_async.sync.aligned.m64n{n}k{kk}.f32.{fmt}.{fmt} {{{regs}}}, {{{ar}}}, "
                        f'%{half + 4}, {tail};\\n}}\\n" : {outs} : {ins}, "l"({db}), "r"(1) : "memory");'
                    )
                    continue
                tail = f"p, 1, 1, {ta}, {tb}" if transposable else "p, 1, 1"
                em(
                    f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{half + 2}, 0;\\n'
                    f"wgmma.mma_async.sync.aligned.m64n{n}k{kk}.f32.{fmt}.{fmt} {{{regs}}}, %{half}, %{half + 1}, "
                    f'{tail};\\n}}\\n" : {outs} : "l"({da}), "l"({db}), "r"(1) : "memory");'
                )
    em("tp_wgmma_commit();")
    if not e.attrs.get("async_"):
        em("tp_wgmma_wait0();")
    em.close()


def emit_mma_wait(r, call):
    """wgmma.wait_group n: at most n of the warpgroup's wgmma groups stay in flight."""
    r.em(f'asm volatile("wgmma.wait_group.sync.aligned %0;\\n" :: "n"({int(call.attrs.get("n", 0))}) : "memory");')


def emit_setmaxnreg(r, call):
    """setmaxnreg.inc / .dec for the executing warpgroup: a role whose threads are whole warpgroups; the
    direction is taken from the kernel's register ceiling (65536 / threads, capped at 255, rounded down to 8):
    a budget above it increases, one below decreases."""
    n = int(call.attrs["n"])
    lo, size = r.role_range()
    if lo % 128 or size % 128:
        raise r.error("tp.setmaxnreg applies to whole warpgroups: call it in a role branch of whole warpgroups "
                      "(tp.warpgroup_id() == ...)", "move it into the producer's or the consumers' branch")
    ceiling = min(255, 65536 // r.kir.num_threads) // 8 * 8
    budgets = r.__dict__.setdefault("_maxnreg", {})
    budgets[(lo, size)] = n
    total = sum(b * sz for (_, sz), b in budgets.items())
    total += (r.kir.num_threads - sum(sz for _, sz in budgets)) * ceiling
    # An increase draws on the block's own pool: the registers it launched with (the ceiling for every thread,
    # which the register cap at entry gives it), not the SM's 65536. 96 / 208 at 384 threads asks for 65536 of a
    # 64512 pool: on the H100 the consumers' setmaxnreg.inc waited forever (the kernel hung).
    pool = ceiling * r.kir.num_threads
    if total > pool:
        raise r.error(f"setmaxnreg budgets need {total} registers, over the {pool} the block launches with "
                      f"({ceiling} x {r.kir.num_threads} threads; "
                      f"{', '.join(f'{b} x {sz} threads' for (_, sz), b in budgets.items())}; other threads keep "
                      f"{ceiling}): an increase would wait forever",
                      "lower the budgets (e.g. producer 40 or 56, consumers 232 or 224 for 3 warpgroups); the "
                      "role that decreases should come first in the kernel")
    if n == ceiling:
        return
    op = "inc" if n > ceiling else "dec"
    r.em(f'asm volatile("setmaxnreg.{op}.sync.aligned.u32 %0;\\n" :: "n"({n}));')


def _register_a_slots(r, a, instr, shape, warps) -> list[int]:
    """For each value slot of the instruction's A fragment layout tiled over `shape`, the value index of the
    register tile `a` that holds the same element in the same thread (any layout that is the same function,
    such as an accumulator of 8-column chunks cast to 16 bits); a CompileError when some element sits in
    another thread."""
    import numpy as np

    want = mma_operand_layout(instr, "a", tuple(shape), tuple(warps))
    have = a.layout
    if have is None or (have.num_threads, have.num_values) != (want.num_threads, want.num_values):
        raise r.error(f"wgmma register operand A has layout {have}, not {instr.name}'s A fragment layout {want}",
                      f"convert it with tp.convert_layout(x, tp.mma_layout({instr!r}, 'a', {shape}, {warps}))")
    hk = np.ravel_multi_index(have.coords, shape)
    wk = np.ravel_multi_index(want.coords, shape)
    table = {}
    for v in range(hk.shape[1]):
        table.setdefault(np.ascontiguousarray(hk[:, v]).tobytes(), v)
    out = [table.get(np.ascontiguousarray(wk[:, v]).tobytes()) for v in range(wk.shape[1])]
    if None in out:
        raise r.error(f"wgmma register operand A has layout {have}: some thread holds other elements than "
                      f"{instr.name}'s A fragment layout {want} gives it",
                      f"convert it with tp.convert_layout(x, tp.mma_layout({instr!r}, 'a', {shape}, {warps}))")
    return out


# ---------------------------------------------------------------------- mbarriers and bulk copies
def emit_mbarrier_init(r, call, name: str, var: str = ""):
    """One arrival per role in the catalogue is, on the GPU, one arrival per thread of that role: each thread's
    own release orders its own writes (what race checkers and the memory model both see), so the hardware
    count is count x (threads of the role that arrives). Roles of different sizes arriving on one mbarrier
    fall back to one elected thread after a barrier over its role."""
    count = call.attrs.get("count", 1)
    stages = call.attrs.get("stages")
    sizes = r.arrival_roles.get(var, set())
    per_thread = len(sizes) == 1
    r.mbar_per_thread[name] = per_thread
    n = count * next(iter(sizes)) if per_thread else count
    if var in r.remote_bars:
        # arrived on from other CTAs of the cluster (cta=): one arrival per warp of the arriving role, in every
        # CTA alike (the same kernel), so the count is count x warps of that role
        if not per_thread:
            raise r.error(f"mbarrier '{var}' takes remote arrivals (cta=) from roles of different or unknown sizes",
                          "arrive on it from one warp-role branch (e.g. the consumer warpgroups) only")
        r.mbar_per_thread[name] = "warp"
        n = count * (next(iter(sizes)) // r.t.warp_size)
    if stages is None:
        r.em.open("if (tp_tid == 0)")
        r.em(f"tp_mbar_init({name}, {n});")
    else:  # an array: the first `stages` threads initialize one each
        r.em.open(f"if (tp_tid < {stages})")
        r.em(f"tp_mbar_init({name} + tp_tid, {n});")
    r.em.close()
    r.barrier()


def emit_mbarrier_at(r, call):
    """`bars[i]` is rendered where an mbarrier op takes it (`_bar`: the array's pointer + i), never alone."""
    raise r.error("an mbarrier of an array is used only as the argument of an mbarrier op or copy_bulk",
                  "pass full[k % STAGES] to the op directly")


def _bar(r, e) -> tuple[str, str]:
    """(C pointer to the mbarrier, the pointer of its allocation): `bars[i]` of an array is `bars_p + i`."""
    if isinstance(e, ir.Call) and e.op == "mbarrier_at":
        base = r.scalar_bar(e.args[0])
        return f"({base} + ({r.scalar_as(e.args[1], r.i32)}))", base
    b = r.scalar_bar(e)
    return b, b


def emit_cluster_rank(r, call) -> str:
    return "tp_cluster_rank()"


def emit_cluster_sync(r, call):
    if r.ctx.divergent:
        raise r.error("tp.cluster_sync() inside a role branch: every thread of the cluster must reach it",
                      "call it where all the block's threads run (after the allocations, at the end)")
    r.em("tp_cluster_sync_relaxed();" if call.attrs.get("relaxed") else "tp_cluster_sync();")


def emit_store_remote(r, call):
    """tp.store_remote(dst, value, mbarrier, cta): the role's first thread arrives on CTA `cta`'s mbarrier with the
    tile's bytes as its transaction count (mbarrier.arrive.expect_tx.shared::cluster), and every thread writes its
    values there with st.async (16-byte vectors where the shared layout makes each thread's values contiguous),
    each completing its bytes on that mbarrier: the phase completes when the arrival and every byte are in, in
    either order (the count may go below zero first). No fence: the receiver reads through its mbarrier wait."""
    dst, value, barv, ctav = call.args
    t = value.type
    if r.ctx.divergent and r.ctx.role is None:
        raise r.error("tp.store_remote in a branch whose threads the renderer cannot tell",
                      "call it in a warp-role branch (tp.warpgroup_id() == ...) or where every thread runs")
    lo, _ = r.role_range()
    bar, base = _bar(r, barv)
    if r.mbar_per_thread.get(base):
        raise r.error("tp.store_remote completes an mbarrier that other roles also arrive on",
                      "give the exchange an mbarrier of its own (tp.mbarrier(1)), waited on by the receiving role")
    cond, keep = r.owner(t.layout)      # (an element held several times is written once, by its lowest thread)
    coords = r.out_coords(t.layout)
    em = r.em
    em.open()
    f, d = r.plan(value, coords)
    sref = r.smem_ref(dst)
    dtype = dst.type.dtype
    V = t.layout.num_values
    vals = r.tmp("v")
    em(f"{ctype(dtype)} {vals}[{V}];")
    for v in range(V):
        em(f"{vals}[{v}] = {cast(f(v), d, dtype)};")
    cta = r.scalar_as(ctav, r.i32)
    ra, rb = r.tmp("ra"), r.tmp("rb")
    em(f"const unsigned {ra} = tp_mapa_shared(tp_smem_addr({sref.ptr}), {cta});")
    em(f"const unsigned {rb} = tp_mapa_shared(tp_smem_addr({bar}), {cta});")
    nbytes = dtype.bytes * math.prod(t.shape)      # every element once
    em(f"if (tp_tid == {lo}) tp_mbar_arrive_expect_tx_remote({rb}, {nbytes}u);")
    bits = "__float_as_uint({})" if dtype.is_float else "(unsigned)({})"
    vec = r.shared_vector_width(sref, coords, V) if all(keep) else 1
    if cond:
        em.open(f"if ({cond})")
    for g in range(0, V, vec):
        if not keep[g]:
            continue
        off = sym_c(sref.stype.offset([c.sym(g) for c in coords]))
        words = ", ".join(bits.format(f"{vals}[{v}]") for v in range(g, g + vec))
        em(f"tp_st_async{vec}({ra} + (unsigned)({off}) * {dtype.bytes}u, {words}, {rb});")
    if cond:
        em.close()
    em.close()


def emit_mbarrier_arrive(r, call):
    bar, base = _bar(r, call.args[0])
    lo, size = r.role_range()
    if r.mbar_per_thread.get(base) == "warp":
        # one arrival per warp (the count is count x warps: emit_mbarrier_init): the warp's threads are done
        # with what they did before it (their wgmma groups retired), then lane 0 arrives, on the CTA `cta` of the
        # cluster (mapa + mbarrier.arrive.release.cluster.shared::cluster) or on its own
        r.em("__syncwarp();")
        if len(call.args) > 1:
            cta = r.scalar_as(call.args[1], r.i32)
            r.em(f"if (tp_lane == 0) tp_mbar_arrive_cluster({bar}, {cta});")
        else:
            r.em(f"if (tp_lane == 0) tp_mbar_arrive({bar});")
        return
    if len(call.args) > 1:
        raise r.error("a remote arrival (cta=) on an mbarrier the renderer counts per thread",
                      "arrive on it with cta= from one warp-role branch")
    if r.mbar_per_thread.get(base):
        r.em(f"tp_mbar_arrive({bar});")
        return
    # One elected arrival: the role's threads first finish what they did before it.
    _role_sync(r, "arrive", lo, size)
    r.em(f"if (tp_tid == {lo}) tp_mbar_arrive({bar});")


def _role_sync(r, purpose: str, lo: int, size: int):
    """A barrier over the role's threads: __syncthreads for the whole block, else a named barrier of its own
    (`bar.sync id, size`), or __syncwarp inside one warp."""
    if size == r.kir.num_threads:
        r.barrier()
    elif size > 32:
        bid = r.named_barrier_id(purpose, lo, size)
        r.em(f'asm volatile("bar.sync %0, %1;" :: "r"({bid}), "r"({size}) : "memory");')
    else:
        r.em("__syncwarp();")


def emit_mbarrier_wait(r, call):
    bar, _ = _bar(r, call.args[0])
    phase = r.scalar_as(call.args[1], r.i32)
    r.em(f"tp_mbar_wait({bar}, ({phase}) & 1);")


def emit_copy_bulk(r, call):
    """Where `tma.plan` accepts the copy, bulk tensor copies (TMA) through a tensor map the launch builds (one
    `cp.async.bulk.tensor` per column block, issued by the role's first thread after expect_tx), guarded by the
    launch's `tp_tma_ok` bit for that map. Otherwise, or when the bit is clear: cp.async.bulk per row (same
    thread) when rows are whole, 16-byte aligned and inside the tensor; otherwise every thread of the role
    copies its share of the tile (coalesced, 16-byte vectors where the addresses allow, zeros outside the
    tensor, through the tile's layout and swizzle), fences the async proxy and meets the others at a barrier
    over the role, with no transaction bytes expected: the phase completes through the arrivals, which follow
    the writes, plus whatever the copies of the same phase that did go through the copy engine expect. Only
    where the role's threads are not a known range does the first thread copy the elements alone.

    Every branch between here and the role's threads is uniform over the role (the tensor-map bit, the view's
    starts), so all of the role's threads take the same one."""
    src, dst, barv = call.args[:3]
    view, sref = r.view_ref(src), r.smem_ref(dst)
    bar, _ = _bar(r, barv)
    lo, size = r.role_range()
    known = not r.ctx.divergent or r.ctx.role is not None
    em = r.em
    if not known:
        em.open(f"if (tp_tid == {lo})")
    tplan, why = tma.plan(view, sref.stype, sref.align)
    guard = tma.start_guard(view, sref.stype.dtype.bytes) if tplan is not None else True
    if guard is False:
        tplan, why = None, (f"its first column ({view.starts[-1]}) is not on a 16-byte boundary, where a bulk tensor "
                            "copy must start")
    mask = call.attrs.get("multicast")
    if mask is not None:
        _multicast_copy(r, call, view, sref, bar, tplan, why, lo, known)
        if not known:
            em.close()
        return
    fallback = call.attrs.get("fallback", True)
    if tplan is None and not fallback:
        raise r.error(f"tp.copy_bulk(..., fallback=False) cannot be a bulk tensor copy (TMA): {why}",
                      "let it fall back (fallback=True), or make the tile TMA-shaped")
    if tplan is None:
        r.notes.append(f"copy_bulk at line {r.ctx.span.line if r.ctx.span else '?'}: no TMA ({why})")
        _bulk_rows_or_elements(r, view, sref, bar, known)
    else:
        spec = tplan.spec if fallback else replace(tplan.spec, required=True)
        if spec not in r.tensor_maps:
            r.tensor_maps.append(spec)
        i = r.tensor_maps.index(spec)
        if fallback:  # TMA when the launch could encode the map (and the first column is on 16 bytes), else the
            em.open(f"if (tp_tma_ok & {1 << i}u{'' if guard is True else ' && ' + guard})")  # per-row / element copy
        if known:
            em.open(f"if (tp_tid == {lo})")
        em(f"tp_mbar_expect_tx({bar}, {tplan.nbytes});")
        coords = list(reversed(view.starts))  # innermost first
        for inner_off, soff in tplan.copies:
            cs = [f"{coords[0]} + {inner_off}" if inner_off else coords[0], *coords[1:]]
            em(f"tp_tma_load_{tplan.spec.rank}d(tp_smem_addr({sref.ptr} + {soff}), &tp_tmap{i}, {bar}, "
               f"{', '.join(cs)});")
        if known:
            em.close()
        if fallback:
            em.close()
            em.open("else")
            _bulk_rows_or_elements(r, view, sref, bar, known)
            em.close()
    if not known:
        em.close()


def _multicast_copy(r, call, view, sref, bar, tplan, why, lo: int, known: bool):
    """copy_bulk(..., multicast=mask, by=rank): every CTA of the mask expects the tile's bytes on its own mbarrier;
    the CTA of rank `by` issues `cp.async.bulk.tensor ... .multicast::cluster` with the mask, which writes the
    tile at the same shared offset of every CTA of the mask and completes the bytes on each one's mbarrier (same
    offset). TMA only: a tile the tensor map cannot describe is a compile error, a tensor it cannot is refused
    at launch."""
    if tplan is None:
        raise r.error(f"tp.copy_bulk(..., multicast=) must be one bulk tensor copy (TMA): {why}",
                      "make the tile TMA-shaped (rows of the swizzle span, 16-byte multiples)")
    if tplan.spec.rank not in (2, 3):
        raise r.error(f"tp.copy_bulk(..., multicast=) of a rank-{tplan.spec.rank} tensor (multicast TMA is rendered "
                      "for rank 2 and 3)", "view the tensor as 2-D or 3-D")
    spec = replace(tplan.spec, required=True)
    if spec not in r.tensor_maps:
        r.tensor_maps.append(spec)
    i = r.tensor_maps.index(spec)
    em = r.em
    by = r.scalar_as(call.args[3], r.i32)
    if known:
        em.open(f"if (tp_tid == {lo})")
    em(f"tp_mbar_expect_tx({bar}, {tplan.nbytes});")
    em.open(f"if (tp_cluster_rank() == ({by}))")
    coords = list(reversed(view.starts))
    for inner_off, soff in tplan.copies:
        cs = [f"{coords[0]} + {inner_off}" if inner_off else coords[0], *coords[1:]]
        em(f"tp_tma_load_{spec.rank}d_mc(tp_smem_addr({sref.ptr} + {soff}), &tp_tmap{i}, {bar}, "
           f"(unsigned short){call.attrs['multicast']}, {', '.join(cs)});")
    em.close()
    if known:
        em.close()


def emit_store_bulk(r, call):
    """tp.store_bulk(src, dst): a TMA store (`cp.async.bulk.tensor` global <- shared, one per column block,
    then `cp.async.bulk.commit_group`) issued by the role's first thread, where `tma.plan` accepts the tile and
    the launch could encode the tensor map (`tp_tma_ok`); elements past the tensor are not written. Before it,
    the role's threads fence their shared writes into the async proxy and meet at a barrier over the role (the
    writes of other roles arrive fenced: a shared store is followed by the proxy fence on this target). Where
    there is no TMA, the role's threads copy the tile to global memory (coalesced), and the wait is a no-op."""
    src, dst = call.args
    sref, view = r.smem_ref(src), r.view_ref(dst)
    lo, size = r.role_range()
    known = not r.ctx.divergent or r.ctx.role is not None
    if not known:
        raise r.error("tp.store_bulk in a branch whose threads are not a static range",
                      "issue it in a role branch: if tp.warpgroup_id() == 0")
    em = r.em
    em(r.t.proxy_fence)
    _role_sync(r, "store_bulk", lo, size)
    tplan, why = tma.plan(view, sref.stype, sref.align)
    fallback = call.attrs.get("fallback", True)
    guard = tma.start_guard(view, sref.stype.dtype.bytes) if tplan is not None else True
    if guard is False:
        tplan, why = None, (f"its first column ({view.starts[-1]}) is not on a 16-byte boundary, where a bulk tensor "
                            "store must start")
    if tplan is None and not fallback:
        raise r.error(f"tp.store_bulk(..., fallback=False) cannot be a bulk tensor store (TMA): {why}",
                      "let it fall back (fallback=True), or make the tile TMA-shaped")
    if tplan is None:
        r.notes.append(f"store_bulk at line {r.ctx.span.line if r.ctx.span else '?'}: no TMA ({why})")
        r.emit_copy(call, False)
        return
    spec = tplan.spec if fallback else replace(tplan.spec, required=True)
    if spec not in r.tensor_maps:
        r.tensor_maps.append(spec)
    i = r.tensor_maps.index(spec)
    if not fallback:   # TMA only: the launch refused a tensor its map cannot describe (and the caller promises
        em.open(f"if (tp_tid == {lo})")   # a first column on a 16-byte boundary: docs/language.md, store_bulk)
    else:
        em.open(f"if (tp_tma_ok & {1 << i}u{'' if guard is True else ' && ' + guard})")
        em.open(f"if (tp_tid == {lo})")
    coords = list(reversed(view.starts))  # innermost first
    rank = tplan.spec.rank
    regs = ", ".join(f"%{j + 2}" for j in range(rank))
    for inner_off, soff in tplan.copies:
        cs = [f"{coords[0]} + {inner_off}" if inner_off else coords[0], *coords[1:]]
        args = ", ".join(f'"r"((int)({c}))' for c in cs)
        em(f'asm volatile("cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group [%0, {{{regs}}}], [%1];\\n" '
           f':: "l"(&tp_tmap{i}), "r"(tp_smem_addr({sref.ptr} + {soff})), {args} : "memory");')
    em('asm volatile("cp.async.bulk.commit_group;\\n" ::: "memory");')
    em.close()
    if not fallback:
        return
    em.close()
    em.open("else")
    r.emit_copy(call, False)
    em.close()


def emit_store_bulk_wait(r, call):
    """The issuing thread waits until its bulk stores have read their shared sources."""
    lo, _ = r.role_range()
    r.em(f'if (tp_tid == {lo}) asm volatile("cp.async.bulk.wait_group.read 0;\\n" ::: "memory");')


def _bulk_rows_or_elements(r, view, sref, bar, known: bool):
    """cp.async.bulk per row (the role's first thread) when the tile is row-major and the rows are whole,
    aligned and in bounds; else the role's cooperative copy, or the element loop of the issuing thread when the
    role is not known (the caller then runs this in that thread alone)."""
    em = r.em
    st = sref.stype
    shape, eb = st.shape, st.dtype.bytes
    rows = _prod(shape[:-1])
    row_bytes = shape[-1] * eb
    strides = st.layout.stride if isinstance(st.layout.stride, tuple) else (st.layout.stride,)
    row_major = st.swizzle is None and list(strides) == [_prod(shape[d + 1 :]) for d in range(len(shape))]
    tdims = view.tile_dims
    contiguous = bool(tdims) and tdims[-1] == len(view.starts) - 1
    per_row = row_major and contiguous and row_bytes % 16 == 0
    lo, size = r.role_range()
    if per_row:
        idx0, off0 = r._global_terms(view, [0] * len(shape))
        last = len(view.starts) - 1
        inb = []
        for j, i in enumerate(idx0):
            if j in tdims:
                n = shape[tdims.index(j)]
                inb.append(f"(unsigned){i} <= (unsigned)({view.tensor.dims[j]} - {n})")
            else:
                inb.append(f"(unsigned){i} < (unsigned)({view.tensor.dims[j]})")
        ok = " && ".join(
            inb
            + [f"tp_aligned({view.tensor.ptr} + {off0}, 16)", f"({view.tensor.dims[last]} * {eb}) % 16 == 0"]
        )
        em.open(f"if ({ok})")
        if known:
            em.open(f"if (tp_tid == {lo})")
        em(f"tp_mbar_expect_tx({bar}, {rows * row_bytes});")
        for row in range(rows):
            coords = _unravel(row, shape[:-1]) + [0]
            _, off = r._global_terms(view, coords)
            soff = row * shape[-1]
            em(
                f"tp_bulk_g2s(tp_smem_addr({sref.ptr} + {soff}), {view.tensor.ptr} + {off}, {row_bytes}, {bar});"
            )
        if known:
            em.close()
        em.close()
        em.open("else")
    if known:
        _cooperative_copy(r, view, sref, lo, size)
        em(r.t.proxy_fence)  # generic-proxy writes, read next by wgmma / the async proxy
        _role_sync(r, "copy_bulk", lo, size)
    else:
        _element_loop(r, view, sref)
        em(r.t.proxy_fence)
    if per_row:
        em.close()


_BATCH_BYTES = 64  # bytes each thread loads before it stores them: several loads in flight per thread


def _cooperative_copy(r, view, sref, lo: int, size: int):
    """The role's `size` threads copy the tile: consecutive threads take consecutive chunks of the last
    dimension (16 bytes when the tensor's base, row length and the view's column start allow, checked at run
    time; single elements otherwise), so loads coalesce. Each thread loads a batch of chunks into registers
    before storing them to shared memory, zero-filling outside the tensor, through the tile's layout + swizzle."""
    em = r.em
    ct = r.role_tid(lo, size)
    vec = _coop_vec(r, view, sref)
    if vec > 1:
        em.open(f"if ({r._uniform_ok(view, vec)})")
        _cooperative_chunks(r, view, sref, ct, size, vec)
        em.close()
        em.open("else")
        _cooperative_chunks(r, view, sref, ct, size, 1)
        em.close()
    else:
        _cooperative_chunks(r, view, sref, ct, size, 1)


def _coop_vec(r, view, sref) -> int:
    """Elements per chunk (up to 16 bytes) that stay contiguous and aligned in the shared tile: a row-major
    last dimension, or one split into column blocks `(A, R) : (1, S)` (the wgmma MN-major B form) with A and S
    multiples of the chunk; the swizzle moves whole chunks."""
    st = sref.stype
    shape, eb = st.shape, st.dtype.bytes
    tdims = view.tile_dims
    if not tdims or tdims[-1] != len(view.starts) - 1:
        return 1
    lay_shape, lay_stride = st.layout.shape, st.layout.stride
    if not isinstance(lay_stride, tuple):
        lay_shape, lay_stride = (lay_shape,), (lay_stride,)
    if len(lay_stride) != len(shape) or any(isinstance(x, tuple) for x in lay_stride[:-1]):
        return 1
    last_shape, last_stride = lay_shape[-1], lay_stride[-1]
    if isinstance(last_stride, tuple):
        if not (len(last_stride) == 2 and last_stride[0] == 1 and isinstance(last_shape, tuple)
                and all(isinstance(x, int) for x in (*last_shape, last_stride[1]))):
            return 1
        steps = (last_shape[0], last_stride[1])
    elif last_stride == 1:
        steps = ()
    else:
        return 1
    vec = 1
    while True:
        w = vec * 2
        if w * eb > 16 or shape[-1] % w or any(x % w for x in (*lay_stride[:-1], *steps)):
            break
        if st.swizzle is not None and (1 << st.swizzle.base) % w:
            break
        if sref.align % (w * eb) and sref.align < 16:
            break
        vec = w
    return vec


def _cooperative_chunks(r, view, sref, ct: str, size: int, vec: int):
    em = r.em
    shape = sref.stype.shape
    eb = sref.dtype.bytes
    T = ctype(sref.dtype)
    ptr, dims = view.tensor.ptr, view.tensor.dims
    last = len(view.starts) - 1
    per_row = shape[-1] // vec
    chunks = _prod(shape[:-1]) * per_row
    per_thread = -(-chunks // size)
    batch = max(1, min(per_thread, _BATCH_BYTES // (vec * eb)))
    while per_thread % batch and batch > 1:  # whole batches: no guard on the batch loop's last round
        batch -= 1
    ragged = per_thread * size != chunks
    em.open()
    b, u, v = r.tmp("b"), r.tmp("u"), r.tmp("v")
    vtype = f"tp_pack<{T}, {vec}>" if vec > 1 else T
    em(f"{vtype} {v}[{batch}];")
    em.open(f"for (int {b} = 0; {b} < {per_thread}; {b} += {batch})")

    def chunk(pass_):
        em("#pragma unroll")
        em.open(f"for (int {u} = 0; {u} < {batch}; ++{u})")
        c = r.tmp("c")
        em(f"const int {c} = {ct} + ({b} + {u}) * {size};")
        names, rem = [], c
        for d in range(len(shape) - 1, -1, -1):
            n = per_row if d == len(shape) - 1 else shape[d]
            x = r.tmp("x")
            names.append(x)
            em(f"const int {x} = {rem} % {n};" if d else f"const int {x} = {rem};")
            if d:
                q = r.tmp("q")
                em(f"const int {q} = {rem} / {n};")
                rem = q
        coords = [Var(x) for x in reversed(names)]
        if vec > 1:
            coords[-1] = coords[-1] * vec
        live = f"{c} < {chunks}" if ragged else ""
        if pass_ == "load":
            idx, off = r._global_terms(view, coords)
            if vec == 1:
                inb = " && ".join(
                    [live] * bool(live) + [f"(unsigned){x} < (unsigned)({dims[j]})" for j, x in enumerate(idx)]
                )
                em(f"{v}[{u}] = ({inb}) ? {ptr}[{off}] : {T}(0);")
            else:
                others = [f"(unsigned){x} < (unsigned)({dims[j]})" for j, x in enumerate(idx) if j != last]
                cond = " && ".join([live] * bool(live) + others)
                n = r.tmp("n")
                em(
                    f"const int {n} = {f'!({cond}) ? 0 : ' if cond else ''}"
                    f"tp_min<int>(tp_max<int>({dims[last]} - {idx[last]}, 0), {vec});"
                )
                em.open(f"if ({n} == {vec})")
                em(f"{v}[{u}] = tp_ldvec<{T}, {vec}>({ptr} + {off});")
                em.close()
                em.open("else")
                for k in range(vec):
                    em(f"{v}[{u}].v[{k}] = {k} < {n} ? {ptr}[{off} + {k}] : {T}(0);")
                em.close()
        else:
            soff = sym_c(sref.stype.offset(coords))
            guard = f"if ({live}) " if live else ""
            if vec > 1:
                em(f"{guard}tp_stvec<{T}, {vec}>({sref.ptr} + {soff}, {v}[{u}]);")
            else:
                em(f"{guard}{sref.ptr}[{soff}] = {v}[{u}];")
        em.close()

    chunk("load")
    chunk("store")
    em.close()
    em.close()


def _element_loop(r, view, sref):
    """The issuing thread copies the tile element by element (a run-time loop: tiles can be large), reading
    zeros outside the tensor, writing through the shared tile's layout and swizzle."""
    em = r.em
    shape = sref.stype.shape
    n = _prod(shape)
    i = r.tmp("i")
    em.open(f"for (int {i} = 0; {i} < {n}; ++{i})")
    names, rem = [], i
    for d in range(len(shape) - 1, -1, -1):
        c = r.tmp("c")
        names.append(c)
        em(f"const int {c} = {rem} % {shape[d]};" if d else f"const int {c} = {rem};")
        if d:
            q = r.tmp("q")
            em(f"const int {q} = {rem} / {shape[d]};")
            rem = q
    coords = [Var(c) for c in reversed(names)]
    idx, off = r._global_terms(view, coords)
    soff = sym_c(sref.stype.offset(coords))
    inb = " && ".join(f"(unsigned){x} < (unsigned)({view.tensor.dims[j]})" for j, x in enumerate(idx))
    em(f"{sref.ptr}[{soff}] = ({inb}) ? {view.tensor.ptr}[{off}] : {ctype(sref.dtype)}(0);")
    em.close()


def _v(x):
    return x if isinstance(x, int) else Var(x)


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def _unravel(i: int, shape) -> list:
    out = []
    for n in reversed(shape):
        out.append(i % n)
        i //= n
    return list(reversed(out))
