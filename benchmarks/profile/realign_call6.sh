# 192 x 176 tiles for C rows off 16 bytes (132 tiles at 2051 x 2045), GPU tests of the new form first.
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl_h2/*.whl 2>&1 | tail -1
export PYTHONPATH=/tmp/site:$PWD TILEPY_HIP_CACHE=/tmp/thc
timeout 200 python3 -m pytest -q -n 12 -p no:cacheprovider tests/gpu/test_gemm_fp8_small.py -k "192x176 or 2045 or LARGE_STAGED" 2>&1 | tail -2
for tool in memcheck racecheck; do timeout 100 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_fp8_small.py UNALIGNED_N_192x176 2>&1 | grep -E "SUMMARY" | tail -1; done
python3 benchmarks/profile/realign_forms.py $OUT/realign-call6.json --call6 2>&1 | grep -v Warning
