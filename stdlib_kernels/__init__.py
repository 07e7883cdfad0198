"""Standard-library kernels written in tilepy. Each module defines its kernel(s), a `launch(...)` helper that
picks the grid, and a numpy reference; each is runnable on its own (`python -m stdlib_kernels.softmax`)."""

from . import gemm, gemm_hopper, rmsnorm, softmax, vector_add

KERNELS = {
    "vector_add": vector_add.vector_add,
    "softmax": softmax.softmax,
    "rmsnorm": rmsnorm.rmsnorm,
    "gemm": gemm.gemm,
    "gemm_hopper": gemm_hopper.gemm_hopper,  # sm_90a only: TMA producer + wgmma consumer warpgroups
}

__all__ = ["KERNELS", "gemm", "gemm_hopper", "rmsnorm", "softmax", "vector_add"]
