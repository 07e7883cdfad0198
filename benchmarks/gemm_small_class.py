"""Issue 15, the small class (<= 1024^3) and its edges (G16): gemm_hopper's policy and candidate forms against cuBLAS
on the same inputs, in one run, with the device time of each side's kernels (torch.profiler) beside the graph time,
so that the fixed cost of a launch (prologue, first loads, epilogue) can be told from the cost per k-tile.

    python benchmarks/gemm_small_class.py [--plan diag|confirm|cluster|g22|g22b|g29|g29b|g29c|g29d|g33|g33b|g33c]
                                          [--out DIR] [--name STEM] [--only REGEX] [--precompile N]

Every candidate's output is checked against float64 (on the GPU) before it is timed; graph times are
`benchmarks/gemm.py`'s rule (median of 15 CUDA-graph replays of 20 calls, ours and cuBLAS alternated twice, each the
better of its two medians); cuBLAS = torch.matmul bf16 (bf16 out) / torch.mm(out_dtype=float32) (f32 out). Device
times: torch.profiler over 10 calls after 3, per kernel. Variants run through `gemm_hopper.launch` with their
constexprs explicit (None: the shape's policy, as callers get it; ("policy", extra): the policy with `extra` over it;
("out", {"bf16": ..., "f32": ...}): full constexprs per output dtype; a dict: the constexprs over PRESETS with
SPLIT_K / EPILOGUE / FIXUP / MIN_BLOCKS 0 unless set).
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

I64, I128 = tp.nv.wgmma_m64n64k16_bf16, tp.nv.wgmma_m64n128k16_bf16
ZERO = dict(SPLIT_K=1, EPILOGUE=0, FIXUP=0, MIN_BLOCKS=0)
T64x128 = dict(BM=64, BN=128, CONSUMERS=1, INSTR=I128)
# cuBLAS's 1024^3 kernel (nvjet_sm90_tst_128x64_64x8_1x2_h, G8's profile) in our terms: a 128 x 64 tile of C^T (128
# columns of C by 64 rows), two consumer warpgroups, 8 stages, clusters of 2 row tiles sharing B's tile (multicast):
# gemm_splitk_swap unsplit with CLUSTER_M=2
SWAP128x64 = dict(SWAP_AB=1, BN=128, BM=64, CONSUMERS=2, INSTR=I64, IN_FLIGHT=1, SPLIT_K=1, FIXUP=3, STAGES=8)
# cuBLAS's 2048 x 1024 x 1024 kernel (nvjet_sm90_tst_128x128_64x6_2x1_v): 128 x 128 tiles in 2-block clusters
CL128 = dict(BN=128, INSTR=I128, IN_FLIGHT=0, CLUSTER_M=2)

SMALL = [
    ("policy", None, ("bf16", "f32")),
    ("64x128_s6_tma", ("policy", dict(EPILOGUE=2)), ("bf16", "f32")),
    ("swap128x64_cl2_s8", dict(SWAP128x64, CLUSTER_M=2), ("bf16", "f32")),
    ("swap128x64_cl2_s8_wait0", dict(SWAP128x64, CLUSTER_M=2, IN_FLIGHT=0), ("f32",)),
    ("swap128x64_s8", SWAP128x64, ("bf16", "f32")),
    ("128x64_s8_wait1", dict(BM=128, BN=64, CONSUMERS=2, INSTR=I64, IN_FLIGHT=1, STAGES=8), ("f32",)),
    ("128x64_s8_wait1_tma", dict(BM=128, BN=64, CONSUMERS=2, INSTR=I64, IN_FLIGHT=1, STAGES=8, EPILOGUE=2), ("bf16",)),
    ("64x128_cl2_s6_tma", dict(T64x128, IN_FLIGHT=0, STAGES=6, CLUSTER_M=2, EPILOGUE=2), ("bf16", "f32")),
]
MID = [
    ("policy", None, ("bf16", "f32")),
    ("128x128_cl2_s5_tma", dict(CL128, STAGES=5, EPILOGUE=2), ("bf16",)),
    ("128x128_cl2_s6", dict(CL128, STAGES=6), ("bf16", "f32")),
    ("swap128x128_cl2_s6", dict(SWAP128x64, BM=128, INSTR=I128, STAGES=6, CLUSTER_M=2), ("f32",)),
]
EDGE512 = [
    ("policy", None, ("bf16", "f32")),
    ("64x128_s6_nosplit", ("policy", dict(SPLIT_K=1)), ("bf16", "f32")),
    ("64x128_split2_fix3", ("policy", dict(SPLIT_K=2, FIXUP=3)), ("bf16",)),
    ("64x64_s8", dict(BM=64, BN=64, CONSUMERS=1, INSTR=I64, IN_FLIGHT=1, STAGES=8), ("bf16",)),
    ("swap128x64_s8", SWAP128x64, ("bf16",)),
]
PLAN_DIAG = [  # (shape, variants)
    ((1024, 1024, 1024), SMALL),
    ((2048, 1024, 1024), MID),
    ((512, 512, 512), EDGE512),
    ((768, 768, 768), [("policy", None, ("bf16", "f32")), ("64x128_s6_tma", ("policy", dict(EPILOGUE=2)), ("bf16",))]),
    # (M N K > 1024^3: the large class, 32 tiles of 128 x 256 split 4 with atomics; the small class's tiles instead)
    ((1024, 1024, 4096), [("policy", None, ("bf16", "f32")),
                          ("64x128_s6_epi1", dict(T64x128, IN_FLIGHT=1, STAGES=6, EPILOGUE=1), ("bf16",)),
                          ("64x128_s4", dict(T64x128, IN_FLIGHT=1, STAGES=4), ("f32",)),
                          ("64x128_s6_tma", dict(T64x128, IN_FLIGHT=1, STAGES=6, EPILOGUE=2), ("bf16", "f32")),
                          ("64x128_s4_split2_fix3_mb2", dict(T64x128, IN_FLIGHT=1, STAGES=4, SPLIT_K=2, FIXUP=3,
                                                             MIN_BLOCKS=2), ("bf16", "f32")),
                          ("swap128x64_cl2_s8", dict(SWAP128x64, CLUSTER_M=2), ("bf16",))]),
    # the fixed cost of one launch: the same grid with 1 and 4 k-tiles
    ((1024, 1024, 64), [("policy", None, ("bf16",))]),
    ((1024, 1024, 256), [("policy", None, ("bf16",))]),
    ((2048, 2048, 2048), [("policy", None, ("bf16", "f32"))]),
    ((3000, 5000, 4096), [("policy", None, ("bf16", "f32")), ("policy_again", None, ("f32",))]),
]
# call 2: the policy after G16's rows ("policy") alternated twice with the constexprs it replaced ("before"), per
# output dtype; the cluster forms' fixed cost against their cost per k-tile (1 and 64 k-tiles); two blocks per SM
OLD_SMALL = {"bf16": dict(T64x128, IN_FLIGHT=1, STAGES=6, EPILOGUE=1), "f32": dict(T64x128, IN_FLIGHT=1, STAGES=4)}
OLD_SPLIT2 = {o: dict(v, SPLIT_K=2) for o, v in OLD_SMALL.items()}
OLD_LARGE_SPLIT4 = {"bf16": dict(IN_FLIGHT=0, STAGES=3, EPILOGUE=2, PRODUCER_REGS=64, CONSUMER_REGS=216, SPLIT_K=4),
                    "f32": dict(IN_FLIGHT=0, STAGES=4, SPLIT_K=4)}


def _ab(before, outs=("bf16", "f32")):
    return [("policy", None, outs), ("before", ("out", before), outs), ("policy_again", None, outs),
            ("before_again", ("out", before), outs)]


CL_TMA = dict(T64x128, IN_FLIGHT=0, STAGES=6, CLUSTER_M=2, EPILOGUE=2)
MB2 = dict(BM=64, BN=64, CONSUMERS=1, INSTR=I64, IN_FLIGHT=1, STAGES=4, MIN_BLOCKS=2)
PLAN_CONFIRM = [
    ((512, 512, 512), _ab(OLD_SPLIT2)),
    ((640, 640, 640), _ab(OLD_SPLIT2, ("bf16",))[:2]),
    ((1024, 1024, 1024), _ab(OLD_SMALL, ("bf16",)) + [("64x64_s4_mb2", MB2, ("bf16", "f32"))]),
    ((768, 768, 768), _ab(OLD_SMALL, ("bf16",)) + [("64x64_s4_mb2", MB2, ("bf16",))]),
    ((1024, 1024, 4096), _ab(OLD_LARGE_SPLIT4)),
    ((512, 2048, 4096), _ab(OLD_LARGE_SPLIT4, ("bf16",))[:2]),
    ((1024, 1024, 64), [("policy", None, ("bf16",)), ("64x128_cl2_s6_tma", CL_TMA, ("bf16",)),
                        ("swap128x64_s8", SWAP128x64, ("bf16",)), ("swap128x64_cl2_s8", dict(SWAP128x64, CLUSTER_M=2),
                                                                   ("bf16",))]),
    ((1024, 1024, 4096), [("64x128_cl2_s6_tma", CL_TMA, ("bf16",)), ("swap128x64_s8", SWAP128x64, ("bf16",))]),
]
# next (not run): where a cluster's +1.5 us per launch goes (G16, NOTES): the 2x1 cluster with and without the
# multicast (MULTICAST=False: cluster dims, cluster barriers and remote releases, every block loading its own B), at 1,
# 16 and 64 k-tiles, beside the unclustered policy
CL_NOMC = dict(CL_TMA, MULTICAST=False)
PLAN_CLUSTER = [((1024, 1024, k), [("policy", None, ("bf16",)), ("64x128_cl2_s6_tma", CL_TMA, ("bf16",)),
                                   ("64x128_cl2_s6_tma_nomc", CL_NOMC, ("bf16",))]) for k in (64, 1024, 4096)]
# G22 (call 2): the 2x1 cluster form with relaxed barriers (gemm_cluster RELAXED=1: the opening barrier without
# release / acquire, the closing one replaced by the producer's tail) at 6 / 8 stages, and the unclustered policy at 8
# stages (wait_group 1 and 0), each alternated twice with the policy; bf16 out through the TMA store, f32 out from the
# registers (the policy's own epilogues)


def _cl(bm=64, bn=128, consumers=1, stages=8, f32_epi=0, cluster_m=2):
    base = dict(BM=bm, BN=bn, CONSUMERS=consumers, INSTR=I128 if bn == 128 else I64, IN_FLIGHT=0, CLUSTER_M=cluster_m,
                RELAXED=1, STAGES=stages)
    return ("out", {"bf16": dict(base, EPILOGUE=2), "f32": dict(base, EPILOGUE=f32_epi)})


S8 = ("policy", dict(STAGES=8))
S8W0 = ("policy", dict(STAGES=8, IN_FLIGHT=0))
BOTH = ("bf16", "f32")


def _again(rows):
    return rows + [(f"{t}_again", spec, outs) for t, spec, outs in rows]


PLAN_G22 = [
    ((1024, 1024, 64), [("policy", None, ("bf16",)), ("cl_rel_s8", _cl(), ("bf16",))]),
    ((1024, 1024, 1024), _again([("policy", None, BOTH), ("s8", S8, BOTH), ("cl_rel_s8", _cl(), BOTH)])
     + [("s8_w0", S8W0, BOTH), ("cl_rel_s6", _cl(stages=6), BOTH)]),
    ((1024, 1024, 4096), _again([("policy", None, BOTH), ("s8", S8, BOTH), ("cl_rel_s8", _cl(), BOTH)])),
    ((512, 2048, 4096), _again([("policy", None, BOTH), ("cl_rel_s8", _cl(), BOTH)]) + [("s8", S8, BOTH)]),
    ((768, 768, 768), _again([("policy", None, BOTH), ("cl_rel_s8", _cl(), BOTH)]) + [("s8", S8, BOTH)]),
    ((640, 640, 640), _again([("policy", None, BOTH), ("cl_rel_64x64_s8", _cl(bn=64), BOTH)])
     + [("cl_rel_s8", _cl(), ("bf16",))]),
    ((512, 512, 512), _again([("policy", None, BOTH), ("cl_rel_64x64_s8", _cl(bn=64), BOTH)])
     + [("cl_rel_s8", _cl(), ("bf16",))]),
    ((2048, 1024, 1024), _again([("policy", None, BOTH), ("cl128_rel_s6", _cl(bm=128, consumers=2, stages=6), BOTH)])),
]
# G22 call 3: cuBLAS's own tile (128 x 64, two consumer warpgroups of 64 x 64, 8 stages) unclustered (wait_group 0 /
# 1) and in relaxed 2x1 clusters, against the policy (bf16 now 8 stages)


def _h128x64(in_flight):
    base = dict(BM=128, BN=64, CONSUMERS=2, INSTR=I64, IN_FLIGHT=in_flight, STAGES=8)
    return ("out", {"bf16": dict(base, EPILOGUE=2), "f32": dict(base, EPILOGUE=0)})


CL128x64 = _cl(bm=128, bn=64, consumers=2)
PLAN_G22B = [
    ((1024, 1024, 1024), _again([("policy", None, BOTH), ("cl128x64_rel_s8", CL128x64, BOTH),
                                 ("h128x64_s8_w0", _h128x64(0), BOTH)])
     + [("h128x64_s8_w1", _h128x64(1), BOTH), ("cl_rel_s8", _cl(), BOTH)]),
    ((1024, 1024, 4096), _again([("policy", None, BOTH), ("cl128x64_rel_s8", CL128x64, BOTH),
                                 ("h128x64_s8_w0", _h128x64(0), BOTH)]) + [("cl_rel_s8", _cl(), BOTH)]),
    ((512, 2048, 4096), _again([("policy", None, BOTH), ("cl128x64_rel_s8", CL128x64, BOTH)])
     + [("cl_rel_s8", _cl(), BOTH)]),
    ((768, 768, 768), _again([("policy", None, BOTH), ("cl128x64_rel_s8", CL128x64, BOTH)])
     + [("h128x64_s8_w0", _h128x64(0), BOTH)]),
]
# G29 call 1 (rotated input sets, METHOD.md): bf16 out on 64 x 128 tiles in relaxed 2x1 clusters with the producer's
# tail before the epilogue (G22's untried form) and in clusters of 4 row tiles (B read once per 4: 12 KB per block per
# k-tile instead of 16 / 24), each alternated twice with the policy; f32 out: the policy (2x1 past 16 k-tiles) against
# clusters of 4
CL4 = _cl(cluster_m=4)
PLAN_G29 = [
    ((1024, 1024, 1024), _again([("policy", None, BOTH), ("cl_rel_s8", _cl(), ("bf16",)), ("cl4_rel_s8", CL4, BOTH)])),
    ((1024, 1024, 4096), _again([("policy", None, BOTH), ("cl_rel_s8", _cl(), ("bf16",)), ("cl4_rel_s8", CL4, BOTH)])),
    ((512, 2048, 4096), _again([("policy", None, ("bf16",)), ("cl_rel_s8", _cl(), ("bf16",)),
                                ("cl4_rel_s8", CL4, ("bf16",))])),
    ((768, 768, 768), _again([("policy", None, ("bf16",)), ("cl_rel_s8", _cl(), ("bf16",)),
                              ("cl4_rel_s8", CL4, ("bf16",))])),
    ((512, 512, 512), _again([("policy", None, ("bf16",)), ("cl4_rel_64x64_s8", _cl(bn=64, cluster_m=4), ("bf16",))])),
]
# G29 call 2: two consumer warpgroups over ONE output tile on alternate k-tiles (gemm_splitk_swap K_WAYS=2, unsplit:
# two rings of 4 stages, two wgmma chains in flight per SM; consumer 1's sum handed to consumer 0 through shared
# memory, C^T's tile stored transposed from the registers), cuBLAS's 128 x 64 tile of C (C^T 64 x 128: m64n128k16) and
# 64 x 128 (C^T 128 x 64: two m64n64k16 a k-step), unclustered and in 2x1 clusters (B multicast), each alternated
# twice with the policy (bf16 out: the relaxed 2x1 cluster since call 1)
KW = dict(SWAP_AB=1, K_WAYS=2, CONSUMERS=2, IN_FLIGHT=1, SPLIT_K=1, STAGES=4)
KW128x64 = dict(KW, BM=128, BN=64, INSTR=I128)
KW64x128 = dict(KW, BM=64, BN=128, INSTR=I64)
PLAN_G29B = [
    ((1024, 1024, 1024), _again([("policy", None, BOTH), ("kw128x64_s4", KW128x64, BOTH),
                                 ("kw128x64_s4_cl2", dict(KW128x64, CLUSTER_M=2), ("bf16",))])
     + [("kw64x128_s4", KW64x128, ("bf16",))]),
    ((1024, 1024, 4096), _again([("policy", None, BOTH), ("kw128x64_s4", KW128x64, BOTH),
                                 ("kw128x64_s4_cl2", dict(KW128x64, CLUSTER_M=2), ("bf16",))])
     + [("kw64x128_s4", KW64x128, ("bf16",))]),
    ((512, 2048, 4096), _again([("policy", None, ("bf16",)), ("kw128x64_s4", KW128x64, ("bf16",))])),
    ((768, 768, 768), _again([("policy", None, ("bf16",)), ("kw128x64_s4", KW128x64, ("bf16",))])),
]
# G29 call 3: the policy after K_WAYS 128 x 64 took the large class's small-tile rows of >= 64 k-tiles ("policy")
# against the relaxed 2x1 cluster it replaced ("cluster"), alternated twice; at 32 / 48 k-tiles (the cluster's
# rows) K_WAYS against the policy


def _cl_before():
    return ("out", {"bf16": dict(T64x128, IN_FLIGHT=0, CLUSTER_M=2, RELAXED=1, STAGES=8, EPILOGUE=2),
                    "f32": dict(T64x128, IN_FLIGHT=0, CLUSTER_M=2, RELAXED=1, STAGES=8, EPILOGUE=0)})


# K_WAYS with wait_group 0 (kw_w0): each ring's 4 stages all in flight (wait_group 1 keeps one stage back: 6 k-tiles
# of lookahead instead of 8), for the operands from DRAM
KW_W0 = dict(KW128x64, IN_FLIGHT=0)
PLAN_G29C = [(shape, _again([("policy", None, BOTH), ("cluster", _cl_before(), BOTH)]
                            + ([("kw_w0", KW_W0, BOTH)] if shape[1] != 512 else [])))
             for shape in ((1024, 1024, 4096), (512, 2048, 4096), (2048, 512, 4096), (1000, 1000, 4096),
                           (1024, 1024, 8192))] + [
    (shape, _again([("policy", None, BOTH), ("kw128x64_s4", KW128x64, BOTH)]))
    for shape in ((1024, 1024, 2048), (1024, 1024, 3072))]
# G29 call 4: the policy after SMALL_KWAYS was restricted (B's rows whole 128-byte lines, row tiles <= column tiles)
# against the cluster, alternated twice, at the measured wins and a ragged M it now takes
PLAN_G29D = [(shape, _again([("policy", None, BOTH), ("cluster", _cl_before(), BOTH)]))
             for shape in ((1024, 1024, 4096), (512, 2048, 4096), (1000, 1024, 4096))]
# G33 call 1: K_WAYS 128 x 64 (SMALL_KWAYS) in 1x2 clusters of adjacent column tiles sharing A's tile by multicast
# (cuBLAS's nvjet 128x64_64x8_1x2), with the relaxed coupling (RELAXED=1: the opening cluster barrier without
# release / acquire, the producer's tail in place of the closing one) and with the full cluster barriers (the coupling's
# cost); the B-multicast 2x1 form relaxed and not; each new form alternated twice with the policy
KW_CN2_REL = dict(KW128x64, CLUSTER_N=2, RELAXED=1)
KW_CN2 = dict(KW128x64, CLUSTER_N=2)
KW_CM2_REL = dict(KW128x64, CLUSTER_M=2, RELAXED=1)
KW_CM2 = dict(KW128x64, CLUSTER_M=2)
PLAN_G33 = [
    ((1024, 1024, 4096), _again([("policy", None, BOTH), ("kw_cn2_rel", KW_CN2_REL, BOTH),
                                 ("kw_cn2", KW_CN2, ("bf16",)), ("kw_cm2_rel", KW_CM2_REL, ("bf16",))])
     + [("kw_cm2", KW_CM2, ("bf16",))]),
    ((1024, 1024, 1024), _again([("policy", None, BOTH), ("kw_cn2_rel", KW_CN2_REL, BOTH), ("kw", KW128x64, ("bf16",)),
                                 ("kw_cn2", KW_CN2, ("bf16",))])),
    ((1024, 1024, 8192), _again([("policy", None, ("bf16",)), ("kw_cn2_rel", KW_CN2_REL, ("bf16",))])),
    ((512, 2048, 4096), _again([("policy", None, ("bf16",)), ("kw_cn2_rel", KW_CN2_REL, ("bf16",))])),
    ((768, 768, 768), _again([("policy", None, ("bf16",)), ("kw_cn2_rel", KW_CN2_REL, ("bf16",))])),
    ((512, 512, 512), _again([("policy", None, ("bf16",)), ("kw_cn2_rel", KW_CN2_REL, ("bf16",))])),
]
# G33 call 3: with the role-relative thread index in [0, size) (K_WAYS's hand-over and C^T store no longer signed
# divisions), the policy at the small class's shapes (both outputs), and K_WAYS against the relaxed cluster below its
# 64 k-tiles (1024^3: 16, 1024 x 1024 x 2048: 32; 768^3: 12), alternated twice
PLAN_G33B = [((1024, 1024, k), _again([("policy", None, BOTH), ("kw", KW128x64, BOTH)]))
             for k in (1024, 2048)] + [
    ((768, 768, 768), _again([("policy", None, ("bf16",)), ("kw", KW128x64, ("bf16",))]))] + [
    (shape, [("policy", None, BOTH)]) for shape in ((1024, 1024, 4096), (1024, 1024, 8192), (512, 2048, 4096),
                                                   (512, 512, 512))]
# G33 call 4: the policy with SMALL_KWAYS from 32 k-tiles against the relaxed cluster it replaced there, alternated
# twice (32-63 k-tiles, B's rows whole 128-byte lines, row tiles <= column tiles)
PLAN_G33C = [(shape, _again([("policy", None, BOTH), ("cluster", _cl_before(), BOTH)]))
             for shape in ((1024, 1024, 2048), (1024, 1024, 3072), (512, 2048, 2048), (1000, 1024, 3000))]
PLANS = {"diag": PLAN_DIAG, "confirm": PLAN_CONFIRM, "cluster": PLAN_CLUSTER, "g22": PLAN_G22, "g22b": PLAN_G22B,
         "g29": PLAN_G29, "g29b": PLAN_G29B, "g29c": PLAN_G29C,
         "g29d": PLAN_G29D, "g33": PLAN_G33, "g33b": PLAN_G33B,
         "g33c": PLAN_G33C}
DT = {"bf16": (torch.bfloat16, tp.bf16), "f32": (torch.float32, tp.f32)}


def params_of(M, N, K, spec, out):
    """The full constexprs a variant launches with."""
    pol = gemm_hopper.policy(M, N, K, out, fixup=True)
    if spec is None:
        return pol
    if isinstance(spec, tuple) and spec[0] == "out":       # full constexprs per output dtype
        return {**gemm_hopper.PRESETS["sm_90a"], **ZERO, **spec[1]["bf16" if out == tp.bf16 else "f32"]}
    if isinstance(spec, tuple):
        return {**pol, **spec[1]}
    return {**gemm_hopper.PRESETS["sm_90a"], **ZERO, **spec}


def device_kernels(fn):
    """[(kernel name, device us per call)] of `fn` from torch.profiler over 10 calls after 3."""
    from torch.profiler import ProfilerActivity, profile

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
            rows.append([ev.key[:120], round(us / 10, 3)])
    return rows


def build_items(plan, only):
    items = {}
    for (M, N, K), variants in plan:
        for tag, spec, outs in variants:
            if only and not re.search(only, tag):
                continue
            for o in outs:
                out = DT[o][1]
                p = params_of(M, N, K, spec, out)
                kernel, kp = gemm_hopper.plan_kernel(M, N, out, p, K)
                items[(id(kernel), tuple(sorted((k, repr(v)) for k, v in kp.items())))] = (M, N, K, out, p)
    return list(items.values())


def precompile(plan, only, workers):
    gb.build_all(build_items(plan, only), workers)


def _text(p):
    return gb._policy_text(p) + "".join(f" {k}={p[k]}" for k in ("CLUSTER_M", "CLUSTER_N", "SWAP_AB", "K_WAYS",
                                                                  "RELAXED") if p.get(k))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", default="diag", choices=sorted(PLANS))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--name", default="gemm-g16-small")
    ap.add_argument("--only", default=None, help="regex over the variant tags")
    ap.add_argument("--precompile", type=int, default=0)
    args = ap.parse_args(argv)
    plan = PLANS[args.plan]
    if args.precompile:
        precompile(plan, args.only, args.precompile)
    props = torch.cuda.get_device_properties(0)
    dev = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    mm_f32 = gb._mm_f32out()
    g = torch.Generator(device="cuda").manual_seed(16)
    res = {"device": props.name, "torch": torch.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"), "plan": args.plan,
           "timing": "graph: median of 15 CUDA-graph replays of 20 calls, ours and cuBLAS alternated twice, the better "
                     "of two medians each; rotated among input_sets sets of (a, b, c) where one set fits in the L2 "
                     "(us / ratio; the one-set figures beside: us_hot / ratio_hot); device: torch.profiler, 10 calls "
                     "after 3, one set, us per call per kernel",
           "rows": {}}
    path = Path(args.out) / f"{args.name}-{dev}.json"
    Path(args.out).mkdir(parents=True, exist_ok=True)
    for (M, N, K), variants in plan:
        key = f"{M}x{N}x{K}"
        row = res["rows"].setdefault(key, {})
        a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
        b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
        for o in ("bf16", "f32"):
            out_t, out = DT[o]
            if not any(o in outs for _, _, outs in variants):
                continue
            f32_peer = out == tp.f32 and mm_f32
            peer = (lambda a=a, b=b: mm_f32(a, b)) if f32_peer else (lambda a=a, b=b: torch.matmul(a, b))
            try:
                row[f"cublas/{o}"] = {"device": device_kernels(peer)}
            except Exception as e:  # noqa: BLE001 - the profiler is a side note
                row[f"cublas/{o}"] = {"error": f"{type(e).__name__}: {e}"[:200]}
            for tag, spec, outs in variants:
                if o not in outs or (args.only and not re.search(args.only, tag)):
                    continue
                name = f"{tag}/{o}"
                try:
                    p = params_of(M, N, K, spec, out)
                    if gemm_hopper._cdiv(M, p["BM"]) % p.get("CLUSTER_M", 1):
                        continue
                    r0 = gb.f32out_row(M, N, K, g, mm_f32, out=out_t, params=p)
                    r = {k: r0.get(k) for k in ("us", "torch_us", "ratio", "rel_err", "torch_rel_err", "registers",
                                                "spills", "input_sets", "us_hot", "torch_us_hot", "ratio_hot")}
                    r["policy"] = _text(p)
                    c = torch.empty(M, N, device="cuda", dtype=out_t)
                    r["device"] = device_kernels(lambda a=a, b=b, c=c, p=p: gemm_hopper.launch(a, b, c, **p))
                except Exception as e:  # noqa: BLE001 - a variant that fails here: say so, go on
                    print(f"{key:16} {name:28} FAILED {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)
                    row[name] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
                    continue
                row[name] = r
                dev_us = sum(x[1] for x in r["device"])
                cub = row.get(f"cublas/{o}", {}).get("device") or []
                hot = f"[hot x {r['ratio_hot']:.3f}]  " if r.get("ratio_hot") else ""
                print(f"{key:16} {name:28} {r['us']:8.2f} us  cuBLAS {r['torch_us']:7.2f}  x {r['ratio']:.3f}  {hot}"
                      f"device {dev_us:6.2f} vs {sum(x[1] for x in cub):6.2f}  err {r['rel_err']:.1e}  "
                      f"{r.get('registers', '')}/{r.get('spills', '')}  {r['policy']}", flush=True)
                torch.cuda.empty_cache()
            path.write_text(json.dumps(res, indent=1))
    for key, row in res["rows"].items():
        for name, r in row.items():
            if name.startswith("cublas/") and "device" in r:
                print("cuBLAS", key, name[7:], r["device"], flush=True)
    path.write_text(json.dumps(res, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
