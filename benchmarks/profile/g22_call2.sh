#!/usr/bin/env bash
# G22 device call 2 (issue 15, the small class): gemm_cluster RELAXED=1 forms and the policy at 8 stages against the
# policy, alternated twice (`benchmarks/gemm_small_class.py --plan g22`), then the GPU tests of the small class (the
# RELAXED forms included), compute-sanitizer memcheck and racecheck (tests/gpu/sanitize_gemm_small_class.py).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g22-call2.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1 | tee "$LOG"
timeout 200 python3 benchmarks/gemm_small_class.py --plan g22 --name gemm-g22-call2 --precompile 16 --out "$OUT" 2>&1 \
  | grep -v Warning | grep -v "^ *$" | grep -v _warn_once | tee -a "$LOG"
echo "== sweep $(el)" | tee -a "$LOG"
timeout 120 python3 -m pytest -v -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_small_class.py > "$OUT/g22-pytest.log" 2>&1
echo "== pytest rc=$? $(el): $(tail -1 "$OUT/g22-pytest.log")" | tee -a "$LOG"
grep -E "FAILED|Error" "$OUT/g22-pytest.log" | head -8 | tee -a "$LOG"
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_small_class.py > "$OUT/g22-$tool.log" 2>&1
  echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/g22-$tool.log" | tail -1) $(el)" | tee -a "$LOG"
  grep -m5 -E "Error|Hazard|Invalid|Traceback" "$OUT/g22-$tool.log" | tail -3 | tee -a "$LOG"
done
