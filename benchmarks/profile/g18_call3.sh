#!/usr/bin/env bash
# G18 device call 3 (issue 15, large f32 out): the policy's f32 form is now 4 pieces of 64 columns through one buffer
# (LARGE_PERSISTENT_F32, STORE_BUFS=1): the GPU tests through launch with it, its SASS, then compute-sanitizer
# racecheck / memcheck on it (3 blocks and 1 block over 3 x 4 ragged tiles; `sanitize_gemm_large.py f32b1`).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g18-call3.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$LOG"
timeout 100 python3 -m pytest -q -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_large.py \
  -k "through_launch or writes_any_c or f32_persistent_policy" 2>&1 | grep -v Warning | tail -6 | tee -a "$LOG"
echo "== pytest $(el)" | tee -a "$LOG"
for tool in racecheck memcheck; do
  timeout 45 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_large.py f32b1 > "$OUT/$tool-f32b1.log" 2>&1
  echo "== $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool-f32b1.log" | tr '\n' ' ') $(el)" \
    | tee -a "$LOG"
  grep -m5 -E "Error|Hazard|Invalid|Traceback|rel err" "$OUT/$tool-f32b1.log" | tee -a "$LOG"
done
echo "== done $(el)" | tee -a "$LOG"
