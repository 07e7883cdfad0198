#!/usr/bin/env bash
# G15 device call 1 (issue 15, large bf16): DEFER=1 (pieces held in registers, written under the next tile's first
# k-tile) against the policy on the issue's large shapes, the diagnostic copies of gemm_persistent
# (benchmarks/profile/g15_epilogue_diag.py), then DEFER's GPU tests and compute-sanitizer memcheck / racecheck.
# Optional last: ncu of the policy and cuBLAS at 8192 x 8192 x 1024 (G15_NCU=1). Everything streams into $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g15-call1.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
V='^(pers_defer|pers_n32_b4_defer|pers_g32)$'
S="8192,8192,1024 4096,14336,4096 4096,4096,4096 4096,4096,14336 8192,8192,8192 8192,8192,2048"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee "$LOG"
timeout 90 python3 benchmarks/gemm_large_sweep.py --only bf16 --precompile 16 --precompile-only --variants "$V" \
  --shapes $S 2>&1 | tee -a "$LOG"
echo "== build $(el)" | tee -a "$LOG"
timeout 150 python3 benchmarks/gemm_large_sweep.py --only bf16 --tag g15-call1 --out "$OUT" --batches 15 --profile \
  --variants "$V" --shapes $S 2>&1 | grep -v Warning | tee -a "$LOG"
echo "== sweep $(el)" | tee -a "$LOG"
timeout 60 python3 benchmarks/profile/g15_epilogue_diag.py --out "$OUT" --shapes 8192,8192,1024 4096,14336,4096 \
  2>&1 | tee -a "$LOG"
echo "== diag $(el)" | tee -a "$LOG"
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_gemm_large.py -k "defer" -v 2>&1 \
  | grep -v Warning > "$OUT/pytest-defer.log"
echo "== pytest rc=$? $(grep -cE 'PASSED' "$OUT/pytest-defer.log") passed $(grep -cE 'FAILED|ERROR' "$OUT/pytest-defer.log") failed $(el)" | tee -a "$LOG"
grep -E "FAILED|Error|assert" "$OUT/pytest-defer.log" | head -10 | tee -a "$LOG"
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_large.py defer > "$OUT/$tool-defer.log" 2>&1
  echo "== $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool-defer.log" | tr '\n' ' ') $(el)" | tee -a "$LOG"
  grep -m5 -E "Error|Hazard|Invalid|Traceback|rel err" "$OUT/$tool-defer.log" | tee -a "$LOG"
done
if [ "${G15_NCU:-0}" = 1 ]; then
  timeout 90 ncu -k regex:'gemm_persistent|nvjet' --launch-skip 2 --launch-count 2 --section SpeedOfLight \
    --section WarpStateStats --section ComputeWorkloadAnalysis -f -o /tmp/g15ncu \
    python3 benchmarks/profile/g15_ncu_driver.py 8192 8192 1024 > "$OUT/ncu-run.log" 2>&1
  echo "== ncu rc=$? $(el)" | tee -a "$LOG"
  ncu -i /tmp/g15ncu.ncu-rep --page details --csv > "$OUT/ncu-details.csv" 2>&1
fi
echo "== done $(el)" | tee -a "$LOG"
