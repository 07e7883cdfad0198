#!/usr/bin/env bash
# G28 call 3: call 2's winners and their neighbours over more small / mid shapes, alternated and rotated; log under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/g28.log"
python3 benchmarks/gemm_fp8_small.py --more --tag=-g28-call3 --out "$OUT" --forms 64x32_s6_w1 64x64_s4_w1 \
  64x64_s6_w1 64x128_s4_w1 64x128_s6_w1 64x128_s8_w1 128x128_s5_w1 128x128_s6_w1 64x128_s8_w1_ep0 64x128_s4_w1_ep0 \
  128x128_s6_w1_ep0 large_tma_only pr128x128_s6 p128x128_s6 2>&1 | tee -a "$OUT/g28.log" | grep -v "^  [0-9a-z]"
