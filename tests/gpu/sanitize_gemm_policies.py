"""gemm_hopper's policies once each on small ragged inputs, for compute-sanitizer (memcheck, racecheck):

compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_policies.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402

d = torch.device("cuda")
P = gemm_hopper.PRESETS["sm_90a"]
I128 = tp.nv.wgmma_m64n128k16_bf16
a = torch.randn(130, 520, device=d).bfloat16()
b = torch.randn(520, 264, device=d).bfloat16()
NEW = [dict(IN_FLIGHT=1, BM=64, BN=32, STAGES=8, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n32k16_bf16,
            B_SWIZZLE=tp.Swizzle(2, 3, 3)),
       dict(IN_FLIGHT=1, BM=64, BN=32, STAGES=8, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n32k16_bf16,
            B_SWIZZLE=tp.Swizzle(2, 3, 3), SPLIT_K=2),
       dict(IN_FLIGHT=1, BM=64, BN=64, STAGES=8, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n64k16_bf16),
       dict(BN=128, STAGES=5, INSTR=I128, EPILOGUE=1),
       dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128, EPILOGUE=1),
       dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128, EPILOGUE=2),
       dict(BN=128, STAGES=5, INSTR=I128, EPILOGUE=2)]
OLD = [dict(IN_FLIGHT=1), dict(IN_FLIGHT=1, STAGES=2, BN=128, INSTR=I128),
       dict(IN_FLIGHT=1, PRODUCER_REGS=64, CONSUMER_REGS=216),
       dict(IN_FLIGHT=1, BN=128, INSTR=I128, SPLIT_K=3), dict(IN_FLIGHT=0, STAGES=3),
       dict(PERSISTENT=1), dict(PERSISTENT=1, BN=128, STAGES=3, INSTR=I128, NUM_SMS=2, GROUP_M=2)]
# split-K reduced in the kernel or by splitk_sum (gemm_splitk, FIXUP 1-3)
FIXUP = [dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=I128, SPLIT_K=4, FIXUP=f) for f in (1, 2, 3)] + [
    dict(IN_FLIGHT=1, BN=128, INSTR=I128, SPLIT_K=3, FIXUP=f) for f in (1, 3)]
# two blocks per SM (MIN_BLOCKS=2, 4 stages): unsplit, split-K with the passes, FIXUP=3 with 8 splits
MB2 = dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=4, CONSUMERS=1, INSTR=I128, MIN_BLOCKS=2)
G6 = [MB2, dict(MB2, SPLIT_K=2), dict(MB2, SPLIT_K=8, FIXUP=3), dict(MB2, SPLIT_K=2, FIXUP=3)]
if "--fixup" in sys.argv:   # the fix-up alone: twice each (the second call reuses the workspace and tickets)
    NEW, OLD = FIXUP + FIXUP, []
if "--g6" in sys.argv:      # the two-blocks-per-SM variants alone, twice each
    NEW, OLD, FIXUP = G6 + G6, [], []
# FIXUP=3 storing only the slot rows below M (SLOT_ROWS=1): 64 x 128 (M = 130: the last slot tile half outside M)
# and 128 x 128 tiles
ROWS = [dict(MB2, STAGES=6, MIN_BLOCKS=0, SPLIT_K=4, FIXUP=3, SLOT_ROWS=1),
        dict(IN_FLIGHT=1, BN=128, STAGES=6, INSTR=I128, SPLIT_K=2, FIXUP=3, SLOT_ROWS=1)]
if "--rows" in sys.argv:
    NEW, OLD, FIXUP = ROWS + ROWS, [], []
# --new: the variants added for the skinny/ragged shapes
for extra in (NEW if {"--new", "--fixup", "--g6", "--rows"} & set(sys.argv) else OLD + NEW + FIXUP + G6 + ROWS):
    for out in (torch.float32, torch.bfloat16):
        gemm_hopper.launch(a, b, torch.empty(130, 264, device=d, dtype=out), **{**P, **extra})
for epi in (1, 2):
    c = torch.empty(130, 264, device=d, dtype=torch.bfloat16)
    gemm_hopper.launch(a, b, c, **{**P, "STAGES": 3, "EPILOGUE": epi})
gemm_hopper.launch(a[:, :200].contiguous(), b[:200, :66].contiguous(), torch.empty(130, 66, device=d))  # fallback
for out in (torch.float32, torch.bfloat16):   # the policy's skinny (64 x 128, two blocks per SM, split 2, FIXUP=3)
    for _ in range(2):                        # and decode (split 4, FIXUP=3) rows through launch, twice each
        gemm_hopper.launch(a[:100].contiguous(), b, torch.empty(100, 264, device=d, dtype=out))
        gemm_hopper.launch(a[:16].contiguous(), b, torch.empty(16, 264, device=d, dtype=out))
torch.cuda.synchronize()
print("ok")
