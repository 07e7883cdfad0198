"""The op catalogue: every `Call.op` the IR may hold, with its operands, attributes and meaning.

This table is the contract between the front end (which builds and type-checks calls), the interpreter (the
reference semantics), the verifier and the renderers. `effect` ops appear only in `Eval` statements.

Conventions: "view" = a GlobalTile value (run-time offsets into a global tensor, static shape, masked at the
tensor's bounds) or a Shared stage value; "reg" = a register tile; T = threads of the block (or of the role
running the op). Register tiles hold elements by their TVLayout; where a layout is not given the op uses
`blocked(shape, T, vec)` with 16-byte vectors.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpInfo:
    name: str
    signature: str
    effect: bool
    doc: str
    feature: str | None = None  # target feature the op needs


_OPS = [
    # ids and sizes (uniform unless noted)
    OpInfo("block_id", "block_id() attrs{axis}", False, "index of this block in the grid along `axis`"),
    OpInfo("num_blocks", "num_blocks() attrs{axis}", False, "grid size along `axis`"),
    OpInfo("thread_id", "thread_id()", False, "thread index in the block (per-thread)"),
    OpInfo("lane_id", "lane_id()", False, "thread index in its warp/wave (per-thread)"),
    OpInfo("warp_id", "warp_id()", False, "warp/wave index in the block (per-thread, warp-uniform)"),
    OpInfo("warpgroup_id", "warpgroup_id()", False, "index of the 4-warp group (per-thread, warp-uniform)"),
    OpInfo("dim", "dim(tensor) attrs{axis}", False, "run-time size of a global tensor's dimension"),
    OpInfo("cdiv", "cdiv(a, b)", False, "ceil(a / b) on non-negative integers"),
    OpInfo("min", "min(a, b)", False, "smaller of two scalars"),
    OpInfo("max", "max(a, b)", False, "larger of two scalars"),
    # tiles
    OpInfo("view", "view(tensor, *starts) attrs{sizes, squeeze}", False,
           "window of a global tensor at run-time `starts` with static `sizes`; dims with squeeze=True were "
           "indexed by an integer and dropped; elements outside the tensor are masked"),
    OpInfo("gather_view", "gather_view(tensor, *indices)", False,
           "gather/scatter view: one index per tensor dimension, an integer register tile or a uniform integer "
           "scalar; the tiles broadcast to the view's shape; element c is tensor[index_0[c], index_1[c], ...]; "
           "elements with an index outside the tensor are masked (loads read `other`, stores skip them)"),
    OpInfo("stage", "stage(shared, index)", False, "stage `index` of a multi-stage shared tile"),
    OpInfo("shared_permute", "shared_permute(shared) attrs{dims}", False,
           "the shared tile with its axes permuted (axis k is axis dims[k]): the same memory, the layout's "
           "modes permuted (SharedType.permute); no data moves"),
    OpInfo("shared_window", "shared_window(shared) attrs{starts, sizes, squeeze}", False,
           "the sub-tile of a shared tile at compile-time `starts` with `sizes` (squeezed axes fixed and dropped): "
           "element c at offset origin + layout(c) (SharedType.window); no data moves"),
    OpInfo("shared", "shared() attrs{type: SharedType}", False, "allocate a shared-memory tile for the block"),
    OpInfo("zeros", "zeros() attrs{shape, dtype, layout}", False, "register tile of zeros"),
    OpInfo("full", "full(value) attrs{shape, dtype, layout}", False, "register tile filled with `value`"),
    OpInfo("arange", "arange() attrs{n, layout}", False, "register tile [0, 1, ..., n-1] of i32"),
    OpInfo("expand_dims", "expand_dims(x) attrs{axis}", False, "insert a size-1 axis (x[:, None])"),
    OpInfo("tile_window", "tile_window(x) attrs{starts, sizes}", False,
           "the sub-tile x[starts, starts + sizes) (compile-time bounds); its layout keeps each element in the "
           "thread and register that held it (TVLayout.window): no data moves"),
    OpInfo("convert_layout", "convert_layout(x) attrs{layout}", False,
           "same values, redistributed over threads by `layout` (through shared memory on the GPU)"),
    # memory
    OpInfo("load", "load(src, other, [mask]) attrs{layout, masked, [cta]}", False,
           "read a view into a register tile; masked-off or out-of-bounds elements read `other` (0); with `cta` "
           "(a compile-time cluster rank), a shared tile of that CTA of the cluster (mapa + ld.shared::cluster)"),
    OpInfo("store", "store(dst, value, [mask])", True,
           "write a register tile into a view; masked or out-of-bounds elements are skipped; an element "
           "held by several threads is written by the lowest one"),
    OpInfo("copy", "copy(src, dst)", True, "cooperative synchronous copy between views (global/shared)"),
    OpInfo("copy_async", "copy_async(src, dst)", True,
           "asynchronous global->shared copy (cp.async); joins the open group; `dst` is written only when a "
           "wait_async retires its group", "cp_async"),
    OpInfo("commit_async", "commit_async()", True, "close the open group of async copies"),
    OpInfo("wait_async", "wait_async() attrs{n}", True,
           "wait until at most `n` committed groups are still in flight; retired groups' data is visible to the "
           "issuing threads (a barrier makes it visible to the others)"),
    OpInfo("copy_bulk", "copy_bulk(src, dst, mbarrier, [by]) attrs{fallback, multicast}", True,
           "bulk tensor copy global->shared (TMA), issued by one thread; completes a transaction on `mbarrier`; "
           "fallback=False: TMA only (no per-row / per-element fallback compiled in; the launch refuses tensors "
           "a tensor map cannot describe). With `multicast` (a bit mask of cluster ranks, executed by every CTA "
           "of the mask): each CTA expects the tile on its own `mbarrier`, and the CTA of rank `by` issues one "
           "load that lands at the same shared offset of every CTA of the mask, completing each one's mbarrier",
           "bulk_copy"),
    OpInfo("store_bulk", "store_bulk(src, dst) attrs{fallback}", True,
           "bulk tensor store shared->global (TMA store), issued by the role's first thread; reads `src` "
           "asynchronously until a store_bulk_wait(src) by the same role; elements past the tensor are skipped; "
           "fallback=False: TMA only (no cooperative copy compiled in; the launch refuses tensors a tensor map "
           "cannot describe)",
           "bulk_copy"),
    OpInfo("store_bulk_wait", "store_bulk_wait(src)", True,
           "wait until the role's bulk stores have read their shared sources (cp.async.bulk.wait_group.read 0); "
           "only then may `src` be written again", "bulk_copy"),
    OpInfo("barrier", "barrier()", True, "block-wide barrier (__syncthreads); must be reached by all threads"),
    OpInfo("mbarrier", "mbarrier() attrs{count, stages}", False,
           "allocate an mbarrier expecting `count` arrivals (with `stages`: an array of that many)", "mbarrier"),
    OpInfo("mbarrier_at", "mbarrier_at(bars, index)", False,
           "the mbarrier at a uniform run-time `index` (0 <= index < stages) of an mbarrier array", "mbarrier"),
    OpInfo("mbarrier_arrive", "mbarrier_arrive(bar, [cta])", True,
           "arrive on an mbarrier (one arrival per role); with `cta` (a uniform cluster rank), on that CTA's copy "
           "of the mbarrier (mapa + mbarrier.arrive.shared::cluster)", "mbarrier"),
    OpInfo("store_remote", "store_remote(dst, value, mbarrier, cta)", True,
           "write a register tile of 32-bit elements into the shared tile `dst` of the CTA of cluster rank `cta` "
           "(a uniform int) asynchronously (mapa + st.async): the writes complete their bytes on that CTA's "
           "`mbarrier`, of which the op is one arrival (arrive.expect_tx of the tile's bytes, by the role's first "
           "thread); that CTA reads `dst` after waiting on its mbarrier. No fence: nothing else is ordered", "cluster"),
    OpInfo("cluster_rank", "cluster_rank()", False,
           "rank of this block in its thread-block cluster (0 .. cluster size - 1; uniform)", "cluster"),
    OpInfo("cluster_sync", "cluster_sync()", True,
           "barrier over every thread of every block of the cluster (barrier.cluster.arrive + wait): mbarriers "
           "initialized before it may be used by the other CTAs; a CTA leaves only after the others stop "
           "touching its shared memory; attrs{relaxed}: without the release / acquire (an execution barrier "
           "only)", "cluster"),
    OpInfo("mbarrier_wait", "mbarrier_wait(bar, phase)", True, "wait until phase `phase` of the mbarrier completes",
           "mbarrier"),
    *(OpInfo(f"atomic_{k}", f"atomic_{k}(dst, value, [mask]) attrs{{sem, masked}}", True,
             f"atomic read-modify-write ({k}) of every element of a global view (window or gather); returns the "
             "old values (masked or out-of-bounds elements: 0); relaxed, device scope unless `sem` says more")
      for k in ("add", "max", "min")),
    OpInfo("atomic_cas", "atomic_cas(dst, cmp, value, [mask]) attrs{sem, masked}", True,
           "atomic compare-and-swap of every element of a global view: where the element equals `cmp` it "
           "becomes `value`; returns the old values"),
    # math
    OpInfo("cast", "cast(x) attrs{dtype}", False, "convert elements to `dtype` (round to nearest even)"),
    OpInfo("where", "where(cond, a, b)", False, "elementwise select"),
    OpInfo("maximum", "maximum(a, b)", False, "elementwise max"),
    OpInfo("minimum", "minimum(a, b)", False, "elementwise min"),
    *(OpInfo(n, f"{n}(x)", False, f"elementwise {n}") for n in
      ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "sin", "cos", "tanh", "sigmoid", "silu", "erf")),
    OpInfo("round_tf32", "round_tf32(x)", False,
           "round f32 elements to tf32 precision (10 mantissa bits, ties away from zero: cvt.rna.tf32.f32), kept "
           "as f32; x - round_tf32(x) is exact, the low half of a split tf32 product"),
    OpInfo("sum", "sum(x) attrs{axis, keepdims}", False, "sum along `axis` (a cross-thread reduction tree)"),
    OpInfo("max_reduce", "max_reduce(x) attrs{axis, keepdims}", False, "max along `axis`"),
    OpInfo("min_reduce", "min_reduce(x) attrs{axis, keepdims}", False, "min along `axis`"),
    OpInfo("prod", "prod(x) attrs{axis, keepdims}", False, "product along `axis`"),
    *(OpInfo(f"scan_{k}", f"scan_{k}(x) attrs{{axis, reverse, exclusive}}", False,
             f"running {k} along `axis` (inclusive unless `exclusive`: element i combines 0..i, or 0..i-1 with "
             "the identity at 0; `reverse` runs from the end)") for k in ("sum", "prod")),
    OpInfo("permute", "permute(x) attrs{dims}", False,
           "result axis k is x's axis dims[k]; the layout is permuted with the axes (no data moves)"),
    OpInfo("reshape", "reshape(x) attrs{shape}", False,
           "the same elements in row-major order, in a tile of another shape (redistributed over threads)"),
    OpInfo("mma", "mma(a, b, acc) attrs{instr, async_}", False,
           "acc + a @ b with the instruction `instr`: the tile is covered by the instruction's fragments over the "
           "accumulator's warp grid; register operands are read through the instruction's operand layouts. "
           "With async_ (tp.mma_async, wgmma only) it is issued as one asynchronous group: its shared operands "
           "may be read until a later mma_wait retires the group, and the result is used only after that"),
    OpInfo("mma_wait", "mma_wait() attrs{n}", True,
           "wait until at most `n` of the role's mma_async groups are in flight (wgmma.wait_group n)", "wgmma"),
    OpInfo("setmaxnreg", "setmaxnreg() attrs{n}", True,
           "the executing warpgroup's register budget becomes `n` per thread (setmaxnreg.inc/dec); no effect on "
           "values", "wgmma"),
    # verification and scheduling: no device code
    OpInfo("tag", "tag(x) attrs{fn: TagFn}", True, "attach fn(*coords) as the symbolic tag of each element of x"),
    OpInfo("mma_operands", "mma_operands(acc)", False, "the (a_tag, b_tag) pairs multiplied into each acc element"),
    OpInfo("assert_tag", "assert_tag(x) attrs{fn: TagFn, message}", True,
           "state that fn(tag) (or fn(a_tag, b_tag) for mma_operands) holds for every element"),
    OpInfo("schedule", "schedule() attrs{hints}", True,
           "instruction scheduling hints for the backend (e.g. interleave=..., unroll=..., priority=...)"),
]

OPS: dict[str, OpInfo] = {op.name: op for op in _OPS}
UNARY_MATH = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "sin", "cos", "tanh", "sigmoid", "silu", "erf",
              "round_tf32")
REDUCTIONS = ("sum", "max_reduce", "min_reduce", "prod")
SCANS = ("scan_sum", "scan_prod")
ATOMICS = ("atomic_add", "atomic_max", "atomic_min", "atomic_cas")
