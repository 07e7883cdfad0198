# The realigned shared -> global store (rows off 16 bytes): GPU tests, sanitizers, and the ragged rows A/B against
# the render before it (realign.diff reversed in a copy of the tree).
set -x
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl_h2/*.whl 2>&1 | tail -1
export PYTHONPATH=/tmp/site:$PWD TILEPY_HIP_CACHE=/tmp/thc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m pytest -q -n 8 -p no:cacheprovider tests/gpu/test_gpu_copy_rows.py tests/gpu/test_gpu_tma_start.py 2>&1 | tail -3
python3 -m pytest -q -n 8 -p no:cacheprovider tests/gpu/test_gemm_fp8_small.py tests/gpu/test_gemm_fp8.py -k "UNALIGNED or 2045" 2>&1 | tail -3
for tool in memcheck racecheck; do timeout 60 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_copy_rows.py 2>&1 | grep -E "SUMMARY|exact" ; done
for tool in memcheck racecheck; do timeout 90 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_fp8_small.py UNALIGNED_N_192x192 2>&1 | grep -E "SUMMARY|rror" | tail -2; done
python3 benchmarks/gemm.py --only fp8 --shapes 2051,2045,1008 2048,2048,1008 --name gemm-realign-fp8 --out $OUT 2>&1 | tail -8
python3 benchmarks/gemm.py --only bf16out,f32out --shapes 2051,2045,1000 --name gemm-realign-bf16 --out $OUT 2>&1 | tail -6
rm -rf /tmp/old && mkdir /tmp/old && cp -r . /tmp/old/ && cd /tmp/old && patch -R -p1 < benchmarks/profile/realign.diff && export PYTHONPATH=/tmp/site:/tmp/old TILEPY_HIP_CACHE=/tmp/thc_old && echo OLD &&
python3 benchmarks/gemm.py --only fp8 --shapes 2051,2045,1008 2048,2048,1008 --name gemm-realign-old-fp8 --out $OUT 2>&1 | tail -8 &&
python3 benchmarks/gemm.py --only bf16out,f32out --shapes 2051,2045,1000 --name gemm-realign-old-bf16 --out $OUT 2>&1 | tail -6
