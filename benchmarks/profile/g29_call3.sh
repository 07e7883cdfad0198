#!/usr/bin/env bash
# G29 device call 3 (issue 15, the small class, rotated input sets): the policy with K_WAYS 128 x 64 on the large
# class's small-tile rows of >= 64 k-tiles against the relaxed cluster it replaced, alternated twice; K_WAYS at 32 / 48
# k-tiles (`gemm_small_class.py --plan g29c`); the small class's GPU tests and sanitizers with it.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g29-call3.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$LOG"
timeout 200 python3 benchmarks/gemm_small_class.py --plan g29c --name gemm-g29-call3 --precompile 16 --out "$OUT" 2>&1 \
  | grep -v Warning | grep -v "^ *$" | grep -v _warn_once | tee -a "$LOG"
echo "== sweep $(el)" | tee -a "$LOG"
timeout 120 python3 -m pytest -v -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_small_class.py > "$OUT/g29-pytest3.log" 2>&1
echo "== pytest rc=$? $(el): $(tail -1 "$OUT/g29-pytest3.log")" | tee -a "$LOG"
grep -E "FAILED|Error" "$OUT/g29-pytest3.log" | head -8 | tee -a "$LOG"
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_small_class.py > "$OUT/g29-$tool-3.log" 2>&1
  echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/g29-$tool-3.log" | tail -1) $(el)" | tee -a "$LOG"
  grep -m5 -E "Error|Hazard|Invalid|Traceback" "$OUT/g29-$tool-3.log" | tail -3 | tee -a "$LOG"
done
true
