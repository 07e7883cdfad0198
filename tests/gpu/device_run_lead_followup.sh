#!/usr/bin/env bash
# A lead follow-up device call: the tests a cut final run did not reach, a sanitizer pass and a few suite rows.
# Usage on the device machine (repo root): bash tests/gpu/device_run_lead_followup.sh "<pytest ids>" <suite seconds> <problem files...>
set -uo pipefail
ids=${1:-}; suite_s=${2:-0}; shift 2 || true
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if [[ -n "$ids" ]]; then
  # shellcheck disable=SC2086
  timeout 200 python3 -m pytest -v -n 6 -p no:cacheprovider -rfE $ids > "$OUT/pytest-followup.log" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest-followup.log" | tail -10
fi
if [[ -n "${SANITIZE:-}" ]]; then
  for tool in memcheck racecheck; do
    # shellcheck disable=SC2086
    timeout 90 compute-sanitizer --tool $tool python3 $SANITIZE > "$OUT/sanitize-$tool.log" 2>&1
    echo "== $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize-$tool.log" | tail -1)"
  done
fi
if [[ -n "${BENCH:-}" ]]; then
  # shellcheck disable=SC2086
  timeout 120 python3 $BENCH 2>&1 | tail -25
fi
if [[ $# -gt 0 && $suite_s -gt 0 ]]; then
  timeout $((suite_s + 40)) python3 benchmarks/suite.py "$@" --jobs 12 --runs 10 --time-budget "$suite_s" \
    --out "$OUT/suite-followup.json" 2>&1 | grep -E "^(level|built)"
fi
