#!/usr/bin/env bash
# The lead's closing device call: the GPU tests of the files a session changed (or all of tests/gpu), then the
# suite on the given problems (rows into $OUT/suite-lead.json), each under its own time limit.
# Usage on the device machine (repo root):
#   bash tests/gpu/device_run_lead.sh "<pytest paths>" <suite seconds> <problem files...>
set -uo pipefail
tests=${1:-tests/gpu}; suite_s=${2:-0}; shift 2 || true
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
if [[ $# -gt 0 && $suite_s -gt 0 ]]; then
  timeout $((suite_s + 90)) python3 benchmarks/suite.py "$@" --jobs 12 --runs 10 --time-budget "$suite_s" \
    --out "$OUT/suite-lead.json" 2>&1 | grep -E "^(level|built)"
fi
if [[ -n $tests ]]; then
  timeout "${PYTEST_S:-300}" python3 -m pytest -q -n 14 -p no:cacheprovider -rfE $tests 2>&1 \
    | tee "$OUT/pytest.log" | grep -vE "^(tests|E |  )" | tail -25
fi
