"""The large-shape policy space of the bf16 GEMM (stdlib_kernels/gemm_hopper.py, bf16 in and out, against
torch.matmul bf16; bf16 in and f32 out, `--only f32`, against torch.mm(out_dtype=torch.float32)) and of the fp8
GEMM (stdlib_kernels/gemm_fp8.py, e4m3 in, bf16 out, per-tensor scales, against torch._scaled_mm) in one run;
writes benchmarks/results/gemm-large-sweep-<tag>-<device>.json (or --out DIR).

    python benchmarks/gemm_large_sweep.py [--only bf16,f32,fp8] [--shapes M,N,K ...] [--variants REGEX] [--tag NAME]
                                          [--precompile N] [--precompile-only] [--batches N] [--out DIR]

Every output is checked against float64 (on the GPU) before it is timed, the ragged shape too (3000 x 5000 x
4096: partial tiles in M and N). A timing is the median over `--batches` replays of a CUDA graph of 10 calls (GPU
time per call), ours and the peer alternating replay by replay on the same random inputs after a warm-up (the
peer re-timed beside every variant); ratio = peer us / ours us (> 1: faster than the peer). Each variant's
registers, spills and the SASS's HGMMA / QGMMA and local-memory instruction count are recorded beside it.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_fp8, gemm_hopper  # noqa: E402

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (4096, 4096, 14336), (8192, 8192, 1024),
          (3000, 5000, 4096)]
FP8_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (4096, 4096, 14336)]
I128 = tp.nv.wgmma_m64n128k16_bf16
I192 = tp.nv.wgmma_m64n192k16_bf16
R64 = dict(PRODUCER_REGS=64, CONSUMER_REGS=216)
TMA3 = dict(STAGES=3, EPILOGUE=2, IN_FLIGHT=0)
# bf16 out, constexprs over the shape's policy (None: the policy itself); every knob a variant changes is named
VARIANTS = {
    "policy": None,
    "g8": dict(GROUP_M=8),
    "g16": dict(GROUP_M=16),
    "g16_r88": dict(GROUP_M=16, PRODUCER_REGS=88, CONSUMER_REGS=208),
    "s4_r64_g16": dict(STAGES=4, EPILOGUE=0, IN_FLIGHT=0, GROUP_M=16, **R64),
    "256x128_g16": dict(BM=256, BN=128, CONSUMERS=2, INSTR=I128, GROUP_M=16, **TMA3, **R64),
    "256x128_s4_g16": dict(BM=256, BN=128, CONSUMERS=2, INSTR=I128, STAGES=4, EPILOGUE=0, IN_FLIGHT=0, GROUP_M=16,
                           **R64),
    "persistent_r64_g16": dict(PERSISTENT=1, STAGES=4, GROUP_M=16, **R64),
    # G9: cuBLAS's own structure at these shapes is 128 x 256 tiles (our frame) in 2x1 clusters along M (its
    # nvjet_sm90_tst_256x128_64x4_1x2 names, column-major); the persistent grid at the group sizes the policy uses
    "persistent_r64": dict(PERSISTENT=1, STAGES=4, GROUP_M=8, **R64),
    "c2_tma_r64": dict(CLUSTER_M=2, **TMA3, **R64),
    "c2_s4_r64": dict(CLUSTER_M=2, STAGES=4, EPILOGUE=0, IN_FLIGHT=0, **R64),
    "256x128": dict(BM=256, BN=128, CONSUMERS=2, INSTR=I128, **TMA3, **R64),
    # gemm_persistent with the TMA store overlapped with the next tile (EPILOGUE=2: the producer stores tile it - 1
    # once it has issued tile it's copies), 3 stages beside the 64 KB c_s, as cuBLAS's persistent nvjet kernels
    "pers_tma_r64": dict(PERSISTENT=1, STAGES=3, EPILOGUE=2, GROUP_M=8, **R64),
    "pers_tma_r64_g16": dict(PERSISTENT=1, STAGES=3, EPILOGUE=2, GROUP_M=16, **R64),
    "pers_tma_r88": dict(PERSISTENT=1, STAGES=3, EPILOGUE=2, GROUP_M=8, PRODUCER_REGS=88, CONSUMER_REGS=208),
    # G12: the store in 64-column pieces through two 16 KB buffers (STORE_N=64, a store warp), 4 stages beside them
    # (cuBLAS's 4 x 48 KB + 16 KB); GROUP_M the policy's; registers per variant (0: no setmaxnreg)
    "pers_n64_s4": dict(PERSISTENT=1, STAGES=4, EPILOGUE=2, STORE_N=64, PRODUCER_REGS=0, CONSUMER_REGS=0),
    "pers_n64_s4_r64": dict(PERSISTENT=1, STAGES=4, EPILOGUE=2, STORE_N=64, **R64),
    "pers_n64_s4_r88": dict(PERSISTENT=1, STAGES=4, EPILOGUE=2, STORE_N=64, PRODUCER_REGS=88, CONSUMER_REGS=208),
    "pers_n64_s4_r96": dict(PERSISTENT=1, STAGES=4, EPILOGUE=2, STORE_N=64, PRODUCER_REGS=96, CONSUMER_REGS=200),
    "pers_n64_s3_r64": dict(PERSISTENT=1, STAGES=3, EPILOGUE=2, STORE_N=64, **R64),
    "pers_whole_s3_r64": dict(PERSISTENT=1, STAGES=3, EPILOGUE=2, STORE_N=0, **R64),    # G9's form (the policy before)
    "pers_n64_s4_r40": dict(PERSISTENT=1, STAGES=4, EPILOGUE=2, STORE_N=64, PRODUCER_REGS=40, CONSUMER_REGS=232),
    "pers_n64_s4_g4": dict(PERSISTENT=1, STAGES=4, EPILOGUE=2, STORE_N=64, GROUP_M=4, **R64),
    "pers_n64_s4_g16": dict(PERSISTENT=1, STAGES=4, EPILOGUE=2, STORE_N=64, GROUP_M=16, **R64),
    # 8 pieces of 32 columns (64-byte swizzle) through 4 buffers of 8 KB: a piece's TMA read is waited for 4 pieces
    # later, not 2
    "pers_n32_b4": dict(PERSISTENT=1, STAGES=4, EPILOGUE=2, STORE_N=32, STORE_BUFS=4, **R64),
    # G15: the policy's piece store with all 32 row tiles of 4096-row shapes in one group (the walk goes down each
    # column first: B is read from HBM once, A stays in the L2)
    "pers_g32": dict(PERSISTENT=1, STAGES=4, EPILOGUE=2, STORE_N=64, GROUP_M=32, **R64),
    # G15: pieces 2 and 3 held in registers (bf16) and written under the next tile's first k-tile (its wgmma async):
    # the store's round trip no longer stops the tensor cores at the tile's end (DEFER=1)
    "pers_defer": dict(PERSISTENT=1, STAGES=4, EPILOGUE=2, STORE_N=64, DEFER=1, **R64),
    "pers_n32_b4_defer": dict(PERSISTENT=1, STAGES=4, EPILOGUE=2, STORE_N=32, STORE_BUFS=4, DEFER=1, **R64),
    # DEFER=2: DEFER's schedule with the ring loop whole from slot 0 (the form the verifier's ring flattening takes)
    "pers_defer2": dict(PERSISTENT=1, STAGES=4, EPILOGUE=2, STORE_N=64, DEFER=2, **R64),
    # 256 x 128 tiles (two consumers of 128 rows) in pieces: two 32 KB buffers leave 3 stages of 48 KB
    "pers_256x128_n64_s3": dict(PERSISTENT=1, BM=256, BN=128, CONSUMERS=2, INSTR=I128, STAGES=3, EPILOGUE=2, STORE_N=64,
                                **R64),
    # G26: the policy's form (DEFER=2) with the store warp's pieces in a run-time loop (STORE_LOOP=1)
    "pers_defer2_loop": dict(PERSISTENT=1, STAGES=4, EPILOGUE=2, STORE_N=64, DEFER=2, STORE_LOOP=1, **R64),
    # G26, 3000 x 5000 x 4096 (B rows of 10000 bytes: the policy's 2x1 cluster): 128 x 192 tiles (24 x 27 = 648 tiles,
    # 4.9 waves of 132 against 128 x 256's 480 = 3.6), in 2x1 clusters (B multicast) and not; clusters of 4 (B read
    # once per 4 row tiles)
    "c2_n192_s4_tma": dict(CLUSTER_M=2, BN=192, INSTR=I192, STAGES=4, EPILOGUE=2, IN_FLIGHT=0, **R64),
    "c2_n192_s4_regs": dict(CLUSTER_M=2, BN=192, INSTR=I192, STAGES=4, EPILOGUE=0, IN_FLIGHT=0, **R64),
    "n192_s4_tma": dict(BN=192, INSTR=I192, STAGES=4, EPILOGUE=2, IN_FLIGHT=0, **R64),
    "c4_tma_r64": dict(CLUSTER_M=4, **TMA3, **R64),
    "c4_n192_s4_tma": dict(CLUSTER_M=4, BN=192, INSTR=I192, STAGES=4, EPILOGUE=2, IN_FLIGHT=0, **R64),
}
# f32 out (bf16 in, f32 accumulate and out, against torch.mm(a, b, out_dtype=torch.float32)), constexprs over the
# shape's f32 policy (G18). Before G18 the policy was gemm_hopper 128 x 256, 4 stages, the registers' store (a 128 KB
# f32 c_s does not fit beside the ring). A (128, 32) f32 piece is 16 KB (128-byte rows, cuBLAS's 4 x 48 KB stages + a
# small store buffer); 64 columns are 32 KB a buffer (3 stages beside two); 16 columns 8 KB (64-byte rows).
PERS = dict(PERSISTENT=1, EPILOGUE=2)
F32_VARIANTS = {
    "policy": None,
    "s4_r64": dict(PERSISTENT=0, STAGES=4, EPILOGUE=0, IN_FLIGHT=0, **R64),            # the policy before + setmaxnreg
    "pers_regs_s4_r64": dict(PERSISTENT=1, STAGES=4, EPILOGUE=0, GROUP_M=8, **R64),    # persistent, registers' store
    "pers_n32_s4_r64": dict(PERS, STAGES=4, STORE_N=32, STORE_BUFS=2, STORE_SPAN=0, GROUP_M=8, **R64),
    # STORE_SPAN=32: each buffer as 32-byte column blocks (the consumers' 8-byte pairs conflict-free; four TMA boxes a
    # piece of 32 columns) instead of 128-byte swizzled rows (a 2-way bank conflict on every write)
    "pers_n32_sp32_s4_r64": dict(PERS, STAGES=4, STORE_N=32, STORE_BUFS=2, STORE_SPAN=32, GROUP_M=8, **R64),
    "pers_n32_sp32_s4_r64_g16": dict(PERS, STAGES=4, STORE_N=32, STORE_BUFS=2, STORE_SPAN=32, GROUP_M=16, **R64),
    "pers_n32_sp32_s4_r0": dict(PERS, STAGES=4, STORE_N=32, STORE_BUFS=2, STORE_SPAN=32, GROUP_M=8, PRODUCER_REGS=0,
                                CONSUMER_REGS=0),
    "pers_n16_b4_sp32_s4_r64": dict(PERS, STAGES=4, STORE_N=16, STORE_BUFS=4, STORE_SPAN=32, GROUP_M=8, **R64),
    "pers_n64_s3_r64": dict(PERS, STAGES=3, STORE_N=64, STORE_BUFS=2, STORE_SPAN=0, GROUP_M=8, **R64),
    # 4 pieces of 64 through ONE 32 KB buffer beside 4 stages (each piece waits for the previous one's read; a
    # quarter of the 8-piece form's write x store pairs for the verifier: 0.8 s CPU against 1.9-2.1)
    "pers_n64_b1_s4_r64": dict(PERS, STAGES=4, STORE_N=64, STORE_BUFS=1, STORE_SPAN=0, GROUP_M=8, **R64),
    "pers_n64_sp32_s3_r64": dict(PERS, STAGES=3, STORE_N=64, STORE_BUFS=2, STORE_SPAN=32, GROUP_M=8, **R64),
    "c2_s4_r64": dict(CLUSTER_M=2, STAGES=4, EPILOGUE=0, IN_FLIGHT=0, **R64),   # B rows off 128-byte lines' form
    # G26: the one-buffer policy with its last piece (32 registers) held and written under the next tile's first
    # k-tile (DEFER=2, HELD=1); 8 pieces of 32 through two buffers with the last 2 / 4 held (16 / 32 registers a piece)
    "pers_b1_held1": dict(PERS, STAGES=4, STORE_N=64, STORE_BUFS=1, STORE_SPAN=0, GROUP_M=8, DEFER=2, HELD=1, **R64),
    "pers_n32_held2": dict(PERS, STAGES=4, STORE_N=32, STORE_BUFS=2, STORE_SPAN=0, GROUP_M=8, DEFER=2, HELD=2, **R64),
    "pers_n32_held4": dict(PERS, STAGES=4, STORE_N=32, STORE_BUFS=2, STORE_SPAN=0, GROUP_M=8, DEFER=2, HELD=4, **R64),
    # G26, 3000 x 5000 x 4096: 128 x 192 tiles in 2x1 clusters (c_s of 96 KB beside 3 stages, or the registers'
    # store beside 5), clusters of 4
    "c2_n192_s3_tma": dict(CLUSTER_M=2, BN=192, INSTR=I192, STAGES=3, EPILOGUE=2, IN_FLIGHT=0, **R64),
    "c2_n192_s5_r64": dict(CLUSTER_M=2, BN=192, INSTR=I192, STAGES=5, EPILOGUE=0, IN_FLIGHT=0, **R64),
    "c4_s4_r64": dict(CLUSTER_M=4, STAGES=4, EPILOGUE=0, IN_FLIGHT=0, **R64),
    "c2_s4_r0": dict(CLUSTER_M=2, STAGES=4, EPILOGUE=0, IN_FLIGHT=0, PRODUCER_REGS=0, CONSUMER_REGS=0),  # before G26
    # G26: the 8-piece HELD=2 form with the store warp's pieces in a run-time loop (STORE_LOOP=1: verifies in ~1 s)
    "pers_n32_held2_loop": dict(PERS, STAGES=4, STORE_N=32, STORE_BUFS=2, STORE_SPAN=0, GROUP_M=8, DEFER=2, HELD=2,
                                STORE_LOOP=1, **R64),
}
# fp8, constexprs over gemm_fp8's policy (128 x 256 x 128; since G10 the large class's is 3 stages, the TMA store,
# 96 / 200): every knob named, so a variant means the same whatever the policy is
# (budgets fit the block's 64512-register pool at 384 threads: 96 / 208 asked for 65536 and hung on the H100)
FP8_VARIANTS = {
    "policy": None,
    "s3_tma": dict(STAGES=3, EPILOGUE=2, PRODUCER_REGS=0, CONSUMER_REGS=0),
    "s3_tma_r96": dict(STAGES=3, EPILOGUE=2, PRODUCER_REGS=96, CONSUMER_REGS=200),
    "s3_tma_r80": dict(STAGES=3, EPILOGUE=2, PRODUCER_REGS=80, CONSUMER_REGS=208),
    "s3_tma_r88": dict(STAGES=3, EPILOGUE=2, PRODUCER_REGS=88, CONSUMER_REGS=208),
    "s3_tma_r96_g16": dict(STAGES=3, EPILOGUE=2, PRODUCER_REGS=96, CONSUMER_REGS=200, GROUP_M=16),
    "s3_tma_r96_g4": dict(STAGES=3, EPILOGUE=2, PRODUCER_REGS=96, CONSUMER_REGS=200, GROUP_M=4),
    "s4_r96": dict(STAGES=4, EPILOGUE=0, PRODUCER_REGS=96, CONSUMER_REGS=200),
    "s3_tma_r96_wait1": dict(STAGES=3, EPILOGUE=2, PRODUCER_REGS=96, CONSUMER_REGS=200, IN_FLIGHT=1),
    # G12: gemm_fp8_persistent_tma (persistent grid, the store in 64-column pieces overlapped with the next tile, a
    # store warp, 4 stages)
    "fp8_pers_n64": dict(PERSISTENT=1, STORE_N=64, STAGES=4),
    "fp8_pers_n64_r96": dict(PERSISTENT=1, STORE_N=64, STAGES=4, PRODUCER_REGS=96, CONSUMER_REGS=200),
    "fp8_pers_n64_r64": dict(PERSISTENT=1, STORE_N=64, STAGES=4, PRODUCER_REGS=64, CONSUMER_REGS=216),
    "fp8_pers_n64_r96_g16": dict(PERSISTENT=1, STORE_N=64, STAGES=4, PRODUCER_REGS=96, CONSUMER_REGS=200, GROUP_M=16),
    "fp8_pers_n64_r64_g16": dict(PERSISTENT=1, STORE_N=64, STAGES=4, PRODUCER_REGS=64, CONSUMER_REGS=216, GROUP_M=16),
}


def bf16_params(M, N, K, p, out=tp.bf16):
    """The constexprs `gemm_hopper.launch` runs for variant p (None: the policy) with output dtype `out`."""
    base = gemm_hopper.policy(M, N, K, out, fixup=True)
    if p is None:
        return base
    if base.get("SWAP_AB") or gemm_hopper.clustered(base) or base.get("PERSISTENT"):
        # as `launch` does: a caller's constexprs lie over the policy without its swap-AB / cluster form
        base = gemm_hopper.policy(M, N, K, out, fixup=True, forms=False)
    full = {**base, **p}
    if p.get("PERSISTENT"):
        for k in gemm_hopper.STEADY_ONLY:
            if k not in p:
                full.pop(k, None)
    return full


def fp8_params(M, N, K, p):
    """The constexprs `gemm_fp8.launch` runs for variant p (None: the policy)."""
    return gemm_fp8.params_for(M, N, K, **(p or {}))


def params_of(kind, M, N, K, p):
    """The constexprs variant p of `kind` (bf16, f32: gemm_hopper's output dtype; fp8) runs."""
    if kind == "fp8":
        return fp8_params(M, N, K, p)
    return bf16_params(M, N, K, p, tp.f32 if kind == "f32" else tp.bf16)


def _sass_facts(ck) -> dict:
    try:
        sass = ck.sass()
    except Exception as e:  # noqa: BLE001 - no cuobjdump: say so
        return {"sass": f"unavailable: {type(e).__name__}"}
    return {"mma": sorted(set(re.findall(r"\b[QH]GMMA\.[\w.]+", sass))),
            "local_memory_instrs": len(re.findall(r"\b(?:LDL|STL)\b", sass)),
            "tma_store": "UTMASTG" in sass, "setmaxnreg": "USETMAXREG" in sass}


def compiled(kind, M, N, K, p):
    import tilepy_hip

    if kind in ("bf16", "f32"):
        out = tp.f32 if kind == "f32" else tp.bf16
        kernel, kp = gemm_hopper.plan_kernel(M, N, out, bf16_params(M, N, K, p, out), K)
    else:
        kernel, kp = gemm_fp8.kernel_of(fp8_params(M, N, K, p))
    return tilepy_hip.compile(kernel, target="sm_90a", **kp)


def _build(item):
    kind, M, N, K, p = item
    try:
        ck = compiled(kind, M, N, K, p)
        return None if ck is not None else "no kernel"
    except Exception as e:  # noqa: BLE001 - reported by the run
        return f"{kind} {M}x{N}x{K} {p}: {type(e).__name__}: {str(e).splitlines()[0][:120]}"


def _graph(fn, reps=10):
    import torch

    fn()
    torch.cuda.synchronize()
    gr = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gr):
        for _ in range(reps):
            fn()
    return gr, reps


