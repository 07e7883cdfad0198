"""GEMM against cuBLAS on every shape of issue 15, in one run; writes benchmarks/results/gemm-<device>.json.

    python benchmarks/gemm.py [--only bf16out|f32out|fp32|fp8] [--shapes 4096,4096,4096 ...] [--sweep] [--policies]
                              [--out DIR]

Rows, each compared like with like, on the same random inputs, in the same run:
* bf16out: `gemm_hopper_bf16` (bf16 in, f32 accumulate, bf16 out: the epilogue rounds) against `torch.matmul`
  bf16.
* f32out: `gemm_hopper` (bf16 in, f32 accumulate and out) against `torch.mm(a, b, out_dtype=torch.float32)`
  where this torch has it, else against `torch.matmul` bf16 (bf16 out: a slightly cheaper epilogue).
* fp32: `gemm_fp32` (f32 in and out, 3xTF32 on the tensor cores) against cuBLAS SGEMM (`torch.matmul` f32 with
  TF32 off); the row holds both errors against float64, ours and SGEMM's, and the speed-up.
* fp8: `gemm_fp8` (e4m3 in with per-tensor f32 scales, bf16 out) against `torch._scaled_mm` on the shapes of
  benchmarks/gemm_fp8.py (which has the rows and an fp8 variant sweep of its own).
Every output is checked against float64 (computed on the GPU) before it is timed; a timing is the median of
CUDA-graph replays (GPU time only), ours and the peer replayed in turn, replay by replay (timing.paired_graph_seconds:
a clock drift within the call moves both alike); `ratio` is the medians' peer / ours, `ratio_pairs` the median of the
rounds' ratios (the table's `paired` column) and `ratio_pairs_spread` their [min, quartiles, max]. The fp32 rows are
timed both with the splits and without (operands split beforehand; where launch reads A as it is and splits it in
registers, `gemm_fp32` A_RAW, only B), each paired with SGEMM.
`--sweep` adds the fp32 kernel's tile/stage variants at 4096^3.

`gemm_hopper` runs with the policy its shape class gets from `gemm_hopper.policy(M, N, K, out)` (large / small /
skinny / decode / unaligned: tile, stages, wait_group 1, split-K, the staged or TMA-store epilogue for bf16 out);
a split-K call includes zeroing its f32 accumulation target (and for bf16 out, the rounding copy). `--policies`
adds a sweep of the policies per shape (`--sweep-out bf16,f32`, `--variants REGEX`, `--sweep-shapes ...`; each
variant's SPLIT_K / EPILOGUE explicit, the shape's policy row first), and the 1024^3 GEMM's 30 back-to-back calls
eager and graph-replayed against cuBLAS (issue 14's bar; `--no-b2b` skips them). `--precompile N` builds the
kernels in N processes first; `--name` sets the JSON's stem.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import re
import statistics
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from timing import graph_seconds, input_sets, paired_graph_seconds  # noqa: E402

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp32, gemm_hopper  # noqa: E402
from tilepy_hip.launch import launch_compiled  # noqa: E402

SHAPES = [  # (M, N, K)
    (4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 1024), (4096, 14336, 4096), (4096, 4096, 14336),
    (128, 4096, 4096), (1024, 1024, 1024), (2051, 2045, 1000), (3000, 5000, 4096),
]

FP32_SWEEP = {  # b_layout, constexprs over launch's form (A split in registers, RAW; one accumulator: the split form)
    "nk_preset": ("nk", {}),
    "kn_split_form": ("kn", dict(A_RAW=0)),
    "kn_s2": ("kn", dict(STAGES=2)),
    "kn_row_order": ("kn", dict(GROUP_M=1)),
    "kn_one_accumulator": ("kn", dict(PROMOTE=False)),
    "kn_128x256_s2_one_accumulator": ("kn", dict(BN=256, STAGES=2, PROMOTE=False,
                                                 INSTR=tp.nv.wgmma_m64n256k8_tf32)),
}


def rel(x, ref) -> float:
    x = x.double()
    if not torch.isfinite(x).all():
        return float("inf")
    return float((x - ref).norm() / ref.norm())


def _mm_f32out():
    """torch.mm with out_dtype=float32 for bf16 inputs, where this torch has it; else None."""
    a = torch.ones(16, 16, device="cuda", dtype=torch.bfloat16)
    try:
        torch.mm(a, a, out_dtype=torch.float32)
    except (TypeError, RuntimeError):
        return None
    return lambda x, y: torch.mm(x, y, out_dtype=torch.float32)


def ours_fn(a, b, c, params):
    """(callable doing c = a @ b through gemm_hopper.launch under `params`: padding, split-K zeroing and rounding
    included, the compiled GEMM kernel for its register facts)."""
    M, K = a.shape
    N = b.shape[1]
    kernel, kp = gemm_hopper.plan_kernel(M, N, tp.f32 if c.dtype == torch.float32 else tp.bf16, params, K)
    ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
    return (lambda: gemm_hopper.launch(a, b, c, **params)), ck


def f32out_row(M, N, K, g, mm_f32, out=torch.float32, params=None):
    p = params or gemm_hopper.policy(M, N, K, tp.bf16 if out == torch.bfloat16 else tp.f32, fixup=True)
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=out)
    if out != torch.float32:
        mm_f32 = None
    fn, ck = ours_fn(a, b, c, p)
    fn()
    ref = a.double() @ b.double()
    err = rel(c, ref)
    torch_fn = mm_f32 or (lambda x, y: torch.matmul(x, y))
    err_torch = rel(torch_fn(a, b), ref)
    # ours and cuBLAS replay by replay (timing.paired_graph_seconds: a CUDA graph of 20 calls each, 30 rounds of
    # one replay of each, the order reversed every other round): each one's median, and the median of the rounds'
    # ratios; where one call's buffers fit in the L2, the calls rotate among input sets, and the one-set ("hot")
    # figures are kept beside
    sets = [(a, b, c)] + [(torch.randn(M, K, device="cuda", generator=g).bfloat16(),
                           torch.randn(K, N, device="cuda", generator=g).bfloat16(), torch.empty_like(c))
                          for _ in range(input_sets(_bytes(a, b, c)) - 1)]
    ours_all = [fn] + [partial(gemm_hopper.launch, x, y, z, **p) for x, y, z in sets[1:]]
    torch_all = [partial(torch_fn, x, y) for x, y, _ in sets]
    pr = paired_graph_seconds(ours_all, torch_all)
    row = {**_row(M, N, K, pr.ours, pr.peer, err, err_torch, ck,
                  against="torch.mm(out_dtype=float32)" if mm_f32 else "torch.matmul bf16 (bf16 out)"),
           **_pairs(pr), "shape_class": gemm_hopper.shape_class(M, N, K), "policy": _policy_text(p),
           "input_sets": len(sets)}
    if len(sets) > 1:
        row.update(_hot(paired_graph_seconds(fn, torch_all[0])))
    return row


def _bytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _pairs(pr, key="ratio") -> dict:
    """A paired timing's ratio fields: `<key>_pairs` the median of the rounds' peer / ours ratios, and
    `<key>_pairs_spread` [min, lower quartile, upper quartile, max] of them (`<key>` itself is the medians' ratio)."""
    return {f"{key}_pairs": pr.ratio, f"{key}_pairs_spread": [pr.ratio_min, pr.ratio_q1, pr.ratio_q3, pr.ratio_max],
            f"{key}_pairs_rounds": pr.rounds}


def _hot(pr) -> dict:
    """The one-input-set figures (the operands stay in the L2 between calls), beside a rotated row's: a paired
    timing (timing.Paired)."""
    return {"us_hot": pr.ours * 1e6, "torch_us_hot": pr.peer * 1e6, "ratio_hot": pr.peer / pr.ours,
            **_pairs(pr, "ratio_hot")}


def _policy_text(p) -> str:
    keys = ("BM", "BN", "STAGES", "CONSUMERS", "IN_FLIGHT", "PRODUCER_REGS", "CONSUMER_REGS", "SPLIT_K", "FIXUP",
            "EPILOGUE", "PERSISTENT", "MIN_BLOCKS")
    return " ".join(f"{k}={p[k]}" for k in keys if k in p and p[k] not in (0, None))


def bf16out_row(M, N, K, g, params=None):
    return f32out_row(M, N, K, g, None, out=torch.bfloat16, params=params)


I64, I128, I256 = tp.nv.wgmma_m64n64k16_bf16, tp.nv.wgmma_m64n128k16_bf16, tp.nv.wgmma_m64n256k16_bf16
I32, SW64 = tp.nv.wgmma_m64n32k16_bf16, tp.Swizzle(2, 3, 3)  # BN = 32: one 32-column B block, 64-byte swizzle
POLICY_SWEEP = {  # bf16 out; constexprs over gemm_hopper.PRESETS (128x256, 4 stages, 2 consumers)
    "128x256_s4_wait0": dict(IN_FLIGHT=0),
    "128x256_s4_persistent": dict(IN_FLIGHT=0, PERSISTENT=1),
    "128x256_s4_persistent_g16": dict(IN_FLIGHT=0, PERSISTENT=1, GROUP_M=16),
    "128x128_s5_persistent": dict(IN_FLIGHT=0, PERSISTENT=1, BN=128, STAGES=5, INSTR=I128),
    "128x256_s4_persistent_regs": dict(IN_FLIGHT=0, PERSISTENT=1, PRODUCER_REGS=64, CONSUMER_REGS=216),
    "128x256_s4_wait1": dict(IN_FLIGHT=1),
    "128x256_s3_wait1": dict(IN_FLIGHT=1, STAGES=3),
    "128x256_s4_wait1_regs64_216": dict(IN_FLIGHT=1, PRODUCER_REGS=64, CONSUMER_REGS=216),
    "128x128_s4_wait1": dict(IN_FLIGHT=1, BN=128, INSTR=I128),
    "128x128_s6_wait1": dict(IN_FLIGHT=1, BN=128, STAGES=6, INSTR=I128),
    "128x64_s6_wait1": dict(IN_FLIGHT=1, BN=64, STAGES=6, INSTR=I64),
    "64x128_s6_wait1_1consumer": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128),
    "128x128_s4_wait1_splitk2": dict(IN_FLIGHT=1, BN=128, INSTR=I128, SPLIT_K=2),
    "128x128_s4_wait1_splitk4": dict(IN_FLIGHT=1, BN=128, INSTR=I128, SPLIT_K=4),
    "128x64_s6_wait1_splitk2": dict(IN_FLIGHT=1, BN=64, STAGES=6, INSTR=I64, SPLIT_K=2),
    "64x128_s6_wait1_1consumer_splitk2": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128,
                                              SPLIT_K=2),
    # skinny M / small: narrower tiles fill the SMs without split-K's zeroing and atomics
    "64x64_s8_wait1_1consumer": dict(IN_FLIGHT=1, BM=64, BN=64, STAGES=8, CONSUMERS=1, INSTR=I64),
    "64x64_s8_wait1_1consumer_splitk2": dict(IN_FLIGHT=1, BM=64, BN=64, STAGES=8, CONSUMERS=1, INSTR=I64,
                                             SPLIT_K=2),
    "64x32_s8_wait1_1consumer": dict(IN_FLIGHT=1, BM=64, BN=32, STAGES=8, CONSUMERS=1, INSTR=I32, B_SWIZZLE=SW64),
    "64x32_s8_wait1_1consumer_splitk2": dict(IN_FLIGHT=1, BM=64, BN=32, STAGES=8, CONSUMERS=1, INSTR=I32,
                                             B_SWIZZLE=SW64, SPLIT_K=2),
    "128x64_s8_wait1": dict(IN_FLIGHT=1, BN=64, STAGES=8, INSTR=I64),
    "128x64_s8_wait1_splitk2": dict(IN_FLIGHT=1, BN=64, STAGES=8, INSTR=I64, SPLIT_K=2),
    # the epilogue staged in shared memory (coalesced 16-byte global stores by the producer warpgroup)
    "128x256_s3_wait0_epi": dict(IN_FLIGHT=0, STAGES=3, EPILOGUE=1),
    "128x128_s5_wait0_epi": dict(IN_FLIGHT=0, BN=128, STAGES=5, INSTR=I128, EPILOGUE=1),
    "128x128_s6_wait0": dict(IN_FLIGHT=0, BN=128, STAGES=6, INSTR=I128),
    "64x128_s6_wait1_1consumer_epi": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128,
                                          EPILOGUE=1),
    "64x64_s8_wait1_1consumer_epi": dict(IN_FLIGHT=1, BM=64, BN=64, STAGES=8, CONSUMERS=1, INSTR=I64, EPILOGUE=1),
    # the TMA store epilogue (tp.store_bulk from a 128-byte-swizzled c_s)
    "128x256_s3_wait0_tma": dict(IN_FLIGHT=0, STAGES=3, EPILOGUE=2),
    # gemm_cluster: 2x1 thread-block clusters, B's tile multicast to both blocks (launch CLUSTER_M=2)
    "128x256_s4_cluster2": dict(IN_FLIGHT=0, CLUSTER_M=2),
    "128x256_s3_cluster2_tma": dict(IN_FLIGHT=0, CLUSTER_M=2, STAGES=3, EPILOGUE=2),
    "128x128_s5_wait0_tma": dict(IN_FLIGHT=0, BN=128, STAGES=5, INSTR=I128, EPILOGUE=2),
    "64x128_s6_wait1_1consumer_tma": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128,
                                          EPILOGUE=2),
    # decode: deeper rings, the stage released at once, wider tiles
    "64x128_s8_wait1_1consumer": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=8, CONSUMERS=1, INSTR=I128),
    "64x128_s4_wait1_1consumer": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=4, CONSUMERS=1, INSTR=I128),
    "64x128_s6_wait0_1consumer": dict(IN_FLIGHT=0, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128),
    "64x256_s4_wait1_1consumer": dict(IN_FLIGHT=1, BM=64, BN=256, STAGES=4, CONSUMERS=1, INSTR=I256),
    # split-K reduced in the kernel (gemm_splitk: a ticket per tile, the last split stores C; no zeroing or
    # rounding pass): FIXUP=1 atomics into a workspace, FIXUP=2 a slot per split (spills at 128x128, as do
    # 64x256 split-K 8 FIXUP=1 and 128x256 split-K 4 FIXUP=1: not swept)
    "64x128_s6_wait1_1consumer_splitk4": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128,
                                              SPLIT_K=4),
    "64x128_s6_wait1_1consumer_splitk4_fix1": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128,
                                                   SPLIT_K=4, FIXUP=1),
    "64x128_s6_wait1_1consumer_splitk4_fix2": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128,
                                                   SPLIT_K=4, FIXUP=2),
    "64x128_s8_wait1_1consumer_splitk4_fix2": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=8, CONSUMERS=1, INSTR=I128,
                                                   SPLIT_K=4, FIXUP=2),
    "128x128_s4_wait1_splitk4_fix1": dict(IN_FLIGHT=1, BN=128, INSTR=I128, SPLIT_K=4, FIXUP=1),
    "128x128_s4_wait1_splitk2_fix1": dict(IN_FLIGHT=1, BN=128, INSTR=I128, SPLIT_K=2, FIXUP=1),
    "128x128_s4_wait0_splitk2_fix1": dict(IN_FLIGHT=0, BN=128, INSTR=I128, SPLIT_K=2, FIXUP=1),
    "64x128_s6_wait1_1consumer_splitk2_fix2": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128,
                                                   SPLIT_K=2, FIXUP=2),
    # FIXUP=3: the slots (plain stores, no ticket) summed and rounded by a second kernel (splitk_sum)
    "64x128_s6_wait1_1consumer_splitk4_fix3": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128,
                                                   SPLIT_K=4, FIXUP=3),
    "64x128_s6_wait1_1consumer_splitk2_fix3": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128,
                                                   SPLIT_K=2, FIXUP=3),
    "128x128_s4_wait1_splitk4_fix3": dict(IN_FLIGHT=1, BN=128, INSTR=I128, SPLIT_K=4, FIXUP=3),
    "128x128_s4_wait1_splitk2_fix3": dict(IN_FLIGHT=1, BN=128, INSTR=I128, SPLIT_K=2, FIXUP=3),
    "64x128_s4_wait1_1consumer_epi": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=4, CONSUMERS=1, INSTR=I128, EPILOGUE=1),
    # two blocks per SM (MIN_BLOCKS=2: __launch_bounds__(256, 2) caps the registers at 128; 4 stages of 24 KB fit
    # twice in the SM's shared memory): one block's fill / epilogue overlaps the other's k-loop; the split
    # doubled so that the grid holds ~2 blocks per SM
    **{f"64x128_s4_wait1_1consumer_mb2_splitk{s}{f'_fix{f}' if f else ''}":
       dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=4, CONSUMERS=1, INSTR=I128, SPLIT_K=s, FIXUP=f, MIN_BLOCKS=2)
       for s in (2, 4, 8) for f in (0, 3)},
    "64x128_s4_wait1_1consumer_mb2": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=4, CONSUMERS=1, INSTR=I128,
                                          MIN_BLOCKS=2),
    "64x128_s8_wait1_1consumer_splitk8_fix3": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=8, CONSUMERS=1, INSTR=I128,
                                                   SPLIT_K=8, FIXUP=3),
    "128x128_s6_wait1_splitk2_fix3": dict(IN_FLIGHT=1, BN=128, STAGES=6, INSTR=I128, SPLIT_K=2, FIXUP=3),
    # FIXUP=3 storing only the slot rows below M (SLOT_ROWS=1)
    "64x128_s6_wait1_1consumer_splitk4_fix3_rows": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1,
                                                        INSTR=I128, SPLIT_K=4, FIXUP=3, SLOT_ROWS=1),
    "128x128_s6_wait1_splitk2_fix3_rows": dict(IN_FLIGHT=1, BN=128, STAGES=6, INSTR=I128, SPLIT_K=2, FIXUP=3,
                                               SLOT_ROWS=1),
    "128x128_s5_wait0_splitk2_fix3": dict(IN_FLIGHT=0, BN=128, STAGES=5, INSTR=I128, SPLIT_K=2, FIXUP=3),
    "64x256_s4_wait1_1consumer_splitk8": dict(IN_FLIGHT=1, BM=64, BN=256, STAGES=4, CONSUMERS=1, INSTR=I256,
                                              SPLIT_K=8),
    "64x256_s4_wait1_1consumer_splitk8_fix3": dict(IN_FLIGHT=1, BM=64, BN=256, STAGES=4, CONSUMERS=1, INSTR=I256,
                                                   SPLIT_K=8, FIXUP=3),
}
G2_SHAPES = [(16, 4096, 4096), (64, 4096, 4096), (128, 4096, 4096), (256, 4096, 4096), (128, 14336, 4096),
             (1024, 1024, 1024), (2051, 2045, 1000), (3000, 5000, 4096), (8192, 8192, 1024)]
