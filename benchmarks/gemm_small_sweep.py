"""Issue 15, skinny / small / ragged GEMM shapes (G8): one sweep of gemm_hopper's candidate constexprs against
cuBLAS on the same inputs, in one run, plus what cuBLAS itself launches for each shape (kernel names and times
from torch.profiler) so that the next session knows the tile / split it is up against.

    python benchmarks/gemm_small_sweep.py [--out DIR] [--name STEM] [--only REGEX] [--precompile N]
    python benchmarks/gemm_small_sweep.py --ncu-target ours|cublas --shape 16,4096,4096   (under ncu)

Every candidate's output is checked against float64 (computed on the GPU) before it is timed; times are
`benchmarks/gemm.py`'s rule (median of 15 CUDA-graph replays of 20 calls, ours and cuBLAS alternated twice, each
the better of its two medians). Each variant runs through `gemm_hopper.launch` with its constexprs explicit (the
shape's policy is laid under them, so SPLIT_K / EPILOGUE / FIXUP / MIN_BLOCKS are given as 0 unless the variant
sets them). "padded B" rows time the kernel on a B copied once, beforehand, into rows of a multiple of 128 bytes
(the copy timed on its own beside it): whether B's row pitch is what costs at 3000 x 5000 x 4096.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import gemm as gb  # noqa: E402  (benchmarks/gemm.py: the row / timing rules)
import torch  # noqa: E402

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402

I128, I256 = tp.nv.wgmma_m64n128k16_bf16, tp.nv.wgmma_m64n256k16_bf16
T64x128 = dict(BM=64, BN=128, CONSUMERS=1, INSTR=I128)
ZERO = dict(SPLIT_K=1, EPILOGUE=0, FIXUP=0, MIN_BLOCKS=0)

# (tag, constexprs over PRESETS + ZERO); None = the shape's policy (through launch, as callers get it);
# ("policy", extra) = the policy with `extra` laid over it
DECODE = [
    ("policy", None),
    ("policy_parts", ("parts", {})),
    ("policy_slot_rows", ("policy", dict(SLOT_ROWS=1))),
    ("64x128_s8_split4_fix3", dict(T64x128, IN_FLIGHT=1, STAGES=8, SPLIT_K=4, FIXUP=3)),
    ("64x128_s8_split4_fix3_rows", dict(T64x128, IN_FLIGHT=1, STAGES=8, SPLIT_K=4, FIXUP=3, SLOT_ROWS=1)),
    ("64x128_s6_wait0_split4_fix3", dict(T64x128, IN_FLIGHT=0, STAGES=6, SPLIT_K=4, FIXUP=3)),
    ("64x128_s6_split4_passes", dict(T64x128, IN_FLIGHT=1, STAGES=6, SPLIT_K=4)),
    ("64x256_s5_split8_fix3_rows", dict(BM=64, BN=256, CONSUMERS=1, INSTR=I256, IN_FLIGHT=1, STAGES=5, SPLIT_K=8,
                                        FIXUP=3, SLOT_ROWS=1)),
]
SKINNY = [
    ("policy", None),
    ("policy_slot_rows", ("policy", dict(SLOT_ROWS=1))),
    # B shared by the blocks of a cluster along M (TMA multicast): 64 x 128 tiles read B once per cluster
    ("64x128_s6_cluster2", dict(T64x128, IN_FLIGHT=0, STAGES=6, CLUSTER_M=2)),
    ("64x128_s6_cluster4", dict(T64x128, IN_FLIGHT=0, STAGES=6, CLUSTER_M=4)),
    ("64x128_s6_nocluster", dict(T64x128, IN_FLIGHT=1, STAGES=6)),
]
SMALL = [
    ("policy", None),
    ("64x128_s6_cluster2", dict(T64x128, IN_FLIGHT=0, STAGES=6, CLUSTER_M=2)),
    ("64x128_s4_cluster2", dict(T64x128, IN_FLIGHT=0, STAGES=4, CLUSTER_M=2)),
    ("64x128_s6_cluster4", dict(T64x128, IN_FLIGHT=0, STAGES=6, CLUSTER_M=4)),
    ("64x128_s6_cluster2_tma", dict(T64x128, IN_FLIGHT=0, STAGES=6, CLUSTER_M=2, EPILOGUE=2)),
    ("64x128_s6_wait0", dict(T64x128, IN_FLIGHT=0, STAGES=6)),
    ("128x128_s4_cluster2", dict(BN=128, INSTR=I128, IN_FLIGHT=0, STAGES=4, CLUSTER_M=2)),
]
RAGGED = [
    ("policy", None),
    ("policy_padded_b", ("padded", {})),
    ("128x256_s4_cluster2", dict(IN_FLIGHT=0, STAGES=4, CLUSTER_M=2)),
]
# second call: mid-size shapes the "large" class splits (128 x 256 tiles filling at most half the SMs), B rows that
# are a multiple of 16 bytes but not of 128 (3000 x 5000 x 4096: cluster multicast above), 129-256 rows in clusters,
# and the decode class's two parts: splitk_sum's row block (BR) and a 16-row A padded to the tile's 64 rows
T128x128 = dict(BN=128, INSTR=I128)
MID = [
    ("policy", None),
    ("128x256_s4_nosplit", dict(IN_FLIGHT=0, STAGES=4)),
    ("128x128_s4_wait0", dict(T128x128, IN_FLIGHT=0, STAGES=4)),
    ("128x128_s6_wait0", dict(T128x128, IN_FLIGHT=0, STAGES=6)),
    ("128x128_s6_wait1", dict(T128x128, IN_FLIGHT=1, STAGES=6)),
    ("128x128_s5_wait0_tma", dict(T128x128, IN_FLIGHT=0, STAGES=5, EPILOGUE=2)),
    ("128x128_s4_cluster2", dict(T128x128, IN_FLIGHT=0, STAGES=4, CLUSTER_M=2)),
    ("64x128_s6_wait1", dict(T64x128, IN_FLIGHT=1, STAGES=6)),
]
REGS = dict(PRODUCER_REGS=64, CONSUMER_REGS=216)
PITCH = [
    ("policy", None),
    ("128x256_s4_cluster2", dict(IN_FLIGHT=0, STAGES=4, CLUSTER_M=2)),
    ("128x256_s4_cluster2_regs", dict(IN_FLIGHT=0, STAGES=4, CLUSTER_M=2, **REGS)),
    ("128x256_s3_cluster2_tma_regs", dict(IN_FLIGHT=0, STAGES=3, CLUSTER_M=2, EPILOGUE=2, **REGS)),
]
SKINNY2 = [
    ("policy", None),
    ("64x128_s6_cluster2", dict(T64x128, IN_FLIGHT=0, STAGES=6, CLUSTER_M=2)),
    ("64x128_s6_cluster2_tma", dict(T64x128, IN_FLIGHT=0, STAGES=6, CLUSTER_M=2, EPILOGUE=2)),
    ("64x128_s5_cluster2", dict(T64x128, IN_FLIGHT=0, STAGES=5, CLUSTER_M=2)),
]
PARTS = [("policy", None), ("sum_rows", ("sums", {})), ("a_padded_64", ("apad", {})),
         ("64x128_s8_split2_fix3", dict(T64x128, IN_FLIGHT=1, STAGES=8, SPLIT_K=2, FIXUP=3)),
         ("64x128_s6_split3_fix3", dict(T64x128, IN_FLIGHT=1, STAGES=6, SPLIT_K=3, FIXUP=3))]
# swap-AB (stdlib_kernels/gemm_splitk_swap.py): C^T = B^T A^T, A's rows the instruction's N, split-K into FIXUP=3 slots
I16, I64 = tp.nv.wgmma_m64n16k16_bf16, tp.nv.wgmma_m64n64k16_bf16
SW16 = dict(SWAP_AB=1, BM=16, INSTR=I16, IN_FLIGHT=1, FIXUP=3)
SW64 = dict(SWAP_AB=1, BM=64, INSTR=I64, IN_FLIGHT=1, FIXUP=3)
SWAP16 = [
    ("policy", None),
    ("swap16_128_s11_split2", dict(SW16, BN=128, CONSUMERS=2, STAGES=11, SPLIT_K=2)),
    ("swap16_128_s11_split4", dict(SW16, BN=128, CONSUMERS=2, STAGES=11, SPLIT_K=4)),
    ("swap16_128_s8_split4", dict(SW16, BN=128, CONSUMERS=2, STAGES=8, SPLIT_K=4)),
    ("swap16_128_s11_split4_wait0", dict(SW16, BN=128, CONSUMERS=2, STAGES=11, SPLIT_K=4, IN_FLIGHT=0)),
    ("swap16_64_s11_split2", dict(SW16, BN=64, CONSUMERS=1, STAGES=11, SPLIT_K=2)),
    ("swap16_64_s11_split4", dict(SW16, BN=64, CONSUMERS=1, STAGES=11, SPLIT_K=4)),
    ("swap16_256_s6_split8", dict(SW16, BN=256, CONSUMERS=2, STAGES=6, SPLIT_K=8)),
]
SWAP64 = [
    ("policy", None),
    ("swap64_128_s8_split2", dict(SW64, BN=128, CONSUMERS=2, STAGES=8, SPLIT_K=2)),
    ("swap64_128_s8_split4", dict(SW64, BN=128, CONSUMERS=2, STAGES=8, SPLIT_K=4)),
    ("swap64_64_s8_split4", dict(SW64, BN=64, CONSUMERS=1, STAGES=8, SPLIT_K=4)),
]
PLAN2 = [
    ((16, 4096, 4096), SWAP16, ("bf16", "f32")),
    ((64, 4096, 4096), SWAP64, ("bf16", "f32")),
    ((16, 4096, 14336), SWAP16[:3] + SWAP16[6:7], ("bf16",)),
    ((16, 14336, 4096), SWAP16[:2] + SWAP16[5:6], ("bf16",)),
    ((32, 4096, 4096), SWAP64[:1] + [("swap32_128_s10_split4", dict(SW16, BM=32, INSTR=tp.nv.wgmma_m64n32k16_bf16,
                                                                     BN=128, CONSUMERS=2, STAGES=10, SPLIT_K=4))],
     ("bf16",)),
    ((2048, 1024, 1024), MID, ("bf16", "f32")),
    ((2048, 2048, 1024), MID, ("bf16", "f32")),
    ((1536, 1536, 1536), MID[:5], ("bf16",)),
    ((3000, 5000, 4096), PITCH, ("bf16", "f32")),
    ((4096, 4104, 4096), PITCH[:2] + PITCH[3:], ("bf16",)),
    ((4096, 4096, 4104), PITCH[:2] + PITCH[3:], ("bf16",)),
    ((256, 4096, 4096), SKINNY2, ("bf16", "f32")),
    ((200, 4096, 4096), SKINNY2, ("bf16", "f32")),
    ((16, 4096, 4096), PARTS, ("bf16",)),
    ((64, 4096, 4096), PARTS[:2], ("bf16",)),
]
# third call: the policy table through launch after G8's change ("policy") against the policy without its forms
# ("noforms": what launch ran before for the swap / cluster rows) on the rows it changed
TABLE = [("policy", None), ("policy_noforms", ("noforms", {}))]
PLAN3 = [(s, TABLE, ("bf16", "f32")) for s in ((16, 4096, 4096), (32, 4096, 4096), (16, 4096, 14336),
                                               (200, 4096, 4096), (256, 4096, 4096), (3000, 5000, 4096))]
PLAN3 += [((2048, 1024, 1024), TABLE[:1], ("bf16", "f32"))]
# fourth call: swap-AB at 32 and 64 rows with more row tiles (cuBLAS: 64 x 16 tiles of C^T, 16 stages, at 32 rows)
I32 = tp.nv.wgmma_m64n32k16_bf16
PLAN4 = [
    ((32, 4096, 4096), [("policy", None),
                        ("swap16_128_s8_split2", dict(SW16, BN=128, CONSUMERS=2, STAGES=8, SPLIT_K=2)),
                        ("swap16_128_s8_split4", dict(SW16, BN=128, CONSUMERS=2, STAGES=8, SPLIT_K=4)),
                        ("swap32_64_s12_split2", dict(SW16, BM=32, INSTR=I32, BN=64, CONSUMERS=1, STAGES=12,
                                                      SPLIT_K=2)),
                        ("swap32_128_s10_split2", dict(SW16, BM=32, INSTR=I32, BN=128, CONSUMERS=2, STAGES=10,
                                                       SPLIT_K=2))], ("bf16",)),
    ((64, 4096, 4096), [("policy", None),
                        ("swap32_128_s10_split2", dict(SW16, BM=32, INSTR=I32, BN=128, CONSUMERS=2, STAGES=10,
                                                       SPLIT_K=2)),
                        ("swap16_128_s8_split2", dict(SW16, BN=128, CONSUMERS=2, STAGES=8, SPLIT_K=2)),
                        ("swap64_128_s8_split4", dict(SW64, BN=128, CONSUMERS=2, STAGES=8, SPLIT_K=4))], ("bf16",)),
]
# fifth call (G10): swap-AB in clusters of row tiles (B's tile multicast to them: cuBLAS's 64 x 16 / 64 x 32 / 64 x 64
# tiles of C^T in 1x2 clusters at 32 / 64 / 128 rows, 16 / 16 / 13 stages, unsplit), B given as (N, K) (a Linear's
# weight, read in place: what the lowering launches), and 128 x 64 tiles in 2x1 clusters (cuBLAS's 256-row and 1024^3
# form, `nvjet ... 128x64_64x8_1x2`)
I128 = tp.nv.wgmma_m64n128k16_bf16
SWC = dict(SWAP_AB=1, IN_FLIGHT=1, FIXUP=3, SPLIT_K=1, CLUSTER_M=2, CONSUMERS=1, BN=64)
C16 = dict(SWC, BM=16, INSTR=I16, STAGES=16)
C32 = dict(SWC, BM=32, INSTR=I32, STAGES=14)
C64 = dict(SWC, BM=64, INSTR=I64, STAGES=12)
C128 = dict(SWC, BM=128, INSTR=I128, STAGES=8)
CL128x64 = dict(BM=128, BN=64, CONSUMERS=2, INSTR=I64, IN_FLIGHT=0, STAGES=8, CLUSTER_M=2)
PLAN5 = [
    ((32, 4096, 4096), [("policy", None), ("policy_nk", ("nk", {})), ("swap16_64_s16_cl2", C16),
                        ("swap16_64_s16_cl2_nk", ("nk", C16)), ("swap16_64_s16_cl2_wait0", dict(C16, IN_FLIGHT=0)),
                        ("swap16_128_s12_cl2_split2", dict(C16, BN=128, CONSUMERS=2, STAGES=12, SPLIT_K=2))],
     ("bf16", "f32")),
    ((64, 4096, 4096), [("policy", None), ("swap32_64_s14_cl2", C32), ("swap32_64_s14_cl2_nk", ("nk", C32)),
                        ("swap32_64_s14_cl2_wait0", dict(C32, IN_FLIGHT=0)),
                        ("swap32_128_s8_cl2_split2", dict(C32, BN=128, CONSUMERS=2, STAGES=8, SPLIT_K=2))],
     ("bf16", "f32")),
    ((128, 4096, 4096), [("policy", None), ("swap64_64_s12_cl2", C64), ("swap64_64_s12_cl2_nk", ("nk", C64)),
                         ("swap64_64_s12_cl2_wait0", dict(C64, IN_FLIGHT=0)),
                         ("swap64_128_s8_cl2_split2", dict(C64, BN=128, CONSUMERS=2, STAGES=8, SPLIT_K=2))],
     ("bf16", "f32")),
    ((100, 4096, 4096), [("policy", None), ("swap64_64_s12_cl2", C64)], ("bf16",)),
    ((16, 4096, 4096), [("policy", None), ("policy_nk", ("nk", {}))], ("bf16",)),
    ((256, 4096, 4096), [("policy", None), ("128x64_s8_cl2", CL128x64),
                         ("128x64_s8_cl2_tma", dict(CL128x64, EPILOGUE=2)), ("swap128_64_s8_cl2", C128)],
     ("bf16", "f32")),
    ((1024, 1024, 1024), [("policy", None), ("128x64_s8_cl2", CL128x64),
                          ("128x64_s8_cl2_tma", dict(CL128x64, EPILOGUE=2)), ("swap128_64_s8_cl2", C128)],
     ("bf16", "f32")),
]
# sixth call (G11): two consumer warpgroups over ONE tile of C^T, each taking every other k-tile into its own
# accumulator, summed through shared memory at the end (gemm_splitk_swap K_WAYS=2: two rings, one per consumer):
# cuBLAS's 384-thread nvjet_sm90_tst_64x16_64x16_1x2 / 64x32_64x16_1x2 / 64x64_64x13_2x1 form, with and without its 1x2
# clusters (B multicast) and split-K; STAGES is per ring (the block holds 2 x STAGES k-tiles)
KW = dict(SWAP_AB=1, K_WAYS=2, CONSUMERS=2, BN=64, IN_FLIGHT=1, FIXUP=3, SPLIT_K=1)
KW16, KW32, KW64, KW128 = (dict(KW, BM=16, INSTR=I16, STAGES=8), dict(KW, BM=32, INSTR=I32, STAGES=8),
                           dict(KW, BM=64, INSTR=I64, STAGES=6), dict(KW, BM=128, INSTR=I128, STAGES=3))
PLAN6 = [
    ((16, 4096, 4096), [("policy", None), ("policy_nk", ("nk", {})),
                        ("kw16_64_s8_split2", dict(KW16, SPLIT_K=2)),
                        ("kw16_128_s4_split4", dict(KW16, BN=128, STAGES=4, SPLIT_K=4)),
                        ("kw16_64_s8_split2_nk", ("nk", dict(KW16, SPLIT_K=2)))], ("bf16", "f32")),
    ((32, 4096, 4096), [("policy", None), ("policy_nk", ("nk", {})),
                        ("kw16_64_s8_cl2", dict(KW16, CLUSTER_M=2)), ("kw16_64_s8", KW16),
                        ("kw16_64_s8_cl2_wait0", dict(KW16, CLUSTER_M=2, IN_FLIGHT=0)),
                        ("kw32_64_s8_split2", dict(KW32, SPLIT_K=2)),
                        ("kw16_64_s8_cl2_nk", ("nk", dict(KW16, CLUSTER_M=2))),
                        ("kw32_64_s8_split2_nk", ("nk", dict(KW32, SPLIT_K=2)))], ("bf16", "f32")),
    ((64, 4096, 4096), [("policy", None), ("kw32_64_s8_cl2", dict(KW32, CLUSTER_M=2)), ("kw32_64_s8", KW32),
                        ("kw32_64_s8_cl2_wait0", dict(KW32, CLUSTER_M=2, IN_FLIGHT=0)),
                        ("kw64_64_s6_split2", dict(KW64, SPLIT_K=2)),
                        ("kw32_64_s8_cl2_nk", ("nk", dict(KW32, CLUSTER_M=2)))], ("bf16", "f32")),
    ((100, 4096, 4096), [("policy", None), ("kw64_64_s6_cl2", dict(KW64, CLUSTER_M=2)), ("kw64_64_s6", KW64)],
     ("bf16", "f32")),
    ((128, 4096, 4096), [("policy", None), ("kw64_64_s6_cl2", dict(KW64, CLUSTER_M=2)), ("kw64_64_s6", KW64),
                         ("kw64_64_s6_cl2_wait0", dict(KW64, CLUSTER_M=2, IN_FLIGHT=0)),
                         ("kw64_64_s6_cl2_nk", ("nk", dict(KW64, CLUSTER_M=2)))], ("bf16", "f32")),
    ((256, 4096, 4096), [("policy", None), ("kw128_64_s3_cl2", dict(KW128, CLUSTER_M=2)), ("kw128_64_s3", KW128),
                         ("kw64_64_s6_cl2", dict(KW64, CLUSTER_M=2))], ("bf16", "f32")),
    ((1024, 1024, 1024), [("policy", None), ("kw128_64_s3_cl2", dict(KW128, CLUSTER_M=2)), ("kw128_64_s3", KW128),
                          ("kw64_64_s6_cl2", dict(KW64, CLUSTER_M=2))], ("bf16", "f32")),
    ((2048, 1024, 1024), [("policy", None), ("kw128_64_s3_cl2", dict(KW128, CLUSTER_M=2)), ("kw128_64_s3", KW128)],
     ("bf16", "f32")),
]
# seventh call (G11): the policy after K_WAYS=2 was taken for 65-128 rows ("policy") against the policy before
# ("policy_noforms": the skinny 64 x 128 split 2, FIXUP=3), twice per row; K_WAYS=2 variants at 17-64 rows (split,
# BN 128 with two 64-row pieces per consumer, two wgmma groups in flight); our kernels' device times (torch.profiler)
# beside cuBLAS's, to part the kernel from the launch gaps
PLAN7_TABLE = [("policy", None), ("policy_noforms", ("noforms", {})), ("policy_again", None),
               ("policy_noforms_again", ("noforms", {}))]
PLAN7 = [
    ((128, 4096, 4096), PLAN7_TABLE + [("policy_nk", ("nk", {})), ("kw64_64_s6_wait0", dict(KW64, IN_FLIGHT=0)),
                                       ("kw64_64_s6_if2", dict(KW64, IN_FLIGHT=2)),
                                       ("kw64_64_s5", dict(KW64, STAGES=5))], ("bf16", "f32")),
    ((100, 4096, 4096), PLAN7_TABLE, ("bf16", "f32")),
    ((80, 4096, 4096), PLAN7_TABLE[:2], ("bf16", "f32")),
    ((64, 4096, 4096), [("policy", None), ("kw64_64_s6_split2", dict(KW64, SPLIT_K=2)),
                        ("kw64_64_s6_split2_if2", dict(KW64, SPLIT_K=2, IN_FLIGHT=2)),
                        ("kw64_128_s3_split4", dict(KW64, BN=128, STAGES=3, SPLIT_K=4)),
                        ("policy_again", None), ("kw64_64_s6_split2_again", dict(KW64, SPLIT_K=2))], ("bf16", "f32")),
    ((48, 4096, 4096), [("policy", None), ("kw64_64_s6_split2", dict(KW64, SPLIT_K=2))], ("bf16",)),
    ((32, 4096, 4096), [("policy", None), ("policy_nk", ("nk", {})), ("kw32_64_s8_split2", dict(KW32, SPLIT_K=2)),
                        ("kw32_64_s8_split2_if2", dict(KW32, SPLIT_K=2, IN_FLIGHT=2)),
                        ("kw32_128_s4_split4", dict(KW32, BN=128, STAGES=4, SPLIT_K=4)),
                        ("kw32_64_s8_split2_nk", ("nk", dict(KW32, SPLIT_K=2))),
                        ("policy_again", None), ("kw32_64_s8_split2_again", dict(KW32, SPLIT_K=2))], ("bf16", "f32")),
    ((16, 4096, 4096), [("policy", None), ("kw16_64_s8_split2", dict(KW16, SPLIT_K=2))], ("bf16",)),
]
# eighth call (G11): after the policy change (17-32 rows: K_WAYS split 2; 97-128 rows: K_WAYS unsplit) against the
# forms it replaced, alternated; 97 / 112 rows (A's last row tile 31 / 16 rows past M); 56 / 64 rows once more
OLD32 = dict(SW16, BM=32, INSTR=I32, BN=128, CONSUMERS=2, STAGES=10, SPLIT_K=4, K_WAYS=1)
PLAN8 = [
    ((32, 4096, 4096), [("policy", None), ("old32", OLD32), ("policy_again", None), ("old32_again", OLD32),
                        ("policy_nk", ("nk", {})), ("old32_nk", ("nk", OLD32))], ("bf16", "f32")),
    ((20, 4096, 4096), [("policy", None), ("old32", OLD32)], ("bf16",)),
    ((128, 4096, 4096), PLAN7_TABLE[:2], ("bf16",)),
    ((112, 4096, 4096), PLAN7_TABLE, ("bf16", "f32")),
    ((97, 4096, 4096), PLAN7_TABLE[:2], ("bf16", "f32")),
    ((64, 4096, 4096), [("policy", None), ("kw64_64_s6_split2_if2", dict(KW64, SPLIT_K=2, IN_FLIGHT=2)),
                        ("kw64_64_s6_split2", dict(KW64, SPLIT_K=2))], ("bf16", "f32")),
    ((56, 4096, 4096), [("policy", None), ("kw64_64_s6_split2_if2", dict(KW64, SPLIT_K=2, IN_FLIGHT=2))], ("bf16",)),
    # whether rows past M cost the K_WAYS kernel time: A (and C) as given against A zero-padded to whole 64-row tiles
    ((80, 4096, 4096), [("kw64_64_s6_apad", ("kwpad", KW64))], ("bf16",)),
    ((100, 4096, 4096), [("kw64_64_s6_apad", ("kwpad", KW64))], ("bf16",)),
]
# ninth call (G11): K_WAYS with the last row tile shifted back to end at M (M_SHIFT=1: no rows past M in A's box)
# against the policy, alternated, at 65-128 rows
KWS = dict(KW64, M_SHIFT=1)
PLAN9 = [
    ((80, 4096, 4096), [("policy", None), ("kw64_64_s6_shift", KWS), ("policy_again", None),
                        ("kw64_64_s6_shift_again", KWS)], ("bf16", "f32")),
    ((100, 4096, 4096), [("policy", None), ("kw64_64_s6_shift", KWS), ("policy_again", None),
                         ("kw64_64_s6_shift_again", KWS)], ("bf16", "f32")),
    ((72, 4096, 4096), [("policy", None), ("kw64_64_s6_shift", KWS)], ("bf16",)),
    ((112, 4096, 4096), [("policy", None), ("kw64_64_s6_shift", KWS)], ("bf16",)),
    ((128, 4096, 4096), [("policy", None), ("kw64_64_s6_shift", KWS)], ("bf16",)),
]
# tenth call (G14): K split over the two blocks of a cluster, rank 1's sum read by rank 0 through distributed shared
# memory (gemm_splitk_swap CLUSTER_K=2 with K_WAYS=2: no slots, no splitk_sum), one row tile of BM = M rounded up to 8
# (wgmma n48 / n80 / n104 / n112) where it fits, alternated with the policy
CK = dict(KW, FIXUP=0, CLUSTER_K=2)


def _ck(bm, stages):
    return dict(CK, BM=bm, INSTR=getattr(tp.nv, f"wgmma_m64n{bm}k16_bf16"), STAGES=stages)


def _alt(tag, spec, twice=True):
    v = [("policy", None), (tag, spec)]
    return v + [("policy_again", None), (tag + "_again", spec)] if twice else v


PLAN10 = [
    ((32, 4096, 4096), _alt("ck32_s8", _ck(32, 8)), ("bf16", "f32")),
    ((64, 4096, 4096), _alt("ck64_s6", _ck(64, 6)), ("bf16", "f32")),
    ((80, 4096, 4096), _alt("ck80_s5", _ck(80, 5)) + [("ck80_s4", _ck(80, 4))], ("bf16", "f32")),
    ((100, 4096, 4096), _alt("ck104_s4", _ck(104, 4)), ("bf16", "f32")),
    ((128, 4096, 4096), _alt("ck128_s4", _ck(128, 4)) + [("ck128_s3", _ck(128, 3))], ("bf16", "f32")),
    ((48, 4096, 4096), _alt("ck48_s6", _ck(48, 6), twice=False), ("bf16",)),
    ((112, 4096, 4096), _alt("ck112_s4", _ck(112, 4), twice=False), ("bf16",)),
    ((16, 4096, 4096), _alt("ck16_s8", _ck(16, 8), twice=False), ("bf16",)),
    ((256, 4096, 4096), [("policy", None)], ("bf16",)),
]
# eleventh call (G14): the policy with the cluster split (32-128 rows) against the forms it replaced ("before": 32 rows
# K_WAYS split 2 into slots, 33-64 rows gemm_splitk split 4 into slots, 65-128 rows K_WAYS unsplit over two shifted row
# tiles), alternated; two wgmma groups in flight per consumer (IN_FLIGHT=2); 96 rows (n96, not measured before)
BEFORE32 = dict(KW32, SPLIT_K=2)
BEFORE_SPLITK = dict(BM=64, BN=128, CONSUMERS=1, INSTR=I128, IN_FLIGHT=1, STAGES=6, SPLIT_K=4, FIXUP=3)


def _table(before, extra=()):
    return [("policy", None), ("before", before), ("policy_again", None), ("before_again", before), *extra]


PLAN11 = [
    ((32, 4096, 4096), _table(BEFORE32, [("policy_if2", ("policy", dict(IN_FLIGHT=2)))]), ("bf16", "f32")),
    ((64, 4096, 4096), _table(BEFORE_SPLITK, [("policy_if2", ("policy", dict(IN_FLIGHT=2)))]), ("bf16", "f32")),
    ((80, 4096, 4096), _table(KWS, [("policy_if2", ("policy", dict(IN_FLIGHT=2)))]), ("bf16", "f32")),
    ((96, 4096, 4096), _table(KWS), ("bf16", "f32")),
    ((128, 4096, 4096), _table(KWS), ("bf16", "f32")),
    ((40, 4096, 4096), _table(BEFORE_SPLITK)[:2], ("bf16",)),
    ((72, 4096, 4096), _table(KWS)[:2], ("bf16",)),
    ((120, 4096, 4096), _table(KWS)[:2], ("bf16",)),
    ((100, 2200, 1000), _table(KWS)[:2], ("bf16",)),
]
# twelfth call (G14): where the cluster split starts paying in K (it lost at 100 x 2200 x 1000, 16 k-tiles; the policy
# takes it from 48): the form forced against the forms before at 2048 / 3072 (32 / 48 k-tiles)
def _forced_ck(m):
    bm = min(b for b in gemm_hopper.CLUSTER_SPLIT_STAGES if b >= m)
    return _ck(bm, gemm_hopper.CLUSTER_SPLIT_STAGES[bm])


PLAN12 = [
    ((32, 4096, 2048), [("before", BEFORE32), ("ck", _forced_ck(32)), ("before_again", BEFORE32),
                        ("ck_again", _forced_ck(32))], ("bf16",)),
    ((64, 4096, 2048), [("before", BEFORE_SPLITK), ("ck", _forced_ck(64)), ("before_again", BEFORE_SPLITK),
                        ("ck_again", _forced_ck(64))], ("bf16",)),
    ((100, 4096, 2048), [("before", KWS), ("ck", _forced_ck(100)), ("before_again", KWS),
                         ("ck_again", _forced_ck(100))], ("bf16",)),
    ((128, 4096, 2048), [("before", KWS), ("ck", _forced_ck(128))], ("bf16",)),
    ((80, 4096, 2048), [("before", KWS), ("ck", _forced_ck(80))], ("bf16",)),
    ((32, 4096, 3072), [("before", BEFORE32), ("ck", _forced_ck(32))], ("bf16",)),
    ((64, 4096, 3072), [("before", BEFORE_SPLITK), ("ck", _forced_ck(64))], ("bf16",)),
    ((100, 4096, 3072), [("before", KWS), ("ck", _forced_ck(100))], ("bf16",)),
    ((128, 4096, 3072), [("before", KWS), ("ck", _forced_ck(128))], ("bf16",)),
]
# thirteenth call (G14): the cluster split below 32 rows (n16 / n24 / n32 row tiles) against the policy there (swap-AB
# BN 128 split 4 into slots + splitk_sum), alternated; 16 x 4096 x 14336 (the LLM decode shape)
PLAN13 = [
    ((16, 4096, 4096), [("policy", None), ("ck16", _ck(16, 8)), ("policy_again", None), ("ck16_again", _ck(16, 8))],
     ("bf16", "f32")),
    ((24, 4096, 4096), [("policy", None), ("ck24", _ck(24, 8)), ("policy_again", None), ("ck24_again", _ck(24, 8)),
                        ("ck32", _ck(32, 8))], ("bf16",)),
    ((20, 4096, 4096), [("policy", None), ("ck24", _ck(24, 8)), ("ck32", _ck(32, 8))], ("bf16",)),
    ((28, 4096, 4096), [("policy", None), ("ck32", _ck(32, 8))], ("bf16",)),
    ((16, 4096, 14336), [("policy", None), ("ck16", _ck(16, 8))], ("bf16",)),
]
# fourteenth call (G19): the policy's cluster split re-timed with its closing cluster barrier relaxed (it was timed
# with the release / acquire barrier there), alternated twice with the forms before at N = K = 4096, and the split
# forced against the forms before at 16-48 k-tiles (where it starts paying: CLUSTER_SPLIT_MIN_K_TILES)
def _kscan(m, ks, before):
    return [((m, 4096, k), [("before", before), ("ck", _forced_ck(m))], ("bf16",)) for k in ks]


PLAN14 = [
    ((32, 4096, 4096), _table(BEFORE32), ("bf16",)),
    ((64, 4096, 4096), _table(BEFORE_SPLITK), ("bf16",)),
    ((80, 4096, 4096), _table(KWS), ("bf16",)),
    ((100, 4096, 4096), _table(KWS), ("bf16",)),
    ((128, 4096, 4096), _table(KWS), ("bf16",)),
    *_kscan(32, (1024, 2048, 3072), BEFORE32),
    *_kscan(64, (1024, 1536, 2048), BEFORE_SPLITK),
    *_kscan(80, (2048, 3072), KWS),
    *_kscan(100, (2048, 3072), KWS),
    *_kscan(128, (2048, 3072), KWS),
    ((24, 4096, 2048), [("policy", None), ("ck", _forced_ck(24))], ("bf16",)),
    ((24, 4096, 1536), [("policy", None), ("ck", _forced_ck(24))], ("bf16",)),
]
# fifteenth call (G19): the cluster split's sums exchanged by st.async (PUSH=1: tp.store_remote into the other
# rank's shared memory, completing its mbarrier; no cluster barrier after the k-loop, no fence, each rank stores half
# the tile) against the policy's barrier exchange, alternated; BM 96 with 4 stages, 112 / 128 with 3 (recv beside
# the rings); at short K forced against the policy there
def _push(m, stages=None):
    p = dict(_forced_ck(m), PUSH=1)
    return dict(p, STAGES=stages) if stages else p


PUSH_ON = ("policy", dict(PUSH=1))
PLAN15 = [
    ((32, 4096, 4096), _alt("push", PUSH_ON), ("bf16", "f32")),
    ((64, 4096, 4096), _alt("push", PUSH_ON), ("bf16", "f32")),
    ((80, 4096, 4096), _alt("push", PUSH_ON), ("bf16", "f32")),
    ((100, 4096, 4096), _alt("push", PUSH_ON), ("bf16", "f32")),
    ((24, 4096, 4096), _alt("push", PUSH_ON, twice=False), ("bf16",)),
    ((48, 4096, 4096), _alt("push", PUSH_ON, twice=False), ("bf16",)),
    ((96, 4096, 4096), _alt("push_s4", _push(96, 4), twice=False), ("bf16",)),
    ((112, 4096, 4096), _alt("push_s3", _push(112, 3), twice=False), ("bf16",)),
    ((128, 4096, 4096), _alt("push_s3", _push(128, 3)), ("bf16",)),
    ((16, 4096, 4096), [("policy", None), ("ck16_push", dict(_ck(16, 8), PUSH=1)), ("ck16", _ck(16, 8))], ("bf16",)),
    ((32, 4096, 1024), _alt("push", _push(32), twice=False), ("bf16",)),
    ((32, 4096, 512), _alt("push", _push(32), twice=False), ("bf16",)),
    ((64, 4096, 1024), _alt("push", _push(64), twice=False), ("bf16",)),
    ((64, 4096, 512), _alt("push", _push(64), twice=False), ("bf16",)),
    ((80, 4096, 1536), _alt("push", _push(80), twice=False), ("bf16",)),
    ((100, 4096, 2048), _alt("push", _push(100), twice=False), ("bf16",)),
    ((100, 4096, 3072), _alt("push", _push(100), twice=False), ("bf16",)),
    ((128, 4096, 3072), _alt("push_s3", _push(128, 3), twice=False), ("bf16",)),
]
# sixteenth call (G19): the policy with PUSH at rows not timed with it, against the barrier exchange (PUSH=0) or the
# forms before at short K; the pushed split below 17 rows (n8 / n16) against the split-4 policy there
PUSH_OFF = ("policy", dict(PUSH=0))
PLAN16 = [
    ((16, 4096, 4096), _alt("ck16_push", dict(_ck(16, 8), PUSH=1)), ("bf16", "f32")),
    ((8, 4096, 4096), _alt("ck8_push", dict(_ck(8, 8), PUSH=1)), ("bf16",)),
    ((1, 4096, 4096), _alt("ck8_push", dict(_ck(8, 8), PUSH=1), twice=False), ("bf16",)),
    ((16, 4096, 14336), _alt("ck16_push", dict(_ck(16, 8), PUSH=1), twice=False), ("bf16",)),
    ((20, 4096, 4096), [("policy", None), ("barrier", PUSH_OFF)], ("bf16",)),
    ((40, 4096, 4096), [("policy", None), ("barrier", PUSH_OFF)], ("bf16",)),
    ((56, 4096, 4096), [("policy", None), ("barrier", PUSH_OFF)], ("bf16",)),
    ((72, 4096, 4096), [("policy", None), ("barrier", PUSH_OFF)], ("f32",)),
    ((48, 4096, 512), [("policy", None), ("before", BEFORE_SPLITK)], ("bf16",)),
    ((24, 4096, 768), [("policy", None), ("before", dict(BEFORE32, BM=32, STAGES=8))], ("bf16",)),
    ((96, 4096, 1536), [("policy", None), ("before", KWS)], ("bf16",)),
    ((104, 4096, 2048), [("policy", None), ("before", KWS)], ("bf16",)),
]
# seventeenth call (G19): A multicast to pairs of column tiles (CLUSTER_N=2 with the pushed split: (1, 2, 2) clusters,
# A's L2 traffic halved, two release cluster barriers) against the policy. CLUSTER_N is not in the kernel: apply
# benchmarks/profile/g19_cluster_n.patch first (measured 2.3-2.9x slower, gemm-g19-pair-*.json: not kept)
PAIR = ("policy", dict(CLUSTER_N=2))
PLAN17 = [
    ((80, 4096, 4096), _alt("pair", PAIR), ("bf16",)),
    ((64, 4096, 4096), _alt("pair", PAIR, twice=False), ("bf16",)),
    ((100, 4096, 4096), _alt("pair", PAIR, twice=False), ("bf16",)),
    ((32, 4096, 4096), _alt("pair", PAIR, twice=False), ("bf16",)),
]
# eighteenth call (G23): what limits the pushed cluster split at 32-112 rows: its depth (stages per ring: if fewer cost
# nothing, the rings are not what waits), BM past M (n64 at 48 rows, n96 at 80: the instruction's N against A's box),
# 64 x 128 tiles (A read once per 128 columns, 64 blocks), B as (N, K); beside ncu (g23_call1.sh)
def _stages(m, s, push=1):
    return ("policy", dict(STAGES=s, PUSH=push))


PLAN18 = [
    ((64, 4096, 4096), [("policy", None), ("s5", _stages(64, 5)), ("s4", _stages(64, 4)), ("s3", _stages(64, 3)),
                        ("bn128_s3", dict(_push(64, 3), BN=128)), ("policy_again", None), ("s4_again", _stages(64, 4)),
                        ("policy_nk", ("nk", {}))], ("bf16",)),
    ((80, 4096, 4096), [("policy", None), ("s4", _stages(80, 4)), ("s3", _stages(80, 3)),
                        ("bm96_s4", _push(96, 4)), ("policy_again", None)], ("bf16",)),
    ((112, 4096, 4096), [("policy", None), ("s3", _stages(112, 3, 0)), ("push_s3", _push(112, 3)),
                         ("policy_again", None)], ("bf16",)),
    ((32, 4096, 4096), [("policy", None), ("s6", _stages(32, 6)), ("s4", _stages(32, 4)), ("policy_again", None)],
     ("bf16",)),
    ((48, 4096, 4096), [("policy", None), ("bm64", _push(64)), ("policy_again", None)], ("bf16",)),
]
# nineteenth call (G23): the policy with 4 stages per ring at BM 32-80 (CLUSTER_SPLIT_STAGES) alternated twice with
# the stages before (8 / 6 / 6 / 5); at BM 112 / 128 the pushed exchange in one tile (XCH=1) against the barrier one
def _before(m):
    bm = min(b for b in gemm_hopper.CLUSTER_SPLIT_STAGES if b >= m)
    return ("policy", dict(STAGES={32: 8, 48: 6, 64: 6, 80: 5}[bm]))


PLAN19 = [((m, 4096, 4096), _table(_before(m)), ("bf16",)) for m in (32, 64, 80)]
PLAN19 += [((m, 4096, 4096), _table(_before(m))[:2], ("bf16",)) for m in (48, 72)]
# 105-128 rows: the pushed exchange with XCH=1 (4 stages) against the barrier exchange (PUSH=0, 4 stages) before
BARRIER = ("policy", dict(PUSH=0, XCH=0))
PLAN19 += [((m, 4096, 4096), _table(BARRIER), ("bf16",)) for m in (112, 128)]
PLAN19 += [((112, 4096, 4096), _table(BARRIER)[:2], ("f32",))]
# twentieth call (G23): where in K the split with XCH starts paying at BM 112 / 128 (the thresholds, 48 / 64 k-tiles,
# were the barrier exchange's): forced against the policy there (K_WAYS over two shifted 64-row tiles, unsplit)
XCH_ON = lambda m: dict(_forced_ck(m), PUSH=1, XCH=1)     # noqa: E731
PLAN20 = [((112, 4096, 2048), _alt("xch", XCH_ON(112)), ("bf16",)), ((128, 4096, 3072), _alt("xch", XCH_ON(128)),
                                                                        ("bf16",)),
          ((112, 4096, 2560), _alt("xch", XCH_ON(112), twice=False), ("bf16",)),
          ((128, 4096, 2048), _alt("xch", XCH_ON(128), twice=False), ("bf16",))]
PLAN = [  # (shape, variants, output dtypes)
    ((16, 4096, 4096), DECODE, ("bf16", "f32")),
    ((64, 4096, 4096), DECODE, ("bf16", "f32")),
    ((128, 4096, 4096), SKINNY, ("bf16", "f32")),
    ((256, 4096, 4096), SKINNY, ("bf16", "f32")),
    ((1024, 1024, 1024), SMALL, ("bf16", "f32")),
    ((2048, 1024, 1024), SMALL[:3], ("bf16",)),
    ((3000, 5000, 4096), RAGGED, ("bf16",)),
    ((2051, 2045, 1000), RAGGED[:1], ("bf16", "f32")),
]
DT = {"bf16": (torch.bfloat16, tp.bf16), "f32": (torch.float32, tp.f32)}


def params_of(M, N, K, spec, out):
    """The full constexprs a variant launches with."""
    pol = gemm_hopper.policy(M, N, K, out, fixup=True)
    if spec is None:
        return pol
    if isinstance(spec, tuple) and spec[0] == "noforms":
        return gemm_hopper.policy(M, N, K, out, fixup=True, forms=False)
    if isinstance(spec, tuple):
        return {**pol, **spec[1]}   # (the policy laid under: "policy" with extras, "padded", "parts")
    return {**gemm_hopper.PRESETS["sm_90a"], **ZERO, **spec}


def _grid_ok(M, p):
    return gemm_hopper._cdiv(M, p["BM"]) % p.get("CLUSTER_M", 1) == 0


def sums_row(M, N, K, g, out_t, out):
    """splitk_sum alone on the decode policy's slots at row blocks BR = 1, 2, 4, 8 (grid cdiv(M, BR) x N / 128)."""
    p = gemm_hopper.policy(M, N, K, out, fixup=True)
    ws = torch.randn(gemm_hopper.workspace_shapes(M, N, p)[0], device="cuda", generator=g)
    c = torch.empty(M, N, device="cuda", dtype=out_t)
    rows = ws.shape[0] // p["SPLIT_K"]
    ref = sum(ws[q * rows:q * rows + M].double() for q in range(p["SPLIT_K"]))
    summer = gemm_hopper.splitk_sum_bf16 if out == tp.bf16 else gemm_hopper.splitk_sum
    r = {"policy": gb._policy_text(p)}
    for br in (1, 2, 4, 8):
        launcher = summer[(gemm_hopper._cdiv(M, br), gemm_hopper._cdiv(N, 128))]

        def fn(launcher=launcher, br=br):
            launcher(ws, c, SPLIT_K=p["SPLIT_K"], BR=br)

        c.fill_(float("nan"))
        fn()
        r[f"BR{br}_err"] = gb.rel(c, ref)
        r[f"BR{br}_us"] = min(gb.timeit_median(fn), gb.timeit_median(fn)) * 1e6
    r["us"] = r["BR8_us"]
    r["ratio"] = r["BR8_us"] / min(r[f"BR{b}_us"] for b in (1, 2, 4, 8))
    r["rel_err"] = max(r[f"BR{b}_err"] for b in (1, 2, 4, 8))
    r["torch_us"] = float("nan")
    return r


