#!/bin/bash
# G36 device call 3: SMALL_64 (64 x 64 one-consumer tiles, unsplit) and 128 x 64 tiles for a short K where the split-K
# policy split 128 x 128 tiles (512^3-768^3), and the nk swap's TMA_ONLY + register budgets at 128 columns: GPU tests,
# compute-sanitizer memcheck + racecheck (in parallel with the build and the tests), then the benchmark alone (rotated,
# two alternating rounds). Into $OUT.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/steps.log"; }
SHAPES="512,512,512:kn:policy+ks2+bn64T
640,640,640:kn:policy+ks2+bn64T
768,768,768:kn:policy+ks3
896,896,896:kn:policy+ks2+m64bn64T
128,4096,4096:nk:policy+swapT0
256,4096,4096:nk:policy+swapT0"
timeout 60 python3 benchmarks/profile/g36_fp32.py --build-only --precompile 6 --shapes $SHAPES > "$OUT/build.log" 2>&1 &
timeout 85 python3 -m pytest -v -n 6 -p no:cacheprovider tests/gpu/test_gpu_gemm_fp32_waves.py > "$OUT/pytest.log" 2>&1 &
for t in memcheck racecheck; do
  ( timeout 85 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp32_waves.py; echo "rc=$?" ) \
      > "$OUT/${t}.log" 2>&1 &
done
wait; step "build, tests, sanitizers done"
timeout 40 python3 benchmarks/profile/g36_fp32.py --rounds 2 --shapes $SHAPES --tag=-call3 --out "$OUT" \
    > "$OUT/bench.log" 2>&1
step "bench done rc=$?"
for f in "$OUT"/memcheck.log "$OUT"/racecheck.log; do echo "$f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rc=' "$f" | tr '\n' ' ')"; done
grep -E "passed|failed|FAILED|Error" "$OUT/pytest.log" | tail -12
grep -E "regs|FAILED|precompiled" "$OUT/build.log"; cat "$OUT/bench.log"
