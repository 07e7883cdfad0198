#!/usr/bin/env bash
# H3 device call 1 (issue 15, fp8 skinny rows with a long N or K): the policy against candidate forms (one row tile of
# all the rows; the persistent 128 x 256 grid; the cluster's split; two unsplit row tiles), each paired with
# torch._scaled_mm replay by replay (benchmarks/profile/h3_bench.py); then the swap form's GPU tests (-k "h3 or policy")
# and memcheck + racecheck on the sanitizer's h3 cases. WHL=.whl_h2: the wheels less z3_solver.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/h3-call1.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site ${WHL:-.whl}/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD TILEPY_HIP_CACHE=/tmp/thc PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader 2>&1 | tee "$LOG"
echo "== start $(el)" | tee -a "$LOG"
timeout ${BENCH_S:-150} python3 benchmarks/profile/h3_bench.py --precompile 14 --blocks ${BLOCKS:-4} --rounds 40 \
  --tag=${TAG:--call1} --out "$OUT" ${SHAPES:+--shapes $SHAPES} 2>&1 \
  | grep -v Warning | grep -v "^ *$" | grep -v _warn_once | tee -a "$LOG"
echo "== bench $(el)" | tee -a "$LOG"
[ "${SKIP_TESTS:-0}" = 1 ] && exit 0
timeout ${PYTEST_S:-70} python3 -m pytest -v -n 14 -p no:cacheprovider -rfE tests/gpu/test_gemm_fp8_swap.py \
  -k "h3 or policy" > "$OUT/h3-pytest1.log" 2>&1
echo "== pytest rc=$? $(el): $(tail -1 "$OUT/h3-pytest1.log")" | tee -a "$LOG"
grep -E "^(FAILED|ERROR)" "$OUT/h3-pytest1.log" | head -12 | tee -a "$LOG"
timeout ${SAN_S:-40} compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp8_swap.py h3 \
  > "$OUT/h3-memcheck1.log" 2>&1
echo "== memcheck rc=$? $(el): $(grep -c '^fp8 swap' "$OUT/h3-memcheck1.log") cases, $(grep -E 'ERROR SUMMARY' "$OUT/h3-memcheck1.log" | tail -1)" | tee -a "$LOG"
timeout ${RACE_S:-60} compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_fp8_swap.py h3 \
  > "$OUT/h3-racecheck1.log" 2>&1
echo "== racecheck rc=$? $(el): $(grep -c '^fp8 swap' "$OUT/h3-racecheck1.log") cases, $(grep -E 'RACECHECK SUMMARY' "$OUT/h3-racecheck1.log" | tail -1)" | tee -a "$LOG"
true
