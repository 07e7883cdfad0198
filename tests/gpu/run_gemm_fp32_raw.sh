#!/usr/bin/env bash
# One device call for gemm_fp32 A_RAW (A split in the GEMM's registers), from the repository root, with
# carry=[".whl"]; logs and JSON go to $OUT:
#   bash tests/gpu/run_gemm_fp32_raw.sh [steps]     steps: a comma list of
#     bench     benchmarks/gemm_fp32_raw.py (A_RAW variants vs the split form vs SGEMM; SASS summary)
#     tests     tests/gpu/test_gpu_gemm_fp32.py, tests/gpu/test_gpu_lower_fp32_raw.py
#     sanitize  compute-sanitizer memcheck + racecheck on tests/gpu/sanitize_gemm_fp32.py
#     profile   benchmarks/conv_profile.py on level3/019 (ConvNeXt block: kernel by kernel, ours vs eager)
#     suite     benchmarks/suite.py on level3/019
#   default: bench,tests,sanitize,profile (suite: the lead's level3 run)
set -uo pipefail
steps=",${1:-bench,tests,sanitize,profile},"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=${TILEPY_HIP_CACHE:-/tmp/thc}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
has() { [[ $steps == *",$1,"* ]]; }
P019=tests/problems/level3/019_convnext_block.py
if has bench; then
  timeout 70 python3 benchmarks/gemm_fp32_raw.py --variants ${VARIANTS:-split,raw,raw_wait_once} \
    --out "$OUT" 2>&1 | tee "$OUT/bench.log" | grep -v "^  warn"
fi
if has tests; then
  timeout 90 python3 -m pytest -q -n 8 -p no:cacheprovider tests/gpu/test_gpu_gemm_fp32.py \
    tests/gpu/test_gpu_lower_fp32_raw.py > "$OUT/tests.log" 2>&1
  echo "== tests: rc=$?"; grep -E "passed|failed|^FAILED|^E " "$OUT/tests.log" | head -20
fi
if has sanitize; then
  for tool in memcheck racecheck; do
    timeout 45 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_fp32.py > "$OUT/$tool.log" 2>&1
    echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Error' "$OUT/$tool.log" | head -3 | tr '\n' ' ')"
  done
fi
if has profile; then
  timeout 70 python3 benchmarks/conv_profile.py $P019 --runs 10 --out "$OUT/profile-019.json" 2>&1 | tail -14
fi
if has suite; then
  timeout 100 python3 benchmarks/suite.py $P019 --jobs 4 --runs 20 --out "$OUT/suite-019.json" 2>&1 | tail -6
fi
