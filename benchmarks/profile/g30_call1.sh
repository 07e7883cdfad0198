#!/bin/bash
# G30 device call 1: where a rotated skinny fp8 call's time goes (g30_trace.py: ours / _scaled_mm / the stream floors,
# rotated graph times and the traced kernel durations and gaps), 16-128 x 4096 x 4096.
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/g30-call1.log"
timeout 200 python3 benchmarks/profile/g30_trace.py --out "$OUT" --name g30-call1-trace >> "$OUT/g30-call1.log" 2>&1
echo "rc=$?" >> "$OUT/g30-call1.log"
cat "$OUT/g30-call1.log"
