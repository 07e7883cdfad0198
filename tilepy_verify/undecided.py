"""The finding for a check whose solver query ended undecided (neither a proof nor a counterexample)."""

from __future__ import annotations

from .report import Finding


def _undecided(kir, check, e):
    from tilepy.errors import Span

    return Finding(check, "error",
                   f"not proven: {e}; the {check} check is incomplete for this kernel, so it is not verified. "
                   f"Simplify the index arithmetic the check reasons about, or allow more time per query with "
                   f"TILEPY_VERIFY_QUERY_TIMEOUT=<seconds>",
                   Span(kir.file, kir.line, 0), {"detail": f"solver: {e.reason}"})
