#!/bin/bash
# G30 device call 2: B's boxes of 16 KB (128-column tiles) against the policy's 8 KB, rotated, each function twice in
# turn (g30_trace.py --plan call2), 16-128 x 4096 x 4096; the stream floors of 16 KB boxes over 64 / 32 blocks.
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/g30-call2.log"
timeout 240 python3 benchmarks/profile/g30_trace.py --plan call2 --repeat 2 --rows 16 32 64 96 128 --out "$OUT" \
    --name g30-call2-trace >> "$OUT/g30-call2.log" 2>&1
echo "rc=$?" >> "$OUT/g30-call2.log"
grep -v Warn "$OUT/g30-call2.log" | cut -c1-150
