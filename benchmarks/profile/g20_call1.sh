#!/bin/bash
# G20 device call 1: the swap-AB forms for skinny rows, fp8 (gemm_fp8_swap) and fp32 (gemm_fp32_ct): kernels built in
# parallel with their GPU tests, SASS, compute-sanitizer memcheck + racecheck, then the two benchmarks alone on the GPU
# (benchmarks/gemm_fp8_skinny.py, benchmarks/gemm_fp32_swap.py --small). Logs and JSON into $OUT.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/steps.log"
timeout 110 python3 benchmarks/gemm_fp8_skinny.py --jobs 8 --build-only > "$OUT/fp8_build.log" 2>&1 &
b1=$!
timeout 110 python3 benchmarks/gemm_fp32_swap.py --rows 16 32 64 128 256 --nk 4096,4096 --small --precompile 6 \
    --build-only > "$OUT/fp32_build.log" 2>&1 &
b2=$!
timeout 120 python3 -m pytest -v -n 3 -p no:cacheprovider tests/gpu/test_gemm_fp8_swap.py \
    tests/gpu/test_gpu_gemm_fp32_swap.py > "$OUT/pytest.log" 2>&1 &
pt=$!
wait $b1 $b2; step "builds done (rc fp8 $(tail -1 "$OUT/fp8_build.log" | cut -c1-80))"
timeout 60 python3 benchmarks/profile/g20_sass.py > "$OUT/sass.log" 2>&1 &
wait $pt; step "pytest done: $(tail -1 "$OUT/pytest.log")"
for t in memcheck racecheck; do
  for f in fp8_swap fp32_swap; do
    ( timeout 90 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_${f}.py > "$OUT/${t}_${f}.log" 2>&1;
      echo "rc=$?" >> "$OUT/${t}_${f}.log" ) &
  done
done
wait; step "sanitizers + sass done"
timeout 75 python3 benchmarks/gemm_fp8_skinny.py --jobs 8 --out "$OUT" > "$OUT/fp8_bench.log" 2>&1
step "fp8 bench done"
timeout 70 python3 benchmarks/gemm_fp32_swap.py --rows 16 32 64 128 256 --nk 4096,4096 --small --out "$OUT" \
    > "$OUT/fp32_bench.log" 2>&1
step "fp32 bench done"
for f in "$OUT"/memcheck_*.log "$OUT"/racecheck_*.log; do echo "$f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rc=' "$f" | tr '\n' ' ')"; done
cat "$OUT/sass.log"; grep -E "passed|failed" "$OUT/pytest.log" | tail -3
