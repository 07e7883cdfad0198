#!/usr/bin/env bash
# G10's checks of what was written after its two device calls: the lowering's GEMM forms on the GPU (swap-AB and the
# split-K Linear reading its weight in place), compute-sanitizer on sanitize_gemm_small.py (its last case: gemm_hopper
# B_NK at the split policies) and on gemm_fp8's large policy.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
timeout 90 python3 -m pytest -q -n 3 -p no:cacheprovider tests/gpu/test_gpu_lower_gemm_policy.py 2>&1 \
  | tee "$OUT/g10-pytest3.log" | grep -vE "^(tests|E |  )|Warning" | tail -6
echo "== pytest done at +$(( $(date +%s) - t0 )) s"
for script in sanitize_gemm_small sanitize_gemm_fp8_policy; do
  for tool in memcheck racecheck; do
    timeout 60 compute-sanitizer --tool $tool python3 tests/gpu/$script.py > "$OUT/g10-$script-$tool.log" 2>&1
    echo "== $script $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/g10-$script-$tool.log" | tail -1) at +$(( $(date +%s) - t0 )) s"
    grep -m5 -E "Error|Hazard|Invalid|Traceback|rel err" "$OUT/g10-$script-$tool.log" | tail -3
  done
done
