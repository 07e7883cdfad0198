#!/usr/bin/env bash
# The suite on the convolution problems at full size on the device machine, from a clean copy of the committed
# tree (build/l2_head.tgz, made here by `git archive HEAD --format=tar.gz -o build/l2_head.tgz`; the shared work
# tree may hold other engineers' unfinished edits): the problems that were never run plus level2/029, then the
# strided transposed problems with conv_igemm's in-kernel phases (ARGUS_TRANSPOSED_PHASES=0).
# Usage (repo root, carry build/l2_head.tgz and .whl): bash tests/gpu/run_conv_suite.sh [seconds] [phased seconds]
set -uo pipefail
budget=${1:-220}
pbudget=${2:-70}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
H=/tmp/head; rm -rf $H; mkdir -p $H && tar xzf build/l2_head.tgz -C $H || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
cd $H
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
P=tests/problems
timeout $((budget + 90)) python3 benchmarks/suite.py --jobs 15 --runs 10 --time-budget "$budget" \
  --out "$OUT/suite-conv-rest.json" $P/level2/029_* $P/level2/043_* $P/level2/045_* $P/level2/048_* \
  $P/level2/050_* $P/level2/052_* $P/level2/055_* $P/level2/057_* $P/level2/058_* \
  $P/level1/089_* $P/level1/090_* $P/level1/091_* $P/level1/092_* $P/level1/093_* $P/level1/094_* \
  $P/level1/095_* $P/level1/096_* $P/level1/097_* $P/level1/098_* $P/level1/099_* $P/level1/100_* \
  $P/level1/101_* 2>&1 | grep -vE "^\s*[{}\"]" | tail -30
ARGUS_TRANSPOSED_PHASES=0 timeout $((pbudget + 90)) python3 benchmarks/suite.py --jobs 15 --runs 10 \
  --time-budget "$pbudget" --out "$OUT/suite-phased.json" $P/level2/010_* $P/level2/035_* $P/level2/003_* \
  $P/level2/034_* 2>&1 | grep -vE "^\s*[{}\"]" | tail -8
