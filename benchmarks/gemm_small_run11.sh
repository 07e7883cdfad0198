#!/usr/bin/env bash
# G11's fourth device call (issue 15): K_WAYS=2 with the last row tile shifted back to end at M (M_SHIFT=1) against
# the policy (gemm_small_sweep.py --plan 9); then every GPU test of the small forms and of
# the lowered GEMM policies, and compute-sanitizer on the K_WAYS cases (the policy's included).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 200 python3 benchmarks/gemm_small_sweep.py --plan 9 --name gemm-g11-shift --precompile 16 --out "$OUT" 2>&1 \
  | tee "$OUT/gemm-g11-shift-sweep.log" | grep -v "^ *$"
echo "== sweep done at +$(( $(date +%s) - t0 )) s"
timeout 150 python3 -m pytest -q -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_small.py \
  tests/gpu/test_gpu_lower_gemm_policy.py "tests/gpu/test_gpu_gemm_policies.py::test_policy_table_through_launch" 2>&1 \
  | tee "$OUT/gemm-g11-pytest.log" | grep -vE "^(tests|E |  )|Warning" | tail -12
echo "== pytest done at +$(( $(date +%s) - t0 )) s"
for tool in memcheck racecheck; do
  timeout 70 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_small.py --kways > "$OUT/gemm-g11-$tool.log" 2>&1
  echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/gemm-g11-$tool.log" | tail -1) at +$(( $(date +%s) - t0 )) s"
  grep -m5 -E "Error|Hazard|Invalid|Traceback" "$OUT/gemm-g11-$tool.log" | tail -3
done
