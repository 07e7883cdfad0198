#!/usr/bin/env bash
# The lead's A/B of where the stdlib depthwise kernel starts (ARGUS_DEPTHWISE_MIN_TAPS 28 vs 9) on the depthwise
# problems, and a kernel profile of MobileNetV2 / EfficientNet. Device machine, repo root: bash tests/gpu/device_run_depthwise_ab.sh
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl; export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
P="tests/problems/level3/005_mobilenetv2_blocks.py tests/problems/level3/006_efficientnet_mbconv_se.py tests/problems/level1/094_conv2d_depthwise.py tests/problems/level3/018_shufflenet_unit.py tests/problems/level3/024_mobilenetv1_net.py"
timeout 140 python3 benchmarks/suite.py $P --jobs 12 --runs 10 --time-budget 110 --out $OUT/suite-dwA.json 2>&1 | grep -E "^(level|built)"
ARGUS_DEPTHWISE_MIN_TAPS=9 timeout 140 python3 benchmarks/suite.py $P --jobs 12 --runs 10 --time-budget 110 --out $OUT/suite-dwB.json 2>&1 | grep -E "^(level|built)"
timeout 100 python3 benchmarks/conv_profile.py tests/problems/level3/005_mobilenetv2_blocks.py tests/problems/level3/006_efficientnet_mbconv_se.py --runs 5 --out $OUT/prof6.json 2>&1 | grep -E "^(==|   )" | head -40
