"""The `argus` command line.

Exit codes: 0 success; 1 the work ran but failed (no correct kernel, verification errors, no correct tuning
point); 2 usage error (also: `--out` holds another problem's outputs, without `--force`); 3 the problem cannot
be handled (not KernelBench format, its code raises, or an op that cannot be lowered: the message names it);
4 a needed package or service is missing (e.g. tilepy_verify for `argus verify`, an unreachable LLM
endpoint); 5 unknown run, skill or file; 6 an identical run is in progress; 130 interrupted (Ctrl-C: the same
command resumes the run).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNSUPPORTED, EXIT_MISSING, EXIT_UNKNOWN = 0, 1, 2, 3, 4, 5
EXIT_BUSY, EXIT_INTERRUPTED = 6, 130
TARGETS = ["cpu", "sm_90a", "gfx942", "sm_80"]


def _history(db):
    from .history import History

    return History(db)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="argus-agent")
def main():
    """ARGUS: write, verify and tune tilepy kernels for PyTorch references (KernelBench format)."""


@main.command()
@click.argument("problem", type=click.Path(exists=True, dir_okay=False))
@click.option("--target", type=click.Choice(TARGETS), default="cpu", show_default=True,
              help="GPU target, or cpu for the interpreter (correctness only).")
@click.option("--budget", type=int, default=8, show_default=True, help="Candidates to try (template included).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Write model_new.py, kernels.py, summary.")
@click.option("--llm-base-url", envvar="OPENAI_BASE_URL", help="OpenAI-compatible endpoint (env OPENAI_BASE_URL).")
@click.option("--model", envvar="ARGUS_MODEL", help="Model name for the endpoint (env ARGUS_MODEL).")
@click.option("--api-key", envvar="OPENAI_API_KEY", help="API key (env OPENAI_API_KEY).")
@click.option("--llm-timeout", type=float, default=60.0, show_default=True, help="Seconds per LLM reply.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--cpu-scale", type=int, default=1, show_default=True,
              help="On the CPU, divide input sizes by this (problems may instead define get_cpu_inputs()).")
@click.option("--db", type=click.Path(dir_okay=False), help="History database (default $ARGUS_HOME/history.db).")
@click.option("--no-resume", is_flag=True, help="Start a new run even if an identical one was interrupted.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--force", is_flag=True, help="Replace another problem's outputs in --out (a backup is kept).")
@click.option("--precision", type=click.Choice(["fp32", "tf32", "bf16"]),
              help="What fp32 matmuls and convolutions compute at (default: PyTorch's settings, read at capture: "
                   "torch.backends.cuda.matmul.allow_tf32 / set_float32_matmul_precision, "
                   "torch.backends.cudnn.allow_tf32).")
@click.option("--stage-timeout", type=float, help="Seconds each candidate may spend per stage (build, verify, test, "
              "time); default 300/300/600/300.")
@click.option("--llm-max-failures", type=int, default=3, show_default=True,
              help="Stop after this many consecutive connection failures to the LLM endpoint.")
def optimize(problem, target, budget, out_dir, llm_base_url, model, api_key, llm_timeout, seed, cpu_scale, db,
             no_resume, as_json, force, stage_timeout, llm_max_failures, precision):
    """Produce a verified, tested (and, on a GPU, tuned and timed) tilepy kernel for PROBLEM.py.

    Outputs go to --out, by default $ARGUS_HOME/runs/<run id>-<problem>/ (~/.argus)."""
    _set_precision(precision, as_json)
    from .history import RunBusy
    from .loop import RunAborted, dumps
    from .loop import optimize as run_optimize
    from .lower import LoweringError as UnsupportedOpError
    from .outdir import OutDirError
    from .planner import LLMPlanner, OfflinePlanner
    from .problem import ProblemError

    if llm_base_url and not model:
        raise click.UsageError("--llm-base-url needs --model (or ARGUS_MODEL)")
    try:
        planner = (LLMPlanner(llm_base_url, model, api_key, timeout=llm_timeout,
                              max_connection_failures=llm_max_failures) if llm_base_url else OfflinePlanner(seed))
    except ImportError as e:  # the [llm] extra is not installed
        raise click.UsageError(str(e)) from None
    history = _history(db)
    with click.progressbar(length=budget, label=f"argus {Path(problem).name}", file=sys.stderr,
                           show_pos=True) as bar:
        def progress(step):
            bar.update(1)
            if not as_json:
                click.echo("\n  " + step.line(), err=True)

        def on_ablation(i, n, row):
            if not as_json:
                click.echo(f"\n  ablation {i}/{n}: without {row['removed']} -> "
                           f"{'correct' if row['correct'] else 'fails'}"
                           + (f", {row['speedup']:.3f}x" if row["speedup"] else ""), err=True)

        try:
            result = run_optimize(problem, target=target, budget=budget, out_dir=out_dir, planner=planner,
                                  history=history, seed=seed, cpu_scale=cpu_scale, progress=progress,
                                  resume=not no_resume, force=force, stage_timeout=stage_timeout,
                                  on_ablation=on_ablation)
        except (UnsupportedOpError, ProblemError) as e:
            _fail(f"cannot handle {problem}: {e}", EXIT_UNSUPPORTED)
        except OutDirError as e:
            _fail(str(e), EXIT_USAGE)
        except RunBusy as e:
            _fail(f"{problem}: {e}", EXIT_BUSY)
        except RunAborted as e:
            _fail(f"run stopped: {e}", EXIT_MISSING)
        except KeyboardInterrupt:
            _fail("interrupted; the run is marked so, and the same command resumes it", EXIT_INTERRUPTED)
    if as_json:
        click.echo(dumps(result))
    else:
        s = result.summary
        best = f"best candidate #{result.best_candidate}" if result.best_candidate is not None else "no correct kernel"
        click.echo(f"\nrun {result.run_id}: {result.status}; {s['pattern']}; {best}")
        click.echo("speedup: " + (f"{result.best_speedup:.3f}x (geometric mean)" if result.best_speedup else
                                  "not measured") + f"; timing: {s['timing']}")
        if result.out_dir:
            click.echo(f"wrote {result.out_dir}/model_new.py, kernels.py, summary.json, summary.md")
        click.echo(f"report: argus report {result.run_id}")
    sys.exit(EXIT_OK if result.status == "done" else EXIT_FAILED)


def _set_precision(precision, as_json: bool):
    """--precision for this run and the processes it starts (ARGUS_PRECISION); printed unless --json."""
    import os

    from .lower.precision import resolve

    if precision:
        os.environ["ARGUS_PRECISION"] = precision
    if not as_json:
        click.echo(f"precision: {resolve(None).describe()}")


def _fail(message: str, code: int):
    """One line (plus the hint lines a located error carries) on stderr, and the exit code."""
    click.echo(f"\nargus: {message}", err=True)
    sys.exit(code)


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--target", type=click.Choice(TARGETS), default="sm_90a", show_default=True)
@click.option("--json", "as_json", is_flag=True)
def verify(file, target, as_json):
    """Verify every @tp.kernel in FILE with tilepy_verify."""
    import tilepy as tp

    from .gates import verify_kernels
    from .problem import load_module

    try:
        module = load_module(file)
    except Exception as e:
        click.echo(f"argus: importing {file} failed: {type(e).__name__}: {e}", err=True)
        sys.exit(EXIT_UNKNOWN)
    ks = {k: v for k, v in vars(module).items() if isinstance(v, tp.Kernel)}
    if not ks:
        click.echo(f"argus: {file} defines no @tp.kernel", err=True)
        sys.exit(EXIT_UNKNOWN)
    verdict = verify_kernels(ks, target)
    if as_json:
        click.echo(json.dumps(verdict.to_dict(), indent=2))
    else:
        click.echo(f"{verdict.status}: {verdict.message}")
        for f in verdict.findings:
            click.echo(f"  [{f['severity']}] {f['kernel']}: {f['check']}: {f['message']}")
    sys.exit({"verified": EXIT_OK, "failed": EXIT_FAILED, "skipped": EXIT_MISSING}[verdict.status])


@main.command()
@click.argument("kernel_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--problem", type=click.Path(exists=True, dir_okay=False),
              help="The reference problem (default: ARGUS_PROBLEM in KERNEL.py, as `argus optimize --out` writes).")
@click.option("--target", type=click.Choice(TARGETS), default="cpu", show_default=True)
@click.option("--max-evals", type=int, default=16, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", "out_file", type=click.Path(dir_okay=False), help="Write the tuned module here.")
@click.option("--json", "as_json", is_flag=True)
def tune(kernel_file, problem, target, max_evals, seed, out_file, as_json):
    """Tune the constexprs of a candidate module (kernels + argus_forward) against its problem."""
    from .loop import Session
    from .lower import LoweringError as UnsupportedOpError
    from .problem import ProblemError
    from .tuner import make_template
    from .tuner import tune as run_tune

    source = Path(kernel_file).read_text()
    if problem is None:
        import re

        found = re.search(r"^ARGUS_PROBLEM = ['\"](.+)['\"]$", source, re.M)
        if not found:
            raise click.UsageError("pass --problem (KERNEL.py has no ARGUS_PROBLEM line)")
        problem = found.group(1)
    try:
        session = Session(problem, target)
    except (UnsupportedOpError, ProblemError) as e:
        click.echo(f"argus: cannot handle {problem}: {e}", err=True)
        sys.exit(EXIT_UNSUPPORTED)
    tpl = make_template(source)
    n = min(max_evals, tpl.size())
    with click.progressbar(length=n, label="tuning", file=sys.stderr, show_pos=True) as bar:
        res = run_tune(source, lambda s: session.check(s).evaluation or _rejected(), target, session.work_dir,
                       max_evals=max_evals, seed=seed, progress=lambda: bar.update(1), feasible=session.feasibility,
                       feasible_many=session.feasibility_many)
    if out_file:
        Path(out_file).write_text(res.best_source)
    if as_json:
        click.echo(json.dumps(res.to_dict() | {"space": tpl.params, "fixed": tpl.fixed}, indent=2, default=str))
    else:
        click.echo(f"search: {res.method}; space {tpl.size()} points; fixed by the host: {', '.join(tpl.fixed) or '-'}")
        click.echo(f"timing: {res.timing}")
        for r in res.rows:
            status = "infeasible" if not r["feasible"] else ("correct" if r["correct"] else "wrong")
            sp = f"{r['speedup']:.3f}x" if r["speedup"] else "-"
            click.echo(f"  {status:<10} {sp:>8}  {r['point']}  {_one_line(r['note'])}")
        click.echo(f"best: {res.best_point}" + (f" at {res.best_speedup:.3f}x" if res.best_speedup else
                                                " (kept: without timings no point beats the current one)"))
    ok = any(r["correct"] for r in res.rows)
    sys.exit(EXIT_OK if ok else EXIT_FAILED)


def _one_line(note: str) -> str:
    """A multi-line located message (file:line:col: kind: message / source / caret / hint) on one line."""
    lines = [ln.strip() for ln in (note or "").splitlines() if ln.strip() and set(ln.strip()) != {"^"}]
    if len(lines) >= 3 and lines[-1].startswith("hint:"):
        lines = [lines[0], lines[-1]]   # drop the source excerpt, keep what and what to do
    return " | ".join(lines)


def _rejected():
    from .evaluate import Evaluation

    return Evaluation(False, "rejected before testing")


@main.group()
def kb():
    """The knowledge base of optimization skills (kb/)."""


@kb.command("list")
@click.option("--dir", "kb_dir", type=click.Path(file_okay=False), help="Another skills directory.")
@click.option("--json", "as_json", is_flag=True)
def kb_list(kb_dir, as_json):
    """List the skills, and any malformed skill files (by file and field)."""
    from .kb import load_kb

    kbase = load_kb(kb_dir)
    if as_json:
        click.echo(json.dumps({"skills": [s.summary() for s in kbase.skills.values()],
                               "problems": [str(p) for p in kbase.problems]}, indent=2))
    else:
        for s in kbase.skills.values():
            click.echo(f"{s.name:<28} {s.codemod:<22} {s.when[:70]}")
        for p in kbase.problems:
            click.echo(f"skipped: {p}", err=True)
    sys.exit(EXIT_OK if not kbase.problems else EXIT_FAILED)


@kb.command("show")
@click.argument("name")
@click.option("--dir", "kb_dir", type=click.Path(file_okay=False))
def kb_show(name, kb_dir):
    """Show one skill's file."""
    from .kb import load_kb

    kbase = load_kb(kb_dir)
    if name not in kbase.skills:
        click.echo(f"argus: no skill {name!r}; known: {', '.join(kbase.skills)}", err=True)
        sys.exit(EXIT_UNKNOWN)
    click.echo(kbase.skills[name].path.read_text())


