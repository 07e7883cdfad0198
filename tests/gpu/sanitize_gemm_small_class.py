"""G16's small-class policy forms on small ragged shapes, for compute-sanitizer, through `gemm_hopper.launch` with
the constexprs of the shape each form serves: 64 x 64 tiles unsplit (SMALL_64x64, 8 stages: more stages than k-tiles
here, and 16 k-tiles with K not a multiple of BK), the small class's 64 x 128 tiles for a large shape (the TMA store
for bf16 out), the small class's own with C rows a tensor map cannot describe (the store's fallback copy).

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_small_class.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_small_class.py [cl4]

(`cl4`: only the clusters of 4 row tiles, G29's form.)
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402, F401
from stdlib_kernels import gemm_hopper  # noqa: E402

d = torch.device("cuda")
g = torch.Generator(device="cuda").manual_seed(16)
# (the shape whose policy is the form, the shape it runs at)
CASES = [((512, 512, 512), (130, 200, 300)),        # 64 x 64, 5 k-tiles in 8 stages, ragged M / N / K
         ((300, 500, 400), (70, 130, 1000)),        # 64 x 64, 16 k-tiles, K not a multiple of BK
         ((1024, 1024, 4096), (130, 264, 700)),     # K_WAYS 128 x 64 (G29; the large class), 11 k-tiles
         ((1024, 1024, 1024), (100, 1001, 200))]    # 64 x 128, C's rows 2002 bytes: the TMA store's fallback
ONLY_CL4 = sys.argv[1:] == ["cl4"]
for policy_shape, (m, n, k) in [] if ONLY_CL4 else CASES:
    a = torch.randn(m, k, device=d, generator=g).bfloat16()
    b = torch.randn(k, n, device=d, generator=g).bfloat16()
    ref = a.double() @ b.double()
    for out, o in ((torch.float32, tp.f32), (torch.bfloat16, tp.bf16)):
        p = gemm_hopper.policy(*policy_shape, o, fixup=True)
        c = torch.full((m, n), float("nan"), device=d, dtype=out)
        gemm_hopper.launch(a, b, c, **p)
        torch.cuda.synchronize()
        err = float((c.double() - ref).norm() / ref.norm())
        print(policy_shape, (m, n, k), out, {x: p.get(x) for x in ("BM", "BN", "STAGES", "EPILOGUE")}, "rel err",
              err, flush=True)
        assert err < (4e-3 if out == torch.bfloat16 else 1e-5), err
# G22: gemm_cluster RELAXED=1 (relaxed opening barrier, the producer's tail instead of a closing one), each form at
# a ragged shape: M = 900 (15 row tiles: a block of the last cluster wholly past M), one k-tile under 8 stages, N = 1001
I64, I128 = tp.nv.wgmma_m64n64k16_bf16, tp.nv.wgmma_m64n128k16_bf16
CL = dict(BM=64, BN=128, CONSUMERS=1, INSTR=I128, IN_FLIGHT=0, CLUSTER_M=2, RELAXED=1, STAGES=8)
for p0, (m, n, k) in ((CL, (900, 264, 700)), (CL, (130, 200, 64)), (dict(CL, BN=64, INSTR=I64), (300, 1001, 200)),
                      (dict(CL, BM=128, CONSUMERS=2, STAGES=6), (900, 264, 500)),
                      (dict(CL, BM=128, BN=64, CONSUMERS=2, INSTR=I64), (900, 200, 300)),
                      # G29: clusters of 4 row tiles (15 row tiles: the grid rounded to 16, one block past M; one
                      # k-tile under 8 stages)
                      (dict(CL, CLUSTER_M=4), (900, 264, 700)), (dict(CL, CLUSTER_M=4), (260, 200, 64))):
    if ONLY_CL4 and p0["CLUSTER_M"] != 4:
        continue
    a = torch.randn(m, k, device=d, generator=g).bfloat16()
    b = torch.randn(k, n, device=d, generator=g).bfloat16()
    ref = a.double() @ b.double()
    for out, o in ((torch.float32, tp.f32), (torch.bfloat16, tp.bf16)):
        p = dict(p0, EPILOGUE=2 if o == tp.bf16 else 0)
        c = torch.full((m, n), float("nan"), device=d, dtype=out)
        gemm_hopper.launch(a, b, c, **p)
        torch.cuda.synchronize()
        err = float((c.double() - ref).norm() / ref.norm())
        print("relaxed cluster", (m, n, k), out, {x: p.get(x) for x in ("BM", "BN", "STAGES", "EPILOGUE")}, "rel err",
              err, flush=True)
        assert err < (4e-3 if out == torch.bfloat16 else 1e-5), err
print("ok")
