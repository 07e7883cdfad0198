#!/usr/bin/env bash
# G33 device call 2 (issue 15, the bf16 small class): where K_WAYS=2's fixed cost goes and what its cluster forms
# pay per k-tile, by source ablation (benchmarks/gemm_small_fixed.py --plan c: 1024 x 1024 x K, K = 128 / 1024 / 4096,
# device time on one set, graph time over rotated input sets, cuBLAS beside).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g33-call2.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$LOG"
timeout 200 python3 benchmarks/gemm_small_fixed.py --plan c --ks 128,1024,4096 --out "$OUT" --name gemm-g33-fixed 2>&1 \
  | grep -v Warning | grep -v "^ *$" | tee -a "$LOG"
echo "== ablation $(el)" | tee -a "$LOG"
true
