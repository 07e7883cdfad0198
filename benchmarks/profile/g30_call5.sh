#!/bin/bash
# G30 device call 5: the adopted skinny policy (TMA_ONLY everywhere, 16 rows unsplit, 256 rows whole tiles) through
# launch: the swap / fp8 GPU tests and memcheck + racecheck of the G30 cases first, then the policy against the table
# before G30, rotated, three runs in turn (g30_trace.py --plan call5).
cd "$(dirname "$0")/../.."
T0=$(date +%s)
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/g30-call5.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/g30-call5.log"
T="python3 benchmarks/profile/g30_trace.py --plan call5 --repeat 3 --out $OUT"
timeout 100 python3 -m pytest -v -n 6 -p no:cacheprovider tests/gpu/test_gemm_fp8_swap.py tests/gpu/test_gemm_fp8.py \
    > "$OUT/g30-call5-pytest.log" 2>&1 &
for t in memcheck racecheck; do
  ( timeout 100 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp8_swap.py g30 > "$OUT/$t.tmp" 2>&1;
    echo "rc=$?" >> "$OUT/$t.tmp" ) &
done
wait; cat "$OUT/memcheck.tmp" "$OUT/racecheck.tmp" > "$OUT/g30-call5-sanitize.log"; rm -f "$OUT"/*.tmp
step "pytest + sanitizers done: $(tail -1 "$OUT/g30-call5-pytest.log")"
timeout 100 $T --rows 1 16 32 64 96 128 192 256 --name g30-call5-trace >> "$OUT/g30-call5.log" 2>&1
step "trace 4096 rc=$?"
timeout 60 $T --rows 16 128 --nk 4096,14336 --name g30-call5-k14336-trace >> "$OUT/g30-call5.log" 2>&1
step "trace K 14336 rc=$?"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|^ok" "$OUT/g30-call5-sanitize.log"
grep -E "FAILED|ERROR|passed|failed" "$OUT/g30-call5-pytest.log" | tail -8
grep -v Warn "$OUT/g30-call5.log" | grep -v "_warn_once" | grep -v "scaled_mm_fast" | cut -c1-110
