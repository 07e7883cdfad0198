"""Findings and reports: what `verify` returns, readable as text and as JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from tilepy.errors import Span

CHECKS = ("race", "barrier_divergence", "deadlock", "out_of_bounds", "bulk_copy_start", "bank_conflict",
          "pipeline_hazard", "mma_layout", "tag_assertion", "global_race", "coverage")

_ORDER = ["block", "other_block", "element", "warp", "lane", "thread", "value", "iteration", "coords", "tags",
          "stage", "address", "degree", "lanes", "other_thread", "other_iteration", "other_value", "other_coords",
          "expected", "actual", "detail"]


@dataclass
class Finding:
    """One violation (severity "error") or performance issue (severity "performance").

    `counterexample` names the concrete block, warp, lane, thread, value index, element coordinates, tags,
    loop iteration, address, ... that exhibit it; `other_span` is where the other op involved comes from."""

    check: str
    severity: str
    message: str
    span: Span
    counterexample: dict = field(default_factory=dict)
    other_span: Span | None = None

    def __post_init__(self):
        if self.check not in CHECKS:
            raise ValueError(f"unknown check {self.check!r}")
        if self.severity not in ("error", "performance"):
            raise ValueError(f"unknown severity {self.severity!r}")
        if self.other_span is not None and "other_span" not in self.counterexample:
            self.counterexample["other_span"] = str(self.other_span)

    def __str__(self) -> str:
        kind = "error" if self.severity == "error" else "performance"
        lines = [f"{self.span}: {kind} [{self.check}]: {self.message}"]
        ex = self.span.excerpt()
        if ex:
            lines.append(ex)
        if self.counterexample:
            lines.append("  counterexample:")
            keys = [k for k in _ORDER if k in self.counterexample] + sorted(
                k for k in self.counterexample if k not in _ORDER and k != "other_span")
            for k in keys:
                lines.append(f"    {k} = {_fmt(self.counterexample[k])}")
        if self.other_span is not None:
            lines.append(f"  other op: {self.other_span}")
            ex = self.other_span.excerpt()
            if ex:
                lines.append("  " + ex.replace("\n", "\n  "))
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "check": self.check,
            "severity": self.severity,
            "message": self.message,
            "span": _span_dict(self.span),
            "other_span": _span_dict(self.other_span) if self.other_span is not None else None,
            "counterexample": _jsonable(self.counterexample),
        }


@dataclass
class Report:
    kernel: str
    target: str
    constexprs: dict
    findings: list = field(default_factory=list)
    elapsed_s: float = 0.0
    checks: tuple = CHECKS
    stats: dict = field(default_factory=dict)

    @property
    def errors(self) -> list:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def performance(self) -> list:
        return [f for f in self.findings if f.severity == "performance"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def by_check(self, check: str) -> list:
        return [f for f in self.findings if f.check == check]

    def to_dict(self) -> dict:
        return {
            "kernel": self.kernel,
            "target": self.target,
            "constexprs": _jsonable(self.constexprs),
            "ok": self.ok,
            "elapsed_s": round(self.elapsed_s, 4),
            "checks": list(self.checks),
            "errors": len(self.errors),
            "performance": len(self.performance),
            "findings": [f.to_dict() for f in self.findings],
            "stats": _jsonable(self.stats),
        }

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    def __str__(self) -> str:
        head = (f"{self.kernel} [{self.target}] "
                + ", ".join(f"{k}={_fmt(v)}" for k, v in self.constexprs.items()))
        verdict = "verified: no errors" if self.ok else f"{len(self.errors)} error(s)"
        if self.performance:
            verdict += f", {len(self.performance)} performance finding(s)"
        lines = [f"{head}: {verdict} ({self.elapsed_s:.2f}s)"]
        for f in self.findings:
            lines.append("")
            lines.append(str(f))
        return "\n".join(lines)


def _span_dict(s: Span | None):
    if s is None:
        return None
    return {"file": s.file, "line": s.line, "col": s.col, "text": s.text.rstrip("\n")}


def _fmt(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_fmt(x)}" for k, x in v.items())
    if isinstance(v, list) and len(v) > 16:
        return "[" + ", ".join(map(str, v[:16])) + f", ... ({len(v)} in all)]"
    return str(v)


def _jsonable(v):
    import numpy as np

    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return repr(v)
