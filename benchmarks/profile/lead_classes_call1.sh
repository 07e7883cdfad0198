#!/usr/bin/env bash
# Lead, fifth 2026-11-25 session (issue 15, fp8 ragged row): the row-class TMA store (tp.row_classes_layout, one
# tensor map per row class mod 8) on the GPU: its tests, compute-sanitizer on it, then gemm_fp8 EPILOGUE=3 forms
# against the staged store and torch._scaled_mm at 2051 x 2045 x 1008 and neighbours.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
timeout 120 python3 -m pytest -q -n 14 -p no:cacheprovider tests/gpu/test_gpu_store_classes.py \
  tests/gpu/test_gemm_fp8_small.py -k "store_classes or row_class or e3_ or UNALIGNED or policy_through_launch" \
  > "$OUT/tests-classes.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed|Error" "$OUT/tests-classes.log" | tail -12
timeout 60 python3 -m pytest -q -n 14 -p no:cacheprovider tests/gpu/test_gemm_fp8.py > "$OUT/tests-fp8.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed|Error" "$OUT/tests-fp8.log" | tail -4
for tool in memcheck racecheck; do
  timeout 30 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_store_classes.py > "$OUT/sanitize-cls-$tool.log" 2>&1
  echo "$tool classes rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^ok" "$OUT/sanitize-cls-$tool.log" | tail -2
  timeout 75 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_fp8_small.py e3_192x192_s3_w1 \
    e3_128x128_s6_w1 e3_64x128_s8_w1 > "$OUT/sanitize-$tool.log" 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Hazard|^ok" "$OUT/sanitize-$tool.log" | tail -3
done
timeout 200 python3 benchmarks/gemm_fp8_small.py --rounds 3 --out "$OUT" \
  --shapes 2051,2045,1008 2048,2048,1008 1024,1020,1024 \
  --forms u192x192_e1 u192x192_e3 l128x256_s3_w1_e3 l128x256_s3_w1_e2 large_e3 128x192_s4_w1_e3 128x128_s6_w1_e3 \
  64x128_s8_w1_e3 > "$OUT/bench-classes.log" 2>&1
echo "bench rc=$?"; grep -vE "^\s*$" "$OUT/bench-classes.log" | tail -40
