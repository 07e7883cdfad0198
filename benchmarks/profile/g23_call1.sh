#!/usr/bin/env bash
# G23 device call 1 (issue 15, skinny bf16 rows 32-112): what limits the pushed cluster split. The sweep
# `gemm_small_sweep.py --plan 18` (its depth, BM, BN 128, B as (N, K), our kernels' device times), then ncu of the
# policy (gemm_splitk_swap CLUSTER_K=2 PUSH) and cuBLAS at 64 and 112 rows, warm L2 (--cache-control none) and the
# clocks as they run (--clock-control none), one launch each after 20; the SASS with its stall samples for ours.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g23-call1.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee "$LOG"
timeout 200 python3 benchmarks/gemm_small_sweep.py --plan 18 --name gemm-g23-limits --precompile 16 --out "$OUT" 2>&1 \
  | grep -v Warning | tee -a "$LOG"
echo "== sweep $(el)" | tee -a "$LOG"
SECS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats
      --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis"
for shape in 64,4096,4096 112,4096,4096; do
  for who in ours cublas; do
    tag="${who}-${shape%%,*}"
    extra=""; [ "$who" = ours ] && extra="--section SourceCounters"
    timeout 90 ncu -k regex:'gemm_splitk_swap|nvjet' --launch-skip 20 --launch-count 1 --cache-control none \
      --clock-control none $SECS $extra --metrics dram__bytes_read.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__m_xbar2l1tex_read_bytes.sum \
      -f -o /tmp/g23-$tag python3 benchmarks/gemm_small_sweep.py --ncu-target $who --shape $shape > /tmp/ncu-run-$tag.log 2>&1
    echo "== ncu $tag rc=$? $(el)" | tee -a "$LOG"; tail -3 /tmp/ncu-run-$tag.log >> "$LOG"
    echo "##### $tag" >> "$OUT/g23-ncu-details.csv"
    ncu -i /tmp/g23-$tag.ncu-rep --page details --csv >> "$OUT/g23-ncu-details.csv" 2>&1
  done
done
ncu -i /tmp/g23-ours-64.ncu-rep --page source --csv --print-source sass > "$OUT/g23-ncu-sass-ours-64.csv" 2>&1
ncu -i /tmp/g23-ours-112.ncu-rep --page source --csv --print-source sass > "$OUT/g23-ncu-sass-ours-112.csv" 2>&1
echo "== done $(el)" | tee -a "$LOG"
