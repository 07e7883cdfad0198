#!/usr/bin/env bash
# G29 device call 1 (issue 15, the small class, rotated input sets): bf16 out on 64 x 128 tiles in relaxed 2x1
# clusters with the producer's tail before the epilogue, and in clusters of 4 row tiles, alternated twice with the
# policy (`gemm_small_class.py --plan g29`); the clusters of 4's GPU tests and sanitizers.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g29-call1.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$LOG"
timeout 230 python3 benchmarks/gemm_small_class.py --plan g29 --name gemm-g29-call1 --precompile 16 --out "$OUT" 2>&1 \
  | grep -v Warning | grep -v "^ *$" | grep -v _warn_once | tee -a "$LOG"
echo "== sweep $(el)" | tee -a "$LOG"
timeout 80 python3 -m pytest -v -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_small_class.py -k cl4 \
  > "$OUT/g29-pytest1.log" 2>&1
echo "== pytest rc=$? $(el): $(tail -1 "$OUT/g29-pytest1.log")" | tee -a "$LOG"
grep -E "FAILED|Error" "$OUT/g29-pytest1.log" | head -8 | tee -a "$LOG"
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_small_class.py cl4 > "$OUT/g29-$tool-1.log" 2>&1
  echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/g29-$tool-1.log" | tail -1) $(el)" | tee -a "$LOG"
  grep -m5 -E "Error|Hazard|Invalid|Traceback" "$OUT/g29-$tool-1.log" | tail -3 | tee -a "$LOG"
done
true
