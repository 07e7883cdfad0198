#!/usr/bin/env bash
# One device call for attention (tests, sanitizers, SASS facts, benchmark), from the repository root:
#   bash tests/gpu/run_attention.sh [--quick]
# with carry=[".whl"]; logs and the results JSON go to $OUT.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=${TILEPY_HIP_CACHE:-/tmp/thc}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_attention.py 2>&1 | tee "$OUT/pytest.log" | tail -15
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_attention.py > "$OUT/sanitize_$tool.log" 2>&1
  echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
  grep -m5 -E "Error|Hazard|Invalid" "$OUT/sanitize_$tool.log"
done
python3 benchmarks/attention.py --out "$OUT" "$@" 2>&1 | tee "$OUT/bench.log" | tail -32
