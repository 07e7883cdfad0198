#!/usr/bin/env bash
# G18 device call 1 (issue 15, large f32 out): the persistent kernel's piece store for f32 out (STORE_N, STORE_SPAN)
# against the policy (gemm_hopper 128 x 256 s4, the registers' store) and torch.mm(out_dtype=float32), two sweeps
# one after the other (each pair alternating replay by replay with the peer; run a also records cuBLAS's kernels),
# then the f32 piece forms' GPU tests and compute-sanitizer memcheck / racecheck on them.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g18-call1.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee "$LOG"
timeout 100 python3 benchmarks/gemm_large_sweep.py --only f32 --precompile 16 --precompile-only \
  --shapes 8192,8192,1024 4096,14336,4096 4096,4096,4096 3000,5000,4096 4096,4096,14336 8192,8192,8192 2>&1 | tee -a "$LOG"
echo "== build $(el)" | tee -a "$LOG"
for run in a b; do
  P=""; [ $run = a ] && P="--profile"
  timeout 110 python3 benchmarks/gemm_large_sweep.py --only f32 --tag g18-call1$run --out "$OUT" --batches 12 $P \
    --shapes 8192,8192,1024 4096,14336,4096 4096,4096,4096 3000,5000,4096 4096,4096,14336 8192,8192,8192 \
    --deadline 85 2>&1 | grep -v -i warn | tee "$OUT/sweep-$run.log" \
    | grep -E "^f32 [0-9x]+:|wrote|failed|WRONG|not run" | tee -a "$LOG"
  echo "== sweep $run $(el)" | tee -a "$LOG"
done
timeout 100 python3 -m pytest -q -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_large.py \
  -k "pers_n32 or pers_n16 or pers_n64_s3 or pers_n64_sp32" 2>&1 | grep -v Warning | tail -6 | tee -a "$LOG"
echo "== pytest $(el)" | tee -a "$LOG"
for tool in memcheck racecheck; do
  timeout 70 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_large.py f32 > "$OUT/$tool-f32.log" 2>&1
  echo "== $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool-f32.log" | tr '\n' ' ') $(el)" \
    | tee -a "$LOG"
  grep -m5 -E "Error|Hazard|Invalid|Traceback|rel err" "$OUT/$tool-f32.log" | tee -a "$LOG"
done
echo "== done $(el)" | tee -a "$LOG"
