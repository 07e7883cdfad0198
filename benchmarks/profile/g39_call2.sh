#!/bin/bash
# G39 device call 2: ring depth under the policy's own forms, rotated, twice in turn (kernel durations traced inside the
# graph): skinny 96 / 112 / 128 x 4096 x 4096 at 4-10 stages; the mid shapes 4096 x 1024 x 1024 (LARGE_PERSISTENT on
# one wave), 1536^3 (WAVE_128x144), 2048 x 1024 x 4096 (MID_128x128) at one / two stages fewer (and more where it fits).
cd "$(dirname "$0")/../.."
T0=$(date +%s)
LOG="$OUT/g39-call2.log"
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$LOG"
run() { timeout 90 python3 benchmarks/profile/g39_trace.py --plan g39-call2 --repeat 2 --out "$OUT" "$@" >> "$LOG" 2>&1;
        step "trace $* rc=$?"; }
run --rows 96 128 112 --name g39-call2-skinny-trace
run --rows 4096 --nk 1024,1024 --name g39-call2-4096x1024x1024-trace
run --rows 1536 --nk 1536,1536 --name g39-call2-1536-trace
run --rows 2048 --nk 1024,4096 --name g39-call2-2048x1024x4096-trace
grep -v Warn "$LOG" | grep -v "_warn_once" | grep -v "scaled_mm_fast" | cut -c1-175
