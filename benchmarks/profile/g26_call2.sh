#!/usr/bin/env bash
# G26 device call 2 (issue 15): the f32 policy where B's rows are off 128-byte lines (UNALIGNED_B_F32: clusters of 4,
# 64 / 216) against the policy before (2x1 cluster, no setmaxnreg: c2_s4_r0) at 3000 x 5000 x 4096 and 4096 x 4104 x
# 4096, two sweeps; the GPU tests through launch and of the clusters of 4; compute-sanitizer memcheck / racecheck (sanitize_gemm_large.py held).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g26-call2.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee "$LOG"
for run in a b; do
  pc=""; [ $run = a ] && pc="--precompile 12"
  timeout 80 python3 benchmarks/gemm_large_sweep.py --only f32 --tag g26-call2-odd$run --out "$OUT" --batches 15 \
    $pc --variants '^(c2_s4_r0|c2_s4_r64|c4_s4_r64)$' --shapes 3000,5000,4096 4096,4104,4096 2>&1 | grep -v -i warn \
    | grep -E "^f32 [0-9x]+:|wrote|failed|WRONG|precompiled" | tee -a "$LOG"
  echo "== sweep odd $run $(el)" | tee -a "$LOG"
done
timeout 120 python3 -m pytest -q -n 8 -p no:cacheprovider tests/gpu/test_gpu_gemm_large.py tests/gpu/test_gpu_gemm_small.py \
  -k "c4_s4 or (through_launch and 3000)" 2>&1 | grep -v Warning | tail -6 \
  | tee -a "$LOG"
echo "== pytest $(el)" | tee -a "$LOG"
for tool in memcheck racecheck; do
  timeout 80 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_large.py held > "$OUT/$tool-held2.log" 2>&1
  echo "== $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool-held2.log" | tr '\n' ' ') $(el)" \
    | tee -a "$LOG"
  grep -m12 -E "Error|Hazard|Invalid|Traceback|rel err" "$OUT/$tool-held2.log" | tee -a "$LOG"
done
echo "== done $(el)" | tee -a "$LOG"
