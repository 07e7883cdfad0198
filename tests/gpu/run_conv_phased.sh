#!/usr/bin/env bash
# One device call for conv_igemm's PHASED transposed convolutions: the conv GPU tests (strided transposed cases
# run PHASED through launch), compute-sanitizer memcheck + racecheck on sanitize_conv.py (PHASED launches in
# both tile configurations), benchmarks/conv.py (phases vs the one-GEMM form vs cuDNN), then the suite on the
# strided transposed problems with the in-kernel phases (ARGUS_TRANSPOSED_PHASES=0; PHASES="0 1": the IR phases too).
# Usage on the device machine (repo root): bash tests/gpu/run_conv_phased.sh [suite seconds]
set -uo pipefail
budget=${1:-40}
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 100 python3 -m pytest -q -x -n 8 -p no:cacheprovider tests/gpu/test_gpu_conv_igemm.py -k "not split_k" 2>&1 \
  | tee "$OUT/pytest.log" | grep -vE "^(tests|E |  )" | tail -6
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_conv.py > "$OUT/sanitize_$tool.log" 2>&1
  echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
  grep -m5 -E "Error|Hazard|Invalid" "$OUT/sanitize_$tool.log"
done
timeout 120 python3 benchmarks/conv.py --runs 20 --out "$OUT" 2>&1 | tail -20
P=tests/problems
for phases in ${PHASES:-0}; do
  ARGUS_TRANSPOSED_PHASES=$phases timeout $((budget + 60)) python3 benchmarks/suite.py --jobs 14 --runs 10 \
    --time-budget "$budget" --out "$OUT/suite-phases$phases.json" \
    $P/level2/003_* $P/level2/010_* $P/level2/034_* $P/level2/035_* $P/level1/099_* 2>&1 | tail -9
done
