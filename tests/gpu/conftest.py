"""GPU tests launch through tilepy_hip; import it so it registers as tilepy's GPU backend even where the
packages are on PYTHONPATH rather than installed (no entry points then). A GPU test module starts with
`torch = cuda_torch()` (gpu_prologue.py): skipped, with the reason, where torch or a CUDA GPU is missing."""

import tilepy_hip  # noqa: F401
