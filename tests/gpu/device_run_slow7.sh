#!/usr/bin/env bash
# One device call for L7's slow problems: the suite on them (rows into $OUT/suite-slow7.json), the GPU tests of
# the lowerings they take, compute-sanitizer memcheck / racecheck on the new kernels at small sizes.
# Usage on the device machine (repo root): bash tests/gpu/device_run_slow7.sh
set -uo pipefail
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 170 python3 benchmarks/suite.py tests/problems/level1/186_conv2d_same_reflect_padding.py \
  tests/problems/level1/193_conv2d_circular_padding.py tests/problems/level1/196_embedding_bag_mean.py \
  tests/problems/level2/029_depthwise_separable_block.py --jobs 8 --runs 10 --out "$OUT/suite-slow7.json" \
  2>&1 | grep -E "^(level|built)"
timeout 80 python3 -m pytest -q -n 6 -p no:cacheprovider tests/gpu/test_gpu_lower_slow7.py 2>&1 \
  | tee "$OUT/pytest.log" | grep -vE "^(tests|E |  )" | tail -6
for tool in memcheck racecheck; do
  timeout 45 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_slow7.py > "$OUT/sanitize_$tool.log" 2>&1
  echo "== $tool: rc=$? $(grep -E '^ok' "$OUT/sanitize_$tool.log" | tr '\n' ' ') $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
done
