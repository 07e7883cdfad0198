#!/usr/bin/env bash
# One device call for conv_tma: its GPU tests, compute-sanitizer memcheck + racecheck on small ragged shapes,
# benchmarks/conv.py (conv_igemm and conv_tma against cuDNN), then the suite on the given problem files.
# Usage on the device machine (repo root): bash tests/gpu/device_run_conv_tma.sh [bench rows...] [-- problems...]
# The forms off by default (W stride, transposed phases) are timed with their switches on, e.g.
#   ARGUS_CONV_TMA_WSTRIDE=1 ARGUS_CONV_TMA_PHASES=1 bash tests/gpu/device_run_conv_tma.sh l1_091 -- \
#     tests/problems/level1/09[179]_* tests/problems/level1/101_* tests/problems/level2/00[03]_* tests/problems/level2/010_*
set -uo pipefail
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
rows=(); probs=()
while [ $# -gt 0 ]; do [ "$1" = "--" ] && { shift; probs=("$@"); break; }; rows+=("$1"); shift; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 python3 -m pytest -q -x -n 8 -p no:cacheprovider tests/gpu/test_gpu_conv_tma.py 2>&1 \
  | tee "$OUT/pytest.log" | grep -vE "^(tests|  )" | tail -15
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_conv_tma.py > "$OUT/sanitize_$tool.log" 2>&1
  echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
  grep -m5 -E "Error|Hazard|Invalid" "$OUT/sanitize_$tool.log"
done
if [ ${#rows[@]} -gt 0 ]; then
  timeout 240 python3 benchmarks/conv.py --runs 20 --out "$OUT" --tag=-tma --tf32-only --only "${rows[@]}" 2>&1 | tail -30
fi
if [ ${#probs[@]} -gt 0 ]; then
  timeout 300 python3 benchmarks/suite.py --jobs 14 --runs 10 --out "$OUT/suite.json" "${probs[@]}" 2>&1 | tail -40
fi
