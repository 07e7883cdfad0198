#!/bin/bash
# G35 device call 3: the policy after call 2 (1536^3 on 128 x 144, the persistent piece store on one wave) against
# the rows it replaced, alternated, rotated; the ragged shape with C computed into rows padded to 16 bytes (TMA store)
# and copied out, against the staged store; then the GPU tests of the policy through launch beside memcheck.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
L="$OUT/g35-call3.log"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$L"
timeout 150 python3 benchmarks/profile/g35_bench.py --plan call3 --rounds 3 --tag=-g35-call3 --out "$OUT" >> "$L" 2>&1
echo "== bench rc=$? at +$(( $(date +%s) - T0 )) s" >> "$L"
F="g35_128x144_s5_w1_ep2"
[ -n "$NOTESTS" ] || for t in memcheck; do
  ( timeout 60 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp8_small.py $F > "$OUT/$t.tmp" 2>&1;
    echo "rc=$?" >> "$OUT/$t.tmp" ) &
done
[ -n "$NOTESTS" ] || timeout 90 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gemm_fp8_small.py -k "g35 or one_wave or policy_through_launch" > "$OUT/g35-call3-pytest.log" 2>&1
wait; cat "$OUT/memcheck.tmp" > "$OUT/g35-call3-sanitize.log"; rm -f "$OUT"/*.tmp
echo "== tests + sanitizers done at +$(( $(date +%s) - T0 )) s" >> "$L"
grep -v Warn "$L" | grep -v "_warn_once" | grep -v "^  [0-9a-z_]* *{" | cut -c1-230
tail -3 "$OUT/g35-call3-pytest.log"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|^ok" "$OUT/g35-call3-sanitize.log"
