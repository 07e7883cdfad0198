#!/bin/bash
# G39 device call 3 (diagnostic): the relaxed rows' cluster with B multicast in two halves (MC_HALF=1) against the whole
# tile by alternate ranks and the policy, 96 / 128 / 192 x 4096 x 4096 rotated, twice in turn; GPU tests of the G39
# forms and memcheck + racecheck of the halves first (tilepy-verify does not follow that multicast).
cd "$(dirname "$0")/../.."
T0=$(date +%s)
LOG="$OUT/g39-call3.log"
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$LOG"
timeout 80 python3 -m pytest -q -v -p no:cacheprovider tests/gpu/test_gemm_fp8_swap.py -k "g39" \
    > "$OUT/g39-call3-pytest.log" 2>&1 &
for t in memcheck racecheck; do
  ( timeout 80 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp8_swap.py g39h > "$OUT/$t.tmp" 2>&1;
    echo "rc=$?" >> "$OUT/$t.tmp" ) &
done
wait; cat "$OUT/memcheck.tmp" "$OUT/racecheck.tmp" > "$OUT/g39-call3-sanitize.log"; rm -f "$OUT"/*.tmp
step "pytest + sanitizers done"
tail -3 "$OUT/g39-call3-pytest.log"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=" "$OUT/g39-call3-sanitize.log"
timeout 80 python3 benchmarks/profile/g39_trace.py --plan g39-call3 --repeat 2 --out "$OUT" \
    --rows 96 128 192 --name g39-call3-trace >> "$LOG" 2>&1
step "trace rc=$?"
grep -v Warn "$LOG" | grep -v "_warn_once" | grep -v "scaled_mm_fast" | cut -c1-150
