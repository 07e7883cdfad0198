#!/bin/bash
# G24 device call 2: gemm_fp8_swap CLUSTER_M=2 (the rows split over a (2, 1, 1) cluster, B's tiles multicast into both
# blocks, no K split: cuBLAS's nvjet 64x8_128x16_1x2 form): the fp8 GPU tests (all swap forms + the policy's), SASS,
# memcheck + racecheck of the G24 cases (at once); then alone on the GPU the skinny sweep (policy / kways_bm_exact /
# cm / cm_kw / cm_kw16 / cm_bn128, every shape's variants twice, alternated).
cd "$(dirname "$0")/../.."
T0=$(date +%s)
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/steps.log"
BENCH="benchmarks/gemm_fp8_skinny.py --kways --repeat 2 --jobs 8"
ROWS="16 24 32 48 64 96 128 192 256"
V1="policy kways_bm_exact cm cm_kw cm_kw16"
timeout 80 python3 $BENCH --rows $ROWS --nk 4096,4096 --only $V1 --build-only > "$OUT/bench.log" 2>&1 &
timeout 80 python3 $BENCH --rows 16 64 128 256 --nk 4096,14336 --only policy cm cm_kw --build-only >> "$OUT/bench.log" 2>&1 &
timeout 80 python3 $BENCH --rows 16 128 --nk 14336,4096 --only policy cm_kw cm_bn128 --build-only >> "$OUT/bench.log" 2>&1 &
timeout 80 python3 benchmarks/profile/g24_sass.py >> "$OUT/steps.log" 2>&1 &
timeout 85 python3 -m pytest -v -n 6 -p no:cacheprovider tests/gpu/test_gemm_fp8_swap.py tests/gpu/test_gemm_fp8.py \
    > "$OUT/pytest.log" 2>&1 &
for t in memcheck racecheck; do
  ( timeout 85 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp8_swap.py g24 > "$OUT/$t.tmp" 2>&1;
    echo "rc=$?" >> "$OUT/$t.tmp" ) &
done
wait; cat "$OUT/memcheck.tmp" "$OUT/racecheck.tmp" > "$OUT/sanitize.log"; rm -f "$OUT"/*.tmp
step "build + pytest + sanitizers + sass done: $(tail -1 "$OUT/pytest.log")"
timeout 80 python3 $BENCH --name gemm-fp8-skinny-g24-call2 --rows $ROWS --nk 4096,4096 --only $V1 --out "$OUT" \
    >> "$OUT/bench.log" 2>&1
step "bench 4096x4096 done"
timeout 30 python3 $BENCH --name gemm-fp8-skinny-g24-call2-k14336 --rows 16 64 128 256 --nk 4096,14336 \
    --only policy cm cm_kw --out "$OUT" >> "$OUT/bench.log" 2>&1
step "bench K 14336 done"
timeout 20 python3 $BENCH --name gemm-fp8-skinny-g24-call2-n14336 --rows 16 128 --nk 14336,4096 \
    --only policy cm_kw cm_bn128 --out "$OUT" >> "$OUT/bench.log" 2>&1
step "bench N 14336 done"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=" "$OUT/sanitize.log"
grep -E "FAILED|ERROR|passed|failed" "$OUT/pytest.log" | tail -12; grep -E "x [0-9]|skipped|fail" "$OUT/bench.log" | cut -c1-112
