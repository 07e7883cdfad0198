#!/usr/bin/env bash
# G10's first device call (issue 15): swap-AB in clusters / B as (N, K) / 128 x 64 clusters against the policy and
# cuBLAS (benchmarks/gemm_small_sweep.py --plan 5), the GPU tests of the small forms, then the fp8 forms' timing
# against torch._scaled_mm (tests/gpu/run_gemm_large.sh sweep --only fp8, G9's script as it is).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 170 python3 benchmarks/gemm_small_sweep.py --plan 5 --name gemm-g10-swapcl --precompile 16 --out "$OUT" 2>&1 \
  | tee "$OUT/g10-sweep5.log" | grep -v "^ *$"
echo "== sweep done at +$(( $(date +%s) - t0 )) s"
timeout 100 python3 -m pytest -q -x -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_small.py 2>&1 \
  | tee "$OUT/g10-pytest1.log" | grep -vE "^(tests|E |  )" | tail -8
echo "== pytest done at +$(( $(date +%s) - t0 )) s"
OUT="$OUT/fp8" timeout 120 bash tests/gpu/run_gemm_large.sh sweep --only fp8 --batches 15 --deadline 60 \
  --variants '^(s3_tma|s3_tma_r96|s3_tma_r96_g16|s4_r96)$' --fp8-shapes 4096,4096,4096 8192,8192,8192 4096,14336,4096 \
  2>&1 | grep -E "^fp8|precompiled|==|Error|error" | tail -30
echo "== fp8 done at +$(( $(date +%s) - t0 )) s"
