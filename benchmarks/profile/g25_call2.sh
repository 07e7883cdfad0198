#!/bin/bash
# G25 device call 2: gemm_fp32_kt's row-major staged B tile (A_KN=2, BN up to 128) against the swizzled blocks (A_KN=1,
# BN <= 64) and the unswapped form: kernels built in parallel with the kn swap GPU tests (both forms), SASS and
# compute-sanitizer memcheck + racecheck, then the benchmark alone on the GPU (two alternating rounds). Into $OUT.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/steps.log"
BENCH="--rows 16 32 64 128 256 --nk 4096,4096 --shapes 128,14336,4096"
timeout 60 python3 benchmarks/gemm_fp32_kn.py $BENCH --precompile 8 --build-only > "$OUT/build.log" 2>&1 &
b1=$!
timeout 75 python3 -m pytest -v -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_fp32_swap.py -k swap_kn \
    > "$OUT/pytest.log" 2>&1 &
pt=$!
timeout 60 python3 benchmarks/profile/g25_sass.py > "$OUT/sass.log" 2>&1 &
wait $b1; step "build done: $(tail -1 "$OUT/build.log" | cut -c1-120)"
wait $pt; step "pytest done: $(tail -1 "$OUT/pytest.log")"
for t in memcheck racecheck; do
  ( timeout 60 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp32_swap.py > "$OUT/${t}.log" 2>&1;
    echo "rc=$?" >> "$OUT/${t}.log" ) &
done
wait; step "sanitizers + sass done"
timeout 60 python3 benchmarks/gemm_fp32_kn.py $BENCH --tag=-g25-call2 --out "$OUT" > "$OUT/bench.log" 2>&1
step "bench done"
for f in "$OUT"/memcheck.log "$OUT"/racecheck.log; do echo "$f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rc=' "$f" | tr '\n' ' ')"; done
cat "$OUT/sass.log"; grep -E "passed|failed|FAILED" "$OUT/pytest.log" | tail -8
grep -v "^precompiled" "$OUT/bench.log" | tail -60
