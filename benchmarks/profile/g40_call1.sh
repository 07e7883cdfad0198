#!/usr/bin/env bash
# G40 device call 1 (issue 15, f32 out on the large class): the policy re-measured (rotated, x torch.mm(out_dtype=f32))
# beside forms that change how much of a tile's 128 KB f32 store waits inside the tile for the TMA's reads (held
# pieces, 4 buffers beside 3 stages), two rounds alternated.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g40-call1.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee "$LOG"
timeout ${T1:-150} python3 benchmarks/gemm_f32out_large.py --tag=-g40-call1 --out "$OUT" --rounds 2 \
  --forms policy held4 s3_b4_held2 s3_b4_held4 s3_held2 g16 \
  --shapes 8192,8192,1024 4096,14336,4096 4096,4096,4096 2>&1 | grep -v -i warn | tee -a "$LOG"
echo "== done $(el)" | tee -a "$LOG"