def apad_row(M, N, K, g, out_t, out):
    """gemm_splitk alone (the decode policy) on A as given (M rows) and on A copied into a zeroed (64, K) buffer:
    whether the tile rows past M that the A copy zero-fills cost time."""
    p = gemm_hopper.policy(M, N, K, out, fixup=True)
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    ap = torch.zeros(p["BM"], K, device="cuda", dtype=torch.bfloat16)
    ap[:M] = a
    b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
    r = {"policy": gb._policy_text(p)}
    for tag, aa in (("as_given", a), ("padded", ap)):
        c = torch.empty(aa.shape[0], N, device="cuda", dtype=out_t)
        plan = gemm_hopper._Plan(aa.shape[0], N, K, out, p)
        ws = plan.buffer("fixup_ws", c, plan.shapes[0], torch.float32)
        locks = plan.buffer("fixup_locks", c, plan.shapes[1], torch.int32)

        def fn(plan=plan, aa=aa, c=c, ws=ws, locks=locks):
            plan.launcher(aa, b, c, ws, locks, target="sm_90a", **plan.params)

        r[f"{tag}_us"] = min(gb.timeit_median(fn), gb.timeit_median(fn)) * 1e6
    r["us"] = r["as_given_us"]
    r["ratio"] = r["as_given_us"] / r["padded_us"]
    r["rel_err"] = float("nan")
    r["torch_us"] = float("nan")
    return r


