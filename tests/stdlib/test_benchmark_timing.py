"""benchmarks/timing.py's paired timer (issue 15 item 7), on fake replays (no GPU, nothing timed): the graphs are
replayed in turn, the order reversed every other round, and the ratio is the median of the rounds' ratios, so a clock
that moves between rounds moves ours and the peer alike; benchmarks/gemm.py's rows carry the pairs' fields."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import timing  # noqa: E402


class Clock:
    """A GPU whose clock runs slower by `factor` from its `step`-th replay on (counted over every graph), or drifts by
    `drift` a replay; `true` gives each graph's seconds per call at full clock."""

    def __init__(self, true, step=None, factor=1.0, drift=0.0):
        self.true, self.step, self.factor, self.drift, self.calls = true, step, factor, drift, []

    def replay(self, name):
        n = len(self.calls)
        self.calls.append(name)
        slow = (self.factor if self.step is not None and n >= self.step else 1.0) * (1.0 + self.drift * n)
        return self.true[name] * slow


def test_interleave_alternates_the_order_every_round():
    clock = Clock({"ours": 1.0, "peer": 2.0, "fast": 3.0})
    times = timing.interleave([lambda n=n: clock.replay(n) for n in ("ours", "peer", "fast")], replays=4)
    assert clock.calls == ["ours", "peer", "fast", "fast", "peer", "ours"] * 2
    assert [len(t) for t in times] == [4, 4, 4]
    assert times == [[1.0] * 4, [2.0] * 4, [3.0] * 4]
    with pytest.raises(ValueError):
        timing.interleave([lambda: 1.0], replays=0)


def test_pair_stats_median_quartiles_and_spread():
    ours = [1.0, 1.0, 1.0, 1.0, 1.0]
    peer = [0.9, 1.3, 1.0, 1.1, 1.2]
    p = timing.pair_stats(ours, peer)
    assert (p.ours, p.peer, p.ratio, p.rounds) == (1.0, 1.1, 1.1, 5)
    assert (p.ratio_min, p.ratio_q1, p.ratio_q3, p.ratio_max) == pytest.approx((0.9, 1.0, 1.2, 1.3))
    # the ratios are taken round by round, not between the medians
    p = timing.pair_stats([1.0, 2.0, 4.0], [2.0, 2.0, 2.0])
    assert (p.ours, p.peer, p.ratio, p.ratio_min, p.ratio_max) == (2.0, 2.0, 1.0, 0.5, 2.0)
    one = timing.pair_stats([2.0], [3.0])
    assert (one.ratio, one.ratio_min, one.ratio_q1, one.ratio_q3, one.ratio_max) == (1.5,) * 5
    with pytest.raises(ValueError):
        timing.pair_stats([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        timing.pair_stats([], [])


@pytest.fixture
def fake_graphs(monkeypatch):
    """timing's graph building and replay on a fake Clock: a 'function' is its name (or a list of names, rotated
    sets), a graph replays the first."""
    state = {}

    def graph_of(fn, reps=20):
        return (fn[0] if isinstance(fn, (list, tuple)) else fn), reps

    monkeypatch.setattr(timing, "graph_of", graph_of)
    monkeypatch.setattr(timing, "replay_seconds", lambda gr: state["clock"].replay(gr[0]))
    return state


def test_a_clock_step_moves_ours_and_the_peer_alike(fake_graphs):
    # the peer takes 1.25x ours; the clock slows by 1.3 at the 31st replay of 60
    fake_graphs["clock"] = Clock({"ours": 100e-6, "peer": 125e-6}, step=31, factor=1.3)
    p = timing.paired_graph_seconds(["ours", "ours"], "peer", replays=30)
    assert p.ratio == pytest.approx(1.25, rel=1e-12) and p.rounds == 30
    # the medians' ratio is not: the straddling round's fast peer / slow ours put the step in ours' median alone
    assert (p.ours, p.peer) == pytest.approx(((100e-6 + 130e-6) / 2, 125e-6), rel=1e-12)
    assert p.ratio_q1 == pytest.approx(1.25, rel=1e-12) and p.ratio_q3 == pytest.approx(1.25, rel=1e-12)
    # only the round the step fell in (round 15: peer then ours, the step between them) is off
    assert p.ratio_min == pytest.approx(1.25 / 1.3) and p.ratio_max == pytest.approx(1.25, rel=1e-12)
    # timed whole, one after the other (graph_seconds' way), the same step reads as a 1.3x difference
    fake_graphs["clock"] = Clock({"ours": 100e-6, "peer": 125e-6}, step=30, factor=1.3)
    whole = [timing.graph_seconds(f, replays=30) for f in ("ours", "peer")]
    assert whole[1] / whole[0] == pytest.approx(1.25 * 1.3)


def test_a_steady_drift_cancels_in_the_median_of_the_reversed_rounds(fake_graphs):
    fake_graphs["clock"] = Clock({"ours": 1.0, "peer": 0.8}, drift=0.01)
    p = timing.paired_graph_seconds("ours", "peer", replays=30)
    assert abs(p.ratio - 0.8) < 0.8 * 0.0005         # the rounds' ratios 0.8 (1 +- ~0.01) alternately
    assert p.ratio_min < 0.8 < p.ratio_max


def test_interleaved_graph_seconds_builds_one_graph_a_function(fake_graphs, monkeypatch):
    built = []
    graph_of = timing.graph_of
    monkeypatch.setattr(timing, "graph_of", lambda fn, reps=20: built.append((fn, reps)) or graph_of(fn, reps))
    fake_graphs["clock"] = Clock({"a": 1.0, "b": 2.0, "c": 3.0})
    times = timing.interleaved_graph_seconds(["a", ["b", "b"], "c"], reps=10, replays=3)
    assert built == [("a", 10), (["b", "b"], 10), ("c", 10)]
    assert times == [[1.0] * 3, [2.0] * 3, [3.0] * 3]
    assert fake_graphs["clock"].calls == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]


def test_gemm_rows_carry_the_pairs():
    import gemm as gb  # benchmarks/gemm.py

    p = timing.pair_stats([1e-6, 2e-6, 1e-6], [1.1e-6, 2.4e-6, 1.0e-6])
    assert gb._pairs(p) == {"ratio_pairs": pytest.approx(1.1), "ratio_pairs_rounds": 3,
                            "ratio_pairs_spread": pytest.approx([1.0, 1.05, 1.15, 1.2])}
    hot = gb._hot(p)
    assert (hot["us_hot"], hot["torch_us_hot"]) == pytest.approx((1.0, 1.1))
    assert hot["ratio_hot"] == pytest.approx(1.1) and hot["ratio_hot_pairs"] == pytest.approx(1.1)
    assert set(gb._pairs(p, "gemm_only_ratio")) == {"gemm_only_ratio_pairs", "gemm_only_ratio_pairs_spread",
                                                    "gemm_only_ratio_pairs_rounds"}
