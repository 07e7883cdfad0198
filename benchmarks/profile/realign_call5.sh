# Where 2051 x 2045 x 1008's time goes: the 192 x 192 form's epilogues on 2048 x 2048 x 1008 and the ragged shape.
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl_h2/*.whl 2>&1 | tail -1
export PYTHONPATH=/tmp/site:$PWD TILEPY_HIP_CACHE=/tmp/thc
python3 benchmarks/profile/realign_forms.py $OUT/realign-call5.json --call5 2>&1 | grep -v Warning
