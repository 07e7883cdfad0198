#!/usr/bin/env bash
# G27 device call 3 (issue 15, skinny bf16 rows, B from DRAM): two unsplit row tiles (K_WAYS=2) at 96-256 rows with
# M = 2 x BM unshifted, alternated with the policy where call 2 found a gain; 128 x 14336 x 4096 at 5 stages again
# (`gemm_skinny_dram.py --plan 3`).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g27-call3.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee "$LOG"
timeout ${SWEEP_S:-240} python3 benchmarks/gemm_skinny_dram.py --plan 3 --no-floor --name gemm-g27-rowtiles2 \
  --precompile 16 --out "$OUT" 2>&1 | grep -v Warning | tee -a "$LOG"
echo "== done $(el)" | tee -a "$LOG"
