#!/usr/bin/env bash
# H1 call 2: the paired timer's round order (reversed every other round, or fixed) on fp32 and bf16-out 4096^3
# (benchmarks/profile/h1_order.py); the kernels prebuilt on the host where carried (.h1/thc.tar.xz).
set -uo pipefail
whl=.whl; [[ -d .whl ]] || whl=.h1/whl
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site $whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/thc
[[ -f .h1/thc.tar.xz ]] && tar -xJf .h1/thc.tar.xz -C /tmp/thc
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
t0=$(date +%s)
timeout "${H1_ORDER_S:-70}" python3 benchmarks/profile/h1_order.py "$OUT/gemm-h1-order.json" 2>&1 | tee "$OUT/gemm-h1-order.log"
echo "rc=$? in $(( $(date +%s) - t0 )) s"
