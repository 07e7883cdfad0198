"""measure_real_sizes.py times problems and reports failures per problem (smoke-tested at CPU sizes)."""

from __future__ import annotations

import json

from . import corpus, measure_real_sizes


def test_time_problem_at_cpu_sizes():
    path = corpus.ROOT / "level1" / "075_mm_square.py"
    record = measure_real_sizes.time_problem(path, device="cpu", cpu_sizes=True, iters=3, warmup=1)
    assert record["name"] == "level1/075_mm_square" and record["error"] is None
    assert 0 < record["median_us"] < 1e6


def test_a_failing_problem_is_recorded_not_raised(tmp_path):
    bad = tmp_path / "001_bad.py"
    bad.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x @ x\n"
                   "def get_inputs():\n    return [torch.randn(3, 4)]\ndef get_init_inputs():\n    return []\n"
                   "get_cpu_inputs, get_cpu_init_inputs = get_inputs, get_init_inputs\n")
    record = measure_real_sizes.time_problem(bad, device="cpu", cpu_sizes=True, iters=1)
    assert record["median_us"] is None and record["error"].startswith("RuntimeError")


def test_main_writes_json(tmp_path, monkeypatch, capsys):
    paths = [corpus.ROOT / "level1" / "001_relu.py", corpus.ROOT / "level2" / "007_conv2d_relu_bias_add.py"]
    monkeypatch.setattr(corpus, "problem_paths", lambda level=None: paths)
    out = tmp_path / "times.json"
    assert measure_real_sizes.main(["--device", "cpu", "--cpu-sizes", "--iters", "2", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert [p["name"] for p in data["problems"]] == ["level1/001_relu", "level2/007_conv2d_relu_bias_add"]
    assert data["device"] == "cpu" and data["cpu_sizes"] is True
    assert "at or above 50 us on cpu" in capsys.readouterr().out
