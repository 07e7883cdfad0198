#!/usr/bin/env bash
# G26 device call 1 (issue 15): 3000 x 5000 x 4096 (B rows of 10000 bytes, 3.6 waves of 128 x 256 tiles) with 128 x 192
# tiles in 2x1 clusters and clusters of 4 (bf16 and f32 out), and the f32-out LLM shapes with gemm_persistent's DEFER=2
# holding the last piece(s) (HELD); two sweeps alternating ours with the peer replay by replay; then the GPU tests of
# the new forms and compute-sanitizer memcheck / racecheck on them (sanitize_gemm_large.py held).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g26-call1.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
LLM="8192,8192,1024 4096,14336,4096 4096,4096,14336 4096,4096,4096 8192,8192,8192"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee "$LOG"
for run in a b; do
  pc=""; [ $run = a ] && pc="--precompile 14"
  timeout 110 python3 benchmarks/gemm_large_sweep.py --only bf16,f32 --tag g26-call1-odd$run --out "$OUT" --batches 15 \
    $pc --variants '^(c2_n192|n192|c4|c2_s4_r64$)' --shapes 3000,5000,4096 2>&1 | grep -v -i warn \
    | grep -E "^(bf16|f32) [0-9x]+:|wrote|failed|WRONG|precompiled" | tee -a "$LOG"
  echo "== sweep odd $run $(el)" | tee -a "$LOG"
  timeout 90 python3 benchmarks/gemm_large_sweep.py --only f32 --tag g26-call1-f32$run --out "$OUT" --batches 12 \
    $pc --variants '^pers_(b1_held1|n32_held2|n32_held4)$' --shapes $LLM 2>&1 | grep -v -i warn \
    | grep -E "^f32 [0-9x]+:|wrote|failed|WRONG|precompiled" | tee -a "$LOG"
  echo "== sweep f32 $run $(el)" | tee -a "$LOG"
done
timeout 120 python3 -m pytest -q -n 8 -p no:cacheprovider tests/gpu/test_gpu_gemm_large.py \
  -k "held or n192 or c4_s3" 2>&1 | grep -v Warning | tail -8 | tee -a "$LOG"
echo "== pytest $(el)" | tee -a "$LOG"
for tool in memcheck racecheck; do
  timeout 80 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_large.py held > "$OUT/$tool-held.log" 2>&1
  echo "== $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool-held.log" | tr '\n' ' ') $(el)" \
    | tee -a "$LOG"
  grep -m8 -E "Error|Hazard|Invalid|Traceback|rel err" "$OUT/$tool-held.log" | tee -a "$LOG"
done
echo "== done $(el)" | tee -a "$LOG"
