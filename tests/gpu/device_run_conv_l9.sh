#!/usr/bin/env bash
# One device call for conv_tma's staged epilogue and the subsampled strided 1x1: the conv_tma GPU tests and
# compute-sanitizer (memcheck with a lowered projection block, racecheck on the stdlib launches) beside the
# build phase of benchmarks/conv_epilogue_ab.py, then its timing phase alone on the GPU.
# Usage on the device machine (repo root): bash tests/gpu/device_run_conv_l9.sh 020-problem [other problems...]
set -uo pipefail
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
(timeout ${TEST_S:-95} python3 -m pytest -q -n 4 -p no:cacheprovider tests/gpu/test_gpu_conv_tma.py \
   > "$OUT/pytest.log" 2>&1; echo "pytest rc=$? at $((SECONDS - t0)) s" >> "$OUT/pytest.log") &
(timeout ${MEMCHECK_S:-55} compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_conv_tma.py \
   > "$OUT/sanitize_memcheck.log" 2>&1
 echo "memcheck rc=$? at $((SECONDS - t0)) s" >> "$OUT/sanitize_memcheck.log"
 timeout ${RACECHECK_S:-40} compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_conv_tma.py --no-lowering \
   > "$OUT/sanitize_racecheck.log" 2>&1
 echo "racecheck rc=$? at $((SECONDS - t0)) s" >> "$OUT/sanitize_racecheck.log") &
# level3/020 in every form (its grouped 3x3 for "merged"), the other problems before / after
first=$1; shift
[ $# -gt 0 ] && (timeout ${BUILD_S:-90} python3 benchmarks/conv_epilogue_ab.py --phase build --work /tmp/ab \
   --jobs 4 "$@" --forms before,after 2>&1 | grep -E "^build") &
timeout ${BUILD_S:-90} python3 benchmarks/conv_epilogue_ab.py --phase build --work /tmp/ab --jobs 4 "$first" 2>&1 \
  | grep -E "^build" ; echo "build done at $((SECONDS - t0)) s"
wait
echo "== tests and sanitizers done at $((SECONDS - t0)) s"
tail -4 "$OUT/pytest.log"; grep -E "FAILED|Error" "$OUT/pytest.log" | head -10
for f in memcheck racecheck; do
  echo "== $f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^ok|rc=' "$OUT/sanitize_$f.log" | tr '\n' ' ')"
  grep -m5 -E "Error|Hazard|Invalid|Traceback" "$OUT/sanitize_$f.log"
done
timeout ${MEASURE_S:-45} python3 benchmarks/conv_epilogue_ab.py --phase measure --work /tmp/ab --runs 20 \
  --out "$OUT/conv-epilogue-ab-020.json" "$first" 2>&1 | grep -E "^(==|     )"
[ $# -gt 0 ] && timeout ${MEASURE_S:-30} python3 benchmarks/conv_epilogue_ab.py --phase measure --work /tmp/ab \
  --runs 20 --forms before,after --out "$OUT/conv-epilogue-ab-resnet.json" "$@" 2>&1 | grep -E "^(==|     )"
echo "== all done at $((SECONDS - t0)) s"
