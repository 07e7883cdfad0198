"""The large-shape GEMM forms once each on small ragged shapes, for compute-sanitizer: gemm_hopper's grouped
tile order with the TMA store and register budgets, the 256 x 128 tile, gemm_persistent's TMA store overlapped with
the next tile (whole, and in 64-column pieces: STORE_N), gemm_fp8 with the TMA store and register budgets, and
gemm_fp8_persistent_tma (the pieces for fp8).

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_large.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_large.py [MODE: persistent, pieces, defer, f32,
f32policy, f32b1, held or loop]
(defer: the DEFER=1 piece forms alone: pieces held in registers and written under the next tile's first k-tile;
f32: the piece forms with f32 out alone, G18: 8 pieces of 32 columns through two 16 KB buffers (128-byte rows, and
32-byte column blocks), 16 of 16 through four, 4 of 64 beside 3 stages, and the large f32 class through launch on a
ragged shape; f32policy: the two 2056-row cases alone; f32b1: G18's one-buffer form (F32_ONE_BUFFER) on the small ragged
shape alone)
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_fp8, gemm_hopper  # noqa: E402

ONLY = sys.argv[1] if len(sys.argv) > 1 else ""   # "persistent": gemm_persistent's case alone (a short call)
d = torch.device("cuda")
g = torch.Generator(device="cuda").manual_seed(0)
P = gemm_hopper.PRESETS["sm_90a"]
R64 = dict(PRODUCER_REGS=64, CONSUMER_REGS=216)
for (m, k, n), extra in (((300, 520, 776), dict(STAGES=3, EPILOGUE=2, IN_FLIGHT=0, GROUP_M=2, **R64)),
                         ((520, 200, 264), dict(BM=256, BN=128, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n128k16_bf16,
                                                STAGES=3, EPILOGUE=2, IN_FLIGHT=0, GROUP_M=2, **R64)),
                         # gemm_persistent, TMA store overlapped with the next tile: 3 blocks over 3 x 4 tiles
                         ((300, 520, 776), dict(PERSISTENT=1, NUM_SMS=3, STAGES=3, EPILOGUE=2, GROUP_M=2, **R64)),
                         # the store in 64-column pieces (two buffers, a store warp), 4 stages: 3 blocks over 3 x 4
                         # tiles, partial in M, N and K
                         ((300, 520, 776), dict(PERSISTENT=1, NUM_SMS=3, STAGES=4, EPILOGUE=2, STORE_N=64, GROUP_M=2,
                                                **R64)),
                         # 8 pieces of 32 columns through 4 buffers (64-byte swizzle)
                         ((300, 520, 776), dict(PERSISTENT=1, NUM_SMS=3, STAGES=4, EPILOGUE=2, STORE_N=32,
                                                STORE_BUFS=4, GROUP_M=2, **R64)),
                         # DEFER=1: pieces 2 and 3 held in registers, written under the next tile's first k-tile;
                         # 3 blocks over 3 x 4 tiles (partial in M, N and K), and one block over all 12
                         ((300, 520, 776), dict(PERSISTENT=1, NUM_SMS=3, STAGES=4, EPILOGUE=2, STORE_N=64, GROUP_M=2,
                                                DEFER=1, **R64)),
                         ((300, 520, 776), dict(PERSISTENT=1, NUM_SMS=1, STAGES=4, EPILOGUE=2, STORE_N=32,
                                                STORE_BUFS=4, GROUP_M=2, DEFER=1, **R64)),
                         # DEFER=2 (the ring loop whole from slot 0): 3 blocks over 3 x 4 tiles
                         ((300, 520, 776), dict(PERSISTENT=1, NUM_SMS=3, STAGES=4, EPILOGUE=2, STORE_N=64, GROUP_M=2,
                                                DEFER=2, **R64))):
    if (ONLY == "persistent" and not extra.get("PERSISTENT") or ONLY == "pieces" and not extra.get("STORE_N")
            or ONLY == "defer" and not extra.get("DEFER") or ONLY in ("f32", "f32policy", "f32b1", "held", "loop")):
        continue
    a = torch.randn(m, k, device=d, generator=g).bfloat16()
    b = torch.randn(k, n, device=d, generator=g).bfloat16()
    ref = a.double() @ b.double()
    c = torch.full((m, n), float("nan"), device=d, dtype=torch.bfloat16)
    gemm_hopper.launch(a, b, c, **{**P, **extra})
    torch.cuda.synchronize()
    print("bf16", m, k, n, "rel err", float((c.double() - ref).norm() / ref.norm()), flush=True)
# f32 out in pieces (G18): 3 blocks over 3 x 4 tiles partial in M, N and K, and one block over all 12
for (m, k, n), extra in (((300, 520, 776), dict(PERSISTENT=1, NUM_SMS=3, STAGES=4, EPILOGUE=2, STORE_N=32, GROUP_M=2,
                                                **R64)),
                         ((300, 520, 776), dict(PERSISTENT=1, NUM_SMS=3, STAGES=4, EPILOGUE=2, STORE_N=32,
                                                STORE_SPAN=32, GROUP_M=2, **R64)),     # 32-byte column blocks
                         ((300, 520, 776), dict(PERSISTENT=1, NUM_SMS=1, STAGES=4, EPILOGUE=2, STORE_N=16,
                                                STORE_BUFS=4, STORE_SPAN=32, GROUP_M=2, **R64)),
                         ((300, 520, 776), dict(PERSISTENT=1, NUM_SMS=3, STAGES=3, EPILOGUE=2, STORE_N=64,
                                                STORE_SPAN=32, GROUP_M=2, **R64)),
                         # the policy's form (4 pieces of 64 through one buffer, 4 stages): 3 blocks, and 1 block
                         ((300, 520, 776), dict(gemm_hopper.F32_ONE_BUFFER, NUM_SMS=3, GROUP_M=2)),
                         ((300, 520, 776), dict(gemm_hopper.F32_ONE_BUFFER, NUM_SMS=1, GROUP_M=2)),
                         # the large f32 class through launch (its policy): 2056 x 4160 x 1040, 17 x 17 tiles
                         # (partial in M, N and K) on the policy's grid; and 4 pieces of 64 through one buffer
                         ((2056, 1040, 4160), {}),
                         ((2056, 1040, 4160), dict(PERSISTENT=1, STAGES=4, EPILOGUE=2, STORE_N=64, STORE_BUFS=1,
                                                   GROUP_M=8, **R64))):
    if (ONLY not in ("", "pieces", "persistent", "f32", "f32policy", "f32b1") or ONLY == "f32policy" and m < 2000
            or ONLY == "f32b1" and (m > 2000 or extra.get("STORE_BUFS") != 1)):
        continue
    a = torch.randn(m, k, device=d, generator=g).bfloat16()
    b = torch.randn(k, n, device=d, generator=g).bfloat16()
    ref = a.double() @ b.double()
    c = torch.full((m, n), float("nan"), device=d, dtype=torch.float32)
    gemm_hopper.launch(a, b, c, **({**P, **extra} if extra else {}))
    torch.cuda.synchronize()
    err = float((c.double() - ref).norm() / ref.norm())
    print("f32", m, k, n, extra.get("STORE_N", "policy"), extra.get("STORE_BUFS", 2), "rel err", err, flush=True)
for (m, n, k), extra in (((136, 260, 400), dict(STAGES=3, EPILOGUE=2, PRODUCER_REGS=96, CONSUMER_REGS=200)),
                         ((300, 520, 272), dict(STAGES=3, EPILOGUE=2, GROUP_M=2)),
                         # gemm_fp8_persistent_tma: 3 blocks over 3 x 3 tiles of 4 pieces, ragged M and K
                         ((300, 520, 272), dict(PERSISTENT=1, NUM_SMS=3, STORE_N=64, STAGES=4, GROUP_M=2,
                                                PRODUCER_REGS=96, CONSUMER_REGS=200))):
    if (ONLY in ("persistent", "defer", "f32", "f32policy", "f32b1", "held", "loop")
            or ONLY == "pieces" and not extra.get("STORE_N")):
        continue
    a = torch.randn(m, k, device=d, generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=d, generator=g).to(torch.float8_e4m3fn)
    s = torch.ones(1, device=d)
    out = torch.full((m, n), float("nan"), device=d, dtype=torch.bfloat16)
    gemm_fp8.launch(a, b, s, s, out, **{**gemm_fp8.PRESETS["sm_90a"], **extra})
    torch.cuda.synchronize()
    ref = a.double() @ b.double().t()
    print("fp8", m, n, k, "rel err", float((out.double() - ref).norm() / ref.norm()), flush=True)
# G26 (mode "held" alone, or all): DEFER=2 with HELD (the last piece(s) held in registers; f32 and bf16 out): the
# one-buffer form with piece 3 held over 3 blocks and one block, 8 pieces of 32 with 2 held; and 128 x 192 tiles in
# 2x1 clusters (TMA store, 3 row tiles: the grid rounded up to whole clusters), clusters of 4; the f32 policy's
# clusters of 4
I192 = tp.nv.wgmma_m64n192k16_bf16
for (m, k, n), extra, outs in (
        ((300, 520, 776), dict(gemm_hopper.F32_ONE_BUFFER, NUM_SMS=3, GROUP_M=2, DEFER=2, HELD=1), "fb"),
        ((300, 520, 776), dict(gemm_hopper.F32_ONE_BUFFER, NUM_SMS=1, GROUP_M=2, DEFER=2, HELD=1), "f"),
        ((300, 520, 776), dict(gemm_hopper.F32_ONE_BUFFER, NUM_SMS=3, STORE_N=32, STORE_BUFS=2, GROUP_M=2,
                               DEFER=2, HELD=2), "f"),
        # the store warp's pieces in a run-time loop (STORE_LOOP=1): the 8-piece HELD=2 form, the bf16 policy's form
        ((300, 520, 776), dict(gemm_hopper.LARGE_PERSISTENT_F32, NUM_SMS=3, GROUP_M=2), "f"),   # the f32 policy's
        ((300, 520, 776), dict(gemm_hopper.LARGE_PERSISTENT_F32, NUM_SMS=1, GROUP_M=2), "f"),
        ((300, 520, 776), dict(gemm_hopper.LARGE_PERSISTENT, NUM_SMS=3, GROUP_M=2, STORE_LOOP=1), "b"),
        ((300, 520, 776), dict(CLUSTER_M=2, BN=192, INSTR=I192, STAGES=4, EPILOGUE=2, IN_FLIGHT=0, **R64), "b"),
        ((300, 520, 776), dict(CLUSTER_M=2, BN=192, INSTR=I192, STAGES=3, EPILOGUE=2, IN_FLIGHT=0, **R64), "f"),
        ((300, 520, 776), dict(CLUSTER_M=4, STAGES=3, EPILOGUE=2, IN_FLIGHT=0, **R64), "b"),
        # the f32 policy where B's rows are off 128-byte lines (UNALIGNED_B_F32: clusters of 4, registers' store),
        # given and through launch (2048 x 1160 x 520: 16 x 5 tiles, B rows of 2320 bytes)
        ((300, 520, 776), dict(CLUSTER_M=4, STAGES=4, EPILOGUE=0, IN_FLIGHT=0, **R64), "f"),
        ((2048, 520, 1160), {}, "f")):
    if ONLY not in ("", "held", "loop") or ONLY == "loop" and not extra.get("STORE_LOOP"):
        continue
    a = torch.randn(m, k, device=d, generator=g).bfloat16()
    b = torch.randn(k, n, device=d, generator=g).bfloat16()
    ref = a.double() @ b.double()
    for o in outs:
        c = torch.full((m, n), float("nan"), device=d, dtype=torch.float32 if o == "f" else torch.bfloat16)
        gemm_hopper.launch(a, b, c, **({**P, **extra} if extra else {}))
        torch.cuda.synchronize()
        print("held/n192", o, extra.get("HELD"), extra.get("BN"), extra.get("CLUSTER_M"), "rel err",
              float((c.double() - ref).norm() / ref.norm()), flush=True)
print("ok")
