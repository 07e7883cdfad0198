#!/bin/bash
# G36 device call 1: gemm_fp32's tile forms (BN 128 / 96 / 80 / 64 with two consumers, 64-row tiles with one; TMA_ONLY
# "T" variants) against SGEMM on the ragged, small and skinny shapes, rotated, two alternating rounds, and where the
# policy's time goes (--parts). Kernels built first in parallel. Into $OUT.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/steps.log"
SHAPES="2051,2045,1000:kn:policy+bn96+bn96T+bn80T+bn64T+m64+m64T+m64bn64T
1024,1024,1024:kn:policy+policyT+bn128+m64T+m64bn64T
128,4096,4096:kn:policy+policyT+swap_m64_ks2T
1536,1536,1536:kn:policy+bn96+bn64T+m64T
2048,2048,2048:kn:policy+policyT+bn96
3000,5000,4096:kn:policy+bn96"
timeout 90 python3 benchmarks/profile/g36_fp32.py --build-only --precompile 15 --shapes $SHAPES > "$OUT/build.log" 2>&1
step "build done"
timeout 200 python3 benchmarks/profile/g36_fp32.py --parts --rounds 2 --shapes $SHAPES --tag=-call1 --out "$OUT" \
    > "$OUT/bench.log" 2>&1
step "bench done rc=$?"
cat "$OUT/build.log"; cat "$OUT/bench.log"
