#!/usr/bin/env bash
# H2 device call 1 (issue 15, fp8 skinny; the role thread index): gemm_fp8_swap's policy forms and gemm_splitk_swap's
# bf16 swap forms with unsigned_role_index off / on, alternated twice, paired with the peer replay by replay
# (benchmarks/profile/h2_bench.py); then tests/gpu/test_gemm_fp8_swap.py with the option on for gemm_fp8_swap
# (benchmarks/profile/h2_on.py as a pytest plugin), memcheck and racecheck on the sanitizer's g34 cases with it on.
# WHL=.whl_h2: the wheels less z3_solver (nothing here imports it; with all of .whl the tree is over the carry limit).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/h2-call1.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site ${WHL:-.whl}/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD TILEPY_HIP_CACHE=/tmp/thc PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader 2>&1 | tee "$LOG"
echo "== start $(el)" | tee -a "$LOG"
timeout ${BENCH_S:-95} python3 benchmarks/profile/h2_bench.py --precompile 14 --out "$OUT" 2>&1 \
  | grep -v Warning | grep -v "^ *$" | grep -v _warn_once | tee -a "$LOG"
echo "== bench $(el)" | tee -a "$LOG"
rm -rf /tmp/h2mark
PYTHONPATH=$PWD/benchmarks/profile:$PYTHONPATH H2_MARK=/tmp/h2mark timeout ${PYTEST_S:-60} python3 -m pytest -v -n 14 \
  -p no:cacheprovider -p h2_on -rfE tests/gpu/test_gemm_fp8_swap.py > "$OUT/h2-pytest1.log" 2>&1
echo "== pytest rc=$? $(el): $(tail -1 "$OUT/h2-pytest1.log"); option on in $(grep -l True /tmp/h2mark/* 2>/dev/null | wc -l) of $(ls /tmp/h2mark 2>/dev/null | wc -l) processes" | tee -a "$LOG"
grep -E "^(FAILED|ERROR)" "$OUT/h2-pytest1.log" | head -12 | tee -a "$LOG"
timeout ${SAN_S:-35} compute-sanitizer --tool memcheck python3 benchmarks/profile/h2_on.py \
  tests/gpu/sanitize_gemm_fp8_swap.py g34 > "$OUT/h2-memcheck1.log" 2>&1
echo "== memcheck rc=$? $(el): $(grep -c '^fp8 swap' "$OUT/h2-memcheck1.log") cases, $(grep -E 'ERROR SUMMARY' "$OUT/h2-memcheck1.log" | tail -1)" | tee -a "$LOG"
timeout ${RACE_S:-40} compute-sanitizer --tool racecheck python3 benchmarks/profile/h2_on.py \
  tests/gpu/sanitize_gemm_fp8_swap.py g34 > "$OUT/h2-racecheck1.log" 2>&1
echo "== racecheck rc=$? $(el): $(grep -c '^fp8 swap' "$OUT/h2-racecheck1.log") cases, $(grep -E 'RACECHECK SUMMARY' "$OUT/h2-racecheck1.log" | tail -1)" | tee -a "$LOG"
true
