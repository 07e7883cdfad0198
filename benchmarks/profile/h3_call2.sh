#!/usr/bin/env bash
# H3 device call 2: the policy with H3's rows (`new`) against the table without them (`old`: swap_policy(h3=False))
# and the peer, at the measured and the interpolated rows (benchmarks/profile/h3_bench.py --set adopt); the GPU tests
# (-k "h3 or policy"); memcheck on H3's policy rows at full size (h3p; call 1 ran memcheck + racecheck on its forms).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/h3-call2.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site ${WHL:-.whl}/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD TILEPY_HIP_CACHE=/tmp/thc PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader 2>&1 | tee "$LOG"
echo "== start $(el)" | tee -a "$LOG"
timeout ${BENCH_S:-150} python3 benchmarks/profile/h3_bench.py --set adopt --precompile 14 --blocks 4 --rounds 40 \
  --tag=-call2 --out "$OUT" --shapes 128,14336,4096 144,14336,4096 160,14336,4096 192,14336,4096 208,14336,4096 \
  224,14336,4096 256,14336,4096 144,4096,14336 160,4096,14336 176,4096,14336 192,4096,14336 224,4096,14336 \
  240,4096,14336 256,4096,14336 2>&1 | grep -v Warning | grep -v "^ *$" | grep -v _warn_once | tee -a "$LOG"
echo "== bench $(el)" | tee -a "$LOG"
timeout ${PYTEST_S:-80} python3 -m pytest -v -n 14 -p no:cacheprovider -rfE tests/gpu/test_gemm_fp8_swap.py \
  -k "h3 or policy" > "$OUT/h3-pytest2.log" 2>&1
echo "== pytest rc=$? $(el): $(tail -1 "$OUT/h3-pytest2.log")" | tee -a "$LOG"
grep -E "^(FAILED|ERROR)" "$OUT/h3-pytest2.log" | head -12 | tee -a "$LOG"
timeout ${SAN_S:-60} compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp8_swap.py h3p \
  > "$OUT/h3-memcheck2.log" 2>&1
echo "== memcheck h3p rc=$? $(el): $(grep -c '^fp8 swap' "$OUT/h3-memcheck2.log") cases, $(grep -E 'ERROR SUMMARY' "$OUT/h3-memcheck2.log" | tail -1)" | tee -a "$LOG"
true
