"""Codemods and skill conditions find tilepy by qualified name, not by the literal alias `tp`: a candidate that
writes `import tilepy as tl` (or imports names from tilepy) gets the same skills and the same rewrites,
spelled its own way."""

import re

import numpy as np
import pytest

from argus_agent.codemods import NotApplicable, apply_codemod, kernels
from argus_agent.kb import load_kb
from argus_agent.loop import Session

EXAMPLES = ["swish_add", "scaled_softmax", "rms_norm", "matmul_relu"]


def respell(source: str, alias: str) -> str:
    """The same module with tilepy imported as `alias`."""
    source = source.replace("import tilepy as tp\n", f"import tilepy as {alias}\n")
    return re.sub(r"(?<![\w.])tp\.", alias + ".", source)


@pytest.fixture(scope="module")
def kb():
    return load_kb()


@pytest.mark.parametrize("example", EXAMPLES)
def test_alias_gets_the_same_skills_and_rewrites(example, kb, examples):
    src = Session(examples[example]).first_source()
    assert "import tilepy as tp\n" in src
    tl = respell(src, "tl")
    skills = [s.name for s in kb.applicable(src, Session(examples[example]).pattern.kind, "sm_90a")]
    skills_tl = [s.name for s in kb.applicable(tl, Session(examples[example]).pattern.kind, "sm_90a")]
    assert skills == skills_tl and skills
    rewrites = 0
    for name in skills:
        sk = kb.skills[name]
        if sk.codemod == "advisory":
            continue
        for variant in sk.variants[:2]:
            try:
                want = respell(apply_codemod(src, sk.codemod, variant), "tl")
            except NotApplicable:
                with pytest.raises(NotApplicable):
                    apply_codemod(tl, sk.codemod, variant)
                continue
            got = apply_codemod(tl, sk.codemod, variant)
            assert got == want, (name, variant)
            assert not re.search(r"(?<![\w.])tp\.", got), (name, "wrote `tp.` into a module that imports tl")
            rewrites += 1
    assert rewrites >= 1


FROM_IMPORT = '''\
import numpy as np
from tilepy import Tensor, block_id, constexpr, f32, load, store
from tilepy import kernel as tile_kernel


@tile_kernel(threads=128)
def scale(X: Tensor[f32, "N"], Y: Tensor[f32, "N"], BLOCK: constexpr = 256):
    i0 = block_id(0) * BLOCK
    x = load(X[i0:i0 + BLOCK])
    store(Y[i0:i0 + BLOCK], x * 3.0)
'''


def test_from_imports_are_found_and_new_code_gets_an_import(tmp_path):
    import libcst as cst

    assert [k.name.value for k in kernels(cst.parse_module(FROM_IMPORT))] == ["scale"]
    out = apply_codemod(FROM_IMPORT, "set_constexpr", {"name": "BLOCK", "value": "512"})
    assert "BLOCK: constexpr = 512" in out and "import tilepy as tp" not in out
    staged = apply_codemod(FROM_IMPORT, "stage_through_shared")
    assert "import tilepy as tp\n" in staged and "tp.shared((BLOCK,), f32)" in staged
    # the staged kernel still runs and computes the same thing
    path = tmp_path / "staged.py"
    path.write_text(staged)
    ns: dict = {}
    exec(compile(staged, str(path), "exec"), ns)
    x = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    y = np.zeros_like(x)
    ns["scale"][(4,)](x, y)
    np.testing.assert_allclose(y, 3.0 * x.astype(np.float64), rtol=1e-6)
