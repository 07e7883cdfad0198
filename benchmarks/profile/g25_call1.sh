#!/bin/bash
# G25 device call 1: the "kn" swap-AB form (gemm_fp32_kt) for skinny rows of a (K, N) B: kernels built in parallel
# with its GPU tests (and test_gpu_gemm_fp32.py, whose kn cases of <= 256 rows now swap), SASS, compute-sanitizer
# memcheck + racecheck, then the benchmark alone on the GPU (two alternating rounds, parts). Logs and JSON into $OUT.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/steps.log"
BENCH="--rows 16 32 64 128 256 --nk 4096,4096 --shapes 1024,1024,1024 128,14336,4096 --extra --parts"
timeout 100 python3 benchmarks/gemm_fp32_kn.py $BENCH --precompile 10 --build-only > "$OUT/build.log" 2>&1 &
b1=$!
timeout 150 python3 -m pytest -v -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_fp32_swap.py \
    tests/gpu/test_gpu_gemm_fp32.py > "$OUT/pytest.log" 2>&1 &
pt=$!
timeout 90 python3 benchmarks/profile/g25_sass.py > "$OUT/sass.log" 2>&1 &
wait $b1; step "build done: $(tail -1 "$OUT/build.log" | cut -c1-120)"
wait $pt; step "pytest done: $(tail -1 "$OUT/pytest.log")"
for t in memcheck racecheck; do
  ( timeout 100 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp32_swap.py > "$OUT/${t}.log" 2>&1;
    echo "rc=$?" >> "$OUT/${t}.log" ) &
done
wait; step "sanitizers + sass done"
timeout 120 python3 benchmarks/gemm_fp32_kn.py $BENCH --tag -g25-call1 --out "$OUT" > "$OUT/bench.log" 2>&1
step "bench done"
for f in "$OUT"/memcheck.log "$OUT"/racecheck.log; do echo "$f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rc=' "$f" | tr '\n' ' ')"; done
cat "$OUT/sass.log"; grep -E "passed|failed|FAILED" "$OUT/pytest.log" | tail -8
cat "$OUT/bench.log" | grep -v "^precompiled" | tail -80
