#!/usr/bin/env bash
# H4 device call 1: H3's prepared call 3 as written (benchmarks/profile/h3_call3.sh: BM 144 at 144 x 14336 x 4096; one
# row tile of 256 rows as four consumers (gemm_fp8) or swapped with 64-wide k-tiles at 224 / 256 x 14336 x 4096, each
# against the policy and paired with torch._scaled_mm), then the new forms' GPU tests (-k h4) and memcheck + racecheck
# on their sanitizer cases (tests/gpu/sanitize_gemm_fp8_swap.py h4). WHL=.whl_h2.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/h4-call1.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
WHL=${WHL:-.whl_h2} BENCH_S=${BENCH_S:-80} bash benchmarks/profile/h3_call3.sh
export PYTHONPATH=/tmp/site:$PWD TILEPY_HIP_CACHE=/tmp/thc PYTHONUNBUFFERED=1
echo "== call3 $(el)" | tee "$LOG"
timeout ${PYTEST_S:-50} python3 -m pytest -v -n 8 -p no:cacheprovider -rfE tests/gpu/test_gemm_fp8_swap.py \
  -k h4 > "$OUT/h4-pytest1.log" 2>&1
echo "== pytest rc=$? $(el): $(tail -1 "$OUT/h4-pytest1.log")" | tee -a "$LOG"
grep -E "^(FAILED|ERROR)" "$OUT/h4-pytest1.log" | head -12 | tee -a "$LOG"
timeout ${SAN_S:-30} compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp8_swap.py h4 \
  > "$OUT/h4-memcheck1.log" 2>&1
echo "== memcheck rc=$? $(el): $(grep -c '^fp8 swap' "$OUT/h4-memcheck1.log") cases, $(grep -E 'ERROR SUMMARY' "$OUT/h4-memcheck1.log" | tail -1)" | tee -a "$LOG"
timeout ${RACE_S:-45} compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_fp8_swap.py h4 \
  > "$OUT/h4-racecheck1.log" 2>&1
echo "== racecheck rc=$? $(el): $(grep -c '^fp8 swap' "$OUT/h4-racecheck1.log") cases, $(grep -E 'RACECHECK SUMMARY' "$OUT/h4-racecheck1.log" | tail -1)" | tee -a "$LOG"
true
