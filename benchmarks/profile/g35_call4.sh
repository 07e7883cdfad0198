#!/bin/bash
# G35 device call 4: the final policy (WAVE_128x144, LARGE_PERSISTENT on one whole-k-tile wave, UNALIGNED_N_192x192)
# against the rows it replaced, alternated, rotated; the GPU tests of the policy through launch and its forms beside
# memcheck + racecheck of the two new policy forms.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
L="$OUT/g35-call4.log"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$L"
timeout 150 python3 benchmarks/profile/g35_bench.py --plan call4 --rounds 3 --tag=-g35-call4 --out "$OUT" >> "$L" 2>&1
echo "== bench rc=$? at +$(( $(date +%s) - T0 )) s" >> "$L"
F="UNALIGNED_N_192x192 WAVE_128x144"
[ -n "$NOTESTS" ] || for t in memcheck racecheck; do
  ( timeout 60 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp8_small.py $F > "$OUT/$t.tmp" 2>&1;
    echo "rc=$?" >> "$OUT/$t.tmp" ) &
done
[ -n "$NOTESTS" ] || timeout 90 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gemm_fp8_small.py -k "g35 or one_wave or policy_through_launch or UNALIGNED or WAVE" > "$OUT/g35-call4-pytest.log" 2>&1
[ -n "$NOTESTS" ] || timeout 80 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gemm_fp8.py >> "$OUT/g35-call4-pytest.log" 2>&1
wait; cat "$OUT/memcheck.tmp" "$OUT/racecheck.tmp" > "$OUT/g35-call4-sanitize.log"; rm -f "$OUT"/*.tmp
echo "== tests + sanitizers done at +$(( $(date +%s) - T0 )) s" >> "$L"
grep -v Warn "$L" | grep -v "_warn_once" | grep -v "^  [0-9a-z_]* *{" | cut -c1-230
grep -E "passed|failed|FAILED|Error" "$OUT/g35-call4-pytest.log" | head -20
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|^ok" "$OUT/g35-call4-sanitize.log"
