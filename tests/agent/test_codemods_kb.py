"""Codemods on stdlib-derived candidates keep formatting and comments, and the results still verify and still
match the reference; the knowledge base loads, covers the topics, and reports malformed skills."""

import pytest

from argus_agent.codemods import NotApplicable, apply_codemod
from argus_agent.kb import load_kb, parse_skill
from argus_agent.loop import Session

TOPICS = ["tiling", "shared-memory staging", "conflict-free swizzles", "async-copy pipelining",
          "warp specialization", "instruction scheduling", "vectorized access", "persistent grids", "split-K",
          "epilogue fusion", "online softmax", "causal block skipping", "MoE token grouping", "reduction trees",
          "register blocking"]

EXAMPLES = ["swish_add", "scaled_softmax", "rms_norm", "matmul_relu"]


@pytest.fixture(scope="module")
def kb():
    return load_kb()


@pytest.mark.parametrize("example", EXAMPLES)
def test_applicable_skills_keep_source_and_correctness(example, kb, examples, tmp_path):
    """Every skill the knowledge base offers for the lowered program either says why it does not fit or
    gives a candidate that still verifies and matches the reference, or is refused for a resource limit it
    names; at least one changes the kernel and stays correct."""
    session = Session(examples[example])
    session.work_dir = tmp_path
    before = session.first_source()
    changed = 0
    for sk in kb.applicable(before, session.pattern.kind, "sm_90a"):
        if sk.codemod == "advisory":   # advice for the LLM planner only
            continue
        for variant in sk.variants[:2]:
            try:
                after = apply_codemod(before, sk.codemod, variant)
            except NotApplicable:
                continue
            assert after != before, sk.name
            # comments and untouched lines survive byte for byte
            for line in before.splitlines():
                if line.strip().startswith("#"):
                    assert line in after, (sk.name, line)
            out = session.check(after)
            if out.outcome == "infeasible":   # over a resource limit: refused before it runs, saying which
                assert "limit" in out.message, (sk.name, variant, out.message)
                continue
            assert out.correct, (sk.name, variant, out.message)
            changed += 1
            assert out.verdict["status"] in ("verified", "skipped")
    assert changed >= 1


def test_not_applicable_says_why(examples):
    src = Session(examples["swish_add"]).first_source()
    with pytest.raises(NotApplicable, match="epilogue"):
        apply_codemod(src, "fuse_epilogue")


def test_knowledge_base_covers_the_topics(kb):
    assert len(kb.skills) >= 20 and not kb.problems
    topics = {s.path.read_text().split("topic: ")[1].splitlines()[0].strip() for s in kb.skills.values()}
    for t in TOPICS:
        assert t in topics, t
    for s in kb.skills.values():
        assert s.when and s.where and s.effect and s.lineage and s.codemod


def test_malformed_skills_are_reported_and_skipped(tmp_path):
    (tmp_path / "good.md").write_text("---\nname: good\nwhen: w\nwhere: x\nconditions: []\n"
                                      "codemod: {name: set_threads, variants: [{threads: 64}]}\n"
                                      "effect: e\nlineage: l\n---\n")
    (tmp_path / "no_effect.md").write_text("---\nname: bad1\nwhen: w\nwhere: x\nconditions: []\n"
                                           "codemod: advisory\nlineage: l\n---\n")
    (tmp_path / "bad_codemod.md").write_text("---\nname: bad2\nwhen: w\nwhere: x\nconditions: [has_call tp.mma]\n"
                                             "codemod: {name: teleport}\neffect: e\nlineage: l\n---\n")
    (tmp_path / "bad_yaml.md").write_text("---\nname: [unclosed\n---\n")
    (tmp_path / "bad_cond.md").write_text("---\nname: bad4\nwhen: w\nwhere: x\nconditions: [moon_phase full]\n"
                                          "codemod: advisory\neffect: e\nlineage: l\n---\n")
    kb = load_kb(tmp_path)
    assert list(kb.skills) == ["good"]
    got = {(p.file.split("/")[-1], p.field) for p in kb.problems}
    assert ("no_effect.md", "effect") in got
    assert ("bad_codemod.md", "codemod") in got
    assert ("bad_yaml.md", "front matter") in got
    assert ("bad_cond.md", "conditions") in got
    assert "no_effect.md: field `effect`" in str(next(p for p in kb.problems if p.field == "effect"))


def test_variant_arguments_are_checked():
    skill, problems = parse_skill("---\nname: s\nwhen: w\nwhere: x\nconditions: []\ncodemod: {name: set_threads, "
                                  "variants: [{warps: 4}]}\neffect: e\nlineage: l\n---\n", "s.md")
    assert skill is None and problems[0].field == "codemod" and "warps" in problems[0].message


def test_several_constexprs_at_once_equal_one_at_a_time():
    """SetConstexprs writes all defaults in one parse; the text is what chaining SetConstexpr gives."""
    from argus_agent.codemods import NotApplicable as NA
    from argus_agent.codemods import SetConstexpr, SetConstexprs
    from argus_agent.lower.templates import stdlib_source

    src = "import tilepy as tp\n" + stdlib_source("gemm_hopper")
    values = {"BM": "64", "STAGES": "3", "NOT_A_PARAM": "7"}
    chained = src
    for k, v in values.items():
        try:
            chained = SetConstexpr().apply(chained, name=k, value=v)
        except NA:
            pass
    assert chained != src and SetConstexprs().apply(src, values=values) == chained
    with pytest.raises(NA):
        SetConstexprs().apply(chained, values={"BM": "64"})     # already that value: nothing to change
