# The staged tile stored by every warpgroup (EPILOGUE=1 STORE_ALL=1) on the forms a policy for C rows off 16 bytes
# could take, per shape class (realign_forms.py --call3).
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl_h2/*.whl 2>&1 | tail -1
export PYTHONPATH=/tmp/site:$PWD TILEPY_HIP_CACHE=/tmp/thc
python3 benchmarks/profile/realign_forms.py $OUT/realign-call3.json --call3 2>&1 | grep -v Warning