@main.command()
@click.option("--db", type=click.Path(dir_okay=False))
@click.option("--limit", type=int, default=30, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def history(db, limit, as_json):
    """List recorded runs."""
    runs = _history(db).runs(limit)
    if as_json:
        click.echo(json.dumps(runs, indent=2, default=str))
        return
    click.echo(f"{'run':>4}  {'problem':<22} {'target':<7} {'planner':<8} {'status':<11} {'cands':>5}  best")
    for r in runs:
        best = "-" if r["best_candidate"] is None else f"#{r['best_candidate']}"
        click.echo(f"{r['id']:>4}  {r['problem'][:22]:<22} {r['target']:<7} {r['planner']:<8} {r['status']:<11} "
                   f"{r['n']:>5}  {best}")


@main.command()
@click.argument("run_id", type=int)
@click.option("--db", type=click.Path(dir_okay=False))
@click.option("--out", "out_file", type=click.Path(dir_okay=False),
              help="Default: $ARGUS_HOME/reports/argus-run-<id>.html")
@click.option("--suite", "is_suite", is_flag=True, help="RUN_ID is a suite id (`argus suite` prints it).")
def report(run_id, db, out_file, is_suite):
    """Write an HTML report (plots: progress over iterations, ablation of the best kernel; for a suite: fast_p
    and a speedup histogram)."""
    from .report import render_report, render_suite_report

    h = _history(db)
    try:
        page = render_suite_report(h, run_id) if is_suite else render_report(h, run_id)
    except KeyError as e:
        click.echo(f"argus: {e.args[0]}", err=True)
        sys.exit(EXIT_UNKNOWN)
    from .history import default_home

    name = f"argus-suite-{run_id}.html" if is_suite else f"argus-run-{run_id}.html"
    path = Path(out_file) if out_file else default_home() / "reports" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page)
    click.echo(str(path))


