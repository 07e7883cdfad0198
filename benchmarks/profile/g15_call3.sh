#!/usr/bin/env bash
# G15 device call 3 (lean): DEFER=2 (the ring loop whole from slot 0) against DEFER=1 and the policy on three large
# shapes, its GPU tests, racecheck on the DEFER cases.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g15-call3.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
V='^(pers_defer|pers_defer2)$'
S="8192,8192,1024 4096,14336,4096 4096,4096,4096"
timeout 60 python3 benchmarks/gemm_large_sweep.py --only bf16 --precompile 8 --precompile-only --variants "$V" \
  --shapes $S 2>&1 | tee "$LOG"
timeout 60 python3 benchmarks/gemm_large_sweep.py --only bf16 --tag g15-call3 --out "$OUT" --batches 20 \
  --variants "$V" --shapes $S 2>&1 | grep -v -i warn | grep -E "^bf16 [0-9x]+:|wrote|failed|WRONG" | tee -a "$LOG"
echo "== sweep $(el)" | tee -a "$LOG"
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_gemm_large.py -k "defer2" 2>&1 \
  | grep -v Warning | tail -3 | tee -a "$LOG"
echo "== pytest $(el)" | tee -a "$LOG"
timeout 45 compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_large.py defer > "$OUT/racecheck-defer3.log" 2>&1
echo "== racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck-defer3.log") $(el)" | tee -a "$LOG"
grep -m5 -E "Hazard|Traceback|rel err" "$OUT/racecheck-defer3.log" | tee -a "$LOG"
