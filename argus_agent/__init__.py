"""ARGUS: writes, verifies and tunes tilepy kernels from PyTorch references.

Coming (issue 7): the `argus` CLI with a knowledge base of skills, an in-context RL planner (LLM or offline),
codemods, a two-stage tuner and run history. Today: `python -m argus_agent demo` runs stdlib kernels on the
CPU interpreter against numpy.
"""

from ._version import __version__

__all__ = ["__version__"]