def kwpad_row(M, N, K, g, out_t, out, spec):
    """The constexprs `spec` through launch on A (M rows) and on A copied into a zeroed (cdiv(M, BM) * BM, K) buffer
    (C as many rows): whether the row tile's rows past M (zero-filled by the TMA box) cost time."""
    p = {**gemm_hopper.PRESETS["sm_90a"], **ZERO, **spec}
    mp = gemm_hopper._cdiv(M, p["BM"]) * p["BM"]
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
    ap = torch.zeros(mp, K, device="cuda", dtype=torch.bfloat16)
    ap[:M] = a
    c = torch.full((M, N), float("nan"), device="cuda", dtype=out_t)
    cp = torch.full((mp, N), float("nan"), device="cuda", dtype=out_t)
    gemm_hopper.launch(a, b, c, **p)
    gemm_hopper.launch(ap, b, cp, **p)
    ref = a.double() @ b.double()
    r = {"policy": gb._policy_text(p) + " K_WAYS=2", "rel_err": max(gb.rel(c, ref), gb.rel(cp[:M], ref))}
    for tag, (aa, cc) in (("as_given", (a, c)), ("padded", (ap, cp))):
        r[f"{tag}_us"] = min(gb.timeit_median(lambda aa=aa, cc=cc: gemm_hopper.launch(aa, b, cc, **p)),
                             gb.timeit_median(lambda aa=aa, cc=cc: gemm_hopper.launch(aa, b, cc, **p))) * 1e6
    r["us"] = r["as_given_us"]
    r["ratio"] = r["as_given_us"] / r["padded_us"]
    r["torch_us"] = float("nan")
    return r


