#!/usr/bin/env bash
# A device call of the small / skinny GEMM work (issue 15): the sweep `gemm_small_sweep.py --plan PLAN` (results
# named NAME), then every GPU test of the small forms and of the lowered GEMM policies, and compute-sanitizer on the
# K_WAYS cases (the policy's included). G11's calls 2-4 were plans 7 / 8 / 9 named gemm-g11-table / -after / -shift.
# Usage on the device machine (repo root): bash benchmarks/gemm_small_tests.sh PLAN NAME [SANITIZE [PYTEST_K]]
# (SANITIZE: sanitize_gemm_small.py's case set, --kways by default; PYTEST_K: a pytest -k expression over the small
# forms' tests alone, e.g. G14's "cluster_k", instead of every test)
set -uo pipefail
plan=${1:?plan number}; name=${2:?results name}; san=${3:---kways}; only=${4:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 200 python3 benchmarks/gemm_small_sweep.py --plan "$plan" --name "$name" --precompile 16 --out "$OUT" 2>&1 \
  | tee "$OUT/$name-sweep.log" | grep -v "^ *$"
echo "== sweep done at +$(( $(date +%s) - t0 )) s"
if [ -n "$only" ]; then tests=(tests/gpu/test_gpu_gemm_small.py -k "$only"); else
  tests=(tests/gpu/test_gpu_gemm_small.py tests/gpu/test_gpu_lower_gemm_policy.py
         "tests/gpu/test_gpu_gemm_policies.py::test_policy_table_through_launch"); fi
timeout 200 python3 -m pytest -q -n 4 -p no:cacheprovider "${tests[@]}" 2>&1 \
  | tee "$OUT/gemm-g11-pytest.log" | grep -vE "^(tests|E |  )|Warning" | tail -12
echo "== pytest done at +$(( $(date +%s) - t0 )) s"
for tool in memcheck racecheck; do
  timeout 70 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_small.py "$san" > "$OUT/gemm-g11-$tool.log" 2>&1
  echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/gemm-g11-$tool.log" | tail -1) at +$(( $(date +%s) - t0 )) s"
  grep -m5 -E "Error|Hazard|Invalid|Traceback" "$OUT/gemm-g11-$tool.log" | tail -3
done
