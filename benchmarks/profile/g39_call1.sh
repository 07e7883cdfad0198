#!/bin/bash
# G39 device call 1: GPU tests + memcheck / racecheck of the relaxed rows' cluster (gemm_fp8_swap CLUSTER_M=2 RELAXED=1)
# first; then the policy against CLUSTER_M=2 with the full and the relaxed coupling at 64-192 x 4096 x 4096, rotated,
# twice in turn (kernel durations traced inside the graph); then ncu (L2 flushed before every kernel) of the policy,
# the relaxed form and torch._scaled_mm at 96 / 128 rows and of the policy and the peer at 4096 x 1024 x 1024, 1536^3.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
LOG="$OUT/g39-call1.log"
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$LOG"
timeout 100 python3 -m pytest -q -v -p no:cacheprovider tests/gpu/test_gemm_fp8_swap.py -k "g39 or g34_policy" \
    > "$OUT/g39-call1-pytest.log" 2>&1 &
for t in memcheck racecheck; do
  ( timeout 100 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp8_swap.py g39 > "$OUT/$t.tmp" 2>&1;
    echo "rc=$?" >> "$OUT/$t.tmp" ) &
done
wait; cat "$OUT/memcheck.tmp" "$OUT/racecheck.tmp" > "$OUT/g39-call1-sanitize.log"; rm -f "$OUT"/*.tmp
step "pytest + sanitizers done"
tail -3 "$OUT/g39-call1-pytest.log"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=" "$OUT/g39-call1-sanitize.log"
timeout 120 python3 benchmarks/profile/g39_trace.py --plan g39-call1 --repeat 2 --out "$OUT" \
    --rows 96 128 112 64 192 --name g39-call1-trace >> "$LOG" 2>&1
step "trace rc=$?"
timeout 120 ncu --profile-from-start off --clock-control none --section LaunchStats --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --metrics dram__bytes_read.sum,lts__t_bytes.sum \
    python3 benchmarks/profile/g39_ncu_driver.py > "$OUT/g39-call1-ncu.log" 2>&1
step "ncu rc=$?"
grep -v Warn "$LOG" | grep -v "_warn_once" | grep -v "scaled_mm_fast" | cut -c1-150
grep -E "profiled|nvjet|gemm_fp8|Duration|DRAM Throughput|L2 Cache Throughput|Memory Throughput|L2 Hit|Cluster Size|Grid Size|Block Size|Registers|dram__bytes|lts__t_bytes|==PROF==|ERR" \
    "$OUT/g39-call1-ncu.log" | cut -c1-140 | head -150
