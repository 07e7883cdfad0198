"""GPU tests launch through tilepy_hip; import it so it registers as tilepy's GPU backend even where the
packages are on PYTHONPATH rather than installed (no entry points then)."""

import tilepy_hip  # noqa: F401