@main.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--target", type=click.Choice(TARGETS), default="cpu", show_default=True)
@click.option("--budget", type=int, default=8, show_default=True, help="Candidates per problem.")
@click.option("--json", "as_json", is_flag=True, help='Print {"problems": [...], "fast_p": {...}}.')
@click.option("--workers", type=int, help="Local worker processes (default: one per GPU for a GPU target, else 1).")
@click.option("--ray", "ray_address", help="Run one Ray task per problem (num_gpus=1 on a GPU target) on the "
              "cluster at this address ('auto', 'ray://host:10001'), or 'local' to start a local Ray instance. "
              "Needs argus-agent[cluster].")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--db", type=click.Path(dir_okay=False), help="History database (default $ARGUS_HOME/history.db).")
@click.option("--no-resume", is_flag=True, help="Start a new suite even if an identical one is unfinished.")
@click.option("--stage-timeout", type=float, help="Seconds each candidate may spend per stage.")
@click.option("--precision", type=click.Choice(["fp32", "tf32", "bf16"]),
              help="What fp32 matmuls and convolutions compute at (default: PyTorch's settings, read at capture: "
                   "torch.backends.cuda.matmul.allow_tf32 / set_float32_matmul_precision, "
                   "torch.backends.cudnn.allow_tf32).")
