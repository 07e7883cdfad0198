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

CASES = [
    ("swish_add", "elementwise-block-size", 0),
    ("swish_add", "shared-memory-staging", 0),
    ("swish_add", "vectorized-access", 0),
    ("swish_add", "threads-per-block", 0),
    ("scaled_softmax", "epilogue-fusion", 0),
    ("scaled_softmax", "online-softmax", 0),
    ("scaled_softmax", "persistent-grid", 0),
    ("scaled_softmax", "reduction-tree", 0),
    ("rms_norm", "persistent-grid", 1),
    ("matmul_relu", "async-copy-pipelining", 0),
    ("matmul_relu", "conflict-free-swizzle", 0),
    ("matmul_relu", "instruction-scheduling", 0),
    ("matmul_relu", "gemm-block-tile", 2),
    ("matmul_relu", "register-blocking", 0),
    ("matmul_relu", "gemm-k-depth", 1),
    ("matmul_relu", "epilogue-fusion", 0),
]


@pytest.fixture(scope="module")
def kb():
    return load_kb()


@pytest.mark.parametrize("example,skill,variant", CASES)
def test_skill_codemod_keeps_source_and_correctness(example, skill, variant, kb, examples, tmp_path):
    session = Session(examples[example])
    session.work_dir = tmp_path
    before = session.first_source()
    sk = kb.skills[skill]
    assert sk.applicable(before, session.pattern.kind, "sm_90a")
    after = apply_codemod(before, sk.codemod, sk.variants[variant])
    assert after != before
    # comments and untouched lines survive byte for byte
    for line in before.splitlines():
        if line.strip().startswith("#") or "# " in line and "tp.store" not in line:
            assert line in after or line.split("#")[1] in after
    out = session.check(after)
    assert out.correct, out.message
    assert out.verdict["status"] in ("verified", "skipped")


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
