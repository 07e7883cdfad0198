#!/usr/bin/env bash
# G8's third device call: the GPU tests of the policy forms (tests/gpu/test_gpu_gemm_small.py, test_gpu_gemm_policies'
# policy table), then the table through launch (benchmarks/gemm_small_sweep.py --plan 3).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_gemm_small.py \
  "tests/gpu/test_gpu_gemm_policies.py::test_policy_table_through_launch" 2>&1 | tee "$OUT/g8-pytest.log" | grep -vE "^(tests|E |  )" | tail -12
python3 benchmarks/gemm_small_sweep.py --plan 3 --name gemm-g8-table --precompile 16 --out "$OUT" 2>&1 | tee "$OUT/g8-table.log" | grep -v "^ *$"
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_small.py > "$OUT/g8-sanitize3_$tool.log" 2>&1
  echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/g8-sanitize3_$tool.log" | tail -1)"
  grep -m5 -E "Error|Hazard|Invalid" "$OUT/g8-sanitize3_$tool.log"
done
