#!/bin/bash
# G35 device call 1: the ragged fp8 shape 2051 x 2045 x 1008 against its neighbours with aligned K / M, N (where the
# time goes: rows of 1008 bytes or C's rows off 16 bytes), candidate forms there (the large tile from the registers,
# A / B padded once to K = 1024 inside the timed call), and the mid shapes 1536^3 (128 x 144 / 128 x 192 tiles),
# 4096 x 1024 x 1024 and 2048^3 (the persistent piece store on one wave); rotated, three alternated rounds. Then the
# G35 forms' GPU tests (float64, _scaled_mm, SASS) beside compute-sanitizer memcheck + racecheck of them.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
L="$OUT/g35-call1.log"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$L"
timeout 150 python3 benchmarks/profile/g35_bench.py --plan call1 --rounds 3 --tag=-g35-call1 --out "$OUT" >> "$L" 2>&1
echo "== bench rc=$? at +$(( $(date +%s) - T0 )) s" >> "$L"
F="g35_128x144_s6_w1_ep0 g35_128x192_s5_w1_ep0 g35_128x256_s4_w1_ep0"
[ -n "$NOTESTS" ] || for t in memcheck racecheck; do
  ( timeout 60 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp8_small.py $F > "$OUT/$t.tmp" 2>&1;
    echo "rc=$?" >> "$OUT/$t.tmp" ) &
done
[ -n "$NOTESTS" ] || timeout 90 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gemm_fp8_small.py -k g35 > "$OUT/g35-call1-pytest.log" 2>&1
wait; cat "$OUT/memcheck.tmp" "$OUT/racecheck.tmp" > "$OUT/g35-call1-sanitize.log"; rm -f "$OUT"/*.tmp
echo "== tests + sanitizers done at +$(( $(date +%s) - T0 )) s" >> "$L"
grep -v Warn "$L" | grep -v "_warn_once" | grep -v "^  [0-9a-z_]* *{" | cut -c1-230
tail -3 "$OUT/g35-call1-pytest.log"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|^ok" "$OUT/g35-call1-sanitize.log"
