"""Build, without a GPU, every kernel that tests/gpu/run_fused_ops.sh launches into the on-disk cache
($TILEPY_HIP_CACHE), so that the device call runs kernels instead of compiling them:

    TILEPY_HIP_CACHE=build/a5_thc python tests/gpu/precompile_fused_ops.py

The launch helpers run on CPU tensors with `Kernel.run` (the interpreter's entry) replaced by a compile for
sm_90a with the constexprs the launch binds: the device's launch path builds the same kernel IR for the same
target, so its cache key is the same and the device finds the binary (the repository lies at the same path
there). Nothing is computed here: the outputs are garbage. Prints one line a kernel and a summary.
"""

import os
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))

import torch  # noqa: E402

import tilepy_hip  # noqa: E402
from tilepy.kernel import Kernel  # noqa: E402
from tilepy_hip.build import compile_ir  # noqa: E402

SEEN = {}


def _compile_instead(self, grid, *args, target=None, record=False, tags=None, **constexprs):
    _, consts = self.bind_args(args, constexprs)
    key = (id(self), tuple(sorted((k, repr(v)) for k, v in consts.items())))
    if key in SEEN:
        return None
    t0 = time.time()
    try:
        ck = compile_ir(self.ir(target or "sm_90a", **consts), "sm_90a")
        SEEN[key] = f"{time.time() - t0:5.1f} s {self.name} {consts} regs {ck.resources.get('registers')} " \
                    f"spills {ck.resources.get('spill_stores')}"
    except Exception as e:  # reported; the device call shows it again where it launches the variant
        SEEN[key] = f"FAILED {self.name} {consts}: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
    print(SEEN[key], flush=True)
    return None


def llm_ops_rows():
    import llm_ops as B  # benchmarks/llm_ops.py

    from stdlib_kernels import llm_ops as L

    bf = torch.bfloat16
    x, r, w, b = torch.randn(4, 4096).to(bf), torch.randn(4, 4096).to(bf), torch.randn(4096).to(bf), \
        torch.randn(4096).to(bf)
    y, ro = torch.empty_like(x), torch.empty_like(x)
    L.launch_fused_add_rmsnorm(x, r, w, y, ro, 1e-6)
    for th, mb, ws in B.RMSNORM_VARIANTS:
        L.launch_fused_add_rmsnorm(x, r, w, y, ro, 1e-6, THREADS=th, MIN_BLOCKS=mb, WARP_SUMS=ws)
    L.launch_layer_norm(x, w, b, y, 1e-5)
    for th, op, rw, ev, mb, ws in B.LAYER_NORM_VARIANTS:
        L.launch_layer_norm(x, w, b, y, 1e-5, THREADS=th, ONE_PASS=op, ROWS=rw, EVEN=ev, MIN_BLOCKS=mb, WARP_SUMS=ws)
    for st, bps in B.LAYER_NORM_RING_VARIANTS:
        L.launch_layer_norm_ring(x, w, b, y, 1e-5, blocks_per_sm=bps, STAGES=st)
    t, hq, hk, hs = 4, 32, 8, 128
    pos = torch.zeros(t, dtype=torch.int64)
    cs = torch.zeros(t, hs)
    q, k = torch.randn(t, hq * hs).to(bf), torch.randn(t, hk * hs).to(bf)
    for neox in (True, False):
        L.launch_rotary(pos, q, k, cs, hs, neox)
        for v in B.ROTARY_VARIANTS:
            if neox or not any(n in v for n in B.NEOX_ONLY):
                L.launch_rotary(pos, q, k, cs, hs, neox, **v)
        for th, bps, st in B.ROTARY_RING_VARIANTS:
            L.launch_rotary_ring(pos, q, k, cs, hs, neox, blocks_per_sm=bps, THREADS=th, STAGES=st,
                                 CS_SMEM=False)
        for th, bps, st in B.ROTARY_RING_CS_SMEM:
            L.launch_rotary_ring(pos, q, k, cs, hs, neox, blocks_per_sm=bps, THREADS=th, STAGES=st, CS_SMEM=True)


def rotary_stream_tests():
    from stdlib_kernels import llm_ops as L

    cases = [(37, 32, 8, 128, 128, 2, 256), (3000, 32, 8, 128, 128, 1, 256), (5, 6, 1, 64, 32, 3, 128),
             (3, 3, 3, 80, 80, 1, 64), (1, 1, 1, 16, 8, 2, 32)]     # test_gpu_llm_ops.STREAM_CASES
    for neox in (True, False):
        for dtype in (torch.bfloat16, torch.float32):
            for t, hq, hk, hs, rot, stream, threads in cases:
                pos = torch.zeros(2, dtype=torch.int64)
                q, k = torch.zeros(2, hq * hs, dtype=dtype), torch.zeros(2, hk * hs, dtype=dtype)
                L.launch_rotary(pos, q, k, torch.zeros(4, rot), hs, neox, stream=stream, THREADS=threads)
                if neox:
                    L.launch_rotary(pos, q, k, torch.zeros(4, rot), hs, neox, stream=stream, THREADS=threads,
                                    PREFETCH=True)


