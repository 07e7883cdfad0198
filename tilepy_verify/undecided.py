"""The finding for a check whose solver query ended undecided (neither a proof nor a counterexample)."""

from __future__ import annotations

from .report import Finding


def _undecided(kir, check, e):
    from tilepy.errors import Span

    more = (f"allow more time per solver check with {e.env}=<seconds>" if e.seconds is not None else
            f"allow a larger budget per query with {e.env}=<Z3 resource units> (deterministic; the wall-clock "
            f"safety net per check is TILEPY_VERIFY_QUERY_TIMEOUT=<seconds>)")
    return Finding(check, "error",
                   f"not proven: {e}; the {check} check is incomplete for this kernel, so it is not verified. "
                   f"Simplify the index arithmetic the check reasons about, or {more}",
                   Span(kir.file, kir.line, 0), {"detail": f"solver: {e.reason}"})
