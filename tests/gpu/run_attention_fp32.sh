#!/usr/bin/env bash
# One device call for fp32 attention, from the repository root, with carry=[".whl"]; logs and JSON go to $OUT:
#   bash tests/gpu/run_attention_fp32.sh [steps]     steps: a comma list of
#     build     every variant compiled in parallel into the cache (tests/gpu/precompile_attention_fp32.py)
#     tests     tests/gpu/test_gpu_attention_fp32.py
#     sanitize  compute-sanitizer memcheck + racecheck on tests/gpu/sanitize_attention_fp32.py
#     bench     benchmarks/attention_fp32.py (--sweep with BENCH_ARGS=--sweep)
#     errors    benchmarks/attention_fp32.py --errors (max / RMS errors against float64: kernel variants, eager)
#     suite     benchmarks/suite.py on the four SDPA problems (level1 131, 132, 175, level2 025)
#   default: build,bench,suite,tests,sanitize (in this order; logs and JSON: at most 8 files under $OUT)
set -uo pipefail
steps=",${1:-build,bench,suite,tests,sanitize},"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=${TILEPY_HIP_CACHE:-/tmp/thc}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
has() { [[ $steps == *",$1,"* ]]; }
if has build; then
  timeout 120 python3 tests/gpu/precompile_attention_fp32.py > "$OUT/build.log" 2>&1
  echo "== build: rc=$? $(tail -1 "$OUT/build.log")"; grep FAILED "$OUT/build.log" | head -5
fi
if has bench; then
  timeout 200 python3 benchmarks/attention_fp32.py --out "$OUT" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" | tail -30
fi
if has errors; then
  timeout 100 python3 benchmarks/attention_fp32.py --errors --out "$OUT" 2>&1 | tee "$OUT/errors.log" | tail -20
fi
if has suite; then
  timeout 300 python3 benchmarks/suite.py tests/problems/level1/131_sdpa.py tests/problems/level1/132_sdpa_causal.py \
    tests/problems/level1/175_multihead_attention.py tests/problems/level2/025_causal_self_attention.py \
    --runs 10 --out "$OUT/suite-sdpa-fp32.json" 2>&1 | tee "$OUT/suite.log" | tail -20
fi
if has tests; then
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_attention_fp32.py 2>&1 | tee "$OUT/pytest.log" | tail -15
fi
if has sanitize; then
  for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_attention_fp32.py > "$OUT/sanitize_$tool.log" 2>&1
    echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
    grep -m5 -E "Error|Hazard|Invalid" "$OUT/sanitize_$tool.log"
  done
fi