def sanitize_cases():
    import sanitize_fused_ops  # tests/gpu/sanitize_fused_ops.py: its launches, on CPU tensors

    sanitize_fused_ops.run("cpu")


def attention_fp32_cases():
    import attention_fp32 as B  # benchmarks/attention_fp32.py

    from stdlib_kernels import attention_fp32 as A

    def run(bh, bhkv, sq, sk, d, causal, **cfg):
        q, k, v = torch.zeros(bh, sq, d), torch.zeros(bhkv, sk, d), torch.zeros(bhkv, sk, d)
        A.launch(q, k, v, torch.empty(bh, sq, d), torch.empty(bh, sq), causal=causal, **cfg)

    for b, h, hkv, sq, sk, d, causal in B.ERROR_ROWS:
        if d == 128:
            for cfg in B.ERROR_VARIANTS.values():
                run(b * h, b * hkv, sq, sk, d, causal, **cfg)
    for causal in (False, True):            # the identity-V rows: 8 heads on 8
        for cfg in B.ERROR_VARIANTS.values():
            run(16, 16, 256, 128, 128, causal, **cfg)
    for d in (128, 64):                     # variant_times' shapes
        for cfg in B.ERROR_VARIANTS.values():
            run(16, 16, 64, 64, d, False, **cfg)
    import sanitize_attention_fp32  # tests/gpu/sanitize_attention_fp32.py: its cases, on CPU tensors

    sanitize_attention_fp32.run("cpu")


def decode_d64():
    import attention as B  # benchmarks/attention.py

    from stdlib_kernels import attention as A

    b, h, hkv, skv, d = 8, 32, 8, 16384, 64
    q = torch.zeros(b * h, 1, d, dtype=torch.bfloat16)
    k = torch.zeros(b * hkv, skv, d, dtype=torch.bfloat16)
    o, lse = torch.empty_like(q), torch.empty(b * h, 1)
    A.decode(q, k, k, o, lse)
    for s in B.DECODE_SPLITS:
        A.decode(q, k, k, o, lse, splits=s)
    for cfg in B.DECODE_VARIANTS[d]:
        A.decode(q, k, k, o, lse, **cfg)


def row_tests():
    """tests/gpu/test_gpu_llm_ops.py's layer_norm and per-warp cases (WARP_SUMS is layer_norm's default)."""
    from stdlib_kernels import llm_ops as L

    for dtype in (torch.bfloat16, torch.float32):
        for m, n in ((1, 1), (19, 700), (64, 4096), (5, 33)):
            x, w = torch.zeros(m, n, dtype=dtype), torch.zeros(n, dtype=dtype)
            for one_pass, rows in ((False, 1), (True, 1), (False, 2), (False, 4)):
                L.launch_layer_norm(x, w, w, torch.empty_like(x), 1e-5, ONE_PASS=one_pass, ROWS=rows)
    for m, n in ((64, 4096), (19, 1024), (5, 8192)):
        x, w = torch.zeros(m, n), torch.zeros(n)
        for rows in (1, 2):
            for ws in (False, True):
                L.launch_layer_norm(x, w, w, torch.empty_like(x), 1e-5, ROWS=rows, WARP_SUMS=ws)
        L.launch_fused_add_rmsnorm(x, x, w, torch.empty_like(x), torch.empty_like(x), 1e-6, WARP_SUMS=True)
        L.launch_fused_add_rmsnorm(x, x, w, torch.empty_like(x), torch.empty_like(x), 1e-6)


def decode_tests():
    """tests/gpu/test_gpu_attention.py's decode cases and tests/gpu/sanitize_attention.py --decode's."""
    from stdlib_kernels import attention as A

    def run(bh, bhkv, qlen, skv, d, causal, splits=None, **cfg):
        q, k = torch.zeros(bh, qlen, d, dtype=torch.bfloat16), torch.zeros(bhkv, skv, d, dtype=torch.bfloat16)
        A.decode(q, k, k, torch.empty_like(q), torch.empty(bh, qlen), causal=causal, splits=splits, **cfg)

    for b, h, hkv, qlen, skv, d, causal in ((4, 32, 8, 1, 8192, 128, False), (2, 8, 2, 4, 3001, 64, True),
                                            (16, 32, 8, 1, 4100, 128, False), (33, 8, 4, 4, 1000, 64, True)):
        run(b * h, b * hkv, qlen, skv, d, causal)
    for splits, d in ((4, 128), (3, 64), (8, 128)):
        run(24, 6, 4, 128 * (splits - 1) + 1, d, True, splits)
    for hd, causal, (bh, bhkv, qlen, sk), splits, cfg in (
            (128, False, (8, 2, 1, 700), 3, {}), (64, True, (8, 2, 4, 333), 2, {}), (128, False, (8, 2, 1, 700), 1, {}),
            (64, True, (4, 1, 4, 300), 1, {}), (64, False, (8, 2, 1, 1500), 1, dict(BN=128, STAGES=6)),
            (128, False, (8, 2, 1, 1500), 2, dict(BN=64, STAGES=6))):
        run(bh, bhkv, qlen, sk, hd, causal, splits, **cfg)