SWEEP_SHAPES = [(4096, 4096, 4096), (128, 4096, 4096), (1024, 1024, 1024), (2051, 2045, 1000)]
PERSISTENT_SHAPES = [(4096, 4096, 4096), (8192, 8192, 1024), (3000, 5000, 4096), (8192, 8192, 8192),
                     (4096, 14336, 4096)]


def _sweep_variants(M, N, K, only):
    """(tag, constexprs) of the sweep at one shape: the shape's policy first, then POLICY_SWEEP's entries that
    match `only` (split-K only where the output is small)."""
    out = [("policy", None)]  # gemm_hopper.policy(M, N, K, out) for each output dtype
    for tag, extra in POLICY_SWEEP.items():
        if only and not re.search(only, tag):
            continue
        # SPLIT_K / EPILOGUE explicit: gemm_hopper.launch lays the shape's policy under the constexprs it is
        # given, so a variant that left them out ran with the policy's split-K / epilogue (until 2026-11-23 late)
        p = {**gemm_hopper.PRESETS["sm_90a"], "SPLIT_K": 1, "EPILOGUE": 0, "FIXUP": 0, "MIN_BLOCKS": 0, **extra}
        if p.get("SPLIT_K", 1) > 1 and M * N > 4096 * 4096:
            continue
        out.append((tag, p))
    return out


