"""Errors of the tile language: each names file:line, shows the source line with a caret, and says what to do."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """Where an IR node came from in the user's source."""

    file: str
    line: int
    col: int
    text: str = ""  # the whole source line

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"

    def excerpt(self) -> str:
        if not self.text:
            return ""
        stripped = self.text.rstrip("\n")
        return f"    {stripped}\n    {' ' * self.col}^"


UNKNOWN = Span("<unknown>", 0, 0)


class TilepyError(Exception):
    """Base of every error tilepy raises on purpose."""


class CompileError(TilepyError):
    """The kernel uses something the language or the target does not accept.

    `str(err)` reads::

        kernel.py:12:9: error: <what is wrong>
            <source line>
            ^
        hint: <what to do instead>
    """

    kind = "error"

    def __init__(self, message: str, span: Span | None = None, hint: str = ""):
        self.message = message
        self.span = span or UNKNOWN
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        lines = [f"{self.span}: {self.kind}: {self.message}"]
        excerpt = self.span.excerpt()
        if excerpt:
            lines.append(excerpt)
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


class UnsupportedConstructError(CompileError):
    kind = "unsupported construct"


class KernelTypeError(CompileError):
    kind = "type error"


class ShapeError(CompileError):
    kind = "shape error"


class ConstexprError(CompileError):
    kind = "constexpr error"


class ResourceError(CompileError):
    kind = "resource error"


class TargetError(CompileError):
    kind = "target error"


class LaunchError(TilepyError):
    """Arguments given at launch do not match the kernel's signature."""


class InterpreterError(TilepyError):
    """The kernel did something at run time that real hardware would not survive (deadlock, bad index)."""

    def __init__(self, message: str, span: Span | None = None):
        self.span = span or UNKNOWN
        text = f"{self.span}: runtime error: {message}"
        if self.span.excerpt():
            text += "\n" + self.span.excerpt()
        super().__init__(text)
