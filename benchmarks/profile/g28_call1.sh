#!/usr/bin/env bash
# G28 call 1 (fp8 small / mid forms): build the forms in parallel, then the GPU tests of the forms with
# compute-sanitizer memcheck + racecheck beside them, then the timing sweep alone on the GPU; logs under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/g28.log"
python3 - <<'PY' 2>&1 | tee -a "$OUT/g28.log"
import sys; sys.path.insert(0, "benchmarks")
import multiprocessing, time
from concurrent.futures import ProcessPoolExecutor
import gemm_fp8_small as s
t = time.time()
with ProcessPoolExecutor(16, mp_context=multiprocessing.get_context("fork")) as ex:
    for n, r in zip(s.FORMS, ex.map(s.build, [s.params_of(n) for n in s.FORMS])):
        print(f"{n:16s} {r}", flush=True)
print(f"built in {time.time() - t:.1f} s")
PY
echo "== build done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/g28.log"
( compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp8_small.py > "$OUT/memcheck.log" 2>&1; echo "rc=$?" >> "$OUT/memcheck.log" ) &
m=$!
( compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_fp8_small.py > "$OUT/racecheck.log" 2>&1; echo "rc=$?" >> "$OUT/racecheck.log" ) &
r=$!
python3 -m pytest -v -p no:cacheprovider tests/gpu/test_gemm_fp8_small.py > "$OUT/pytest.log" 2>&1
tail -3 "$OUT/pytest.log" | tee -a "$OUT/g28.log"
grep -E "FAILED|^E  " "$OUT/pytest.log" | head -20 | tee -a "$OUT/g28.log"
echo "== pytest done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/g28.log"
wait $m; wait $r
for f in memcheck racecheck; do
  echo "== $f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rc=|^ok' "$OUT/$f.log" | tr '\n' ' ')" | tee -a "$OUT/g28.log"
  grep -m5 -E "Error|Hazard|Invalid|Traceback" "$OUT/$f.log" | tee -a "$OUT/g28.log"
done
echo "== sanitizers done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/g28.log"
python3 benchmarks/gemm_fp8_small.py --tag=-g28-call1 --out "$OUT" 2>&1 | grep -v "^  " | tee -a "$OUT/g28.log"
echo "== bench done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/g28.log"
