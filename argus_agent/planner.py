"""Planners: in-context RL over the skills of the knowledge base.

Both planners see the same context: the problem, the current kernel source, the applicable skills and the
trajectory so far (actions, verifier counterexamples, compile errors, test failures, speedups, rewards).
An action is a dict: {"kind": "skill", "skill": NAME, "variant": I} | {"kind": "edit", "source": TEXT} |
{"kind": "tune"} | {"kind": "stop"}.

`OfflinePlanner` is a seeded UCB1 bandit over (skill, variant) arms plus the tuner; `LLMPlanner` asks any
OpenAI-compatible chat-completions endpoint and turns every failure (timeout, HTTP error, malformed JSON,
unknown skill, source that does not parse) into a trajectory step instead of an exception.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import random
import re
from dataclasses import dataclass, field


@dataclass
class Step:
    iteration: int
    action: dict
    outcome: str           # correct | rejected | not-applicable | verify-failed | compile-error | test-failed | ...
    message: str = ""
    counterexamples: list = field(default_factory=list)
    speedup: float | None = None
    reward: float = 0.0
    source_digest: str = ""

    def line(self) -> str:
        act = describe_action(self.action)
        sp = f", speedup {self.speedup:.3f}x" if self.speedup else ""
        cex = f"; counterexample: {json.dumps(self.counterexamples[0])}" if self.counterexamples else ""
        return f"#{self.iteration} {act} -> {self.outcome}{sp}, reward {self.reward:+.2f}: {self.message[:400]}{cex}"


def describe_action(a: dict) -> str:
    k = a.get("kind")
    if k == "skill":
        return f"skill {a.get('skill')}[{a.get('variant', 0)}]"
    if k == "edit":
        return f"edit ({len(a.get('source', ''))} chars)"
    return str(k)


def digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:12]


@dataclass
class Context:
    problem_source: str
    kernel_source: str
    target: str
    skills: list            # applicable Skill objects
    trajectory: list        # Steps
    timing: str = ""
    iteration: int = 0

    def render(self) -> str:
        skills = "\n".join(
            f"- {s.name} ({'advisory: write the edit yourself' if s.advisory else f'{len(s.variants)} variant(s): '}"
            f"{'' if s.advisory else json.dumps(s.variants)}): when {s.when}; effect: {s.effect}"
            for s in self.skills) or "(none applicable)"
        traj = "\n".join(s.line() for s in self.trajectory) or "(nothing yet)"
        return (f"## Problem (PyTorch reference, KernelBench format)\n```python\n{self.problem_source}\n```\n\n"
                f"## Target\n{self.target}. Timing: {self.timing or 'measured on the GPU'}\n\n"
                f"## Current kernel module (tilepy kernels + host `argus_forward`)\n```python\n{self.kernel_source}\n"
                f"```\n\n## Applicable skills\n{skills}\n\n## Trajectory so far\n{traj}\n")


class OfflinePlanner:
    """UCB1 over (skill, variant) arms and the tuner, seeded: the same seed and outcomes give the same
    choices. An arm is played at most once on a given source (whatever it gave, it would give again), so
    arms never tried there come first; the planner stops when every arm was tried on the current kernel, or
    when `patience` steps in a row brought no improvement (a first correct kernel, or a faster one)."""

    name = "offline"

    def __init__(self, seed: int = 0, c: float = 0.7, use_tuner: bool = True, patience: int = 6):
        self.seed, self.c, self.use_tuner, self.patience = seed, c, use_tuner, patience
        self.stats: dict = {}   # arm -> [plays, total reward]
        self.dead: set = set()  # (source digest, arm): already played there
        self.best: float | None = None
        self.have_correct = False
        self.since_improved = 0

    @staticmethod
    def _arm(action: dict):
        if action.get("kind") == "skill":
            return (action["skill"], int(action.get("variant", 0)))
        return (action.get("kind"), 0)

    def observe(self, step: Step):
        arm = self._arm(step.action)
        plays = self.stats.setdefault(arm, [0, 0.0])
        plays[0] += 1
        plays[1] += step.reward
        self.dead.add((step.source_digest, arm))
        improved = step.outcome == "correct" and (not self.have_correct or (
            step.speedup is not None and (self.best is None or step.speedup > self.best * 1.01)))
        if step.outcome == "correct":
            self.have_correct = True
            if step.speedup is not None and (self.best is None or step.speedup > self.best):
                self.best = step.speedup
        self.since_improved = 0 if improved else self.since_improved + 1

    def propose(self, ctx: Context) -> dict:
        if self.patience and self.since_improved >= self.patience:
            return {"kind": "stop", "reason": f"no improvement in the last {self.since_improved} steps"}
        rng = random.Random(self.seed * 1_000_003 + ctx.iteration)
        here = digest(ctx.kernel_source)
        arms = [(s.name, i) for s in ctx.skills if not s.advisory for i in range(len(s.variants))]
        if self.use_tuner:
            arms.append(("tune", 0))
        arms = [a for a in arms if (here, a) not in self.dead]
        if not arms:
            return {"kind": "stop", "reason": "every applicable arm was tried on the current kernel"}
        rng.shuffle(arms)
        total = sum(p for p, _ in self.stats.values()) + 1

        def score(a):
            plays, reward = self.stats.get(a, (0, 0.0))
            if plays == 0:
                return math.inf
            return reward / plays + self.c * math.sqrt(math.log(total) / plays)

        best = max(arms, key=score)
        if best[0] == "tune":
            return {"kind": "tune"}
        return {"kind": "skill", "skill": best[0], "variant": best[1]}


SYSTEM_PROMPT = """You optimize GPU kernels written in tilepy (a Python tile language) for a PyTorch reference.
Each turn, choose ONE action and reply with a single JSON object, nothing else:
  {"kind": "skill", "skill": "<name from Applicable skills>", "variant": <index>}
  {"kind": "edit", "source": "<the complete new kernel module: tilepy kernels and argus_forward>"}
  {"kind": "tune"}      (search the kernels' constexpr parameters)
  {"kind": "stop"}
Every candidate is verified (counterexamples come back), tested against the reference on fresh inputs, and
timed. The host `argus_forward(model, *inputs)` may only allocate, reshape and cast with torch; all arithmetic
must happen in tilepy kernels launched through `launch(kernel, grid, *args)`. Learn from the trajectory:
repeat what gained, avoid what failed."""


class LLMPlanner:
    """An OpenAI-compatible chat-completions planner (`openai` client; base URL, model, key from the CLI or
    OPENAI_BASE_URL / ARGUS_MODEL / OPENAI_API_KEY)."""

    name = "llm"

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 60.0,
                 temperature: float = 0.2, max_connection_failures: int = 3):
        try:
            from openai import OpenAI
        except ImportError:
            raise ImportError("the LLM planner needs the `openai` client, which is the [llm] extra: "
                              "pip install 'argus-agent[llm]'") from None

        self.model, self.temperature, self.base_url = model, temperature, base_url
        self.client = OpenAI(base_url=base_url, api_key=api_key or os.environ.get("OPENAI_API_KEY") or "none",
                             timeout=timeout, max_retries=0)
        self.last_error = ""
        self.max_connection_failures = max_connection_failures
        self.connection_failures = 0

    def observe(self, step: Step):
        pass  # the trajectory is in the context: the in-context learner needs no other state

    def propose(self, ctx: Context) -> dict:
        """An action, or {"kind": "invalid", "outcome": ..., "message": ...} describing what went wrong."""
        import openai

        try:
            resp = self.client.chat.completions.create(
                model=self.model, temperature=self.temperature,
                messages=[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": ctx.render()}])
            self.connection_failures = 0
            text = content_text(resp.choices[0].message.content)
        except openai.APITimeoutError as e:
            self.connection_failures = 0
            return {"kind": "invalid", "outcome": "llm-timeout", "message": f"the LLM did not answer in time: {e}"}
        except openai.APIConnectionError as e:
            self.connection_failures += 1
            if self.connection_failures >= self.max_connection_failures:
                return {"kind": "abort", "outcome": "llm-unreachable",
                        "message": f"the LLM endpoint {self.base_url} could not be reached "
                                   f"{self.connection_failures} times in a row ({e}); check --llm-base-url and "
                                   "that the server is running"}
            return {"kind": "invalid", "outcome": "llm-error", "message": f"{type(e).__name__}: {e}"}
        except openai.APIError as e:
            self.connection_failures = 0
            return {"kind": "invalid", "outcome": "llm-error", "message": f"{type(e).__name__}: {e}"}
        except Exception as e:  # malformed HTTP bodies and the like: fed back, never fatal
            return {"kind": "invalid", "outcome": "llm-error", "message": f"{type(e).__name__}: {e}"}
        return parse_reply(text, ctx)


def content_text(content) -> str:
    """A message's `content` as text, whatever shape the server sent: a string, None, a number, or a list of
    parts (strings, or dicts with a `text`)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list | tuple):
        parts = []
        for p in content:
            if isinstance(p, dict):
                parts.append(content_text(p.get("text", p.get("content"))))
            elif hasattr(p, "text"):
                parts.append(content_text(p.text))
            else:
                parts.append(content_text(p))
        return "".join(parts)
    if isinstance(content, dict):
        return content_text(content.get("text", content.get("content")))
    return str(content)


