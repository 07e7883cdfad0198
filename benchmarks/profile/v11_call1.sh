#!/usr/bin/env bash
# V11 device call 1 (issues 15 + 17): gemm_persistent DEFER=2 (the held pieces written under the next tile's first
# k-tile, the ring whole from slot 0: the form tilepy-verify now proves) against the policy, two sweeps one after the
# other on the five large bf16 shapes (each pair alternating replay by replay with cuBLAS), then its GPU tests and
# compute-sanitizer racecheck / memcheck (`sanitize_gemm_large.py defer`: the DEFER=1 and DEFER=2 cases).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/v11-call1.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
V='^pers_defer2$'
S="8192,8192,1024 4096,14336,4096 4096,4096,4096 4096,4096,14336 8192,8192,8192"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee "$LOG"
timeout 90 python3 benchmarks/gemm_large_sweep.py --only bf16 --precompile 16 --precompile-only --variants "$V" \
  --shapes $S 2>&1 | tail -3 | tee -a "$LOG"
echo "== build $(el)" | tee -a "$LOG"
for run in a b; do
  timeout 100 python3 benchmarks/gemm_large_sweep.py --only bf16 --tag v11-call1$run --out "$OUT" --batches 20 \
    --variants "$V" --shapes $S 2>&1 | grep -v -i warn | grep -E "^bf16 [0-9x]+:|wrote|failed|WRONG" | tee -a "$LOG"
  echo "== sweep $run $(el)" | tee -a "$LOG"
done
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_gemm_large.py -k "defer2" 2>&1 \
  | grep -v Warning | tail -3 | tee -a "$LOG"
echo "== pytest $(el)" | tee -a "$LOG"
for tool in racecheck memcheck; do
  timeout 50 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_large.py defer > "$OUT/$tool-defer.log" 2>&1
  echo "== $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool-defer.log" | tr '\n' ' ') $(el)" \
    | tee -a "$LOG"
  grep -m5 -E "Error|Hazard|Invalid|Traceback|rel err" "$OUT/$tool-defer.log" | tee -a "$LOG"
done
echo "== done $(el)" | tee -a "$LOG"
