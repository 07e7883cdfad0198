#!/bin/bash
# G24 device call 1: gemm_fp8_swap K_WAYS=2 (two consumers on one 64-column tile, alternate k-tiles) and the rows' own
# BM (e4m3 n24 / n48 / n96): GPU tests of the new forms, SASS, memcheck + racecheck (at once); then alone on the GPU the
# skinny sweep (policy / kways / bm_exact / kways_bm_exact / stages16, every shape's variants twice, alternated) and
# ncu (warm L2, as the graph replays see it) of the policy, K_WAYS=2 and torch._scaled_mm at 16 and 128 rows.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/steps.log"
BENCH="benchmarks/gemm_fp8_skinny.py --kways --repeat 2 --jobs 8"
ROWS="16 24 32 48 64 96 128 192 256"
timeout 80 python3 $BENCH --rows $ROWS --nk 4096,4096 --build-only > "$OUT/bench.log" 2>&1 &
timeout 80 python3 $BENCH --rows 16 64 128 256 --nk 4096,14336 14336,4096 --only policy kways --build-only \
    >> "$OUT/bench.log" 2>&1 &
timeout 80 python3 benchmarks/profile/g24_sass.py >> "$OUT/steps.log" 2>&1 &
timeout 85 python3 -m pytest -v -n 5 -p no:cacheprovider tests/gpu/test_gemm_fp8_swap.py -k "K_WAYS or BM" \
    > "$OUT/pytest.log" 2>&1 &
for t in memcheck racecheck; do
  ( timeout 85 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp8_swap.py g24 > "$OUT/$t.tmp" 2>&1;
    echo "rc=$?" >> "$OUT/$t.tmp" ) &
done
wait; cat "$OUT/memcheck.tmp" "$OUT/racecheck.tmp" > "$OUT/sanitize.log"; rm -f "$OUT"/*.tmp
step "build + pytest + sanitizers + sass done: $(tail -1 "$OUT/pytest.log")"
timeout 90 python3 $BENCH --name gemm-fp8-skinny-g24-call1 --rows $ROWS --nk 4096,4096 --out "$OUT" \
    >> "$OUT/bench.log" 2>&1
step "bench 4096x4096 done"
timeout 50 python3 $BENCH --name gemm-fp8-skinny-g24-call1-long --rows 16 64 128 256 --nk 4096,14336 14336,4096 \
    --only policy kways --out "$OUT" >> "$OUT/bench.log" 2>&1
step "bench long done"
timeout 60 ncu --profile-from-start off --cache-control none --clock-control none \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_bytes.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__block_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
    python3 benchmarks/profile/g24_ncu_driver.py > "$OUT/ncu.log" 2>&1
step "ncu done"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=" "$OUT/sanitize.log"
grep -E "FAILED|ERROR|passed|failed" "$OUT/pytest.log" | tail -12; grep -E "x [0-9]|skipped|fail" "$OUT/bench.log" | cut -c1-160
grep -E "profiled|gemm|nvjet|sm90|cutlass|gpu__time|dram__|lts__|grid_size|block_size" "$OUT/ncu.log" | cut -c1-150 | head -90
