# STORE_ALL (every warpgroup stores the staged tile) and the staged epilogue on rows off 16 bytes, against the policy;
# the policy rows again on the render before the realigned store (realign.diff reversed in a copy of the tree).
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl_h2/*.whl 2>&1 | tail -1
export PYTHONPATH=/tmp/site:$PWD TILEPY_HIP_CACHE=/tmp/thc
python3 -m pytest -q -n 8 -p no:cacheprovider tests/gpu/test_gemm_fp8_small.py -k "UNALIGNED" 2>&1 | tail -2
python3 benchmarks/profile/realign_forms.py $OUT/realign-forms.json 2>&1 | grep -v Warning
rm -rf /tmp/old && mkdir /tmp/old && cp -r . /tmp/old/ && cd /tmp/old && patch -s -R -p1 < benchmarks/profile/realign.diff && export PYTHONPATH=/tmp/site:/tmp/old TILEPY_HIP_CACHE=/tmp/thc_old && echo OLD &&
python3 benchmarks/gemm.py --only fp8 --shapes 4096,4090,1024 1000,1001,1024 1536,1530,1536 2051,2045,4096 --name gemm-realign-old-call2 --out $OUT 2>&1 | grep "^fp8"
