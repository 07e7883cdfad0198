#!/bin/bash
# G35 device call 2: the ragged fp8 shape with the tile staged and stored coalesced (EPILOGUE=1) and 192 x 192 tiles
# (one wave), 1536^3 on 128 x 144 with the TMA store in 16-column blocks, the persistent piece store (LARGE_PERSISTENT)
# on one wave of large tiles a second time; then the new forms' GPU tests beside memcheck + racecheck.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
L="$OUT/g35-call2.log"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$L"
timeout 150 python3 benchmarks/profile/g35_bench.py --plan call2 --rounds 3 --tag=-g35-call2 --out "$OUT" >> "$L" 2>&1
echo "== bench rc=$? at +$(( $(date +%s) - T0 )) s" >> "$L"
F="g35_128x256_s3_w1_ep1 g35_192x192_s3_w1_ep1 g35_192x192_s4_w1_ep0 g35_128x144_s5_w1_ep2"
[ -n "$NOTESTS" ] || for t in memcheck racecheck; do
  ( timeout 60 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp8_small.py $F > "$OUT/$t.tmp" 2>&1;
    echo "rc=$?" >> "$OUT/$t.tmp" ) &
done
[ -n "$NOTESTS" ] || timeout 90 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gemm_fp8_small.py -k g35 > "$OUT/g35-call2-pytest.log" 2>&1
wait; cat "$OUT/memcheck.tmp" "$OUT/racecheck.tmp" > "$OUT/g35-call2-sanitize.log"; rm -f "$OUT"/*.tmp
echo "== tests + sanitizers done at +$(( $(date +%s) - T0 )) s" >> "$L"
grep -v Warn "$L" | grep -v "_warn_once" | grep -v "^  [0-9a-z_]* *{" | cut -c1-230
tail -3 "$OUT/g35-call2-pytest.log"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|^ok" "$OUT/g35-call2-sanitize.log"
