#!/bin/bash
# G30 device call 3: no K split (g30_trace.py --plan call3: 64-column tiles unsplit, one consumer / K_WAYS=2, over one
# or two row tiles; CLUSTER_M=2 with K_WAYS=2) against the policy and _scaled_mm, rotated, each function twice in turn;
# N = K = 4096 at 16-256 rows, N = 4096 / K = 14336 at 16, 64, 128 rows.
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/g30-call3.log"
T="python3 benchmarks/profile/g30_trace.py --plan call3 --repeat 2 --out $OUT"
timeout 200 $T --rows 16 32 64 96 128 192 256 --name g30-call3-trace >> "$OUT/g30-call3.log" 2>&1
echo "rc=$?" >> "$OUT/g30-call3.log"
timeout 120 $T --rows 16 64 128 --nk 4096,14336 --name g30-call3-k14336-trace >> "$OUT/g30-call3.log" 2>&1
echo "rc=$?" >> "$OUT/g30-call3.log"
grep -v Warn "$OUT/g30-call3.log" | grep -v "_warn_once" | cut -c1-140
