#!/usr/bin/env bash
# G33 device call 1 (issue 15, the bf16 small class, rotated input sets): gemm_splitk_swap K_WAYS=2 in 1x2 clusters
# of column tiles sharing A by multicast (CLUSTER_N=2), relaxed and with the full cluster barriers, and the 2x1
# B-multicast form relaxed, against the policy (`--plan g33`); the forms' GPU tests and SASS; compute-sanitizer
# memcheck and racecheck on tests/gpu/sanitize_gemm_kways_cluster.py.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g33-call1.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$LOG"
timeout 200 python3 benchmarks/gemm_small_class.py --plan g33 --name gemm-g33-call1 --precompile 16 --out "$OUT" 2>&1 \
  | grep -v Warning | grep -v "^ *$" | grep -v _warn_once | tee -a "$LOG"
echo "== sweep $(el)" | tee -a "$LOG"
timeout 150 python3 -m pytest -v -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_kways_cluster.py \
  > "$OUT/g33-pytest1.log" 2>&1
echo "== pytest rc=$? $(el): $(tail -1 "$OUT/g33-pytest1.log")" | tee -a "$LOG"
grep -E "FAILED|Error" "$OUT/g33-pytest1.log" | head -8 | tee -a "$LOG"
timeout 90 compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_kways_cluster.py > "$OUT/g33-memcheck1.log" 2>&1
echo "== memcheck: rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/g33-memcheck1.log" | tail -1) $(el)" | tee -a "$LOG"
timeout 120 compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_kways_cluster.py \
  > "$OUT/g33-racecheck1.log" 2>&1
echo "== racecheck: rc=$? $(grep -E 'RACECHECK SUMMARY' "$OUT/g33-racecheck1.log" | tail -1) $(el)" | tee -a "$LOG"
true
