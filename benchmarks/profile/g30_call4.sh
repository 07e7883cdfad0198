#!/bin/bash
# G30 device call 4: gemm_fp8_swap's copies TMA only (TMA_ONLY=1) against the policy (g30_trace.py --plan call4, rotated,
# each function twice in turn; N = K = 4096 at 16-256 rows, K = 14336 at 16 / 64 / 128 rows; the stream floor with and
# without it); the swap GPU tests (the G30 cases among them) and memcheck + racecheck of the G30 cases first.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/g30-call4.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/g30-call4.log"
T="python3 benchmarks/profile/g30_trace.py --plan call4 --repeat 2 --out $OUT"
timeout 100 python3 -m pytest -v -n 6 -p no:cacheprovider tests/gpu/test_gemm_fp8_swap.py tests/gpu/test_gemm_fp8.py \
    > "$OUT/g30-call4-pytest.log" 2>&1 &
for t in memcheck racecheck; do
  ( timeout 100 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp8_swap.py g30 > "$OUT/$t.tmp" 2>&1;
    echo "rc=$?" >> "$OUT/$t.tmp" ) &
done
wait; cat "$OUT/memcheck.tmp" "$OUT/racecheck.tmp" > "$OUT/g30-call4-sanitize.log"; rm -f "$OUT"/*.tmp
step "pytest + sanitizers done: $(tail -1 "$OUT/g30-call4-pytest.log")"
timeout 150 $T --rows 16 32 64 96 128 192 256 --name g30-call4-trace >> "$OUT/g30-call4.log" 2>&1
step "trace 4096 rc=$?"
timeout 90 $T --rows 16 64 128 --nk 4096,14336 --name g30-call4-k14336-trace >> "$OUT/g30-call4.log" 2>&1
step "trace K 14336 rc=$?"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|^ok|fp8 swap" "$OUT/g30-call4-sanitize.log" | cut -c1-140
grep -E "FAILED|ERROR|passed|failed" "$OUT/g30-call4-pytest.log" | tail -8
grep -v Warn "$OUT/g30-call4.log" | grep -v "_warn_once" | grep -v "^  stream\|scaled_mm_fast" | cut -c1-120
