#!/usr/bin/env bash
# G27 device call 1 (issue 15, skinny bf16 rows, B from DRAM): the floor of a plain read of B, the policy against
# cuBLAS at 16-256 rows and the LLM decode shapes, the pushed split's depth, all rotated among input sets
# (`gemm_skinny_dram.py --plan 1`); then ncu of ours / cuBLAS at 32 and 128 rows and of B.sum with the caches
# flushed before each kernel (ncu's default --cache-control all: B from DRAM), the clocks as they run.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g27-call1.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee "$LOG"
timeout ${SWEEP_S:-240} python3 benchmarks/gemm_skinny_dram.py --plan 1 --name gemm-g27-dram --precompile 16 \
  --out "$OUT" 2>&1 | grep -v Warning | tee -a "$LOG"
echo "== sweep $(el)" | tee -a "$LOG"
timeout ${NCU_S:-90} ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,launch__grid_size,launch__cluster_dim_z,sm__throughput.avg.pct_of_peak_sustained_elapsed \
  --csv python3 benchmarks/gemm_skinny_dram.py --ncu-target > "$OUT/g27-ncu.csv" 2> "$OUT/g27-ncu.err"
echo "== ncu rc=$? $(el)" | tee -a "$LOG"
