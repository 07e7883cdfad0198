#!/bin/bash
# G34 device call 1: gemm_fp8_swap's HALF_SUM (the K split's exchange as a reduce-scatter of C's rows) and STORE_T
# (C's tile by one TMA store) against the skinny fp8 policy, and G30's unsplit two-row-tile forms with TMA_ONLY at
# 64-128 rows; 16-256 x 4096 x 4096 rotated (B from DRAM), every function three times in turn (g34_trace.py --plan
# g34-call1), then 64 / 128 x 4096 x 14336 twice; first the G34 GPU tests, last memcheck + racecheck of the G34 cases.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
LOG="$OUT/g34-call1.log"
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$LOG"
timeout 100 python3 -m pytest -q -v -p no:cacheprovider tests/gpu/test_gemm_fp8_swap.py -k g34 > "$OUT/g34-call1-pytest.log" 2>&1
step "pytest rc=$?"
tail -3 "$OUT/g34-call1-pytest.log"
timeout 170 python3 benchmarks/profile/g34_trace.py --plan g34-call1 --repeat 3 --out "$OUT" \
    --rows 16 32 64 96 128 192 256 --name g34-call1-trace >> "$LOG" 2>&1
step "trace rc=$?"
timeout 60 python3 benchmarks/profile/g34_trace.py --plan g34-call1 --repeat 2 --out "$OUT" --nk 4096,14336 \
    --rows 64 128 --name g34-call1-k14336-trace >> "$LOG" 2>&1
step "trace k14336 rc=$?"
for t in memcheck racecheck; do
  ( timeout 60 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp8_swap.py g34 > "$OUT/$t.tmp" 2>&1;
    echo "rc=$?" >> "$OUT/$t.tmp" ) &
done
wait; cat "$OUT/memcheck.tmp" "$OUT/racecheck.tmp" > "$OUT/g34-call1-sanitize.log"; rm -f "$OUT"/*.tmp
step "sanitizers done"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|^ok|fp8 swap" "$OUT/g34-call1-sanitize.log" | cut -c1-140
grep -v Warn "$LOG" | grep -v "_warn_once" | grep -v "scaled_mm_fast" | cut -c1-170
