#!/usr/bin/env bash
# The lead's closing benchmark call: issue 15's whole GEMM table in one run (benchmarks/gemm.py, every precision,
# the kernels built in parallel first), then the suite on the given problems under the time left.
# Usage on the device machine (repo root): bash tests/gpu/device_run_closing_bench.sh <gemm seconds> <suite seconds> <problems...>
set -uo pipefail
gemm_s=${1:-240}; suite_s=${2:-0}; shift 2 || true
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout "$gemm_s" python3 benchmarks/gemm.py --precompile 14 --name gemm-closing --out "$OUT" > "$OUT/gemm-closing.log" 2>&1
echo "gemm rc=$?"; grep -vE "^\s*$" "$OUT/gemm-closing.log" | tail -45
# the classes' other rows (skinny, small; bf16 out and fp8), operands rotated out of the L2 as in the table
timeout 150 python3 benchmarks/gemm.py --precompile 14 --only bf16out,fp8 --name gemm-closing-classes --out "$OUT" \
  --shapes 32,4096,4096 64,4096,4096 96,4096,4096 512,512,512 1024,1024,4096 > "$OUT/gemm-closing-classes.log" 2>&1
echo "classes rc=$?"; grep -vE "^\s*$" "$OUT/gemm-closing-classes.log" | tail -14
if [[ $# -gt 0 && $suite_s -gt 0 ]]; then
  timeout $((suite_s + 40)) python3 benchmarks/suite.py "$@" --jobs 12 --runs 10 --time-budget "$suite_s" \
    --out "$OUT/suite-closing.json" 2>&1 | grep -E "^(level|built)"
fi
