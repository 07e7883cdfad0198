"""Build the sort_rows specializations tests/gpu/test_gpu_sort.py and sanitize_sort.py launch into the on-disk
cache in parallel processes, so the tests find them built.  python3 tests/gpu/precompile_sort.py [workers]"""

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from stdlib_kernels import sort as S  # noqa: E402

LENGTHS = (1, 29, 64, 127, 128, 1000, 4096, 8192)


def _items():
    out = []
    for n in LENGTHS:
        L, VB, threads, rb = S.shape_of(n)
        base = dict(L=L, VB=VB, THREADS=threads, RB=rb)
        for fl in (True, False):
            for desc in (False, True):
                out.append(dict(base, FLOAT=fl, DESC=desc, PICK=-1, NAN_FIRST=False))
        out.append(dict(base, FLOAT=True, DESC=False, PICK=(n - 1) // 2, NAN_FIRST=True))
    return out


def build(params):
    import tilepy_hip

    try:
        tilepy_hip.compile(S.sort_rows, target="sm_90a", **params)
    except Exception as e:  # noqa: BLE001 - reported below
        return f"{params}: {type(e).__name__}: {e}"[:300]
    return None


if __name__ == "__main__":
    t = time.time()
    items = _items()
    with ProcessPoolExecutor(int(sys.argv[1]) if len(sys.argv) > 1 else 12) as ex:
        errors = [e for e in ex.map(build, items) if e]
    print(f"built {len(items)} sort_rows specializations in {time.time() - t:.1f}s; errors: {errors}")