def _build(item):
    """Compile one (kernel variant, constexprs) into the on-disk cache (a worker process); None if it does not
    fit (a staged f32 epilogue past the shared memory, say)."""
    M, N, K, out, params = item
    kernel, kp = gemm_hopper.plan_kernel(M, N, out, params, K)
    try:
        tilepy_hip.compile(kernel, target="sm_90a", **kp)
        if gemm_hopper.fixed_up(params) and params["FIXUP"] == 3:   # the slots' sum, launched after it
            summer = gemm_hopper.splitk_sum_bf16 if out == tp.bf16 else gemm_hopper.splitk_sum
            tilepy_hip.compile(summer, target="sm_90a", SPLIT_K=params["SPLIT_K"])
    except Exception as e:  # noqa: BLE001 - reported and skipped by the sweep
        return f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    return None


def precompile(shapes, only, outs, workers=16):
    """Build every kernel the sweep launches, in parallel processes (the sweep then finds them cached)."""
    items = {}
    for M, N, K in shapes:
        for _, p0 in _sweep_variants(M, N, K, only):
            for out in outs:
                o = tp.bf16 if out == torch.bfloat16 else tp.f32
                p = p0 or gemm_hopper.policy(M, N, K, o, fixup=True)
                kernel, kp = gemm_hopper.plan_kernel(M, N, o, p, K)
                items[(id(kernel), tuple(sorted((k, repr(v)) for k, v in kp.items())))] = (M, N, K, o, p)
    build_all(list(items.values()), workers)


