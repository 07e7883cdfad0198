#!/usr/bin/env bash
# One device call for gemm_hopper's policies: GPU tests, compute-sanitizer memcheck + racecheck, benchmarks.
# Usage (device machine, repo root; the carried wheels installed first): bash tests/gpu/run_gemm_policies.sh [tests] [bench]
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
for what in "$@"; do
  if [[ $what == tests ]]; then
    python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_gemm_policies.py tests/gpu/test_gpu_kernels.py \
      -k "policy or policies or gemm_hopper" 2>&1 | tee "$OUT/pytest_policies.log" | grep -vE "^(tests|E |  )" | tail -15
    for tool in memcheck racecheck; do
      compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_policies.py > "$OUT/sanitize_$tool.log" 2>&1
      echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
      grep -m5 -E "Error|Hazard|Invalid" "$OUT/sanitize_$tool.log"
    done
  fi
  if [[ $what == sweep ]]; then
    python3 benchmarks/gemm.py --only none --policies --out "$OUT" 2>&1 | tail -80
  fi
  if [[ $what == bench ]]; then
    python3 benchmarks/gemm.py --policies --out "$OUT" 2>&1 | tail -100
  fi
  if [[ $what == ablation ]]; then
    python3 benchmarks/ablation.py --out "$OUT" 2>&1 | tail -14
  fi
  if [[ $what == launch ]]; then
    python3 benchmarks/launch_overhead.py --out "$OUT" 2>&1 | tail -14
  fi
done
