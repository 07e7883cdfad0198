#!/usr/bin/env bash
# H1 call 1 (issue 15 item 7): benchmarks/gemm.py with ours and the peer paired replay by replay, on three shapes of
# the closing table (every row: bf16 out, f32 out, fp32 whole call and GEMM alone, fp8). The kernels come prebuilt
# (benchmarks/profile/h1_prebuild.py on the host, carried as .h1/thc.tar.xz, where present).
set -uo pipefail
# the wheels: .whl (all 18) where carried, else .h1/whl (libcst alone, what benchmarks/gemm.py's imports need: the
# working tree and the 18 wheels are past the run's 64 MiB)
whl=.whl; [[ -d .whl ]] || whl=.h1/whl
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site $whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/thc
[[ -f .h1/thc.tar.xz ]] && tar -xJf .h1/thc.tar.xz -C /tmp/thc && echo "prebuilt: $(find /tmp/thc -name '*.bin' | wc -l) kernels"
python3 -c "import yaml, libcst" 2>&1 | tail -1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
t0=$(date +%s); touch /tmp/h1_mark
timeout "${H1_GEMM_S:-90}" python3 benchmarks/gemm.py --precompile 14 --name gemm-h1 --out "$OUT" \
  --shapes 4096,4096,4096 8192,8192,1024 1024,1024,1024 2>&1 | tee "$OUT/gemm-h1.log"
echo "gemm rc=$? in $(( $(date +%s) - t0 )) s; new kernels built here: $(find /tmp/thc -name '*.bin' -newer /tmp/h1_mark 2>/dev/null | wc -l)"