def build_all(items: list, workers: int) -> list:
    """Compile (M, N, K, out, params) items into the kernel cache in `workers` spawned processes (`_build`);
    prints the count and the first errors, returns the errors."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    t = time.time()
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as ex:
        errors = [e for e in ex.map(_build, items) if e]
    print(f"precompiled {len(items)} kernels in {time.time() - t:.1f} s; {len(errors)} did not build: {errors[:4]}",
          flush=True)
    return errors


def policy_sweep(g, shapes, only=None, outs=(torch.bfloat16,), out=None, save=None) -> dict:
    """bf16-out (and with `outs`, f32-out) rows of every variant per shape; `save` is called after each shape
    (the JSON so far, should the call be cut off)."""
    out = {} if out is None else out
    for M, N, K in shapes:
        row = {}
        for tag, p0 in _sweep_variants(M, N, K, only):
            for dtype in outs:
                name = tag if dtype == torch.bfloat16 else f"{tag}/f32out"
                p = p0 or gemm_hopper.policy(M, N, K, tp.bf16 if dtype == torch.bfloat16 else tp.f32, fixup=True)
                try:
                    r = f32out_row(M, N, K, g, _MM_F32, out=dtype, params=p)
                except Exception as e:  # noqa: BLE001 - a variant that does not build here: say so, go on
                    print(f"  sweep {M}x{N}x{K} {name:36s} skipped: {type(e).__name__}: {str(e).splitlines()[0][:90]}",
                          flush=True)
                    continue
                row[name] = {k: r[k] for k in ("us", "torch_us", "ratio", "rel_err", "torch_rel_err", "registers",
                                               "spills")}
                row[name]["policy"] = _policy_text(p)
                print(f"  sweep {M}x{N}x{K} {name:36s} {r['us']:8.1f} us  x cuBLAS {r['ratio']:.2f}  "
                      f"regs {r['registers']} spills {r['spills']}  err {r['rel_err']:.1e} "
                      f"(cuBLAS {r['torch_rel_err']:.1e})", flush=True)
                torch.cuda.empty_cache()
        out[f"{M}x{N}x{K}"] = row
        if save:
            save()
    return out


_MM_F32 = None


def host_us(fn, n=300) -> float:
    """Host microseconds per call, no synchronization (the launch path's own cost)."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    dt = time.perf_counter() - t
    torch.cuda.synchronize()
    return dt / n * 1e6


def back_to_back_1024(g, calls=30, reps=20) -> dict:
    """Issue 14's bar: the 1024^3 GEMM (bf16 in and out) 30 times back to back, eager (kernel[grid] through
    gemm_hopper.launch's constexprs, as a user calls it) and graph-replayed, against torch.matmul."""
    M = N = K = 1024
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)

    def per_call(fn, graph: bool) -> float:
        fn()
        torch.cuda.synchronize()
        run = fn
        if graph:
            gr = torch.cuda.CUDAGraph()
            with torch.cuda.graph(gr):
                for _ in range(calls):
                    fn()
            run = gr.replay
        times = []
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            if graph:
                run()
            else:
                for _ in range(calls):
                    run()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) * 1e3 / calls)
        return statistics.median(times)

    res = {"calls": calls, "cublas": {"eager_us": per_call(lambda: torch.matmul(a, b), False),
                                      "graph_us": per_call(lambda: torch.matmul(a, b), True)}}
    print(f"  1024^3 x{calls} cuBLAS eager {res['cublas']['eager_us']:.1f} us, graph {res['cublas']['graph_us']:.1f}",
          flush=True)
    ref = a.double() @ b.double()
    variants = {"policy": gemm_hopper.policy(M, N, K)}
    for tag in ("128x64_s6_wait1", "128x128_s4_wait1"):
        variants[tag] = {**gemm_hopper.PRESETS["sm_90a"], **POLICY_SWEEP[tag]}
    for tag, p in variants.items():
        fn, _ = ours_fn(a, b, c, p)
        fn()
        torch.cuda.synchronize()
        plan = next(v for k, v in gemm_hopper._PLANS.items() if k[:3] == (M, N, K) and dict(k[6:]) == p)
        direct = (lambda plan=plan: plan.launcher(a, b, c, target="sm_90a", **plan.params)) \
            if not plan.split else fn  # kernel[grid](...) with the plan's constexprs, no planning
        r = {"policy": _policy_text(p), "rel_err": rel(c, ref), "eager_us": per_call(fn, False),
             "eager_kernel_grid_us": per_call(direct, False), "graph_us": per_call(fn, True),
             "host_us_launch": host_us(fn), "host_us_kernel_grid": host_us(direct)}
        r["eager_ratio"] = r["eager_us"] / res["cublas"]["eager_us"]
        r["graph_ratio"] = r["graph_us"] / res["cublas"]["graph_us"]
        res[tag] = r
        print(f"  1024^3 x{calls} {tag:28s} eager {r['eager_us']:6.1f} us ({r['eager_ratio']:.2f}x cuBLAS's time; "
              f"kernel[grid] {r['eager_kernel_grid_us']:.1f}), graph {r['graph_us']:6.1f} ({r['graph_ratio']:.2f}x); "
              f"host per call: launch {r['host_us_launch']:.1f} us, kernel[grid] {r['host_us_kernel_grid']:.1f}",
              flush=True)
    res["cublas"]["host_us"] = host_us(lambda: torch.matmul(a, b))
    prof = cProfile.Profile()
    fn, _ = ours_fn(a, b, c, variants["policy"])
    prof.enable()
    for _ in range(300):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(8)
    res["profile_launch"] = text.getvalue()[-3000:]
    print("  host profile of 300 gemm_hopper.launch calls (tottime):\n" + "\n".join(
        line for line in text.getvalue().splitlines() if "{" in line or ".py" in line)[:1800])
    print(f"  cuBLAS host per call {res['cublas']['host_us']:.1f} us")
    return res


