#!/usr/bin/env bash
# G27 device call 4 (issue 15): the policy with two unsplit row tiles at 97-256 rows (and 5 stages at 128 x 14336 x
# 4096 bf16): GPU tests (launch through the policy, the same bits twice, SASS; the lowering), compute-sanitizer
# memcheck / racecheck of the new forms and of the cluster split's own 105-128-row forms, then the rotated table and
# the new rows against the forms they replaced (`gemm_skinny_dram.py --plan 4`).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g27-call4.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee "$LOG"
timeout ${TEST_S:-150} python3 -m pytest -v -p no:cacheprovider tests/gpu/test_gpu_gemm_small.py \
  -k "two_unsplit or g8_policy or one_exchange or k_ways_policy or cluster_split_four" \
  tests/gpu/test_gpu_lower_gemm_policy.py::test_lowered_skinny_rows_run_k_ways_on_gpu > "$OUT/g27-pytest.log" 2>&1
echo "== pytest rc=$? $(el)" | tee -a "$LOG"; tail -3 "$OUT/g27-pytest.log" | tee -a "$LOG"
for tool in memcheck racecheck; do
  timeout ${SAN_S:-90} compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_small.py --rowtiles \
    > "$OUT/g27-$tool.log" 2>&1
  echo "== $tool rowtiles rc=$? $(el)" | tee -a "$LOG"; tail -2 "$OUT/g27-$tool.log" | tee -a "$LOG"
done
timeout ${SAN_S:-90} compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_small.py --clusterk-stages \
  > "$OUT/g27-memcheck-stages.log" 2>&1
echo "== memcheck clusterk-stages rc=$? $(el)" | tee -a "$LOG"; tail -2 "$OUT/g27-memcheck-stages.log" | tee -a "$LOG"
timeout ${SWEEP_S:-150} python3 benchmarks/gemm_skinny_dram.py --plan 4 --no-floor --name gemm-g27-policy \
  --precompile 16 --out "$OUT" 2>&1 | grep -v Warning | tee -a "$LOG"
echo "== done $(el)" | tee -a "$LOG"
