#!/usr/bin/env bash
# G27 device call 5 (issue 15): 81-96 rows as two unsplit 48-row tiles (the policy's row_tiles2 from 81 rows): GPU
# tests through launch (the same bits twice, SASS) and the lowering, memcheck / racecheck of the row tiles, then the
# new rows against the forms before (`gemm_skinny_dram.py --plan 5`).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g27-call5.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee "$LOG"
timeout ${TEST_S:-110} python3 -m pytest -v -p no:cacheprovider tests/gpu/test_gpu_gemm_small.py \
  -k "two_unsplit or one_exchange_tile_sass or k_ways_policy" \
  tests/gpu/test_gpu_lower_gemm_policy.py::test_lowered_skinny_rows_run_k_ways_on_gpu > "$OUT/g27-pytest5.log" 2>&1
echo "== pytest rc=$? $(el)" | tee -a "$LOG"; tail -3 "$OUT/g27-pytest5.log" | tee -a "$LOG"
for tool in memcheck racecheck; do
  timeout ${SAN_S:-80} compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_small.py --rowtiles \
    > "$OUT/g27-$tool-5.log" 2>&1
  echo "== $tool rowtiles rc=$? $(el)" | tee -a "$LOG"; tail -2 "$OUT/g27-$tool-5.log" | tee -a "$LOG"
done
timeout ${SWEEP_S:-80} python3 benchmarks/gemm_skinny_dram.py --plan 5 --no-floor --name gemm-g27-rows96 \
  --precompile 16 --out "$OUT" 2>&1 | grep -v Warning | tee -a "$LOG"
echo "== done $(el)" | tee -a "$LOG"