def nk_row(M, N, K, g, out_t, out, extra):
    """gemm_splitk_swap with B given as (N, K) (B_NK=1: an nn.Linear weight read in place) at the shape's policy
    (extra = {}) or at `extra`'s swap-AB constexprs, against cuBLAS's F.linear (torch.matmul(a, w.T)) on the same
    inputs; the slots' sum launched after it where the constexprs split K."""
    from stdlib_kernels import gemm_splitk_swap as gs

    p = {**gemm_hopper.policy(M, N, K, out, fixup=True), **extra, "B_NK": 1}
    if not p.get("SWAP_AB"):
        return {"error": "the policy here is not swap-AB", "policy": gb._policy_text(p)}
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    w = torch.randn(N, K, device="cuda", generator=g).bfloat16()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=out_t)
    kp = gemm_hopper.kernel_params(p)
    kernel = gs.gemm_splitk_swap_nk_bf16 if out == tp.bf16 and kp["SPLIT_K"] == 1 else gs.gemm_splitk_swap_nk
    launcher = kernel[gemm_hopper.grid_of(M, N, p)]
    split = kp["SPLIT_K"] > 1
    ws = torch.zeros(gemm_hopper.workspace_shapes(M, N, {**p, "FIXUP": 3})[0] if split else (1, 1), device="cuda")
    locks = torch.zeros(1, device="cuda", dtype=torch.int32)
    summer = (gemm_hopper.splitk_sum_bf16 if out == tp.bf16 else gemm_hopper.splitk_sum)[
        (gemm_hopper._cdiv(M, 8), gemm_hopper._cdiv(N, 128))] if split else None
    cw = c if not split else torch.empty(M, N, device="cuda")      # (the split kernel's C, unused: f32-typed)

    def fn():
        launcher(a, w, cw, ws, locks, target="sm_90a", **kp)
        if summer is not None:
            summer(ws, c, SPLIT_K=kp["SPLIT_K"])

    fn()
    ref = a.double() @ w.double().T
    err = gb.rel(c, ref)
    peer = (lambda: torch.matmul(a, w.T)) if out_t == torch.bfloat16 else (lambda: torch.mm(a, w.T, out_dtype=out_t))
    err_torch = gb.rel(peer(), ref)
    t, t_torch = gb.timeit_median(fn), gb.timeit_median(peer)
    t, t_torch = min(t, gb.timeit_median(fn)), min(t_torch, gb.timeit_median(peer))
    return {"us": t * 1e6, "torch_us": t_torch * 1e6, "ratio": t_torch / t, "rel_err": err, "torch_rel_err": err_torch,
            "policy": gb._policy_text(p) + f" SWAP_AB CLUSTER_M={kp.get('CLUSTER_M', 1)} B_NK"
            + (" K_WAYS=2" if kp.get("K_WAYS") == 2 else "")}


