#!/usr/bin/env bash
# One device call for the implicit-GEMM convolution and fused epilogues: GPU tests, compute-sanitizer memcheck +
# racecheck on a small conv, and the suite on the conv / linear / matmul problems (rows into $OUT/suite.json).
# Usage on the device machine (repo root): bash tests/gpu/device_run_conv.sh [suite seconds]
set -uo pipefail
budget=${1:-60}
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 90 python3 -m pytest -q -x -n 8 -p no:cacheprovider tests/gpu/test_gpu_conv_igemm.py 2>&1 \
  | tee "$OUT/pytest.log" | grep -vE "^(tests|E |  )" | tail -8
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_conv.py > "$OUT/sanitize_$tool.log" 2>&1
  echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
  grep -m5 -E "Error|Hazard|Invalid" "$OUT/sanitize_$tool.log"
done
P=tests/problems
timeout $((budget + 60)) python3 benchmarks/suite.py --jobs 14 --runs 10 --time-budget "$budget" --out "$OUT/suite.json" \
  $P/level2/007_* $P/level2/008_* $P/level2/016_* $P/level2/022_* $P/level2/042_* $P/level2/001_* \
  $P/level2/056_* $P/level2/003_* $P/level2/035_* $P/level1/077_* $P/level1/089_* $P/level1/090_* \
  $P/level1/091_* $P/level1/093_* $P/level1/096_* $P/level1/097_* $P/level1/098_* $P/level1/099_* \
  $P/level1/100_* $P/level1/095_* $P/level2/027_* $P/level2/028_* $P/level2/010_* $P/level2/017_* 2>&1 | tail -40
