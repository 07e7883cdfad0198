"""G34: g30_trace.py's rotated timing and kernel trace (each function a CUDA graph of 20 calls over input sets that
rotate B out of the L2, METHOD.md; the graph traced for every kernel's duration) over g34_forms' plans, no stream
floors. Writes <name>-<device>.json.

    python benchmarks/profile/g34_trace.py --plan g34-call1|g34-call2 [--rows 16 32 64 96 128 192 256] [--nk 4096,4096]
        [--repeat 3] [--out DIR] [--name NAME]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import g30_trace  # noqa: E402
import g34_forms  # noqa: E402

g30_trace.PLANS.update({"g34-call1": g34_forms.call1_variants, "g34-call2": g34_forms.call2_variants,
                        "g34-call3": g34_forms.call3_variants, "g34-call4": g34_forms.call4_variants})
g30_trace.STREAMS = {}      # (the floors were G30's; none timed here)

if __name__ == "__main__":
    g30_trace.main()
