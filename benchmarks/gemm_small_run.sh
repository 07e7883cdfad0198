#!/usr/bin/env bash
# G8's device call (issue 15: skinny / small / ragged GEMM): the sweep (benchmarks/gemm_small_sweep.py, JSON under
# $OUT), then ncu's view of our decode GEMM and cuBLAS's at 16 x 4096 x 4096 (L2 warm: --cache-control none, the
# launches after 20 calls). Usage (device machine, repo root, carried wheels installed): bash benchmarks/gemm_small_run.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
python3 benchmarks/gemm_small_sweep.py --precompile 16 --out "$OUT" ${G8_ONLY:+--only "$G8_ONLY"} 2>&1 | tee "$OUT/g8-sweep.log" | grep -v "^ *$"
M="gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,lts__t_bytes.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__block_size,launch__registers_per_thread"
for side in ours cublas; do
  timeout 60 ncu --cache-control none --launch-skip 20 --launch-count 4 --metrics "$M" --csv \
    python3 benchmarks/gemm_small_sweep.py --ncu-target $side --shape 16,4096,4096 > "$OUT/g8-ncu-$side.csv" 2> "$OUT/g8-ncu-$side.err"
  echo "== ncu $side rc=$?"; grep -E "gpu__time|dram__bytes_read|hit_rate|Kernel Name|grid_size" "$OUT/g8-ncu-$side.csv" | cut -c1-220 | head -24
done
