#!/usr/bin/env bash
# H2 device call 2: gemm_fp8_swap with the role index chosen per form (the tree's `adopted`) against the signed index
# everywhere (`off`: HEAD's renders), the policy's fp8 skinny shapes, alternated three times, paired with
# torch._scaled_mm replay by replay (benchmarks/profile/h2_bench.py); then the fp8 swap policy's GPU tests.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/h2-call2.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site ${WHL:-.whl}/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD TILEPY_HIP_CACHE=/tmp/thc PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader 2>&1 | tee "$LOG"
echo "== start $(el)" | tee -a "$LOG"
timeout ${BENCH_S:-80} python3 benchmarks/profile/h2_bench.py --precompile 14 --arms off adopted --bf16-rows \
  --rounds 3 --tag=-call2 --out "$OUT" 2>&1 | grep -v Warning | grep -v "^ *$" | grep -v _warn_once | tee -a "$LOG"
echo "== bench $(el)" | tee -a "$LOG"
[ "${SKIP_TESTS:-0}" = 1 ] || timeout ${PYTEST_S:-50} python3 -m pytest -v -n 14 -p no:cacheprovider -rfE tests/gpu/test_gemm_fp8_swap.py \
  -k policy > "$OUT/h2-pytest2.log" 2>&1
echo "== pytest rc=$? $(el): $(tail -1 "$OUT/h2-pytest2.log")" | tee -a "$LOG"
grep -E "^(FAILED|ERROR)" "$OUT/h2-pytest2.log" | head -12 | tee -a "$LOG"
true
