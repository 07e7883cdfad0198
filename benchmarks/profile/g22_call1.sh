#!/usr/bin/env bash
# G22 device call 1 (issue 15, the small class): the fixed cost / cost per k-tile ablation by source edits
# (benchmarks/gemm_small_fixed.py), then ncu of the small policy and cuBLAS at 1024^3 bf16 (warm L2, clocks as they
# run; our third call and cuBLAS's first, benchmarks/profile/g15_ncu_driver.py).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g22-call1.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee "$LOG"
timeout 230 python3 benchmarks/gemm_small_fixed.py --out "$OUT" --name gemm-g22-fixed 2>&1 | grep -v Warning | tee -a "$LOG"
echo "== ablation $(el)" | tee -a "$LOG"
timeout 100 ncu -k regex:'gemm_hopper|nvjet' --launch-skip 2 --launch-count 2 --cache-control none --clock-control none \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
  --section LaunchStats --section Occupancy \
  --metrics lts__t_bytes.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__m_xbar2l1tex_read_bytes.sum,gpc__cycles_elapsed.max,sm__cycles_active.avg \
  -f -o /tmp/g22-ncu python3 benchmarks/profile/g15_ncu_driver.py 1024 1024 1024 > /tmp/g22-ncu-run.log 2>&1
echo "== ncu rc=$? $(el)" | tee -a "$LOG"; tail -3 /tmp/g22-ncu-run.log >> "$LOG"
ncu -i /tmp/g22-ncu.ncu-rep --page details --csv > "$OUT/g22-ncu-details.csv" 2>&1
echo "== done $(el)" | tee -a "$LOG"