def build_items(only, plan):
    items = {}
    for (M, N, K), variants, outs in plan:
        for tag, spec in variants:
            if only and not re.search(only, tag):
                continue
            for o in outs:
                out = DT[o][1]
                p = params_of(M, N, K, spec, out)
                NB = N if not (isinstance(spec, tuple) and spec[0] == "padded") else -(-N // 64) * 64
                if isinstance(spec, tuple) and spec[0] in ("nk", "kwpad"):
                    continue    # (built on first use)
                kernel, kp = gemm_hopper.plan_kernel(M, NB, out, p, K)
                items[(id(kernel), tuple(sorted((k, repr(v)) for k, v in kp.items())))] = (M, NB, K, out, p)
    return list(items.values())


def precompile(only, workers, plan):
    gb.build_all(build_items(only, plan), workers)


def padded_row(M, N, K, g, out_t, out):
    """The policy's kernel on B copied beforehand into (K, NB) with NB a multiple of 64 (128-byte rows), C (M, N);
    the copy itself timed apart."""
    p = gemm_hopper.policy(M, N, K, out, fixup=True)
    NB = -(-N // 64) * 64
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
    bp = torch.zeros(K, NB, device="cuda", dtype=torch.bfloat16)
    bp[:, :N] = b
    c = torch.full((M, N), float("nan"), device="cuda", dtype=out_t)
    kernel = gemm_hopper.kernel_for(out, pad_b=True)
    kp = gemm_hopper.kernel_params(p)
    launcher = kernel[gemm_hopper.grid_of(M, N, p)]

    def fn():
        launcher(a, bp, c, target="sm_90a", **kp)

    fn()
    ref = a.double() @ b.double()
    err = gb.rel(c, ref)
    t = min(gb.timeit_median(fn), gb.timeit_median(fn))
    t_copy = gb.timeit_median(lambda: bp[:, :N].copy_(b))
    t_torch = min(gb.timeit_median(lambda: torch.matmul(a, b)), gb.timeit_median(lambda: torch.matmul(a, b)))
    return {"us": t * 1e6, "copy_us": t_copy * 1e6, "torch_us": t_torch * 1e6, "ratio": t_torch / t,
            "ratio_with_copy": t_torch / (t + t_copy), "rel_err": err, "policy": gb._policy_text(p)}


def parts_row(M, N, K, g, out_t, out):
    """The policy's split GEMM (FIXUP=3) timed in its parts: gemm_splitk alone, splitk_sum alone, and both."""
    p = gemm_hopper.policy(M, N, K, out, fixup=True)
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=out_t)
    gemm_hopper.launch(a, b, c)
    ref = a.double() @ b.double()
    err = gb.rel(c, ref)
    plan = gemm_hopper._Plan(M, N, K, out, p)
    if plan.summer is None:
        return {"error": "the policy here is not FIXUP=3", "policy": gb._policy_text(p)}
    ws = plan.buffer("fixup_ws", c, plan.shapes[0], torch.float32)
    locks = plan.buffer("fixup_locks", c, plan.shapes[1], torch.int32)
    prm = plan.params

    def gemm():
        plan.launcher(a, b, c, ws, locks, target="sm_90a", **prm)

    def summ():
        plan.summer(ws, c, SPLIT_K=prm["SPLIT_K"])

    t_g, t_s, t_b = (min(gb.timeit_median(f), gb.timeit_median(f)) for f in (gemm, summ, lambda: plan(a, b, c,
                                                                                                       "sm_90a")))
    t_torch = gb.timeit_median(lambda: torch.matmul(a, b)) if out_t == torch.bfloat16 else float("nan")
    return {"us": t_b * 1e6, "gemm_us": t_g * 1e6, "sum_us": t_s * 1e6, "torch_us": t_torch * 1e6,
            "ratio": t_torch / t_b, "rel_err": err, "policy": gb._policy_text(p),
            "B_TBps_gemm_alone": K * N * 2 / t_g / 1e12}


def cublas_kernels(M, N, K, out_t, mm_f32):
    """What cuBLAS launches for one call (names, device us each), from torch.profiler over 10 calls."""
    from torch.profiler import ProfilerActivity, profile

    a = torch.randn(M, K, device="cuda").bfloat16()
    b = torch.randn(K, N, device="cuda").bfloat16()
    fn = (lambda: mm_f32(a, b)) if (out_t == torch.float32 and mm_f32) else (lambda: torch.matmul(a, b))
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
    rows = []
    for ev in prof.key_averages():
        if ev.device_type is not None and "CUDA" in str(ev.device_type) and ev.count:
            us = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
            rows.append({"kernel": ev.key[:200], "calls": ev.count, "us_each": us / ev.count})
    return rows


def our_kernels(M, N, K, out_t, params=None):
    """What the policy (or `params`) through `launch` runs for one call (names, device us each), from torch.profiler
    over 10 calls, as `cublas_kernels` does for cuBLAS: the kernels' own time, apart from the gaps between launches."""
    from torch.profiler import ProfilerActivity, profile

    a = torch.randn(M, K, device="cuda").bfloat16()
    b = torch.randn(K, N, device="cuda").bfloat16()
    c = torch.empty(M, N, device="cuda", dtype=out_t)
    given = {} if params is None else params
    for _ in range(3):
        gemm_hopper.launch(a, b, c, **given)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            gemm_hopper.launch(a, b, c, **given)
        torch.cuda.synchronize()
    rows = []
    for ev in prof.key_averages():
        if ev.device_type is not None and "CUDA" in str(ev.device_type) and ev.count:
            us = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
            rows.append({"kernel": ev.key[:200], "calls": ev.count, "us_each": us / ev.count})
    return rows


def ncu_target(which, M, N, K, plan="5"):
    """Run one side 30 times (after a warm-up) for ncu to pick launches from (--launch-skip / --launch-count):
    "ours" (the policy through launch), "cublas", or a variant tag of `plan` (5 unless given) at this shape."""
    g = torch.Generator(device="cuda").manual_seed(15)
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    fn = (lambda: gemm_hopper.launch(a, b, c)) if which == "ours" else (lambda: torch.matmul(a, b))
    if which not in ("ours", "cublas"):
        plans = {"5": PLAN5, "18": PLAN18}
        spec = next(sp for (shape, variants, _) in plans[plan] if shape == (M, N, K) for tag, sp in variants
                    if tag == which)
        p = params_of(M, N, K, spec, tp.bf16)

        def fn():
            gemm_hopper.launch(a, b, c, **p)
    for _ in range(30):
        fn()
    torch.cuda.synchronize()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--name", default="gemm-g8-small")
    ap.add_argument("--only", default=None, help="regex over the variant tags")
    ap.add_argument("--precompile", type=int, default=0)
    ap.add_argument("--ncu-target", default=None)
    ap.add_argument("--shape", default="16,4096,4096")
    ap.add_argument("--plan", default="1", help="1 / 2: the first / second call's sweep, 3: the table, 4: swap at "
                    "32-64 rows, 5: swap-AB in clusters, B as (N, K), 128 x 64 clusters, 6: two consumers over one "
                    "tile, alternate k-tiles (K_WAYS=2), 7: the policy with K_WAYS against the policy before, our "
                    "kernels' device times, 8: after the policy change, 9: K_WAYS with M_SHIFT, 10: K split over a "
                    "cluster's two blocks (CLUSTER_K=2), 11: the policy with it against the forms it replaced, "
                    "12: where in K the cluster split starts paying, 13: the cluster split below 32 rows, 14: the "
                    "cluster split re-timed with its relaxed closing barrier, and its K thresholds, 15: its sums "
                    "exchanged by st.async (PUSH=1), 16: the policy with PUSH at more rows, n8 / n16, 17: A "
                    "multicast to pairs of column tiles (CLUSTER_N=2), 18: the pushed split's stages, BM, "
                    "BN 128 (G23), 19: 4 stages per ring at BM 32-80 against the stages before, XCH at BM 112 / "
                    "128, 20: XCH forced at shorter K")
    args = ap.parse_args(argv)
    if args.ncu_target:
        ncu_target(args.ncu_target, *(int(x) for x in args.shape.split(",")), plan=args.plan)
        return
    plan = {"1": PLAN, "2": PLAN2, "3": PLAN3, "4": PLAN4, "5": PLAN5, "6": PLAN6, "7": PLAN7, "8": PLAN8,
            "9": PLAN9, "10": PLAN10, "11": PLAN11, "12": PLAN12, "13": PLAN13, "14": PLAN14, "15": PLAN15,
            "16": PLAN16, "17": PLAN17, "18": PLAN18, "19": PLAN19, "20": PLAN20}[args.plan]
    if args.precompile:
        precompile(args.only, args.precompile, plan)
    props = torch.cuda.get_device_properties(0)
    dev = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    mm_f32 = gb._mm_f32out()
    g = torch.Generator(device="cuda").manual_seed(15)
    res = {"device": props.name, "torch": torch.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"), "timing": "median of 15 graph replays of 20 calls, ours and "
           "cuBLAS alternated twice, the better of two medians each", "rows": {}, "cublas_kernels": {}}
    path = Path(args.out) / f"{args.name}-{dev}.json"
    Path(args.out).mkdir(parents=True, exist_ok=True)
    for (M, N, K), variants, outs in plan:
        key = f"{M}x{N}x{K}"
        row = res["rows"].setdefault(key, {})
        for o in outs:
            out_t, out = DT[o]
            try:
                if (args.plan in ("1", "5", "6", "7", "8", "10") or variants is MID or variants is PITCH
                        or (args.plan == "3" and M <= 32)):
                    res["cublas_kernels"][f"{key}/{o}"] = cublas_kernels(M, N, K, out_t, mm_f32)
            except Exception as e:  # noqa: BLE001 - the profiler is a side note
                res["cublas_kernels"][f"{key}/{o}"] = f"{type(e).__name__}: {e}"[:200]
            if args.plan in ("7", "8", "9", "10", "11", "18"):
                try:
                    res.setdefault("our_kernels", {})[f"{key}/{o}"] = our_kernels(M, N, K, out_t)
                except Exception as e:  # noqa: BLE001 - a side note too
                    res.setdefault("our_kernels", {})[f"{key}/{o}"] = f"{type(e).__name__}: {e}"[:200]
            if args.plan == "10":   # the cluster-split form's own kernel time (no second kernel to add)
                tag, spec = next(((t, sp) for t, sp in variants if t.startswith("ck")), (None, None))
                if tag is not None:
                    try:
                        res["our_kernels"][f"{key}/{o}/{tag}"] = our_kernels(
                            M, N, K, out_t, params_of(M, N, K, spec, out))
                    except Exception as e:  # noqa: BLE001
                        res["our_kernels"][f"{key}/{o}/{tag}"] = f"{type(e).__name__}: {e}"[:200]
            for tag, spec in variants:
                if args.only and not re.search(args.only, tag):
                    continue
                name = f"{tag}/{o}"
                try:
                    if isinstance(spec, tuple) and spec[0] == "padded":
                        r = padded_row(M, N, K, g, out_t, out)
                    elif isinstance(spec, tuple) and spec[0] == "nk":
                        r = nk_row(M, N, K, g, out_t, out, spec[1])
                        if "error" in r:
                            print(f"{key:16} {name:34} {r['error']}", flush=True)
                            row[name] = r
                            continue
                    elif isinstance(spec, tuple) and spec[0] == "kwpad":
                        r = kwpad_row(M, N, K, g, out_t, out, spec[1])
                        print(f"{key:16} {name:34} as given {r['as_given_us']:.2f} us, A padded to whole row tiles "
                              f"{r['padded_us']:.2f} us", flush=True)
                    elif isinstance(spec, tuple) and spec[0] in ("sums", "apad"):
                        r = (sums_row if spec[0] == "sums" else apad_row)(M, N, K, g, out_t, out)
                        print(f"{key:16} {name:34} " + " ".join(f"{k} {v:.3g}" for k, v in r.items()
                                                                  if k.endswith("_us")), flush=True)
                    elif isinstance(spec, tuple) and spec[0] == "parts":
                        r = parts_row(M, N, K, g, out_t, out)
                        print(f"{key:16} {name:34} gemm {r.get('gemm_us', 0):.2f} us, sum {r.get('sum_us', 0):.2f}, "
                              f"B at {r.get('B_TBps_gemm_alone', 0):.2f} TB/s (gemm alone)", flush=True)
                    else:
                        p = params_of(M, N, K, spec, out)
                        if not _grid_ok(M, p):
                            continue
                        r0 = gb.f32out_row(M, N, K, g, mm_f32, out=out_t, params=p)
                        r = {k: r0[k] for k in ("us", "torch_us", "ratio", "rel_err", "torch_rel_err", "registers",
                                                "spills")}
                        r["policy"] = gb._policy_text(p) + (f" CLUSTER_M={p['CLUSTER_M']}" if p.get("CLUSTER_M")
                                                            else "") + (" SLOT_ROWS=1" if p.get("SLOT_ROWS") else "") \
                            + (" SWAP_AB" if p.get("SWAP_AB") else "") + (" K_WAYS=2" if p.get("K_WAYS") == 2 else "") \
                            + (" M_SHIFT" if p.get("M_SHIFT") else "") \
                            + (f" CLUSTER_K={p['CLUSTER_K']}" if p.get("CLUSTER_K", 1) > 1 else "") \
                            + (" PUSH" if p.get("PUSH") else "") + (" XCH" if p.get("XCH") else "") \
                            + (" CLUSTER_N=2" if p.get("CLUSTER_N") == 2 else "")
                except Exception as e:  # noqa: BLE001 - a variant that fails here: say so, go on
                    print(f"{key:16} {name:34} FAILED {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)
                    row[name] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
                    continue
                row[name] = r
                print(f"{key:16} {name:34} {r['us']:8.2f} us  cuBLAS {r['torch_us']:7.2f}  x {r['ratio']:.2f}  "
                      f"err {r['rel_err']:.1e}  {r.get('registers', '')}/{r.get('spills', '')}  {r['policy']}"
                      + (f"  copy {r['copy_us']:.1f} us, with copy x {r['ratio_with_copy']:.2f}" if "copy_us" in r
                         else ""), flush=True)
                torch.cuda.empty_cache()
        path.write_text(json.dumps(res, indent=1))
    for who, table in (("cuBLAS", res["cublas_kernels"]), ("ours", res.get("our_kernels", {}))):
        for k, v in table.items():
            print(who, k, v if isinstance(v, str) else [(x["kernel"][:90], x["calls"], round(x["us_each"], 2))
                                                        for x in v], flush=True)
    path.write_text(json.dumps(res, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
