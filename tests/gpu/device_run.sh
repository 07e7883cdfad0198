#!/usr/bin/env bash
# One device call: install carried wheels, run the GPU tests, compute-sanitizer memcheck + racecheck, benchmarks.
# Usage on the device machine (repo root): bash tests/gpu/device_run.sh [pytest|sanitize|bench|all]
set -uo pipefail
what=${1:-all}
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/tilepy_hip_cache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
python3 -c "import tilepy_hip, json; print(json.dumps(tilepy_hip.toolchain_info()))" | tee -a "$OUT/gpu.txt"
if [[ $what == all || $what == pytest ]]; then
  python3 -m pytest -q --maxfail=15 -p no:cacheprovider tests/gpu 2>&1 | tee "$OUT/pytest.log" | grep -vE "^(tests|E |  )" | tail -40
fi
if [[ $what == all || $what == sanitize ]]; then
  for tool in memcheck racecheck; do
    compute-sanitizer --tool $tool python3 tests/gpu/sanitize.py > "$OUT/sanitize_$tool.log" 2>&1
    echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
    grep -m5 -E "Error|Hazard|Invalid" "$OUT/sanitize_$tool.log"
  done
fi
if [[ $what == all || $what == bench ]]; then
  python3 benchmarks/run.py --out "$OUT" 2>&1 | tail -12
fi
