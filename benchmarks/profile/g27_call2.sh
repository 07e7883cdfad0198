#!/usr/bin/env bash
# G27 device call 2 (issue 15, skinny bf16 rows, B from DRAM): where a rotated call's period goes (kernel against the
# gap between calls, ours and cuBLAS at 32-192 rows, from torch.profiler over graph replays), then two unsplit row
# tiles (K_WAYS=2, M_SHIFT) at 96-256 rows and the 128 x 128 tiles' depth at 128 x 14336 x 4096, alternated with the
# policy (`gemm_skinny_dram.py --plan 2 --trace`).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g27-call2.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee "$LOG"
timeout ${SWEEP_S:-240} python3 benchmarks/gemm_skinny_dram.py --plan 2 --trace --no-floor --name gemm-g27-rowtiles \
  --precompile 16 --out "$OUT" 2>&1 | grep -v Warning | tee -a "$LOG"
echo "== done $(el)" | tee -a "$LOG"
