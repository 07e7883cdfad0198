#!/bin/bash
# G17 device call: gemm_fp32's split-K policy (benchmarks/gemm.py fp32 rows), its GPU tests, memcheck on the
# split-K cases, then the 64-row-tile variants (benchmarks/gemm_fp32_skinny.py). Logs and JSON into $OUT.
cd "$(dirname "$0")/../.."
timeout 55 python3 benchmarks/gemm.py --only fp32 --shapes 128,4096,4096 64,4096,4096 256,4096,4096 1024,1024,1024 \
    4096,4096,4096 64,64,4096 --name gemm-g17 --out "$OUT" > "$OUT/bench.log" 2>&1
timeout 25 python3 -m pytest -v -p no:cacheprovider tests/gpu/test_gpu_gemm_fp32.py -k policy > "$OUT/pytest.log" 2>&1
timeout 20 compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp32.py --split-k > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?" >> "$OUT/memcheck.log"
timeout 25 python3 benchmarks/gemm_fp32_skinny.py --shapes 64,4096,4096 128,4096,4096 --out "$OUT" > "$OUT/skinny.log" 2>&1
tail -5 "$OUT"/*.log
