#!/usr/bin/env bash
# H3 device call 3: BM 144 at 144 rows x 14336 x 4096; at 224 / 256 rows x 14336 x 4096 one row tile of 256 rows (four
# consumers, gemm_fp8) and swap BM 256 with 64-wide k-tiles (8 stages), against the policy and the peer
# (benchmarks/profile/h3_bench.py --set extra).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/h3-call3.log"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site ${WHL:-.whl}/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD TILEPY_HIP_CACHE=/tmp/thc PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader 2>&1 | tee "$LOG"
timeout ${BENCH_S:-100} python3 benchmarks/profile/h3_bench.py --set extra --precompile 14 --blocks 4 --rounds 40 \
  --tag=-call3 --out "$OUT" --shapes 144,14336,4096 224,14336,4096 256,14336,4096 2>&1 \
  | grep -v Warning | grep -v "^ *$" | grep -v _warn_once | tee -a "$LOG"
true
