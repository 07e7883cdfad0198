"""The evaluation's timing fields: eager and CUDA-graph-replay figures side by side (no GPU needed: the trials
carry the figures a GPU run would measure)."""

import math

import torch

from argus_agent.evaluate import Trial, finish


def _trials(graph_new, note=""):
    return [Trial("4x8", True, 0.0, ref_ms=2.0, new_ms=1.0, ref_graph_ms=1.0, new_graph_ms=graph_new[0],
                  graph_note=note),
            Trial("8x8", True, 0.0, ref_ms=4.0, new_ms=1.0, ref_graph_ms=2.0, new_graph_ms=graph_new[1],
                  graph_note=note)]


def test_finish_reports_eager_and_graph_speedups(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "a GPU")
    ev = finish(_trials([0.5, 4.0]), 2, 3, 2, True, "", 20, 100)
    assert math.isclose(ev.speedup, math.sqrt(2.0 * 4.0))
    assert math.isclose(ev.graph_speedup, math.sqrt(2.0 * 0.5))
    assert "CUDA-graph replay 1.000x" in ev.timing
    d = ev.to_dict()
    assert d["graph_speedup"] == ev.graph_speedup and d["trials"][0]["new_graph_ms"] == 0.5


def test_finish_says_why_there_is_no_graph_figure(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "a GPU")
    ev = finish(_trials([None, None], "capturing forward failed: RuntimeError: sync"), 2, 3, 2, True, "", 20, 100)
    assert ev.graph_speedup is None and ev.speedup is not None
    assert "no CUDA-graph figure (capturing forward failed" in ev.timing
    ev = finish(_trials([None, None]), 2, 3, 2, False, "no GPU", 20, 100)
    assert ev.graph_speedup is None and ev.timing == "skipped: no GPU"
