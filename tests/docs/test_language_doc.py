"""docs/language.md is executable documentation: every ```python block in it is a complete program (imports
included) that runs on the CPU interpreter and checks its own result with asserts. Each block is written to its
own .py file and run with runpy, so `inspect.getsource` (which @tp.kernel needs) finds the kernels defined in it.
One test per block, named after the heading above it. Fragments are fenced ```text or ```py-fragment."""

from __future__ import annotations

import os
import re
import runpy
import time
from pathlib import Path

import numpy  # noqa: F401 - imported here so the time limit measures each example, not imports
import pytest

import tilepy  # noqa: F401

DOC = Path(__file__).resolve().parents[2] / "docs" / "language.md"
FENCE_LANGS = {"python", "text", "py-fragment"}
# A hang guard per example (they take well under 2 s on an idle CPU; a loaded 2-core CI machine is no benchmark).
TIME_LIMIT_S = float(os.environ.get("TILEPY_DOC_TIME_LIMIT", "30"))


def _slug(heading: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-") or "top"


def parse_blocks(text: str) -> list[tuple[str, str, str, int]]:
    """(language, code, heading, first line) of every fenced block, in order."""
    blocks, heading = [], "top"
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^```(.*)$", line)
        if m:
            lang, start, body = m.group(1).strip(), i + 1, []
            i += 1
            while i < len(lines) and not re.match(r"^```\s*$", lines[i]):
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise AssertionError(f"docs/language.md:{start}: unclosed ``` fence")
            blocks.append((lang, "\n".join(body) + "\n", heading, start))
        elif re.match(r"^#{1,6} ", line):
            heading = line.lstrip("#").strip()
        i += 1
    return blocks


def _python_blocks():
    blocks = parse_blocks(DOC.read_text())
    out, seen = [], {}
    for lang, code, heading, line in blocks:
        if lang != "python":
            continue
        slug = _slug(heading)
        seen[slug] = seen.get(slug, 0) + 1
        ident = slug if seen[slug] == 1 else f"{slug}-{seen[slug]}"
        out.append(pytest.param(code, line, id=ident))
    return out


def test_fences_are_tagged():
    """Every block says what it is: runnable (python) or not (text, py-fragment)."""
    bad = [(line, lang) for lang, _, _, line in parse_blocks(DOC.read_text()) if lang not in FENCE_LANGS]
    assert not bad, f"fences need one of {sorted(FENCE_LANGS)}; found (line, lang): {bad}"


def test_there_are_examples():
    assert len(_python_blocks()) >= 20


@pytest.mark.parametrize("code,line", _python_blocks())
def test_example(code, line, tmp_path, monkeypatch):
    assert "import tilepy" in code, f"docs/language.md:{line}: examples import tilepy themselves"
    assert re.search(r"^\s*assert\b", code, re.M), f"docs/language.md:{line}: examples check their result"
    path = tmp_path / f"language_doc_line{line}.py"
    path.write_text(code)
    monkeypatch.chdir(tmp_path)
    t0 = time.perf_counter()
    runpy.run_path(str(path), run_name="__main__")
    elapsed = time.perf_counter() - t0
    assert elapsed < TIME_LIMIT_S, f"docs/language.md:{line}: example took {elapsed:.2f}s (limit {TIME_LIMIT_S}s)"
