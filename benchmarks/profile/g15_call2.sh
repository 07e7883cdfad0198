#!/usr/bin/env bash
# G15 device call 2 (issue 15, large bf16): DEFER=1 as committed (the held pieces' staged arrivals after the first
# k-tile's wgmma retires) against the policy, two sweeps one after the other (each pair alternating replay by replay
# with cuBLAS), then DEFER's GPU tests and compute-sanitizer racecheck / memcheck on the committed form.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g15-call2.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
V='^(pers_defer|pers_n32_b4_defer)$'
S="8192,8192,1024 4096,14336,4096 4096,4096,4096 4096,4096,14336 8192,8192,8192"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee "$LOG"
timeout 90 python3 benchmarks/gemm_large_sweep.py --only bf16 --precompile 16 --precompile-only --variants "$V" \
  --shapes $S 2>&1 | tee -a "$LOG"
echo "== build $(el)" | tee -a "$LOG"
for run in a b; do
  timeout 120 python3 benchmarks/gemm_large_sweep.py --only bf16 --tag g15-call2$run --out "$OUT" --batches 20 \
    --variants "$V" --shapes $S 2>&1 | grep -v -i warn | grep -E "^bf16 [0-9x]+:|wrote|failed|WRONG" | tee -a "$LOG"
  echo "== sweep $run $(el)" | tee -a "$LOG"
done
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_gemm_large.py -k "defer or pieces" 2>&1 \
  | grep -v Warning | tail -5 | tee -a "$LOG"
echo "== pytest $(el)" | tee -a "$LOG"
for tool in racecheck memcheck; do
  timeout 60 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_large.py defer > "$OUT/$tool-defer2.log" 2>&1
  echo "== $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool-defer2.log" | tr '\n' ' ') $(el)" | tee -a "$LOG"
  grep -m5 -E "Error|Hazard|Invalid|Traceback" "$OUT/$tool-defer2.log" | tee -a "$LOG"
done
echo "== done $(el)" | tee -a "$LOG"
