#!/usr/bin/env bash
# One device call for gemm_cluster (2x1 clusters, TMA multicast): the GPU tests beside compute-sanitizer memcheck +
# racecheck, the SASS facts, then the benchmark alone on the GPU; logs under $OUT.
# Usage on the device machine (repo root, wheels installed, PYTHONPATH set): bash tests/gpu/run_gemm_cluster.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/cluster.log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$LOG"
t0=$(date +%s)
python3 tests/gpu/precompile_gemm_cluster.py 14 2>&1 | tee -a "$LOG"
python3 benchmarks/gemm_cluster.py --precompile 10 --precompile-only > "$OUT/precompile.log" 2>&1 &
pc=$!
( compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_cluster.py > "$OUT/memcheck.log" 2>&1; echo "rc=$?" >> "$OUT/memcheck.log" ) &
m=$!
( compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_cluster.py > "$OUT/racecheck.log" 2>&1; echo "rc=$?" >> "$OUT/racecheck.log" ) &
r=$!
python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_gemm_cluster.py > "$OUT/pytest.log" 2>&1
grep -E "passed|failed|^E  |^FAILED" "$OUT/pytest.log" | head -30 | tee -a "$LOG"
echo "== pytest done at +$(( $(date +%s) - t0 )) s" | tee -a "$LOG"
python3 - <<'PY' 2>&1 | tee -a "$LOG"
import re, tilepy_hip
from stdlib_kernels import gemm_hopper as g
for extra in ({}, dict(STAGES=3, EPILOGUE=2)):
    k = g.gemm_cluster_bf16 if extra else g.gemm_cluster
    ck = tilepy_hip.compile(k, target="sm_90a", **extra)
    s = ck.sass()
    print("SASS", extra, "HGMMA.64x256x16", "HGMMA.64x256x16" in s, "UTMALDG.2D.MULTICAST", s.count("UTMALDG.2D.MULTICAST"),
          "LDL/STL", bool(re.search(r"\b(LDL|STL)\b", s)), ck.resources)
PY
wait $m; wait $r; wait $pc
for f in memcheck racecheck; do
  echo "== $f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rel err|rc=' "$OUT/$f.log" | tr '\n' ' ')" | tee -a "$LOG"
  grep -m5 -E "Error|Hazard|Invalid" "$OUT/$f.log" | tee -a "$LOG"
done
echo "== sanitizers done at +$(( $(date +%s) - t0 )) s" | tee -a "$LOG"
python3 benchmarks/gemm_cluster.py --out "$OUT" --precompile 14 2>&1 | tee -a "$LOG" | grep -vE "^\s*$"
echo "== bench done at +$(( $(date +%s) - t0 )) s" | tee -a "$LOG"
