#!/usr/bin/env bash
# G23 device call 2 (issue 15): the policy's cluster split with 4 stages per ring at BM 32-80 alternated twice with the
# stages before, and at BM 112 / 128 the pushed exchange in one tile (XCH=1) against the barrier exchange
# (`gemm_small_sweep.py --plan 19`), their GPU tests, compute-sanitizer memcheck / racecheck on their cases.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g23-call2.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | tee "$LOG"
timeout 60 python3 benchmarks/gemm_small_sweep.py --plan 19 --name gemm-g23-stages --precompile 16 --out "$OUT" 2>&1 \
  | grep -v Warning | tee -a "$LOG"
echo "== sweep $(el)" | tee -a "$LOG"
timeout 50 python3 -m pytest -q -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_small.py \
  -k "four_stages_through or one_exchange" -v 2>&1 \
  | grep -v Warning > "$OUT/g23-pytest.log"
echo "== pytest $(grep -c PASSED "$OUT/g23-pytest.log") passed $(grep -cE 'FAILED|ERROR' "$OUT/g23-pytest.log") failed $(el)" | tee -a "$LOG"
grep -E "FAILED|Error|assert" "$OUT/g23-pytest.log" | head -8 | tee -a "$LOG"
for tool in memcheck racecheck; do
  timeout 40 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_small.py --clusterk-stages > "$OUT/g23-$tool.log" 2>&1
  echo "== $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/g23-$tool.log" | tr '\n' ' ') $(el)" | tee -a "$LOG"
  grep -m5 -E "Error|Hazard|Invalid|Traceback|rel err" "$OUT/g23-$tool.log" | tee -a "$LOG"
done
echo "== done $(el)" | tee -a "$LOG"
