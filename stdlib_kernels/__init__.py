"""Standard-library kernels written in tilepy. Each module defines its kernel(s), a `launch(...)` helper that
picks the grid, and a numpy reference; each is runnable on its own (`python -m stdlib_kernels.softmax`)."""

import tilepy_hip  # noqa: F401  (registers the GPU backend: kernel[grid] on CUDA tensors launches through it)

# gemm_splitk_swap registers itself in gemm_hopper.SWAP_KERNELS (gemm_hopper.launch's swap-AB decode form)
from . import (
    conv,
    cumsum,
    embedding,
    gemm,
    gemm_hopper,
    gemm_splitk_swap,
    max_pool,
    rmsnorm,
    scatter_add,
    softmax,
    vector_add,
)

KERNELS = {
    "vector_add": vector_add.vector_add,
    "softmax": softmax.softmax,
    "rmsnorm": rmsnorm.rmsnorm,
    "gemm": gemm.gemm,
    "gemm_hopper": gemm_hopper.gemm_hopper,  # sm_90a only: TMA producer + wgmma consumer warpgroups
    "embedding": embedding.embedding,  # gathers through an index tile
    "scatter_add": scatter_add.scatter_add,  # atomics through a scatter view
    "max_pool2d": max_pool.max_pool2d,  # strided windows
    "conv2d": conv.conv2d,  # implicit GEMM: gathered im2col tiles into MMA (constexprs: conv.PRESETS)
    "conv_transpose2d": conv.conv_transpose2d,
    "cumsum_block_sums": cumsum.block_sums,  # a scan across blocks: two passes
    "cumsum_block_scan": cumsum.block_scan,
}

__all__ = ["KERNELS", "conv", "cumsum", "embedding", "gemm", "gemm_hopper", "gemm_splitk_swap", "max_pool", "rmsnorm",
           "scatter_add", "softmax", "vector_add"]
