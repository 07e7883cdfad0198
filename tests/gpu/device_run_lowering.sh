#!/usr/bin/env bash
# One device call for the lowering's templates (L1): GPU tests of conv_igemm, the lowered GEMM policies and
# precisions and gemm_fp32; compute-sanitizer on gemm_fp32's one-pass (TF32) variant; benchmarks/conv.py
# (conv_igemm at its policy against cuDNN); the suite on every convolution problem (rows into $OUT).
# Usage on the device machine (repo root): bash tests/gpu/device_run_lowering.sh [suite seconds]
# (the suite's seconds count from its start: building the 48 problems takes ~110 s on 14 processes)
set -uo pipefail
budget=${1:-400}
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 150 python3 -m pytest -q -x -n 6 -p no:cacheprovider tests/gpu/test_gpu_conv_igemm.py \
  tests/gpu/test_gpu_lower_gemm_policy.py tests/gpu/test_gpu_gemm_fp32.py 2>&1 | tee "$OUT/pytest.log" \
  | grep -vE "^(tests|E |  )" | tail -8
cat > /tmp/one_pass.py <<'PY'
import torch
from stdlib_kernels import gemm_fp32
a, b = torch.randn(70, 100, device="cuda"), torch.randn(100, 90, device="cuda")
c = torch.empty(70, 90, device="cuda")
gemm_fp32.launch(a, b, c, PASSES=1)
torch.cuda.synchronize()
print("ok", float((c - a @ b).abs().max()))
PY
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool python3 /tmp/one_pass.py > "$OUT/sanitize_$tool.log" 2>&1
  echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
done
timeout 120 python3 benchmarks/conv.py --runs 10 --out "$OUT" 2>&1 | grep -v Warn
timeout $((budget + 60)) python3 benchmarks/suite.py --jobs 14 --runs 10 --time-budget "$budget" \
  --out "$OUT/suite-conv.json" tests/problems/level2/002_conv2d_groupnorm_mish_maxpool.py tests/problems/level2/003_convtranspose3d_bias_clamp_mean.py tests/problems/level2/006_conv3d_softmax_maxpool3d_x2.py tests/problems/level2/007_conv2d_relu_bias_add.py tests/problems/level2/008_conv2d_batchnorm_scale_tanh.py tests/problems/level2/009_conv2d_subtract_hardswish_maxpool_mish.py tests/problems/level2/010_convtranspose2d_maxpool_hardtanh_mean_tanh.py tests/problems/level2/013_conv3d_groupnorm_mean.py tests/problems/level2/015_conv2d_instancenorm_divide.py tests/problems/level2/016_conv2d_min_tanh_tanh.py tests/problems/level2/017_convtranspose3d_add_layernorm_avgpool_gelu.py tests/problems/level2/019_conv2d_avgpool_sigmoid_sum.py tests/problems/level2/022_conv2d_multiply_leakyrelu_gelu.py tests/problems/level2/023_conv3d_multiply_instancenorm_clamp_multiply_max.py tests/problems/level2/024_convtranspose2d_mean_bias_logsumexp_sum_multiply.py tests/problems/level2/027_resnet_stem.py tests/problems/level2/028_resnet_basic_block.py tests/problems/level2/029_depthwise_separable_block.py tests/problems/level2/030_conv1d_groupnorm_gelu_avgpool1d.py tests/problems/level2/031_conv1d_relu_adaptivemaxpool_linear.py tests/problems/level2/032_convtranspose1d_bias_tanh_sum.py tests/problems/level2/033_conv3d_activation_chain_bias.py tests/problems/level2/034_convtranspose3d_batchnorm_avgpool_avgpool.py tests/problems/level2/035_convtranspose2d_add_min_gelu_multiply.py tests/problems/level2/039_conv2d_groupnorm_scale_maxpool_clamp.py tests/problems/level2/040_conv2d_hardswish_relu_softmax_mean.py tests/problems/level2/042_conv2d_tanh_scale_bias_maxpool.py tests/problems/level2/043_conv3d_maxpool_logsumexp_relu.py tests/problems/level2/045_conv2d_squeeze_excitation.py tests/problems/level2/048_conv2d_pixelshuffle_relu.py tests/problems/level2/050_convtranspose2d_softmax_bias_scale_sigmoid.py tests/problems/level2/052_conv2d_subtract_mish_mish.py tests/problems/level2/055_conv3d_divide_maxpool_globalavgpool_bias_sum.py tests/problems/level2/057_convtranspose3d_scale_batchnorm_globalavgpool.py tests/problems/level2/058_conv2d_bias_scale_sigmoid_groupnorm.py tests/problems/level1/089_conv1d_bias.py tests/problems/level1/090_conv2d_3x3_no_bias.py tests/problems/level1/091_conv2d_strided_dilated.py tests/problems/level1/092_conv2d_asymmetric_kernel.py tests/problems/level1/093_conv2d_grouped.py tests/problems/level1/094_conv2d_depthwise.py tests/problems/level1/095_conv2d_pointwise_1x1.py tests/problems/level1/096_conv3d.py tests/problems/level1/097_conv3d_strided_asymmetric_no_bias.py tests/problems/level1/098_conv_transpose1d.py tests/problems/level1/099_conv_transpose2d_strided.py tests/problems/level1/100_conv_transpose2d_grouped_dilated.py tests/problems/level1/101_conv_transpose3d.py  2>&1 | tail -60
