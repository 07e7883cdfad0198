#!/usr/bin/env bash
# G18 device call 2 (issue 15, large f32 out): the policy with f32 out on gemm_persistent's 32-column pieces
# (LARGE_PERSISTENT_F32): benchmarks/gemm.py's bf16out / f32out table in one run, two more alternations of the policy
# against the policy before and against 4 pieces of 64 through one buffer (gemm_large_sweep.py --only f32), the GPU
# tests through launch, and compute-sanitizer memcheck / racecheck on the f32 policy through launch and the one-buffer
# form (2056 x 4160 x 1040: 289 ragged tiles on 132 blocks).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g18-call2.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
S="8192,8192,1024 4096,14336,4096 4096,4096,4096 4096,4096,14336 8192,8192,8192"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee "$LOG"
timeout 120 python3 benchmarks/gemm.py --only bf16out,f32out --precompile 14 --name gemm-g18 --out "$OUT" \
  > "$OUT/gemm-g18.log" 2>&1
echo "== gemm.py rc=$? $(el)" | tee -a "$LOG"
grep -vE "^\s*$" "$OUT/gemm-g18.log" | grep -v -i warn | tail -24 | cut -c1-150 | tee -a "$LOG"
for run in a b; do
  timeout 75 python3 benchmarks/gemm_large_sweep.py --only f32 --tag g18-call2$run --out "$OUT" --batches 12 \
    --precompile 8 \
    --variants '^pers_n64_b1_s4_r64$' --shapes $S 2>&1 | grep -v -i warn \
    | grep -E "^f32 [0-9x]+:|wrote|failed|WRONG" | tee -a "$LOG"
  echo "== sweep $run $(el)" | tee -a "$LOG"
done
timeout 100 python3 -m pytest -q -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_large.py \
  -k "through_launch or writes_any_c or f32_persistent_policy or pieces or pers_n64_b1" 2>&1 | grep -v Warning | tail -6 \
  | tee -a "$LOG"
echo "== pytest $(el)" | tee -a "$LOG"
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_large.py f32policy > "$OUT/$tool-f32policy.log" 2>&1
  echo "== $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool-f32policy.log" | tr '\n' ' ') $(el)" \
    | tee -a "$LOG"
  grep -m5 -E "Error|Hazard|Invalid|Traceback|rel err" "$OUT/$tool-f32policy.log" | tee -a "$LOG"
done
echo "== done $(el)" | tee -a "$LOG"