def suite(directory, target, budget, as_json, workers, ray_address, seed, db, no_resume, stage_timeout, precision):
    """Run every problem file in DIRECTORY through optimize; print a table, fast_p and the solved share."""
    _set_precision(precision, as_json)
    from .suite import SuiteError, run_suite, suite_json, suite_table

    def progress(i, n, row):
        if not as_json:
            status = "correct" if row["correct"] else f"failed: {row.get('error') or ''}"
            sp = f" {row['speedup_eager']:.3f}x" if row.get("speedup_eager") else ""
            click.echo(f"[{i}/{n}] {row['name']}: {status}{sp} ({row.get('worker', '')}, "
                       f"{row.get('seconds', 0):.1f} s)", err=True)

    try:
        suite_id, rows, _ = run_suite(directory, target, budget, history=_history(db), seed=seed, workers=workers,
                                      ray_address=ray_address, resume=not no_resume, stage_timeout=stage_timeout,
                                      progress=progress)
    except SuiteError as e:
        _fail(str(e), EXIT_MISSING if "Ray" in str(e) else EXIT_USAGE)
    except KeyboardInterrupt:
        _fail("interrupted; the same command resumes the suite", EXIT_INTERRUPTED)
    if as_json:
        click.echo(json.dumps(suite_json(rows) | {"suite_id": suite_id}, indent=2))
    else:
        click.echo(suite_table(rows))
        click.echo(f"suite {suite_id}; report: argus report --suite {suite_id}")
    sys.exit(EXIT_OK)


