#!/usr/bin/env bash
# One device call for the conv_tma forms that were off until timed (W stride, transposed phases): the conv_tma
# GPU tests, compute-sanitizer on the small shapes of tests/gpu/sanitize_conv_tma.py (a W-stride and a
# shared-copy phase included), then the suite on the given problems with the forms on and off.
# Usage on the device machine (repo root): bash tests/gpu/device_run_conv4.sh TAG problems...
# Environment: SKIP_TESTS=1 skips the tests and sanitizers; FORMS="1" times only the default (forms on);
# PROFILE="problem files" adds benchmarks/conv_profile.py's per-kernel CUDA times for them. E.g. the check of
# the shared phase weights and the padded problems (not yet timed end to end):
#   SKIP_TESTS=1 FORMS=1 bash tests/gpu/device_run_conv4.sh b tests/problems/level2/034_* \
#     tests/problems/level1/101_* tests/problems/level2/003_* tests/problems/level1/18[67]_* \
#     tests/problems/level1/193_* tests/problems/level2/029_*
set -uo pipefail
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tag=$1; shift
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout 150 python3 -m pytest -q -x -n 16 -p no:cacheprovider tests/gpu/test_gpu_conv_tma.py 2>&1 \
    | tee "$OUT/pytest.log" | grep -vE "^(tests|  )" | tail -8
  for tool in memcheck racecheck; do
    timeout 90 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_conv_tma.py > "$OUT/sanitize_$tool.log" 2>&1
    echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
    grep -m5 -E "Error|Hazard|Invalid" "$OUT/sanitize_$tool.log"
  done
fi
for on in ${FORMS:-1 0}; do
  echo "== suite with ARGUS_CONV_TMA_WSTRIDE=$on ARGUS_CONV_TMA_PHASES=$on"
  ARGUS_CONV_TMA_WSTRIDE=$on ARGUS_CONV_TMA_PHASES=$on timeout 240 python3 benchmarks/suite.py --jobs 16 --runs 10 \
    --out "$OUT/suite-conv4-$tag-forms$on.json" "$@" 2>&1 | grep -E "^level|built|wrote|rror" | tail -24
done
if [ -n "${PROFILE:-}" ]; then
  timeout 150 python3 benchmarks/conv_profile.py --runs 5 --out "$OUT/profile-$tag.json" $PROFILE 2>&1 | grep -E "^(==|   )" | head -60
fi