def parse_reply(text: str, ctx: Context) -> dict:
    """Validate an LLM reply into an action, or an {"kind": "invalid", ...} step description."""
    body = text.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", body, re.S)
    if fence:
        body = fence.group(1).strip()
    if "{" in body:
        body = body[body.index("{"): body.rindex("}") + 1] if "}" in body else body
    try:
        action = json.loads(body)
    except json.JSONDecodeError as e:
        return {"kind": "invalid", "outcome": "malformed-reply",
                "message": f"the reply is not one JSON object ({e.msg} at char {e.pos}): {text[:200]!r}"}
    if not isinstance(action, dict) or action.get("kind") not in ("skill", "edit", "tune", "stop"):
        return {"kind": "invalid", "outcome": "malformed-reply",
                "message": f"`kind` must be skill, edit, tune or stop; got {str(action)[:200]}"}
    if action["kind"] == "skill":
        names = {s.name: s for s in ctx.skills}
        skill = names.get(action.get("skill"))
        if skill is None:
            return {"kind": "invalid", "outcome": "malformed-reply",
                    "message": f"skill {action.get('skill')!r} is not applicable; choose from {sorted(names)}"}
        if skill.advisory:
            return {"kind": "invalid", "outcome": "malformed-reply",
                    "message": f"skill {skill.name} is advisory (no codemod): reply with an edit that applies it"}
        v = action.get("variant", 0)
        if not isinstance(v, int) or not 0 <= v < len(skill.variants):
            return {"kind": "invalid", "outcome": "malformed-reply",
                    "message": f"variant must be an int in [0, {len(skill.variants)})"}
        return {"kind": "skill", "skill": skill.name, "variant": v}
    if action["kind"] == "edit":
        src = action.get("source")
        if not isinstance(src, str) or not src.strip():
            return {"kind": "invalid", "outcome": "malformed-reply", "message": "edit needs a `source` string"}
        try:
            ast.parse(src)
        except SyntaxError as e:
            return {"kind": "invalid", "outcome": "parse-error",
                    "message": f"the edited source does not parse: line {e.lineno}: {e.msg}"}
        return {"kind": "edit", "source": src}
    return {"kind": action["kind"]}
