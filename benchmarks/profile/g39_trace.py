"""G39: g30_trace.py's rotated timing and kernel trace (each function a CUDA graph of 20 calls over input sets that
rotate B out of the L2, METHOD.md; the graph traced for every kernel's duration) over g39_forms' plans, no stream
floors. Writes <name>-<device>.json.

    python benchmarks/profile/g39_trace.py --plan g39-call1 [--rows 64 96 112 128 192] [--repeat 2] [--out DIR]
        [--name NAME]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import g30_trace  # noqa: E402
import g39_forms  # noqa: E402

g30_trace.PLANS.update({"g39-call1": g39_forms.call1_variants, "g39-call2": g39_forms.call2_variants})
g30_trace.STREAMS = {}      # (the floors were G30's; none timed here)

if __name__ == "__main__":
    g30_trace.main()
