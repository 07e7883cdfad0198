"""The built-in checks. Each is `check(ctx) -> list[Finding]` over one analysis (see tilepy_verify.verify)."""

from . import banks, barrier, bounds, bulk_start, coverage, deadlock, global_race, mma, pipeline, race, tags

ALL = {
    "race": race.check,
    "barrier_divergence": barrier.check,
    "deadlock": deadlock.check,
    "out_of_bounds": bounds.check,
    "bulk_copy_start": bulk_start.check,
    "bank_conflict": banks.check,
    "pipeline_hazard": pipeline.check,
    "mma_layout": mma.check,
    "tag_assertion": tags.check,
    "global_race": global_race.check,
    "coverage": coverage.check,
}

__all__ = ["ALL"]