def timeit_median(fn, reps: int = 20, replays: int = 15) -> float:
    """Seconds per call: the median over `replays` replays of a CUDA graph of `reps` calls, after a warm-up."""
    return graph_seconds(fn, reps, replays)


STREAMK_SHAPES = [(16, 4096, 4096), (64, 4096, 4096), (128, 4096, 4096), (256, 4096, 4096), (128, 14336, 4096),
                  (1024, 1024, 1024), (3000, 5000, 4096), (4096, 4096, 4096)]


def streamk_rows(g, shapes, outs=(torch.bfloat16, torch.float32)) -> list:
    """gemm_streamk (its tile presets) against gemm_hopper.launch's policy and cuBLAS on the same inputs, in one
    run: each output checked against float64 (NaN-poisoned first), then timed (median of graph replays)."""
    from stdlib_kernels import gemm_streamk

    rows = []
    for M, N, K in shapes:
        a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
        b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
        ref = a.double() @ b.double()
        for out in outs:
            o = tp.bf16 if out == torch.bfloat16 else tp.f32
            mm = torch.matmul if out == torch.bfloat16 or _MM_F32 is None else _MM_F32
            cublas = partial(mm, a, b)
            row = {"shape": [M, N, K], "out": str(out).split(".")[-1], "cublas_us": timeit_median(cublas) * 1e6,
                   "cublas_rel_err": rel(cublas(), ref)}
            variants = {"policy": (gemm_hopper.launch, {})}
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            for name, p in gemm_streamk.PRESETS.items():
                variants[f"streamk_{name}"] = (gemm_streamk.launch, p)
                if p.get("FIXUP", 1):  # the slots' fix-up against the atomic one
                    variants[f"streamk_{name}_atomic"] = (gemm_streamk.launch, {**p, "FIXUP": 0})
                variants[f"streamk_{name}_reduce"] = (gemm_streamk.launch, {**p, "FIXUP": 2})  # split-K's passes
                tiles = -(-M // p["BM"]) * -(-N // p["BN"])
                if tiles < sms:   # a grid of whole splits of every tile (shares aligned to tiles: split-K)
                    aligned = {**p, "num_sms": tiles * (sms // tiles)}
                    variants[f"streamk_{name}_aligned"] = (gemm_streamk.launch, aligned)
                    variants[f"streamk_{name}_aligned_reduce"] = (gemm_streamk.launch, {**aligned, "FIXUP": 2})
                if p.get("FIXUP", 1) == 1:  # the slots summed by a run-time loop (compact code)
                    variants[f"streamk_{name}_loop"] = (gemm_streamk.launch, {**p, "MAX_PARTS": 0})
            for tag, (launch, p) in variants.items():
                c = torch.full((M, N), float("nan"), device="cuda", dtype=out)
                try:
                    launch(a, b, c, **p)
                    torch.cuda.synchronize()
                    err = rel(c, ref)
                    us = timeit_median(partial(launch, a, b, c, **p)) * 1e6
                except Exception as e:  # noqa: BLE001 - a variant that does not build here: say so, go on
                    row[tag] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
                    print(f"  streamk {M}x{N}x{K} {row['out']} {tag}: {row[tag]['error']}", flush=True)
                    continue
                row[tag] = {"us": us, "ratio": row["cublas_us"] / us, "rel_err": err}
                if tag == "policy":
                    pol = gemm_hopper.policy(M, N, K, o)
                    row[tag]["policy"] = _policy_text(pol)
                    plan = next(v for k, v in gemm_hopper._PLANS.items() if k[:4] == (M, N, K, c.dtype))
                    if plan.split:  # the split-K GEMM kernel alone (no zeroing, no rounding pass): their cost
                        ws = plan.buffer("ws", c, tuple(c.shape), torch.float32) if out != torch.float32 else c
                        row[tag]["kernel_only_us"] = timeit_median(partial(plan.launcher, a, b, ws, target="sm_90a",
                                                                            **plan.params)) * 1e6
            best = min((v["us"], k) for k, v in row.items() if isinstance(v, dict) and "us" in v)
            row["best"] = best[1]
            rows.append(row)
            if "kernel_only_us" in row.get("policy", {}):
                print(f"  streamk {M}x{N}x{K:<5} {row['out']:8s} policy's split-K kernel alone "
                      f"{row['policy']['kernel_only_us']:7.1f} us of {row['policy']['us']:7.1f}", flush=True)
            print(f"  streamk {M}x{N}x{K:<5} {row['out']:8s} cuBLAS {row['cublas_us']:7.1f} us | " + " | ".join(
                f"{k} {v['us']:7.1f} ({v['ratio']:.2f}x, err {v['rel_err']:.1e})" for k, v in row.items()
                if isinstance(v, dict) and "us" in v), flush=True)
        torch.cuda.empty_cache()
    return rows


def fp32_row(M, N, K, g, b_layout="kn", **constexprs):
    # the form launch runs: swap-AB for skinny rows (gemm_fp32.swap_ok: the weight split in registers, x's rows by a
    # pass), else A split in the GEMM's registers (RAW) where K % 4 == 0 and the sum is promoted, with
    # gemm_fp32.launch_policy's tile (split-K, 64- or 96-wide tiles) where no tile is named
    named = dict(constexprs)
    a = torch.randn(M, K, device="cuda", generator=g)
    b = torch.randn((K, N) if b_layout == "kn" else (N, K), device="cuda", generator=g)
    c = torch.full((M, N), float("nan"), device="cuda")
    swap = gemm_fp32.swap_ok(a, b, b_layout, constexprs)
    if swap:
        p = {**gemm_fp32.swap_params(M, N, K, b_layout=b_layout), **{k: v for k, v in constexprs.items()
                                                                       if k != "SWAP"}}
        raw = 1
        ck = tilepy_hip.compile(gemm_fp32.gemm_fp32_kt if b_layout == "kn" else gemm_fp32.gemm_fp32_ct,
                                target="sm_90a", **p)
    else:
        constexprs.pop("SWAP", None)
        if not gemm_fp32.tile_named(constexprs):
            constexprs = {**gemm_fp32.launch_policy(M, N, K), **constexprs}
        raw = constexprs.get("A_RAW", int(gemm_fp32.raw_ok(K) and constexprs.get("PROMOTE", True)))
        p = {**gemm_fp32.PRESETS["sm_90a"], **(gemm_fp32.RAW if raw else {}), **constexprs}
        ck = tilepy_hip.compile(gemm_fp32.gemm_fp32, target="sm_90a", **p)
    gemm_fp32.launch(a, b, c, b_layout, **named)
    bb = b if b_layout == "kn" else b.t()
    ref = a.double() @ bb.double()
    err = rel(c, ref)
    torch.backends.cuda.matmul.allow_tf32 = False
    err_sgemm = rel(torch.matmul(a, bb), ref)
    # where one call's buffers fit in the L2, ours and SGEMM rotate among input sets (the one-set figures beside)
    sets = [(a, b, c)] + [(torch.randn_like(a), torch.randn_like(b), torch.empty_like(c))
                          for _ in range(input_sets(_bytes(a, b, c)) - 1)]
    ours_all = [partial(gemm_fp32.launch, x, y, z, b_layout, **named) for x, y, z in sets]
    sgemm_all = [partial(torch.matmul, x, y if b_layout == "kn" else y.t()) for x, y, _ in sets]
    whole = paired_graph_seconds(ours_all, sgemm_all)   # replay by replay, as f32out_row
    hot = _hot(paired_graph_seconds(ours_all[0], sgemm_all[0])) if len(sets) > 1 else {}
    ks = p.get("KSPLIT", 1)
    if swap:    # the swap kernel alone (x split beforehand), into its partial products where split
        xh, xl = gemm_fp32.split(a, "nk")
        w3, part = b[None], torch.empty(ks, M, N, device="cuda")
        kern = gemm_fp32.gemm_fp32_kt if b_layout == "kn" else gemm_fp32.gemm_fp32_ct
        gr = (tp.cdiv(N, p["BM"]) * tp.cdiv(M, p["BN"]), 1, ks)
        gemm_alone = lambda: kern[gr](w3, w3, xh, xl, part, **p)  # noqa: E731
    else:
        (ah, al), (bh, bl) = gemm_fp32.split(a), gemm_fp32.split(b, b_layout)
        kw = {k: v for k, v in constexprs.items() if k != "A_RAW"}
        if ks > 1:     # B (and A unless raw) split beforehand; the partial products' sum
            gemm_alone = (partial(gemm_fp32.launch_raw, a, (bh, bl), c, **kw) if raw
                          else partial(gemm_fp32.launch_split, (ah, al), (bh, bl), c, **kw))
        else:
            args = [a[None], a[None], bh, bl, c[None]] if raw else [ah, al, bh, bl, c[None]]
            grid = gemm_fp32.grid(a, c, **constexprs)
            gemm_alone = partial(launch_compiled, ck, grid, args)    # B (and A unless raw) split beforehand
    # the GEMM alone against SGEMM on one set (the GEMM alone's operands are split once, on set 0), replay by replay;
    # graphs of fewer calls where a call is long (30 rounds of 20 calls would add ~18 s at 8192^3: ~5 ms a replay)
    alone = paired_graph_seconds(gemm_alone, sgemm_all[0], reps=max(2, min(20, round(5e-3 / whole.ours))))
    return {**_row(M, N, K, whole.ours, whole.peer, err, err_sgemm, ck, against="SGEMM (torch.matmul f32, TF32 off)"),
            **_pairs(whole), **hot, "input_sets": len(sets),
            "b_layout": b_layout, "swap": bool(swap), "tile": [p["BM"], p["BN"], p["BK"]], "stages": p["STAGES"],
            "a_raw": bool(raw), "ksplit": ks, "tma_only": bool(p.get("TMA_ONLY")),
            "promote": p.get("PROMOTE", True), "gemm_only_us": alone.ours * 1e6, "gemm_only_sgemm_us": alone.peer * 1e6,
            "gemm_only_ratio": alone.peer / alone.ours, **_pairs(alone, "gemm_only_ratio"),
            "error_no_worse": err <= err_sgemm}


def _row(M, N, K, t_ours, t_torch, err, err_torch, ck, against):
    flops = 2 * M * N * K
    return {"shape": [M, N, K], "us": t_ours * 1e6, "torch_us": t_torch * 1e6, "ratio": t_torch / t_ours,
            "TFLOPs": flops / t_ours / 1e12, "torch_TFLOPs": flops / t_torch / 1e12, "rel_err": err,
            "torch_rel_err": err_torch, "against": against, "registers": ck.resources.get("registers"),
            "spills": ck.resources.get("spill_stores"), "tensor_maps": len(ck.tensor_maps)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="comma-separated kinds among bf16out,f32out,fp32,fp8 (or none)")
    ap.add_argument("--shapes", nargs="*", default=None, help="M,N,K triples (default: the issue's table)")
    ap.add_argument("--sweep", action="store_true", help="also the fp32 kernel's variants at 4096^3")
    ap.add_argument("--policies", action="store_true", help="also the policy sweep and 1024^3 x30 back to back")
    ap.add_argument("--variants", default=None, help="with --policies: a regex over the sweep's variant names")
    ap.add_argument("--b2b", action="store_true", help="also the 1024^3 x30 back to back (no sweep)")
    ap.add_argument("--sweep-shapes", nargs="*", default=None, help="with --policies: the sweep's shapes (default: "
                    "--shapes, else the sweep's own)")
    ap.add_argument("--sweep-out", default="bf16", help="with --policies: output dtypes swept (bf16,f32)")
    ap.add_argument("--precompile", type=int, default=0, help="with --policies: build the sweep's kernels first "
                    "in this many processes")
    ap.add_argument("--no-b2b", action="store_true", help="with --policies: skip the 1024^3 x30 back to back")
    ap.add_argument("--streamk", action="store_true", help="also gemm_streamk against the policy and cuBLAS on "
                    "--shapes (default: STREAMK_SHAPES)")
    ap.add_argument("--name", default="gemm", help="the JSON file's stem (gemm-<device>.json)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes] if args.shapes else SHAPES
    props = torch.cuda.get_device_properties(0)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    g = torch.Generator(device="cuda").manual_seed(15)
    mm_f32 = _mm_f32out()
    global _MM_F32
    _MM_F32 = mm_f32
    res = {"device": props.name, "torch": torch.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"), "bf16out": [], "f32out": [], "fp32": [], "fp32_sweep": {}}
    print(f"{props.name}, torch {torch.__version__}; f32-out baseline: "
          f"{'torch.mm(out_dtype=float32)' if mm_f32 else 'torch.matmul bf16'}")
    print(f"{'kind':8} {'M x N x K':22} {'ours us':>9} {'torch us':>9} {'ratio':>6} {'paired [quartiles]':>20} "
          f"{'TFLOP/s':>8} {'rel err':>9} {'torch err':>9} {'gemm-only us':>12} {'ratio':>6} {'paired':>6}")

    def paired(r, key="ratio"):
        if f"{key}_pairs" not in r:
            return ""
        q = r[f"{key}_pairs_spread"]
        return f"{r[f'{key}_pairs']:.3f} [{q[1]:.3f}-{q[2]:.3f}]"

    def show(kind, r):
        M, N, K = r["shape"]
        print(f"{kind:8} {f'{M} x {N} x {K}':22} {r['us']:9.1f} {r['torch_us']:9.1f} {r['ratio']:6.2f} "
              f"{paired(r):>20} {r['TFLOPs']:8.1f} {r['rel_err']:9.2e} {r['torch_rel_err']:9.2e}"
              + (f" {r['gemm_only_us']:12.1f} {r['gemm_only_ratio']:6.2f} "
                 f"{r.get('gemm_only_ratio_pairs', float('nan')):6.3f}" if "gemm_only_us" in r else "")
              + (f"  [{r['shape_class']}: {r['policy']}]" if "policy" in r else "")
              + (f"  (rotated over {r['input_sets']} input sets; one set: {r['us_hot']:.1f} / {r['torch_us_hot']:.1f}"
                 f" us, {r['ratio_hot']:.2f}, paired {paired(r, 'ratio_hot')})" if "us_hot" in r else ""), flush=True)

    if args.precompile:  # the table's kernels (policy per output dtype) and the sweep's, in parallel processes
        kinds = [] if args.only is None else args.only.split(",")
        table_outs = [t for k, t in (("bf16out", torch.bfloat16), ("f32out", torch.float32))
                      if args.only is None or k in kinds]
        precompile(shapes, "^$", table_outs, args.precompile)
    for M, N, K in shapes:
        if args.only is None or "bf16out" in args.only.split(","):
            r = bf16out_row(M, N, K, g)
            res["bf16out"].append(r)
            show("bf16out", r)
        if args.only is None or "f32out" in args.only.split(","):
            r = f32out_row(M, N, K, g, mm_f32)
            res["f32out"].append(r)
            show("f32out", r)
        if args.only is None or "fp32" in args.only.split(","):
            r = fp32_row(M, N, K, g, "kn")
            res["fp32"].append(r)
            show("fp32", r)
        torch.cuda.empty_cache()
    if args.only is None or "fp8" in args.only.split(","):
        # the fp8 section (issue 15 item 5): gemm_fp8 against torch._scaled_mm, on its own shapes unless given
        import gemm_fp8 as fp8_bench  # benchmarks/gemm_fp8.py

        res["fp8"] = []
        for M, N, K in (shapes if args.shapes else fp8_bench.SHAPES):
            r = fp8_bench.fp8_row(M, N, K, g)
            res["fp8"].append(r)
            show("fp8", r)
            torch.cuda.empty_cache()
    if args.sweep:
        for tag, (lay, extra) in FP32_SWEEP.items():
            r = fp32_row(4096, 4096, 4096, g, lay, **extra)
            res["fp32_sweep"][tag] = r
            show(tag[:8], r)
            print(f"         {tag}: {r['registers']} registers, {r['spills']} spills", flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / f"{args.name}-{name}.json"
    path.write_text(json.dumps(res, indent=1))  # the table so far, should a later part not finish
    if args.policies:
        sweep_shapes = SWEEP_SHAPES if not args.shapes else shapes
        if args.sweep_shapes:
            sweep_shapes = [tuple(int(x) for x in s.split(",")) for s in args.sweep_shapes]
        outs = [{"bf16": torch.bfloat16, "f32": torch.float32}[x] for x in args.sweep_out.split(",")]
        if args.precompile:
            precompile(sweep_shapes, args.variants, outs, args.precompile)
        res["policy_sweep"] = {}
        policy_sweep(g, sweep_shapes, args.variants, outs, res["policy_sweep"],
                     lambda: path.write_text(json.dumps(res, indent=1)))
    if args.streamk:
        res["streamk"] = streamk_rows(g, shapes if args.shapes else STREAMK_SHAPES)
        path.write_text(json.dumps(res, indent=1))
    if (args.policies and not args.no_b2b) or args.b2b:
        res["back_to_back_1024"] = back_to_back_1024(g)
    path.write_text(json.dumps(res, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
