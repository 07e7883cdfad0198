#!/usr/bin/env bash
# G11's device call (issue 15): gemm_splitk_swap K_WAYS=2 (two consumer warpgroups over one tile, alternate k-tiles)
# against the policy and cuBLAS (gemm_small_sweep.py --plan 6), its GPU tests, compute-sanitizer on its cases.
#   bash benchmarks/gemm_small_run8.sh [sweep-plan (6)] [name (gemm-g11-kways)] [pytest -k expression (k_ways)]
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PLAN=${1:-6}; NAME=${2:-gemm-g11-kways}; KEXPR=${3:-k_ways}
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 200 python3 benchmarks/gemm_small_sweep.py --plan "$PLAN" --name "$NAME" --precompile 16 --out "$OUT" 2>&1 \
  | tee "$OUT/$NAME-sweep.log" | grep -v "^ *$"
echo "== sweep done at +$(( $(date +%s) - t0 )) s"
timeout 100 python3 -m pytest -q -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_small.py -k "$KEXPR" 2>&1 \
  | tee "$OUT/$NAME-pytest.log" | grep -vE "^(tests|E |  )" | tail -8
echo "== pytest done at +$(( $(date +%s) - t0 )) s"
for tool in memcheck racecheck; do
  timeout 70 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_small.py --kways > "$OUT/$NAME-$tool.log" 2>&1
  echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$NAME-$tool.log" | tail -1) at +$(( $(date +%s) - t0 )) s"
  grep -m5 -E "Error|Hazard|Invalid|Traceback|rel err" "$OUT/$NAME-$tool.log" | tail -3
done
