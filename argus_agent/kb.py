"""The knowledge base: optimization skills as Markdown files with YAML front matter, in `kb/`.

    ---
    name: async-copy-pipelining
    when: the main loop waits on global memory every iteration
    where: GEMM-like kernels that stage tiles in shared memory
    conditions: [has_constexpr STAGES, has_call tp.copy_async]
    codemod: {name: set_constexpr, variants: [{name: STAGES, value: "3"}, {name: STAGES, value: "4"}]}
    effect: overlaps the next tiles' loads with this tile's MMAs; ~1.1-1.4x on memory-latency-bound GEMMs
    lineage: CUTLASS multistage (sm80) -> Triton num_stages -> ThunderKittens
    ---
    Free text: the why, pitfalls, references.

A skill whose codemod is `advisory` has no automatic transform: the LLM planner sees it as guidance and the
offline planner skips it. Loading checks every field; a malformed skill is reported (file, field, message)
and skipped, never fatal.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
import yaml

from .codemods import CODEMODS, TilepyNames

KB_DIR = Path(__file__).resolve().parent.parent / "kb"
REQUIRED = ("name", "when", "where", "conditions", "codemod", "effect", "lineage")
CONDITION_KINDS = ("kernel_kind", "has_constexpr", "has_call", "lacks_call", "has_kernel", "target", "source_has",
                   "source_lacks")


@dataclass
class Skill:
    name: str
    when: str
    where: str
    conditions: list
    codemod: str
    variants: list
    effect: str
    lineage: str
    body: str = ""
    path: Path | None = None

    @property
    def advisory(self) -> bool:
        return self.codemod == "advisory"

    def applicable(self, source: str, kind: str, target: str) -> bool:
        return all(_holds(c, source, kind, target) for c in self.conditions)

    def summary(self) -> dict:
        return {"name": self.name, "when": self.when, "where": self.where, "effect": self.effect,
                "codemod": self.codemod, "variants": self.variants, "lineage": self.lineage}


@dataclass
class SkillProblem:
    file: str
    field: str
    message: str

    def __str__(self):
        return f"{self.file}: field `{self.field}`: {self.message}"


@dataclass
class KnowledgeBase:
    skills: dict = field(default_factory=dict)
    problems: list = field(default_factory=list)

    def applicable(self, source: str, kind: str, target: str) -> list[Skill]:
        return [s for s in self.skills.values() if s.applicable(source, kind, target)]


@functools.lru_cache(maxsize=64)
def _names(source: str) -> TilepyNames:
    """How `source` imports tilepy (`import tilepy as tl`, `from tilepy import load`); plain `tp` if unparsable."""
    try:
        return TilepyNames.of(cst.parse_module(source))
    except cst.ParserSyntaxError:
        return TilepyNames({"tp"}, {})


def _calls(fn: str, source: str) -> bool:
    """Does `source` call `fn`? `tp.X` means tilepy's X under any alias or from-import."""
    if not fn.startswith("tp."):
        return f"{fn}(" in source
    names, attr = _names(source), fn[3:]
    spellings = [f"{a}.{attr}" for a in names.aliases] + [k for k, v in names.members.items() if v == attr]
    return any(re.search(rf"(?<![\w.]){re.escape(sp)}\s*\(", source) for sp in spellings)


def _holds(cond: str, source: str, kind: str, target: str) -> bool:
    what, _, arg = cond.partition(" ")
    arg = arg.strip()
    if what == "kernel_kind":   # a lowered program has several kinds of kernel: "elementwise|reduction|matmul"
        return bool(set(kind.split("|")) & set(arg.split("|")))
    if what == "has_constexpr":
        return re.search(rf"\b{re.escape(arg)}\s*:\s*(\w+\.)*constexpr\b", source) is not None
    if what in ("has_call", "lacks_call"):
        return _calls(arg, source) == (what == "has_call")
    if what == "has_kernel":
        return f"def {arg}(" in source
    if what == "target":
        vendor = {"sm_80": "nvidia", "sm_90a": "nvidia", "gfx942": "amd", "cpu": "cpu"}.get(target, target)
        return any(t in (target, vendor) for t in arg.split("|"))
    if what in ("source_has", "source_lacks"):   # `tp.` in the argument means tilepy, however it is imported
        return (_names(source).qualify(arg) in source) == (what == "source_has")
    return False


