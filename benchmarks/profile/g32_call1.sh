#!/bin/bash
# G32 device call 1: gemm_fp8_swap's rows over a cluster of 2 sharing B by multicast (CLUSTER_M=2) with the copies TMA
# only (TMA_ONLY=1), one consumer / two on alternate k-tiles / the deepest ring, against the skinny policy at 32-192 x
# 4096 x 4096, rotated (B from DRAM), each function twice in turn (g32_trace.py --plan g32-call1); then memcheck +
# racecheck of the G32 cases (one call of at most 130 s: the timing first).
cd "$(dirname "$0")/../.."
T0=$(date +%s)
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/g32-call1.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/g32-call1.log"
timeout 80 python3 benchmarks/profile/g32_trace.py --plan g32-call1 --repeat 2 --out "$OUT" --rows 32 64 96 128 192 \
    --name g32-call1-trace >> "$OUT/g32-call1.log" 2>&1
step "trace rc=$?"
for t in memcheck racecheck; do
  ( timeout 40 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp8_swap.py g32 > "$OUT/$t.tmp" 2>&1;
    echo "rc=$?" >> "$OUT/$t.tmp" ) &
done
wait; cat "$OUT/memcheck.tmp" "$OUT/racecheck.tmp" > "$OUT/g32-call1-sanitize.log"; rm -f "$OUT"/*.tmp
step "sanitizers done"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|^ok|fp8 swap" "$OUT/g32-call1-sanitize.log" | cut -c1-140
grep -v Warn "$OUT/g32-call1.log" | grep -v "_warn_once" | grep -v "scaled_mm_fast" | cut -c1-150
