#!/usr/bin/env bash
# G40 device call 2 (issue 15, f32 out on the large class): the policy against DEFER_K=2 / 3 (the held pieces written
# under the tile's first two / three k-tiles' wgmmas), HELD=4 and GROUP_M 16, ours and the peer alternating replay
# by replay (call 1's rows drifted with the clock), the forms alternated twice.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g40-call2.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee "$LOG"
timeout ${T1:-150} python3 benchmarks/gemm_f32out_large.py --tag=-g40-call2 --out "$OUT" --rounds 2 \
  --forms policy dk2 dk3 held4 g16 \
  --shapes 8192,8192,1024 4096,14336,4096 4096,4096,4096 2>&1 | grep -v -i warn | tee -a "$LOG"
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader 2>&1 | tee -a "$LOG"
echo "== done $(el)" | tee -a "$LOG"
