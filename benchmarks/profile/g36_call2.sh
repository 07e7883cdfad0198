#!/bin/bash
# G36 device call 2: the adopted policy (launch_policy's 128 x 96 / 128 x 64 TMA_ONLY tiles, the kn swap with TMA_ONLY
# and register budgets) against the forms it replaced and on shapes not used to set it; GPU tests; compute-sanitizer
# memcheck + racecheck; then the benchmark alone on the GPU (rotated, two alternating rounds). Into $OUT.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/steps.log"
SHAPES="2051,2045,1000:kn:policy+bn128+policy0
1536,1536,1536:kn:policy+bn128
1600,1600,1600:kn:policy+bn128
3072,3072,1024:kn:policy+bn128
1152,1152,1152:kn:policy+bn128
2304,2304,2304:kn:policy+bn96
1024,1024,1024:kn:policy+policy0
1000,1000,1000:kn:policy+policy0
128,4096,4096:kn:policy+swapT+swapT0
256,4096,4096:kn:policy+swapT+swapT0
16,4096,4096:kn:policy+swapT0
64,4096,4096:kn:policy+swapT0
128,4096,4096:nk:policy+swapTR
512,512,512:kn:policy+m64bn64T+m64bn64ks2T
768,768,768:kn:policy+m64bn64T+bn64T"
timeout 80 python3 benchmarks/profile/g36_fp32.py --build-only --precompile 10 --shapes $SHAPES > "$OUT/build.log" 2>&1 &
b1=$!
timeout 110 python3 -m pytest -v -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_fp32_waves.py \
    tests/gpu/test_gpu_gemm_fp32.py tests/gpu/test_gpu_gemm_fp32_swap.py > "$OUT/pytest.log" 2>&1 &
pt=$!
wait $b1; step "build done"
wait $pt; step "pytest done: $(tail -1 "$OUT/pytest.log")"
for t in memcheck racecheck; do
  ( for f in tests/gpu/sanitize_gemm_fp32_waves.py tests/gpu/sanitize_gemm_fp32_swap.py; do
      timeout 70 compute-sanitizer --tool $t python3 $f; echo "rc=$? ($f)"; done > "$OUT/${t}.log" 2>&1 ) &
done
wait; step "sanitizers done"
timeout 120 python3 benchmarks/profile/g36_fp32.py --rounds 2 --shapes $SHAPES --tag=-call2 --out "$OUT" \
    > "$OUT/bench.log" 2>&1
step "bench done rc=$?"
for f in "$OUT"/memcheck.log "$OUT"/racecheck.log; do echo "$f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rc=' "$f" | tr '\n' ' ')"; done
grep -E "passed|failed|FAILED|Error" "$OUT/pytest.log" | tail -15
grep -E "regs|FAILED" "$OUT/build.log"; cat "$OUT/bench.log"
