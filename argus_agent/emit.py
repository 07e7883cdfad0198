"""Outputs of a run: `model_new.py` (KernelBench's ModelNew), the kernels' source and a summary."""

from __future__ import annotations

import json
from pathlib import Path

MODEL_NEW = '''

# --------------------------------------------------------------------------------------------------------
# ARGUS: ModelNew has Model's constructor (same arguments, and the same parameters under the same seed);
# its forward runs the tilepy kernels below (on the CPU interpreter for CPU tensors, compiled through
# tilepy_hip for CUDA tensors).
# --------------------------------------------------------------------------------------------------------

{kernels}


class ModelNew(Model):
    def forward(self, *inputs):
        return argus_forward(self, *inputs)
'''


def model_new_source(problem_source: str, kernel_source: str) -> str:
    return problem_source.rstrip() + "\n" + MODEL_NEW.format(kernels=kernel_source.strip())


def write_outputs(out: Path, problem, kernel_source: str, summary: dict) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "model_new.py", out / "kernels.py", out / "summary.json", out / "summary.md"]
    paths[0].write_text(model_new_source(problem.source, kernel_source))
    paths[1].write_text(f"ARGUS_PROBLEM = {str(problem.path.resolve())!r}\n" + kernel_source)
    paths[2].write_text(json.dumps(summary, indent=2, default=str) + "\n")
    sp = summary.get("best_speedup")
    lines = [f"# ARGUS: {summary['problem']} on {summary['target']}", "",
             f"- kernel: {summary['pattern']}",
             f"- correct: {summary['correct']}",
             f"- speedup: {f'{sp:.3f}x (geometric mean over the test shapes)' if sp else 'not measured'}",
             f"- timing: {summary['timing']}", "", "| # | action | outcome | speedup |", "|---|---|---|---|"]
    for s in summary["steps"]:
        lines.append(f"| {s['iteration']} | {s['action']} | {s['outcome']} | "
                     f"{_x(s['speedup'])} |")
    paths[3].write_text("\n".join(lines) + "\n")
    return paths


def _x(speedup) -> str:
    return f"{speedup:.3f}x" if speedup else "-"
