#!/usr/bin/env bash
# One device call for gemm_streamk (G4, issue 15 items 1-3): build in parallel, GPU tests, benchmark rows against
# gemm_hopper's policy and cuBLAS (JSON gemm-streamk-<device>.json), compute-sanitizer memcheck + racecheck.
# Usage (device machine, repo root; the carried wheels installed first): bash tests/gpu/run_gemm_streamk.sh [tests] [bench] [sanitize]
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
python3 tests/gpu/precompile_gemm_streamk.py 16 2>&1 | tail -2
for what in "$@"; do
  if [[ $what == tests ]]; then
    python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_gemm_streamk.py 2>&1 | tee "$OUT/pytest_streamk.log" \
      | grep -vE "^(tests|E |  )" | tail -8
  fi
  if [[ $what == bench ]]; then
    python3 benchmarks/gemm.py --only none --streamk --name gemm-streamk --out "$OUT" 2>&1 | grep -E "streamk|wrote|Error" | tail -30
  fi
  if [[ $what == bench_skinny ]]; then   # the decode / skinny / small rows only
    python3 benchmarks/gemm.py --only none --streamk --name gemm-streamk-skinny --out "$OUT" --shapes 16,4096,4096 \
      64,4096,4096 128,4096,4096 256,4096,4096 1024,1024,1024 2>&1 | grep -E "streamk|wrote|Error" | tail -30
  fi
  if [[ $what == ncu ]]; then
    ncu -k regex:gemm --section SpeedOfLight --section WarpStateStats --section LaunchStats \
      python3 tests/gpu/profile_gemm_streamk.py > "$OUT/ncu_streamk.txt" 2>&1
    grep -E "gemm|Duration|Memory Throughput|Compute \(SM\)|Stall|Warp Cycles Per Issued|Registers" "$OUT/ncu_streamk.txt" | head -60
  fi
  if [[ $what == sanitize ]]; then
    for tool in memcheck racecheck; do
      compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_streamk.py > "$OUT/sanitize_streamk_$tool.log" 2>&1
      echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_streamk_$tool.log" | tail -1)"
      grep -m5 -E "Error|Hazard|Invalid" "$OUT/sanitize_streamk_$tool.log"
    done
  fi
done
