#!/usr/bin/env bash
# G23 device call 3 (issue 15): where in K the cluster split with XCH=1 starts paying at BM 112 / 128
# (`gemm_small_sweep.py --plan 20`: forced against the policy there, K = 2048-3072).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$OUT/g23-call3.log"
timeout 45 python3 benchmarks/gemm_small_sweep.py --plan 20 --name gemm-g23-xch-k --precompile 8 --out "$OUT" 2>&1 \
  | grep -v Warning | tee -a "$OUT/g23-call3.log"
echo "== done +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/g23-call3.log"
