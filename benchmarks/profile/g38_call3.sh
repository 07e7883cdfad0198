#!/bin/bash
# G38 device call 3 (NOT RUN in the G38 session: the helper's device cap was spent): the one-launch prototype
# (benchmarks/profile/g38_bkn.py) -- memcheck + racecheck, then the bench alone (rotated, two alternating rounds,
# against gemm_fp32.launch and SGEMM, outputs checked first). Into $OUT.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/steps.log"; }
timeout 120 python3 benchmarks/profile/g38_bkn_bench.py --build-only > "$OUT/build.log" 2>&1
step "build rc=$?"
for t in memcheck racecheck; do
  ( timeout 150 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp32_bkn.py; echo "rc=$?" ) \
      > "$OUT/${t}.log" 2>&1 &
done
wait; step "sanitizers done"
timeout 150 python3 benchmarks/profile/g38_bkn_bench.py --rounds 2 --tag=-call3 --out "$OUT" > "$OUT/bench.log" 2>&1
step "bench done rc=$?"
for f in "$OUT"/memcheck.log "$OUT"/racecheck.log; do echo "$f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rc=|bkn' "$f" | tr '\n' ' ')"; done
grep -c built "$OUT/build.log"; grep FAILED "$OUT/build.log"; cat "$OUT/bench.log"
