#!/bin/bash
# G34 device call 3: GPU tests of the final skinny fp8 policy through launch (G34 / G30 / G24 rows) and of G34's
# forms; memcheck + racecheck of the G34 cases (with the 129-255-row tiles) in parallel with them; then the final
# policy against the table before it (g34=False) and the other of rows2 / HALF_SUM (g34_forms.call3_variants) at
# 17-240 x 4096 x 4096, rotated, twice in turn, on the renderer with G33's unsigned role index (f33002c).
cd "$(dirname "$0")/../.."
T0=$(date +%s)
LOG="$OUT/g34-call3.log"
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$LOG"
timeout 100 python3 -m pytest -q -v -p no:cacheprovider tests/gpu/test_gemm_fp8_swap.py \
    -k "g34 or g30_policy or exact_bm or skinny_policy" > "$OUT/g34-call3-pytest.log" 2>&1 &
for t in memcheck racecheck; do
  ( timeout 100 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp8_swap.py g34 > "$OUT/$t.tmp" 2>&1;
    echo "rc=$?" >> "$OUT/$t.tmp" ) &
done
wait; cat "$OUT/memcheck.tmp" "$OUT/racecheck.tmp" > "$OUT/g34-call3-sanitize.log"; rm -f "$OUT"/*.tmp
step "pytest + sanitizers done"
tail -3 "$OUT/g34-call3-pytest.log"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=" "$OUT/g34-call3-sanitize.log"
timeout 120 python3 benchmarks/profile/g34_trace.py --plan g34-call3 --repeat 2 --out "$OUT" \
    --rows 17 24 40 48 80 96 129 160 192 224 240 --name g34-call3-trace >> "$LOG" 2>&1
step "trace rc=$?"
grep -v Warn "$LOG" | grep -v "_warn_once" | grep -v "scaled_mm_fast" | cut -c1-130
