"""The stdlib bitonic row sort once per shape class on small inputs, for compute-sanitizer:

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_sort.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_sort.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tilepy_hip  # noqa: E402,F401
from stdlib_kernels import sort as S  # noqa: E402

d = torch.device("cuda")
for r, n in ((70, 29), (40, 128), (3, 1000), (2, 8192)):       # partial row blocks, padding, 1024 threads
    x = torch.randn(r, n, device=d)
    x[0, 0] = float("nan")
    v, i = torch.empty_like(x), torch.empty(r, n, dtype=torch.int64, device=d)
    S.launch(x, v, i)
    S.launch(x.int(), v.int(), i, descending=True)
    v1, i1 = torch.empty(r, 1, device=d), torch.empty(r, 1, dtype=torch.int64, device=d)
    S.launch(x, v1, i1, pick=(n - 1) // 2, nan_first=True)
    torch.cuda.synchronize()
    ok = torch.equal(i, torch.sort(x.int(), dim=1, stable=True, descending=True).indices)
    print(r, n, "ok" if ok else "MISMATCH")
