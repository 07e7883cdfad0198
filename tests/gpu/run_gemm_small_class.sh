#!/usr/bin/env bash
# G16's device call 2 (issue 15, the small class): the policy after G16's rows against what it replaced
# (`benchmarks/gemm_small_class.py --plan confirm`), the GPU tests of the small-class forms and of the policy through
# launch / the lowering, then compute-sanitizer memcheck and racecheck on tests/gpu/sanitize_gemm_small_class.py.
# Usage on the device machine (repo root): bash tests/gpu/run_gemm_small_class.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 150 python3 benchmarks/gemm_small_class.py --plan confirm --name gemm-g16-confirm --precompile 16 \
  --out "$OUT" 2>&1 | tee "$OUT/g16-confirm.log" | grep -v "^ *$" | grep -v Warning
echo "== sweep done at +$(( $(date +%s) - t0 )) s"
timeout 150 python3 -m pytest -v -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_small_class.py \
  "tests/gpu/test_gpu_gemm_policies.py::test_policy_table_through_launch" \
  "tests/gpu/test_gpu_lower_gemm_policy.py::test_lowered_gemm_policy_on_gpu" > "$OUT/g16-pytest.log" 2>&1
echo "== pytest rc=$? at +$(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/g16-pytest.log")"
grep -E "FAILED|Error" "$OUT/g16-pytest.log" | head -8
for tool in memcheck racecheck; do
  timeout 80 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_small_class.py > "$OUT/g16-$tool.log" 2>&1
  echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/g16-$tool.log" | tail -1) at +$(( $(date +%s) - t0 )) s"
  grep -m5 -E "Error|Hazard|Invalid|Traceback" "$OUT/g16-$tool.log" | tail -3
done