@main.command()
@click.option("--example", default="scaled_softmax", show_default=True, help="Built-in example problem.")
@click.option("--budget", type=int, default=6, show_default=True)
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Default: $ARGUS_HOME/demo (~/.argus/demo).")
def demo(example, budget, out_dir):
    """The built-in example: stdlib kernels on the interpreter, then the agent on a built-in problem."""
    from .history import default_db

    out_dir = out_dir or str(default_db().parent / "demo")
    from .demo import main as stdlib_demo
    from .examples import EXAMPLES
    from .loop import optimize as run_optimize

    code = stdlib_demo()
    if example not in EXAMPLES:
        raise click.UsageError(f"unknown example {example!r}; built-in: {', '.join(EXAMPLES)}")
    path = EXAMPLES[example]
    shown = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
    click.echo(f"\nargus optimize {shown} --target cpu --budget {budget} --out {out_dir}   (offline planner, no LLM)")
    db = Path(out_dir) / "history.db"
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    result = run_optimize(EXAMPLES[example], target="cpu", budget=budget, out_dir=out_dir, history=_history(db),
                          resume=False, force=True, progress=lambda s: click.echo("  " + s.line()))
    from .report import render_report

    page = Path(out_dir) / f"report-{result.run_id}.html"
    page.write_text(render_report(_history(db), result.run_id))
    click.echo(f"\n{result.status}: best candidate #{result.best_candidate}; speedup "
               f"{f'{result.best_speedup:.3f}x' if result.best_speedup else 'not measured'} ({result.timing})")
    click.echo(f"wrote {out_dir}/model_new.py and {page}")
    sys.exit(code or (EXIT_OK if result.status == "done" else EXIT_FAILED))


if __name__ == "__main__":  # pragma: no cover
    main(prog_name=os.path.basename(sys.argv[0]))
