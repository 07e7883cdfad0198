#!/usr/bin/env bash
# The lead's closing device call: every GPU test (-v, streamed to $OUT/pytest-final.log so a cut run still names
# what passed and failed), compute-sanitizer memcheck and racecheck on each command of SANITIZE (';'-separated, e.g.
# SANITIZE="tests/gpu/sanitize_gemm_large.py loop;tests/gpu/sanitize_gemm_small_class.py"), then the suite on the
# given problems under the time left.
# Usage on the device machine (repo root): bash tests/gpu/device_run_final.sh <pytest seconds> <suite seconds> <problems...>
set -uo pipefail
py_s=${1:-420}; suite_s=${2:-0}; shift 2 || true
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout "$py_s" python3 -m pytest -v -n 14 -p no:cacheprovider -rfE tests/gpu > "$OUT/pytest-final.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest-final.log" | tail -30
grep -cE " PASSED " "$OUT/pytest-final.log"
IFS=';' read -ra cmds <<< "${SANITIZE:-}"
for i in "${!cmds[@]}"; do
  for tool in memcheck racecheck; do
    # shellcheck disable=SC2086
    timeout "${SANITIZE_S:-90}" compute-sanitizer --tool $tool python3 ${cmds[$i]} > "$OUT/sanitize-$i-$tool.log" 2>&1
    echo "== ${cmds[$i]} $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize-$i-$tool.log" | tail -1)"
  done
done
if [[ $# -gt 0 && $suite_s -gt 0 ]]; then
  timeout $((suite_s + 40)) python3 benchmarks/suite.py "$@" --jobs 12 --runs 10 --time-budget "$suite_s" \
    --out "$OUT/suite-final.json" 2>&1 | grep -E "^(level|built)"
fi
