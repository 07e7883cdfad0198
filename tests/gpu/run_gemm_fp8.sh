#!/usr/bin/env bash
# One device call for the fp8 GEMM: build every variant in parallel, then the GPU tests with compute-sanitizer
# memcheck + racecheck beside them, then the benchmark (alone on the GPU) with its sweep; logs under $OUT.
# Usage on the device machine (repo root, wheels installed, PYTHONPATH set): bash tests/gpu/run_gemm_fp8.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/fp8.log"
t0=$(date +%s)
python3 - <<'PY' 2>&1 | tee -a "$OUT/fp8.log"
import multiprocessing, os, sys, time
from concurrent.futures import ProcessPoolExecutor
sys.path.insert(0, os.getcwd()); sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
def build(p):
    import tilepy_hip
    from stdlib_kernels import gemm_fp8
    try:
        kernel, kp = gemm_fp8.kernel_of(p)
        ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
        return ck.resources.get("registers"), None
    except Exception as e:
        return None, f"{type(e).__name__}: {str(e)[:200]}"
if __name__ == "__main__":
    from stdlib_kernels import gemm_fp8
    import gemm_fp8 as bench
    ps = {}
    for shape in bench.SHAPES + [(1000, 1000, 1024), (2051, 2045, 1008), (64, 64, 16)]:
        ps[repr(sorted(gemm_fp8.policy(*shape).items(), key=str))] = gemm_fp8.policy(*shape)
    for extra in bench.SWEEP.values():
        p = {**gemm_fp8.PRESETS["sm_90a"], **extra}
        ps[repr(sorted(p.items(), key=str))] = p
    t = time.time()
    with ProcessPoolExecutor(int(os.environ.get("FP8_JOBS", "16")), mp_context=multiprocessing.get_context("fork")) as ex:
        res = list(ex.map(build, ps.values()))
    print(f"built {len(ps)} gemm_fp8 variants in {time.time() - t:.1f} s; failures: {[e for _, e in res if e]}")
    import tilepy_hip
    ck = tilepy_hip.compile(gemm_fp8.gemm_fp8, target="sm_90a", **gemm_fp8.policy(4096, 4096, 4096))
    import re
    sass = ck.sass()
    print("SASS:", sorted(set(re.findall(r"\b[QH]GMMA\.[\w.]+", sass))), "UTMALDG" in sass,
          "local memory:", bool(re.search(r"\b(LDL|STL)\b", sass)), ck.resources)
PY
echo "== build done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/fp8.log"
( compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp8.py > "$OUT/memcheck.log" 2>&1; echo "rc=$?" >> "$OUT/memcheck.log" ) &
m=$!
( compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_fp8.py > "$OUT/racecheck.log" 2>&1; echo "rc=$?" >> "$OUT/racecheck.log" ) &
r=$!
python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_gemm_fp8.py > "$OUT/pytest.log" 2>&1
grep -E "rel err|passed|failed|^E  " "$OUT/pytest.log" | head -40 | tee -a "$OUT/fp8.log"
echo "== pytest done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/fp8.log"
wait $m; wait $r
for f in memcheck racecheck; do
  echo "== $f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rc=' "$OUT/$f.log" | tr '\n' ' ')" | tee -a "$OUT/fp8.log"
  grep -m5 -E "Error|Hazard|Invalid" "$OUT/$f.log" | tee -a "$OUT/fp8.log"
done
echo "== sanitizers done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/fp8.log"
python3 benchmarks/gemm_fp8.py --sweep --out "$OUT" 2>&1 | tee -a "$OUT/fp8.log" | grep -v "^  sweep" | tail -12
grep "^  sweep" "$OUT/fp8.log" | sort -t'x' -k1,1 | head -40
echo "== bench done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/fp8.log"
