"""The `argus` CLI: commands, --json, exit codes, the HTML report."""

import json
import shutil

from click.testing import CliRunner

from argus_agent.cli import main


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_optimize_json_history_report_tune(examples, tmp_path):
    db, out = tmp_path / "h.db", tmp_path / "out"
    r = run("optimize", examples["swish_add"], "--budget", 3, "--out", out, "--db", db, "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout[r.stdout.index("{"):])
    assert data["status"] == "done" and data["best_speedup"] is None and data["timing"].startswith("skipped")
    assert (out / "model_new.py").exists()
    r = run("history", "--db", db, "--json")
    assert json.loads(r.stdout)[0]["id"] == data["run_id"]
    page = tmp_path / "r.html"
    r = run("report", data["run_id"], "--db", db, "--out", page)
    assert r.exit_code == 0 and "<svg" in page.read_text() and "ablation" in page.read_text()
    r = run("tune", out / "kernels.py", "--max-evals", 2, "--json", "--out", tmp_path / "tuned.py")
    assert r.exit_code == 0, r.output
    tuned = json.loads(r.stdout[r.stdout.index("{"):])
    assert tuned["method"].startswith(("exhaustive", "optuna")) and tuned["rows"]
    assert (tmp_path / "tuned.py").exists()
    assert run("report", 999, "--db", db).exit_code == 5


def test_unsupported_problem_exits_3(tmp_path):
    p = tmp_path / "histc.py"
    p.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                 "        return torch.histc(x + 1, bins=7)\n\ndef get_inputs():\n    return [torch.randn(4, 8)]\n\n"
                 "def get_init_inputs():\n    return []\n")
    r = run("optimize", p, "--db", tmp_path / "h.db")
    assert r.exit_code == 3 and "histc.py:4" in r.output and "aten.histc" in r.output


def test_kb_commands():
    r = run("kb", "list", "--json")
    assert r.exit_code == 0 and len(json.loads(r.stdout)["skills"]) >= 20
    assert "lineage:" in run("kb", "show", "online-softmax").stdout
    assert run("kb", "show", "nope").exit_code == 5


def test_verify_a_stdlib_kernel():
    import stdlib_kernels

    r = run("verify", stdlib_kernels.softmax.__file__, "--json")
    assert r.exit_code in (0, 4), r.output  # 4: tilepy_verify not installed
    assert json.loads(r.stdout)["status"] in ("verified", "skipped")


def test_report_page_renders_in_chromium_if_installed(examples, tmp_path):
    import subprocess

    import pytest

    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no chromium installed: the page is checked for well-formed SVG only")
    db = tmp_path / "h.db"
    r = run("optimize", examples["swish_add"], "--budget", 2, "--db", db, "--json")
    run_id = json.loads(r.stdout[r.stdout.index("{"):])["run_id"]
    page = tmp_path / "r.html"
    run("report", run_id, "--db", db, "--out", page)
    shot = tmp_path / "shot.png"
    subprocess.run([browser, "--headless", "--no-sandbox", f"--screenshot={shot}", page.as_uri()], timeout=60)
    assert shot.exists() and shot.stat().st_size > 1000


def test_report_svg_is_well_formed(examples, tmp_path, history):
    import xml.etree.ElementTree as ET

    from argus_agent.loop import optimize
    from argus_agent.report import render_report

    res = optimize(examples["scaled_softmax"], budget=3, history=history, tune_evals=2)
    page = render_report(history, res.run_id)
    for chunk in page.split("<svg")[1:]:
        ET.fromstring("<svg" + chunk.split("</svg>")[0] + "</svg>")
