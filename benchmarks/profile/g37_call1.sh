#!/usr/bin/env bash
# G37 device call 1 (issue 15, the bf16 small class, rotated): the role thread index's new form against the old,
# alternated twice (benchmarks/profile/g37_call1.py), then the GPU tests of every warp-specialized GEMM form with the
# new render, then memcheck on the small class's sanitizer script (K_WAYS at a ragged shape among its cases).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g37-call1.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$LOG"
timeout ${BENCH_S:-130} python3 benchmarks/profile/g37_call1.py --precompile 16 --out "$OUT" 2>&1 \
  | grep -v Warning | grep -v "^ *$" | grep -v _warn_once | tee -a "$LOG"
echo "== bench $(el)" | tee -a "$LOG"
timeout ${PYTEST_S:-160} python3 -m pytest -v -n 14 -p no:cacheprovider -rfE tests/gpu \
  -k "gemm or cluster or kways or fp8 or fp32" > "$OUT/g37-pytest1.log" 2>&1
echo "== pytest rc=$? $(el): $(tail -1 "$OUT/g37-pytest1.log")" | tee -a "$LOG"
echo "PASSED $(grep -c ' PASSED ' "$OUT/g37-pytest1.log")" | tee -a "$LOG"
grep -E "^(FAILED|ERROR)" "$OUT/g37-pytest1.log" | head -12 | tee -a "$LOG"
timeout ${SAN_S:-45} compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_small_class.py \
  > "$OUT/g37-memcheck1.log" 2>&1
echo "== memcheck rc=$? $(el): $(grep -E 'ERROR SUMMARY' "$OUT/g37-memcheck1.log" | tail -1)" | tee -a "$LOG"
true
