#!/usr/bin/env bash
# One device call for attention, from the repository root, with carry=[".whl"]; logs and JSON go to $OUT:
#   bash tests/gpu/run_attention.sh [steps]      steps: a comma list of
#     build     every variant compiled in parallel into the cache (tests/gpu/precompile_attention.py)
#     tests     tests/gpu/test_gpu_attention.py
#     sanitize  compute-sanitizer memcheck + racecheck on tests/gpu/sanitize_attention.py ($SANITIZE_ARGS:
#               --policy for the launch policy alone)
#     sweep     benchmarks/attention.py --sweep (the policy variants)
#     bench     benchmarks/attention.py --quick (the table, with the policy)
#     ablation  benchmarks/ablation_attention.py
#   default: build,tests,sanitize,bench
set -uo pipefail
steps=",${1:-build,tests,sanitize,bench},"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=${TILEPY_HIP_CACHE:-/tmp/thc}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
has() { [[ $steps == *",$1,"* ]]; }
if has build; then
  timeout 120 python3 tests/gpu/precompile_attention.py > "$OUT/build.log" 2>&1
  echo "== build: rc=$? $(tail -1 "$OUT/build.log")"; grep FAILED "$OUT/build.log" | head -5
fi
if has tests; then
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_attention.py 2>&1 | tee "$OUT/pytest.log" | tail -15
fi
if has sweep; then
  timeout 150 python3 benchmarks/attention.py --sweep --out "$OUT" 2>&1 | tee "$OUT/sweep.log" | tail -45
fi
if has bench; then
  timeout 200 python3 benchmarks/attention.py --quick --out "$OUT" 2>&1 | tee "$OUT/bench.log" | tail -32
fi
if has sanitize; then
  for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_attention.py ${SANITIZE_ARGS:-} \
      > "$OUT/sanitize_$tool.log" 2>&1
    echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
    grep -m5 -E "Error|Hazard|Invalid" "$OUT/sanitize_$tool.log"
  done
fi
if has ablation; then
  timeout 100 python3 benchmarks/ablation_attention.py --out "$OUT" 2>&1 | tee "$OUT/ablation.log" | tail -12
fi
