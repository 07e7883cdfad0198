#!/usr/bin/env bash
# G22 device call 3 (issue 15, the small class): gemm_cluster RELAXED=1's producer tail against a relaxed closing
# barrier and the tail before the epilogue (source edits, `gemm_small_fixed.py --plan b`, device time); cuBLAS's tile
# (128 x 64, two consumer warpgroups, 8 stages) unclustered and in relaxed clusters against the policy, alternated
# (`gemm_small_class.py --plan g22b`); the small class's GPU tests (the 128 x 64 cluster form added) and sanitizers.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g22-call3.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$LOG"
timeout 100 python3 benchmarks/gemm_small_fixed.py --plan b --out "$OUT" --name gemm-g22-tail 2>&1 \
  | grep -v Warning | grep -v _warn_once | tee -a "$LOG"
echo "== tail ablation $(el)" | tee -a "$LOG"
timeout 150 python3 benchmarks/gemm_small_class.py --plan g22b --name gemm-g22-call3 --precompile 16 --out "$OUT" 2>&1 \
  | grep -v Warning | grep -v "^ *$" | grep -v _warn_once | tee -a "$LOG"
echo "== sweep $(el)" | tee -a "$LOG"
timeout 100 python3 -m pytest -v -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_small_class.py > "$OUT/g22-pytest3.log" 2>&1
echo "== pytest rc=$? $(el): $(tail -1 "$OUT/g22-pytest3.log")" | tee -a "$LOG"
grep -E "FAILED|Error" "$OUT/g22-pytest3.log" | head -8 | tee -a "$LOG"
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_small_class.py > "$OUT/g22-$tool-3.log" 2>&1
  echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/g22-$tool-3.log" | tail -1) $(el)" | tee -a "$LOG"
  grep -m5 -E "Error|Hazard|Invalid|Traceback" "$OUT/g22-$tool-3.log" | tail -3 | tee -a "$LOG"
done
true
