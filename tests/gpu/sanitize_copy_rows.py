"""The realigned shared -> global store (tests/gpu/test_gpu_copy_rows.py's kernels: rows off 16 bytes, heads and tails
by element) for compute-sanitizer, a few cases of each element size, each checked exact.

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_copy_rows.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_copy_rows.py
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import test_gpu_copy_rows as t  # noqa: E402

t.test_bf16_rows(2045, 3, 0, 1)
t.test_bf16_rows(2043, 1, 5, 0)
t.test_f32_rows(1021, 1, 2)
t.test_e4m3_rows(1001, 5, 3)
print("sanitize_copy_rows: exact")
