"""The LLM planner against a real HTTP server speaking the chat-completions protocol, with scripted replies."""

import json

from argus_agent.loop import optimize
from argus_agent.planner import LLMPlanner


def test_llm_run_survives_every_kind_of_bad_reply(fake_openai, history, examples, tmp_path):
    good = json.dumps({"kind": "skill", "skill": "reduction-tree", "variant": 0})
    server = fake_openai([
        good,                                                   # 1: a good edit
        "I think you should fuse things {not json",             # 2: malformed JSON
        json.dumps({"kind": "edit", "source": "def broken(:\n"}),  # 3: code that does not parse
        {"hold": 1.0, "content": good},                         # 4: too late for the 0.3 s client timeout
        "PLACEHOLDER",                                          # 5: an edit that computes the wrong thing
        {"status": 500},                                        # 6: the endpoint fails
        json.dumps({"kind": "skill", "skill": "no-such-skill"}),  # 7: unknown skill
    ])
    planner = LLMPlanner(server.base_url, "fake-model", api_key="test", timeout=0.3)
    problem = examples["scaled_softmax"]

    # Script reply 5 from the current candidate: same module, exp replaced by exp2 (a wrong result).
    original_propose = planner.propose

    def propose(ctx):
        if len(server.requests) == 4 and server.replies and server.replies[0] == "PLACEHOLDER":
            wrong = ctx.kernel_source.replace("tp.exp(", "tp.exp2(")
            server.replies[0] = json.dumps({"kind": "edit", "source": wrong})
        return original_propose(ctx)

    planner.propose = propose
    result = optimize(problem, target="cpu", budget=8, planner=planner, history=history, out_dir=tmp_path / "out")
    outcomes = [s.outcome for s in result.steps]
    assert outcomes[0] == "correct"                 # the template
    assert outcomes[1] == "correct"                 # the good skill
    assert outcomes[2] == "malformed-reply"
    assert outcomes[3] == "parse-error"
    assert outcomes[4] == "llm-timeout"
    assert outcomes[5] in ("test-failed", "verify-failed")
    assert outcomes[6] == "llm-error"
    assert outcomes[7] == "malformed-reply"
    assert result.status == "done"
    # the accepted kernel is the skill's, not the broken edit
    assert "tp.exp2(" not in result.best_source and "tp.exp(" in result.best_source
    # in-context RL: later prompts carry the trajectory with the failures fed back
    last = server.requests[-1]["body"]["messages"][-1]["content"]
    assert "malformed-reply" in last and "parse-error" in last and "llm-timeout" in last
    assert "wrong result" in last
    assert "## Applicable skills" in last and "## Current kernel module" in last
    assert server.requests[0]["body"]["model"] == "fake-model"


def test_llm_stop_ends_the_run(fake_openai, history, examples):
    server = fake_openai([json.dumps({"kind": "stop"})])
    planner = LLMPlanner(server.base_url, "m", api_key="k", timeout=5)
    result = optimize(examples["swish_add"], budget=5, planner=planner, history=history)
    assert len(result.steps) == 1 and result.status == "done"


def test_llm_fenced_json_and_tune(fake_openai, history, examples):
    server = fake_openai(["```json\n{\"kind\": \"tune\"}\n```"])
    planner = LLMPlanner(server.base_url, "m", api_key="k", timeout=5)
    result = optimize(examples["swish_add"], budget=2, planner=planner, history=history, tune_evals=3)
    assert result.steps[1].action["kind"] == "tune" and result.steps[1].outcome == "correct"


def test_without_the_llm_extra_the_cli_names_it(monkeypatch, examples, tmp_path):
    # openai is the [llm] extra: without it, asking for an LLM is a usage error naming the extra
    import sys

    from click.testing import CliRunner

    from argus_agent.cli import main

    monkeypatch.setitem(sys.modules, "openai", None)  # `import openai` raises ImportError
    r = CliRunner().invoke(main, ["optimize", str(examples["scaled_softmax"]), "--db", str(tmp_path / "h.db"),
                                  "--llm-base-url", "http://127.0.0.1:9/v1", "--model", "m"])
    assert r.exit_code == 2, r.output
    assert "argus-agent[llm]" in r.output and "Traceback" not in r.output
