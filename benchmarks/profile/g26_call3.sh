#!/usr/bin/env bash
# G26 device call 3 (issue 15; only with the lead's OK: over G26's cap): the f32-out LLM shapes with the 8-piece HELD=2
# form whose store warp walks the pieces in a run-time loop (STORE_LOOP=1: verifies in ~1 s CPU, the unrolled one ~4-5
# s) against the policy and the unrolled form, two sweeps; the bf16 policy with STORE_LOOP=1 against the policy; GPU
# tests of the loop forms; compute-sanitizer memcheck / racecheck on them (sanitize_gemm_large.py loop).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g26-call3.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
S="8192,8192,1024 4096,14336,4096 4096,4096,4096"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee "$LOG"
for run in a b; do
  pc=""; tl=22; [ $run = a ] && pc="--precompile 8" && tl=30
  timeout $tl python3 benchmarks/gemm_large_sweep.py --only bf16,f32 --tag g26-call3$run --out "$OUT" --batches 12 \
    $pc --variants '^pers_(n32_held2|n32_held2_loop|defer2_loop)$' --shapes $S 2>&1 | grep -v -i warn \
    | grep -E "^(bf16|f32) [0-9x]+:|wrote|failed|WRONG|precompiled" | tee -a "$LOG"
  echo "== sweep $run $(el)" | tee -a "$LOG"
done
timeout 25 python3 -m pytest -q -n 8 -p no:cacheprovider tests/gpu/test_gpu_gemm_large.py -k "loop" 2>&1 \
  | grep -v Warning | tail -5 | tee -a "$LOG"
echo "== pytest $(el)" | tee -a "$LOG"
for tool in memcheck racecheck; do
  timeout 22 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_large.py loop > "$OUT/$tool-loop.log" 2>&1
  echo "== $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool-loop.log" | tr '\n' ' ') $(el)" \
    | tee -a "$LOG"
  grep -m8 -E "Error|Hazard|Invalid|Traceback|rel err" "$OUT/$tool-loop.log" | tee -a "$LOG"
done
echo "== done $(el)" | tee -a "$LOG"
