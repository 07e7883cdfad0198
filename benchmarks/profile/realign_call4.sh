# The policy with C's rows off 16 bytes staged for every warpgroup: GPU tests, sanitizers on the new forms, the rows.
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl_h2/*.whl 2>&1 | tail -1
export PYTHONPATH=/tmp/site:$PWD TILEPY_HIP_CACHE=/tmp/thc
timeout 300 python3 -m pytest -q -n 12 -p no:cacheprovider tests/gpu/test_gemm_fp8_small.py tests/gpu/test_gemm_fp8.py tests/gpu/test_gpu_copy_rows.py 2>&1 | tail -4
for f in UNALIGNED_N_192x192 LARGE_STAGED; do for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_fp8_small.py $f > $OUT/sanitize-$f-$tool.log 2>&1
  echo "$f $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitize-$f-$tool.log | tail -1)"; done; done
python3 benchmarks/profile/realign_forms.py $OUT/realign-call4.json --call4 2>&1 | grep -v Warning
