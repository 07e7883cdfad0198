#!/bin/bash
# G34 device call 4: STORE_T (C's tile by one TMA store) on the policy's two unsplit row tiles (one consumer) against
# the policy, 48-240 x 4096 x 4096 rotated, three times in turn; GPU tests of G34's forms (the new STORE_T row tiles
# among them) and memcheck + racecheck of the G34 cases in parallel, first.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
LOG="$OUT/g34-call4.log"
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$LOG"
timeout 100 python3 -m pytest -q -v -p no:cacheprovider tests/gpu/test_gemm_fp8_swap.py -k "g34" \
    > "$OUT/g34-call4-pytest.log" 2>&1 &
for t in memcheck racecheck; do
  ( timeout 100 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp8_swap.py g34 > "$OUT/$t.tmp" 2>&1;
    echo "rc=$?" >> "$OUT/$t.tmp" ) &
done
wait; cat "$OUT/memcheck.tmp" "$OUT/racecheck.tmp" > "$OUT/g34-call4-sanitize.log"; rm -f "$OUT"/*.tmp
step "pytest + sanitizers done"
tail -3 "$OUT/g34-call4-pytest.log"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=" "$OUT/g34-call4-sanitize.log"
timeout 100 python3 benchmarks/profile/g34_trace.py --plan g34-call4 --repeat 3 --out "$OUT" \
    --rows 48 96 136 160 192 200 224 240 --name g34-call4-trace >> "$LOG" 2>&1
step "trace rc=$?"
grep -v Warn "$LOG" | grep -v "_warn_once" | grep -v "scaled_mm_fast" | cut -c1-130