def ring_tests():
    """tests/gpu/test_gpu_llm_ops.py's layer_norm_ring cases."""
    from stdlib_kernels import llm_ops as L

    for n in (4096, 1024, 8192, 2048):
        x = torch.zeros(2, n, dtype=torch.bfloat16)
        for stages, bps in ((2, 2), (3, 2), (4, 2), (4, 1)):
            L.launch_layer_norm_ring(x, x[0], x[0], x.clone(), 1e-5, blocks_per_sm=bps, STAGES=stages)
    for neox in (True, False):           # rotary_ring's cases
        for t, hq, hk, hs, rot, bps, th, st in ((3000, 32, 8, 128, 128, 2, 512, 3), (37, 32, 8, 128, 128, 3, 256, 4),
                                                 (500, 6, 1, 64, 32, 2, 64, 2), (5, 3, 3, 80, 16, 1, 32, 3)):
            q, k = torch.zeros(2, hq * hs, dtype=torch.bfloat16), torch.zeros(2, hk * hs, dtype=torch.bfloat16)
            for csm in (False, True):
                L.launch_rotary_ring(torch.zeros(2, dtype=torch.int64), q, k, torch.zeros(4, rot), hs, neox,
                                     blocks_per_sm=bps, THREADS=th, STAGES=st, CS_SMEM=csm)


def ring_bench_rows():
    """benchmarks/llm_ops.py --ring-only: the rotary_ring rows (plain and CS_SMEM) at the benchmark's shapes."""
    import llm_ops as B  # benchmarks/llm_ops.py

    from stdlib_kernels import llm_ops as L

    t, hq, hk, hs = 4, 32, 8, 128
    pos, cs = torch.zeros(t, dtype=torch.int64), torch.zeros(t, hs)
    q, k = torch.zeros(t, hq * hs, dtype=torch.bfloat16), torch.zeros(t, hk * hs, dtype=torch.bfloat16)
    for neox in (True, False):
        for csm, rows in ((False, B.ROTARY_RING_VARIANTS), (True, B.ROTARY_RING_CS_SMEM)):
            for th, bps, st in rows:
                L.launch_rotary_ring(pos, q, k, cs, hs, neox, blocks_per_sm=bps, THREADS=th, STAGES=st, CS_SMEM=csm)


def halves_tests():
    """tests/gpu/test_gpu_llm_ops.py's HALVES_CASES."""
    from stdlib_kernels import llm_ops as L

    for dtype in (torch.bfloat16, torch.float32):
        for t, hq, hk, hs, rot, hpb, threads in ((37, 32, 8, 128, 128, 16, 64), (300, 32, 8, 128, 128, None, 128),
                                                 (5, 6, 1, 64, 32, 2, 32), (3, 3, 3, 16, 16, 4, 32)):
            q, k = torch.zeros(2, hq * hs, dtype=dtype), torch.zeros(2, hk * hs, dtype=dtype)
            L.launch_rotary(torch.zeros(2, dtype=torch.int64), q, k, torch.zeros(4, rot), hs, True,
                            heads_per_block=hpb, THREADS=threads, HALVES=True)


if __name__ == "__main__":
    Kernel.run = _compile_instead
    t0 = time.time()
    steps = sys.argv[1].split(",") if len(sys.argv) > 1 else ["llm", "stream", "sanitize", "fp32", "decode"]
    fns = {"llm": llm_ops_rows, "stream": rotary_stream_tests, "sanitize": sanitize_cases,
           "fp32": attention_fp32_cases, "decode": decode_d64, "rows": row_tests, "decode_tests": decode_tests,
           "halves": halves_tests, "ring": ring_tests, "ringbench": ring_bench_rows}
    for s in steps:
        fns[s]()
    failed = [v for v in SEEN.values() if v.startswith("FAILED")]
    print(f"{len(SEEN)} kernels, {len(failed)} failed, {time.time() - t0:.0f} s (tilepy_hip {tilepy_hip.__version__})")
