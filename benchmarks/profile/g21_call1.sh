#!/bin/bash
# G21 device call 1: gemm_fp8_swap's CLUSTER_K (the split summed in the kernel over a (1, 1, 2 / 4) cluster by st.async
# butterfly rounds): GPU tests, the SASS, compute-sanitizer memcheck + racecheck (all at once), then the skinny sweep
# alone on the GPU (slots against the cluster, every shape's variants timed twice, alternated).
cd "$(dirname "$0")/../.."
T0=$(date +%s)
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/steps.log"
BENCH="benchmarks/gemm_fp8_skinny.py --cluster --repeat 2 --jobs 6"
timeout 80 python3 $BENCH --rows 16 32 64 128 256 --nk 4096,4096 --build-only > "$OUT/bench.log" 2>&1 &
timeout 80 python3 benchmarks/profile/g21_sass.py > "$OUT/sass.log" 2>&1 &
timeout 85 python3 -m pytest -v -n 5 -p no:cacheprovider tests/gpu/test_gemm_fp8_swap.py tests/gpu/test_gemm_fp8.py \
    > "$OUT/pytest.log" 2>&1 &
for t in memcheck racecheck; do
  ( timeout 85 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp8_swap.py > "$OUT/$t.log" 2>&1;
    echo "rc=$?" >> "$OUT/$t.log" ) &
done
wait; step "build + pytest + sanitizers + sass done: $(tail -1 "$OUT/pytest.log")"
timeout 70 python3 $BENCH --name gemm-fp8-skinny-g21-call1 --rows 16 32 64 128 256 --nk 4096,4096 --out "$OUT" \
    >> "$OUT/bench.log" 2>&1
step "bench 4096x4096 done"
timeout 25 python3 $BENCH --name gemm-fp8-skinny-g21-call1-k14336 --rows 16 64 --nk 4096,14336 --only policy slots \
    --out "$OUT" >> "$OUT/bench.log" 2>&1
step "bench 4096x14336 done"
for f in "$OUT"/memcheck.log "$OUT"/racecheck.log; do echo "$f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rc=' "$f" | tr '\n' ' ')"; done
cat "$OUT/sass.log"; grep -E "FAILED|ERROR|passed|failed" "$OUT/pytest.log" | tail -12; grep -E "x [0-9]" "$OUT/bench.log" | cut -c1-150
