#!/usr/bin/env bash
# One device call for the sort family (L5): GPU tests, compute-sanitizer memcheck + racecheck of the bitonic row
# sort, the sort problems of the suite (level1/173 174 191 192, level2/076). Repo root on the device machine:
#   bash tests/gpu/device_run_sort.sh
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 tests/gpu/precompile_sort.py 14 | tee "$OUT/precompile.log"
python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_sort.py 2>&1 | tail -5 | tee "$OUT/pytest.log"
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool python3 tests/gpu/sanitize_sort.py > "$OUT/sanitize_$tool.log" 2>&1
  echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
  grep -m5 -E "Error|Hazard|Invalid|MISMATCH" "$OUT/sanitize_$tool.log"
done
P=tests/problems
python3 benchmarks/suite.py $P/level1/174_sort_descending.py $P/level1/191_median_dim_values.py \
  $P/level1/192_kthvalue_keepdim.py $P/level1/173_topk_values.py \
  $P/level2/076_conv2d_circular_groupnorm_rrelu_median.py --runs 10 --jobs 14 --out "$OUT/suite-sort.json" \
  > "$OUT/suite.log" 2>&1
tail -25 "$OUT/suite.log"