def timed_pair(fa, fb, batches=30):
    """Median seconds per call of fa and of fb: CUDA-graph replays of 10 calls, alternating, after a warm-up."""
    import torch

    ga, ra = _graph(fa)
    gb, rb = _graph(fb)
    for _ in range(3):
        ga.replay()
        gb.replay()
    torch.cuda.synchronize()
    ta, tb = [], []
    for _ in range(batches):
        for gr, reps, out in ((ga, ra, ta), (gb, rb, tb)):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            gr.replay()
            e.record()
            e.synchronize()
            out.append(s.elapsed_time(e) / 1e3 / reps)
    return statistics.median(ta), statistics.median(tb)


def _rel(x, ref) -> float:
    import torch

    x = x.double()
    if not bool(torch.isfinite(x).all()):
        return float("inf")
    return float((x - ref).norm() / ref.norm())


def _plain(p: dict) -> dict:
    return {k: (v.name if hasattr(v, "name") else v) for k, v in p.items() if not isinstance(v, tp.Swizzle)}


_FACTS: dict = {}      # kernel key -> the facts dict every row of that kernel shares
_SASS: dict = {}       # kernel key -> its compiled kernel, disassembled once at the end (add_sass_facts)


def _resources(kind, M, N, K, p) -> dict:
    """Registers, spills and shared memory of the kernel variant p runs (once per kernel); its SASS facts are
    added to the same dict by add_sass_facts."""
    key = (kind, repr(sorted(_plain(params_of(kind, M, N, K, p)).items())))
    if key not in _FACTS:
        try:
            ck = compiled(kind, M, N, K, p)
            _FACTS[key] = {"registers": ck.resources.get("registers"), "spill_stores": ck.resources.get("spill_stores"),
                           "dynamic_smem": ck.resources.get("dynamic_smem")}
            _SASS[key] = ck
        except Exception as e:  # noqa: BLE001
            _FACTS[key] = {"build": f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"}
    return _FACTS[key]


def add_sass_facts():
    """cuobjdump every kernel used (in threads: ~1-3 s each), into the rows' shared facts dicts."""
    from concurrent.futures import ThreadPoolExecutor

    keys = list(_SASS)
    with ThreadPoolExecutor(16) as ex:
        for key, facts in zip(keys, ex.map(lambda k: _sass_facts(_SASS[k]), keys)):
            _FACTS[key].update(facts)


def cublas_kernels(M, N, K, g, peer_fn=None) -> list:
    """What torch.matmul bf16 (or `peer_fn`) launches at (M, N, K): each kernel's name (cuBLAS's nvjet names carry
    its tile, stages and cluster, in cuBLAS's column-major frame: its M is our N), grid, block, registers and device
    us, from torch.profiler's trace over 5 calls after a warm-up."""
    import os
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile

    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
    peer_fn = peer_fn or torch.matmul
    for _ in range(3):
        peer_fn(a, b)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            peer_fn(a, b)
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        trace = json.loads(Path(path).read_text())
    finally:
        os.unlink(path)
    seen: dict = {}
    for ev in trace.get("traceEvents", []):
        if ev.get("cat") != "kernel":
            continue
        args = ev.get("args", {})
        r = seen.setdefault(ev["name"][:200], {"kernel": ev["name"][:200], "grid": args.get("grid"),
                                               "block": args.get("block"),
                                               "registers": args.get("registers per thread"),
                                               "smem": args.get("shared memory"), "us": []})
        r["us"].append(ev.get("dur"))
    rows = list(seen.values())
    for r in rows:
        r["us_median"] = statistics.median(r.pop("us"))
    return rows


PROFILE = False     # --profile: each bf16 shape's row records what cuBLAS launches (cublas_kernels)


class Deadline:
    """Rows stop starting after `seconds` (the JSON written so far stays complete)."""

    def __init__(self, seconds):
        self.end = time.time() + seconds if seconds else None

    def passed(self) -> bool:
        return self.end is not None and time.time() > self.end


def bf16_rows(shapes, variants, batches, g, rows, deadline, save, kind="bf16"):
    """bf16 in; bf16 out against torch.matmul bf16, or (kind "f32") f32 out against torch.mm(out_dtype=float32)."""
    import torch

    dt = torch.float32 if kind == "f32" else torch.bfloat16
    if kind == "f32":
        def peer_fn(a, b):
            return torch.mm(a, b, out_dtype=torch.float32)
    else:
        def peer_fn(a, b):
            return torch.matmul(a, b)

    for M, N, K in shapes:
        if deadline.passed():
            print(f"{kind} {M}x{N}x{K}: not run (--deadline)", flush=True)
            continue
        a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
        b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
        ref = a.double() @ b.double()
        err_peer = _rel(peer_fn(a, b), ref)
        row = {}
        if PROFILE:
            try:
                row["cublas"] = cublas_kernels(M, N, K, g, peer_fn)
                print(f"{kind} {M}x{N}x{K} cuBLAS runs {row['cublas']}", flush=True)
            except Exception as e:  # noqa: BLE001 - the profile is a side note
                row["cublas"] = f"{type(e).__name__}: {e}"[:200]
        for name, v in variants.items():
            p = params_of(kind, M, N, K, v)
            c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
            try:
                gemm_hopper.launch(a, b, c, **p)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - a variant that does not build or run: say so, go on
                print(f"{kind} {M}x{N}x{K} {name:20s} failed: {type(e).__name__}: {str(e).splitlines()[0][:100]}",
                      flush=True)
                row[name] = {"failed": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
                continue
            err = _rel(c, ref)
            # cuBLAS's bf16 output rounds the same sum once; f32 out: both sum in f32 (error ~1e-6, an order under
            # bf16's rounding: 1.5x the peer's plus 1e-7)
            ok = err <= 1.5 * err_peer + (1e-7 if kind == "f32" else 1e-4)
            t, tp_ = timed_pair(lambda a=a, b=b, c=c, p=p: gemm_hopper.launch(a, b, c, **p),
                                lambda a=a, b=b: peer_fn(a, b), batches)
            flops = 2 * M * N * K
            row[name] = {"us": t * 1e6, "peer_us": tp_ * 1e6, "ratio": tp_ / t, "tflops": flops / t / 1e12,
                         "rel_err": err, "peer_rel_err": err_peer, "ok": ok, "params": _plain(p),
                         "kernel": _resources(kind, M, N, K, v)}
            print(f"{kind} {M}x{N}x{K} {name:20s} {t * 1e6:8.1f} us  cuBLAS {tp_ * 1e6:8.1f} us  x{tp_ / t:.3f}  "
                  f"err {err:.1e} ({err_peer:.1e}) {'ok' if ok else 'WRONG'} "
                  f"regs {row[name]['kernel'].get('registers')} spills {row[name]['kernel'].get('spill_stores')}",
                  flush=True)
        rows[f"{M}x{N}x{K}"] = row
        save()
        del a, b, ref
        torch.cuda.empty_cache()


def _quantize(x):
    import torch

    scale = (x.abs().max().float() / 448.0).clamp(min=1e-12)
    return (x / scale).to(torch.float8_e4m3fn), scale.reshape(1)


def fp8_rows(shapes, variants, batches, g, rows, deadline, save):
    import torch

    for M, N, K in shapes:
        if deadline.passed():
            print(f"fp8 {M}x{N}x{K}: not run (--deadline)", flush=True)
            continue
        a, sa = _quantize(torch.randn(M, K, device="cuda", generator=g))
        b, sb = _quantize(torch.randn(N, K, device="cuda", generator=g))
        ref = (a.double() @ b.double().t()) * sa.double() * sb.double()

        def peer(a=a, b=b, sa=sa, sb=sb):
            return torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16)

        def fast(a=a, b=b, sa=sa, sb=sb):
            return torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True)

        err_peer, err_fast = _rel(peer(), ref), _rel(fast(), ref)
        row = {}
        for name, v in variants.items():
            p = fp8_params(M, N, K, v)
            out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            try:
                gemm_fp8.launch(a, b, sa, sb, out, **(v or {}))
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                print(f"fp8  {M}x{N}x{K} {name:20s} failed: {type(e).__name__}: {str(e).splitlines()[0][:100]}",
                      flush=True)
                row[name] = {"failed": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
                continue
            err = _rel(out, ref)
            ok = err <= 1.5 * err_fast + 1e-5      # like for like: cuBLAS's fp8 without promoted accumulation
            t, tp_ = timed_pair(lambda a=a, b=b, sa=sa, sb=sb, out=out, v=v: gemm_fp8.launch(a, b, sa, sb, out,
                                                                                              **(v or {})),
                                peer, batches)
            r = {"us": t * 1e6, "peer_us": tp_ * 1e6, "ratio": tp_ / t, "tflops": 2 * M * N * K / t / 1e12,
                 "rel_err": err, "peer_rel_err": err_peer, "fast_accum_rel_err": err_fast, "ok": ok,
                 "params": _plain(p), "kernel": _resources("fp8", M, N, K, v)}
            if name == "policy":
                tf, _ = timed_pair(fast, peer, batches)
                r["fast_accum_us"] = tf * 1e6
            row[name] = r
            print(f"fp8  {M}x{N}x{K} {name:20s} {t * 1e6:8.1f} us  _scaled_mm {tp_ * 1e6:8.1f} us  x{tp_ / t:.3f}  "
                  f"err {err:.1e} (fast {err_fast:.1e}, promoted {err_peer:.1e}) {'ok' if ok else 'WRONG'} "
                  f"regs {r['kernel'].get('registers')} spills {r['kernel'].get('spill_stores')}", flush=True)
        rows[f"{M}x{N}x{K}"] = row
        save()
        del a, b, ref
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="bf16,fp8", help="kinds among bf16, f32 (f32 out), fp8")
    ap.add_argument("--shapes", nargs="*", default=None, help="M,N,K triples (bf16, f32)")
    ap.add_argument("--fp8-shapes", nargs="*", default=None, help="M,N,K triples (fp8)")
    ap.add_argument("--deadline", type=float, default=0,
                    help="start no shape after this many seconds of its kind's rows (bf16, then fp8)")
    ap.add_argument("--variants", default=None, help="regex over variant names (the policy row always runs)")
    ap.add_argument("--tag", default="sweep")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--precompile", type=int, default=0, help="build every kernel first in N processes")
    ap.add_argument("--precompile-only", action="store_true")
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--profile", action="store_true", help="record cuBLAS's kernels (name, grid) per bf16 shape")
    args = ap.parse_args()
    global PROFILE
    PROFILE = args.profile
    kinds = args.only.split(",")
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes] if args.shapes else None
    fp8_shapes = [tuple(int(x) for x in s.split(",")) for s in args.fp8_shapes] if args.fp8_shapes else None

    def pick(vs):
        return {k: v for k, v in vs.items() if k == "policy" or not args.variants or re.search(args.variants, k)}

    todo = {"bf16": (shapes or SHAPES, pick(VARIANTS)), "f32": (shapes or SHAPES, pick(F32_VARIANTS)),
            "fp8": (fp8_shapes or FP8_SHAPES, pick(FP8_VARIANTS))}
    if args.precompile:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        t = time.time()
        items, seen = [], set()
        for kind in kinds:
            sh, vs = todo[kind]
            for M, N, K in sh:
                for v in vs.values():
                    key = (kind, repr(sorted(_plain(params_of(kind, M, N, K, v)).items())))
                    if key not in seen:
                        seen.add(key)
                        items.append((kind, M, N, K, v))
        with ProcessPoolExecutor(args.precompile, mp_context=multiprocessing.get_context("spawn")) as ex:
            errs = [e for e in ex.map(_build, items) if e]
        print(f"precompiled {len(items)} kernels in {time.time() - t:.1f} s; {len(errs)} failed {errs[:3]}",
              flush=True)
    if args.precompile_only:
        return
    import torch

    dev = torch.cuda.get_device_name()
    import tilepy_hip

    result = {"device": dev, "torch": torch.__version__, "cuda": torch.version.cuda,
              "toolchain": tilepy_hip.toolchain_info().get("nvidia"), "python": platform.python_version(),
              "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "method": "median of CUDA-graph replays (10 calls each), ours and the peer alternating replay by "
                        "replay, random normal inputs (fp8: quantized per tensor, amax at 448); ratio = peer us / "
                        "ours us; bf16 peer torch.matmul bf16, f32 (f32 out) peer torch.mm(out_dtype=float32), "
                        "fp8 peer torch._scaled_mm(out_dtype=bf16) default (promoted accumulation)"}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"gemm-large-{args.tag}-{re.sub(r'[^A-Za-z0-9]+', '-', dev).strip('-').lower()}.json"

    def save():
        path.write_text(json.dumps(result, indent=1))

    g = torch.Generator(device="cuda").manual_seed(0)
    for kind, rows_of in (("bf16", bf16_rows), ("f32", partial(bf16_rows, kind="f32")), ("fp8", fp8_rows)):
        if kind in kinds:
            result[kind] = {}
            rows_of(*todo[kind], args.batches, g, result[kind], Deadline(args.deadline), save)
    save()
    add_sass_facts()
    save()
    print("wrote", path)
    for kind in ("bf16", "f32", "fp8"):          # the table last: ratio per variant and shape
        for shape, row in result.get(kind, {}).items():
            cells = "  ".join(f"{n} {r['ratio']:.3f}{'' if r['ok'] else ' WRONG'}"
                              for n, r in row.items() if isinstance(r, dict) and "ratio" in r)
            print(f"{kind} {shape}: {cells}")


if __name__ == "__main__":
    main()
