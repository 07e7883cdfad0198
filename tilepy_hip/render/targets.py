"""Per-target rendering tables: what each IR op becomes on sm_90a, sm_80 and gfx942.

A target is data: warp size, shared-memory size and alignment, the barrier and shuffle spellings, the
template or emitter of every op in the catalogue (`tilepy.ops.OPS`), the math functions, and which emitter
renders each matrix-instruction family. An op a target cannot render maps to None and raises a
`CompileError` naming the op's source line, the target and what to use instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilepy.ops import OPS, UNARY_MATH
from tilepy.targets import TARGETS, Target

from . import gfx942, sm80, sm90a

# Ops the common walk renders the same way everywhere (expressions, views, tiles, reductions, stores).
COMMON_OPS = (
    "block_id num_blocks thread_id lane_id warp_id warpgroup_id dim cdiv min max view stage shared zeros full "
    "arange expand_dims convert_layout load store copy barrier cast where maximum minimum sum max_reduce "
    "min_reduce mma tag mma_operands assert_tag schedule gather_view prod scan_sum scan_prod permute reshape "
    "shared_permute shared_window tile_window"
).split() + list(UNARY_MATH)

ELEMENTWISE = frozenset({"cast", "where", "maximum", "minimum", *UNARY_MATH})

UNARY_F32 = {
    "exp": "tp_expf({x})",
    "exp2": "tp_exp2f({x})",
    "log": "tp_logf({x})",
    "log2": "tp_log2f({x})",
    "sqrt": "tp_sqrtf({x})",
    "rsqrt": "tp_rsqrtf({x})",
    "abs": "tp_fabsf({x})",
    "sin": "tp_sinf({x})",
    "cos": "tp_cosf({x})",
    "tanh": "tp_tanhf({x})",
    "sigmoid": "tp_sigmoid({x})",
    "silu": "tp_silu({x})",
    "erf": "tp_erff({x})",
    # cvt.rna.tf32.f32: round to 10 mantissa bits, ties away from zero (inf stays inf, quiet NaNs stay NaN)
    "round_tf32": "tp_uint_as_float((tp_float_as_uint({x}) + 0x1000u) & 0xffffe000u)",
}
UNARY_F64 = {
    "exp": "tp_exp({x})",
    "exp2": "tp_exp2({x})",
    "log": "tp_log({x})",
    "log2": "tp_log2({x})",
    "sqrt": "tp_sqrt({x})",
    "rsqrt": "(1.0 / tp_sqrt({x}))",
    "abs": "tp_fabs({x})",
    "sigmoid": "(1.0 / (1.0 + tp_exp(-({x}))))",
    "silu": "(({x}) / (1.0 + tp_exp(-({x}))))",
}

_CP_ASYNC_COMMIT = 'asm volatile("cp.async.commit_group;\\n" ::: "memory");'
_CP_ASYNC_WAIT = 'asm volatile("cp.async.wait_group {n};\\n" ::: "memory");'
_PROXY_FENCE = 'asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");'


def _store(r, call):
    r.emit_store(call)


def _copy(r, call):
    r.emit_copy(call, async_=False)


def _copy_async(r, call):
    r.emit_copy(call, async_=True)


def _atomic(r, call):
    r.emit_atomic(call, None)  # a statement: the old values are not kept


# The C functions of the atomics (tilepy_hip.h overloads them per element type; the vendor headers give the
# hardware primitives they are built on).
ATOMIC_FNS = {"atomic_add": "tp_atomic_add", "atomic_max": "tp_atomic_max", "atomic_min": "tp_atomic_min",
              "atomic_cas": "tp_atomic_cas"}


def _barrier(r, call):
    r.need_uniform("tp.barrier()")
    r.barrier()


@dataclass(frozen=True)
class RenderTarget:
    target: Target  # the machine facts (warp size, shared memory, banks): tilepy's one target model
    compiler: str  # "nvrtc" (NVRTC, nvcc fallback) | "amdgpu-clang"
    arch: str
    binary_ext: str
    ops: dict  # op name -> template string, emitter function(renderer, call), or None (not on this target)
    mma: dict  # instruction family -> emitter(renderer, call, acc, a, b)
    barrier: str = "__syncthreads();"
    shuffle_xor: str = "__shfl_xor({v}, {m}, {w})"
    launch_bounds: str = "__launch_bounds__({threads})"
    unary: dict = field(default_factory=lambda: dict(UNARY_F32))
    unary_f64: dict = field(default_factory=lambda: dict(UNARY_F64))
    elementwise_ops: frozenset = ELEMENTWISE
    proxy_fence: str = ""
    fence_after_async_wait: bool = False  # async-proxy readers (wgmma) of cp.async data need a proxy fence
    fence_after_shared_store: bool = False
    hints: dict = field(default_factory=dict)
    swizzle_align: int = 1024
    atomics: dict = field(default_factory=lambda: dict(ATOMIC_FNS))
    fence: str = "tp_fence_device();"  # the device-scope fence that strengthens an atomic's ordering

    @property
    def name(self) -> str:
        return self.target.name

    @property
    def vendor(self) -> str:
        return self.target.vendor

    @property
    def warp_size(self) -> int:
        return self.target.warp_size

    @property
    def smem_bytes(self) -> int:
        return self.target.shared_bytes

    @property
    def banks(self) -> int:
        return self.target.banks

    def shared_align(self, stype) -> int:
        """Alignment of a shared allocation: swizzled tiles start on a swizzle-pattern boundary (1024 B)."""
        return self.swizzle_align if stype.swizzle is not None else 128

    def hint(self, op: str) -> str:
        return self.hints.get(
            op, f"tp.{op} is not available on {self.name}; see docs/backend.md for what each target renders"
        )


def _ops(**specific) -> dict:
    table = {op: None for op in OPS}
    table.update({"store": _store, "copy": _copy, "barrier": _barrier})
    table.update(dict.fromkeys(ATOMIC_FNS, _atomic))
    table.update(specific)
    return table


_NV_ASYNC = dict(copy_async=_copy_async, commit_async=_CP_ASYNC_COMMIT, wait_async=_CP_ASYNC_WAIT)

SM_90A = RenderTarget(
    target=TARGETS["sm_90a"],
    compiler="nvrtc",
    arch="sm_90a",
    binary_ext="cubin",
    ops=_ops(
        **_NV_ASYNC,
        copy_bulk=sm90a.emit_copy_bulk,
        store_bulk=sm90a.emit_store_bulk,
        store_bulk_wait=sm90a.emit_store_bulk_wait,
        mbarrier=sm90a.emit_mbarrier_init,
        mbarrier_arrive=sm90a.emit_mbarrier_arrive,
        store_remote=sm90a.emit_store_remote,
        mbarrier_wait=sm90a.emit_mbarrier_wait,
        mbarrier_at=sm90a.emit_mbarrier_at,
        cluster_rank=sm90a.emit_cluster_rank,
        cluster_sync=sm90a.emit_cluster_sync,
        mma_wait=sm90a.emit_mma_wait,
        setmaxnreg=sm90a.emit_setmaxnreg,
    ),
    mma={"mma_sync": sm80.emit_mma_sync, "wgmma": sm90a.emit_wgmma},
    proxy_fence=_PROXY_FENCE,
    fence_after_async_wait=True,
    fence_after_shared_store=True,
)

SM_80 = RenderTarget(
    target=TARGETS["sm_80"],
    compiler="nvrtc",
    arch="sm_80",
    binary_ext="cubin",
    ops=_ops(**_NV_ASYNC),
    mma={"mma_sync": sm80.emit_mma_sync},
    hints={
        "copy_bulk": "sm_80 has no bulk copy engine: use tp.copy_async with commit/wait",
        "mbarrier": "synchronize with tp.barrier() on sm_80",
        "mma": "sm_80 has mma.sync only: use tp.nv.mma_m16n8k16_bf16",
    },
)

GFX942 = RenderTarget(
    target=TARGETS["gfx942"],
    compiler="amdgpu-clang",
    arch="gfx942",
    binary_ext="hsaco",
    # LDS staging: copies to shared memory go through registers, so commit/wait have nothing to wait for.
    ops=_ops(copy_async=_copy, commit_async="", wait_async=""),
    mma={"mfma": gfx942.emit_mfma},
    hints={
        "copy_bulk": "gfx942 has no bulk tensor copy: use tp.copy_async (LDS staging)",
        "mbarrier": "synchronize with tp.barrier() on gfx942",
        "mma": "on gfx942 use tp.amd.mfma_f32_32x32x8_bf16 or tp.amd.mfma_f32_16x16x16_bf16",
    },
    swizzle_align=128,
)

RENDER_TARGETS = {t.name: t for t in (SM_90A, SM_80, GFX942)}


def get_render_target(name) -> RenderTarget:
    name = getattr(name, "name", name)
    try:
        return RENDER_TARGETS[name]
    except KeyError:
        raise ValueError(
            f"tilepy_hip cannot render for target {name!r}; targets: {', '.join(RENDER_TARGETS)}"
        ) from None


def coverage(target: RenderTarget) -> dict:
    """For every op in the catalogue: how this target renders it ("common", "template", "emitter", None)."""
    out = {}
    for op in OPS:
        if op in target.ops and target.ops[op] is not None:
            out[op] = "template" if isinstance(target.ops[op], str) else "emitter"
        elif op in COMMON_OPS:
            out[op] = "common"
        else:
            out[op] = None
    return out