def parse_skill(text: str, file: str) -> tuple[Skill | None, list[SkillProblem]]:
    """Parse one skill file; returns (skill or None, problems)."""
    problems = []
    if not text.startswith("---"):
        return None, [SkillProblem(file, "front matter", "the file must start with a `---` YAML front matter block")]
    parts = text.split("---", 2)
    if len(parts) < 3:
        return None, [SkillProblem(file, "front matter", "no closing `---`")]
    try:
        meta = yaml.safe_load(parts[1]) or {}
    except yaml.YAMLError as e:
        return None, [SkillProblem(file, "front matter", f"not valid YAML: {e}")]
    if not isinstance(meta, dict):
        return None, [SkillProblem(file, "front matter", "must be a mapping of fields")]
    for f in REQUIRED:
        if f not in meta or meta[f] in (None, "", []) and f != "conditions":
            problems.append(SkillProblem(file, f, "missing or empty"))
    for f in ("name", "when", "where", "effect", "lineage"):
        if f in meta and not isinstance(meta[f], str):
            problems.append(SkillProblem(file, f, f"must be text, got {type(meta[f]).__name__}"))
    conds = meta.get("conditions", [])
    if not isinstance(conds, list) or not all(isinstance(c, str) for c in conds):
        problems.append(SkillProblem(file, "conditions", "must be a list of strings such as `has_constexpr STAGES`"))
        conds = []
    for c in conds:
        if c.split(" ", 1)[0] not in CONDITION_KINDS:
            problems.append(SkillProblem(file, "conditions", f"unknown condition `{c}`; known: "
                                         f"{', '.join(CONDITION_KINDS)}"))
    codemod, variants = meta.get("codemod"), []
    if isinstance(codemod, str):
        codemod = {"name": codemod}
    if not isinstance(codemod, dict) or "name" not in codemod:
        problems.append(SkillProblem(file, "codemod", "must be {name: <codemod>, variants: [{args}...]} or "
                                     "`advisory`"))
        name = None
    else:
        name = codemod["name"]
        variants = codemod.get("variants", [{}])
        if name != "advisory" and name not in CODEMODS:
            problems.append(SkillProblem(file, "codemod", f"unknown codemod `{name}`; known: "
                                         f"{', '.join(CODEMODS)}, advisory"))
        if not isinstance(variants, list) or not all(isinstance(v, dict) for v in variants):
            problems.append(SkillProblem(file, "codemod", "variants must be a list of argument mappings"))
        elif name in CODEMODS:
            allowed = set(CODEMODS[name].args)
            for v in variants:
                bad = set(v) - allowed
                if bad:
                    problems.append(SkillProblem(file, "codemod", f"codemod `{name}` takes {sorted(allowed)}, not "
                                                 f"{sorted(bad)}"))
    if problems:
        return None, problems
    return Skill(meta["name"], meta["when"].strip(), meta["where"].strip(), conds, name, variants or [{}],
                 meta["effect"].strip(), meta["lineage"].strip(), parts[2].strip(), Path(file)), []


def load_kb(directory: str | Path | None = None) -> KnowledgeBase:
    """Load every `*.md` skill under `directory` (default: the repo's kb/), except README.md."""
    directory = Path(directory) if directory else KB_DIR
    kb = KnowledgeBase()
    for path in sorted(directory.glob("*.md")):
        if path.name.lower() == "readme.md":
            continue
        skill, problems = parse_skill(path.read_text(), str(path))
        kb.problems.extend(problems)
        if skill is not None:
            if skill.name in kb.skills:
                kb.problems.append(SkillProblem(str(path), "name", f"`{skill.name}` is already defined by "
                                                f"{kb.skills[skill.name].path}"))
                continue
            kb.skills[skill.name] = skill
    return kb
