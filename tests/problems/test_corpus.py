"""Keeps the problem corpus honest.

Every problem file imports, follows the format, runs at its CPU sizes with finite outputs, is deterministic under a
seed, keeps its CPU sizes small and its real sizes big (measured on the meta device, nothing allocated), runs at the
agent harness's varied test shapes, and exports with `torch.export`. The corpus as a whole is large enough and covers
every op family that issue 12 asks the lowering to handle, checked on the exported core-ATen graphs.
"""

from __future__ import annotations

import functools
import math
import re
from collections import defaultdict

import pytest
import torch
import torch.nn as nn
from torch.utils._pytree import tree_leaves

from . import corpus

PATHS = corpus.problem_paths()
IDS = [corpus.problem_id(p) for p in PATHS]

# CPU sizes: the interpreter must run every problem in milliseconds.
CPU_MAX_TENSOR_ELEMENTS = 4200
CPU_MAX_INPUT_ELEMENTS = 20_000
CPU_MAX_PARAM_ELEMENTS = 20_000
# Real sizes: big enough that the eager reference takes >= ~50 us on an H100 (a roofline lower bound of 30 us; the
# reference never reaches peak), small enough to fit beside the reference and a candidate.
REAL_MIN_ROOFLINE_S = 30e-6
REAL_MAX_INPUT_BYTES = 2e9
REAL_MAX_TENSOR_BYTES = 8 * 2**30


def _outputs(out) -> list[torch.Tensor]:
    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]


def _assert_finite(out, what: str):
    for t in _outputs(out):
        if t.dtype.is_floating_point:
            assert torch.isfinite(t).all(), f"{what}: non-finite output"


def _signature(values) -> list:
    """What must agree between real and CPU sizes: kinds, ranks and dtypes of tensors; plain values' types."""
    return [("tensor", v.dim(), v.dtype) if isinstance(v, torch.Tensor) else ("value", type(v)) for v in values]


# --- the corpus as a whole -------------------------------------------------------------------------------------------

def test_corpus_size():
    level1, level2 = corpus.problem_paths("level1"), corpus.problem_paths("level2")
    assert len(level1) >= 70, len(level1)
    assert len(level2) >= 50, len(level2)
    assert len(PATHS) >= 120


def test_file_names_are_numbered_and_descriptive():
    for level in corpus.LEVELS:
        numbers = []
        for path in corpus.problem_paths(level):
            match = corpus.NAME.match(path.name)
            assert match, f"{path.name}: expected NNN_words.py"
            assert len(path.stem.split("_")) >= 2
            numbers.append(int(match.group(1)))
        assert len(numbers) == len(set(numbers)), f"{level}: duplicate problem numbers"


# --- each problem ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_format_and_cpu_run(path):
    module = corpus.load(path)
    assert isinstance(getattr(module, "Model", None), type) and issubclass(module.Model, nn.Module)
    doc = (module.Model.__doc__ or "").strip()
    assert doc and "\n" not in doc, "Model needs a one-line docstring saying what it computes"
    for name in corpus.FUNCTIONS:
        assert callable(getattr(module, name, None)), f"missing {name}()"
    assert _signature(module.get_init_inputs()) == _signature(module.get_cpu_init_inputs()), \
        "real and CPU constructor arguments differ in kind"

    model, inputs = corpus.build(module, cpu=True)
    with torch.no_grad():
        out = model(*inputs)
    assert _outputs(out), "forward returns no tensor"
    _assert_finite(out, "CPU sizes")

    # Deterministic under a seed (parameters from torch's default init), with eval-mode semantics.
    again, _ = corpus.build(module, cpu=True)
    state, state_again = model.state_dict(), again.state_dict()
    assert state.keys() == state_again.keys() and all(torch.equal(state[k], state_again[k]) for k in state)
    assert not any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules()), "dropout"
    with torch.no_grad():
        for x, y in zip(_outputs(out), _outputs(again(*inputs))):
            assert torch.equal(x, y), "two runs of the same seeded model differ"
    # A second draw of inputs (the harness draws its own) must be as well behaved.
    torch.manual_seed(1)
    with torch.no_grad():
        _assert_finite(model(*module.get_cpu_inputs()), "CPU sizes, second draw")


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_cpu_sizes_are_small(path):
    module = corpus.load(path)
    model, inputs = corpus.build(module, cpu=True)
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    assert max(t.numel() for t in tensors) <= CPU_MAX_TENSOR_ELEMENTS
    assert sum(t.numel() for t in tensors) <= CPU_MAX_INPUT_ELEMENTS
    assert sum(p.numel() for p in model.parameters()) <= CPU_MAX_PARAM_ELEMENTS


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_real_sizes_are_big_and_keep_the_structure(path):
    module = corpus.load(path)
    with torch.device("meta"):
        real = list(module.get_inputs())
    cpu = list(module.get_cpu_inputs())
    assert _signature(real) == _signature(cpu), "CPU sizes must keep the real sizes' ranks and dtypes"
    assert [v for v in real if not isinstance(v, torch.Tensor)] == [v for v in cpu if not isinstance(v, torch.Tensor)]

    profile = corpus.real_size_profile(module)
    assert profile["input_bytes"] < REAL_MAX_INPUT_BYTES
    assert profile["largest_tensor_bytes"] <= REAL_MAX_TENSOR_BYTES
    seconds = corpus.roofline_seconds(profile)
    assert seconds >= REAL_MIN_ROOFLINE_S, f"real sizes too small: the H100 roofline bound is {seconds * 1e6:.1f} us"


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_runs_at_the_harness_test_shapes(path):
    """The agent's harness varies every size that is not a parameter's; each problem must stay well formed."""
    from argus_agent.problem import load_problem

    problem = load_problem(path, cpu=True)
    model = problem.make_model()
    generator = torch.Generator().manual_seed(0)
    for shapes in problem.shapes():
        with torch.no_grad():
            _assert_finite(model(*problem.draw_inputs(shapes, generator)), f"harness shapes {shapes}")


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_exports(path):
    """`torch.export` captures every problem as the lowering will, and the capture computes what eager does."""
    model, inputs = corpus.build(corpus.load(path), cpu=True)
    exported = torch.export.export(model, tuple(inputs))
    with torch.no_grad():
        expected = _outputs(model(*inputs))
        got = _outputs(exported.module()(*inputs))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5, equal_nan=False)


# --- coverage of the op families, on the exported graphs -------------------------------------------------------------

class _Level(nn.Module):
    """All of a level's models in one module, so that one export and one `run_decompositions` serve the level."""

    def __init__(self, models):
        super().__init__()
        self.models = nn.ModuleList(models)

    def forward(self, inputs):
        return [m(*args) for m, args in zip(self.models, inputs)]


class Graphs:
    """One level's exported graph before decompositions (`pre`) and in core ATen (`core`)."""

    def __init__(self, level: str):
        built = [corpus.build(corpus.load(p), cpu=True) for p in corpus.problem_paths(level)]
        models, inputs = [m for m, _ in built], [i for _, i in built]
        self.pre = torch.export.export(_Level(models), (inputs,))
        self.core = self.pre.run_decompositions()
        self.inputs = inputs

    @staticmethod
    def calls(program):
        return [n for n in program.graph.nodes
                if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)]

    @staticmethod
    def names(program) -> set[str]:
        """Op packet names, 'aten.convolution' for aten.convolution.default."""
        return {str(n.target.overloadpacket) for n in Graphs.calls(program)}

    def problem_of(self, node) -> int:
        """Which problem of the level a core-ATen node belongs to (its module stack starts at models.<i>)."""
        for path, _ in node.meta["nn_module_stack"].values():
            match = re.match(r"models\.(\d+)$", path)
            if match:
                return int(match.group(1))
        raise AssertionError(f"{node} has no problem in its module stack")


@functools.cache
def _graphs(level: str) -> Graphs:
    return Graphs(level)


def _val(node, i):
    arg = node.args[i] if i < len(node.args) else None
    return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg


def _rank(node, i=0) -> int:
    return _val(node, i).dim()


def _conv(node, transposed: bool, rank: int) -> bool:
    return node.args[6] == transposed and _rank(node, 1) == rank


def _reduction_dims(node):
    dims = node.args[1] if len(node.args) > 1 else None
    return [dims] if isinstance(dims, int) else list(dims or [])


def _keepdim(node) -> bool:
    return bool(node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False))


def _softmax_dim(node) -> int:
    return node.args[1] % _rank(node)


def _pointwise(node) -> bool:
    return torch.Tag.pointwise in node.target.tags


def _broadcasts(node) -> bool:
    tensors = [a.meta["val"] for a in node.args if isinstance(a, torch.fx.Node)]
    return len(tensors) == 2 and tensors[0].shape != tensors[1].shape


def _scalar_operand(node) -> bool:
    return any(isinstance(a, (int, float)) and not isinstance(a, bool) for a in node.args[1:])


def _causal(node) -> bool:
    return bool(node.args[5] if len(node.args) > 5 else node.kwargs.get("is_causal", False))


def _pool(node, attr: int, test) -> bool:
    return len(node.args) > attr and test(node.args[attr])


# Each family of issue 12 maps to a predicate over the core-ATen call nodes (after run_decompositions) or, for the
# ops that decompositions dissolve into simpler ones (activations, norms by name, losses, attention), over the op
# names that torch.export captures before decomposing. 'core:NAME' means an op of that packet name is present.
LEVEL1_FAMILIES = {
    # pointwise
    "activations": ["pre:aten.relu", "pre:aten.gelu", "pre:aten.mish", "pre:aten.softplus", "pre:aten.elu",
                    "pre:aten.selu", "pre:aten.hardswish", "pre:aten.hardsigmoid", "pre:aten.leaky_relu",
                    "pre:aten.log_sigmoid", "pre:aten.silu", "pre:aten.sigmoid", "pre:aten.tanh", "pre:aten.hardtanh"],
    "softsign (x / (1 + |x|))": ["core:aten.abs", "core:aten.div"],
    "arithmetic": ["core:aten.add", "core:aten.sub", "core:aten.mul", "core:aten.div", "core:aten.neg"],
    "broadcasting binary op": [lambda n: n.target.overloadpacket in (torch.ops.aten.add, torch.ops.aten.sub,
                                                                      torch.ops.aten.mul, torch.ops.aten.div,
                                                                      torch.ops.aten.maximum) and _broadcasts(n)],
    "scalar operand": [lambda n: _pointwise(n) and _scalar_operand(n)],
    "where and comparisons": ["core:aten.where", "core:aten.gt", "core:aten.ge", "core:aten.lt"],
    "logical ops": ["core:aten.logical_and", "core:aten.bitwise_or", "core:aten.logical_not"],
    "casts": [lambda n: n.target == torch.ops.aten._to_copy.default and "dtype" in n.kwargs],
    "clamp (scalar and tensor bounds)": ["core:aten.clamp", "core:aten.hardtanh",
                                         lambda n: n.target == torch.ops.aten.clamp.Tensor],
    "pow (scalar and tensor exponent)": [lambda n: n.target == torch.ops.aten.pow.Tensor_Scalar,
                                         lambda n: n.target == torch.ops.aten.pow.Tensor_Tensor],
    "math functions": ["core:aten.exp", "core:aten.log", "core:aten.log1p", "core:aten.rsqrt", "core:aten.sin",
                       "core:aten.cos", "core:aten.erf", "core:aten.floor", "core:aten.round", "core:aten.sign",
                       "core:aten.remainder", "core:aten.maximum"],
    "integer arithmetic": [lambda n: _pointwise(n) and n.meta["val"].dtype == torch.int32],
    # reductions
    "reductions": ["core:aten.sum", "core:aten.mean", "core:aten.amax", "core:aten.amin", "core:aten.argmax",
                   "core:aten.argmin", "core:aten.prod", "core:aten.var", "core:aten.any", "core:aten.min",
                   "core:aten.linalg_vector_norm", "pre:aten.logsumexp", "pre:aten.std", "pre:aten.all"],
    "reduction with keepdim": [lambda n: n.target.overloadpacket in (torch.ops.aten.mean, torch.ops.aten.amin,
                                                                      torch.ops.aten.var, torch.ops.aten.sum)
                               and _keepdim(n)],
    "reduction over several dims": [lambda n: n.target.overloadpacket in (torch.ops.aten.mean, torch.ops.aten.amin,
                                                                          torch.ops.aten.var)
                                    and len(_reduction_dims(n)) >= 2],
    "full reduction": [lambda n: n.target == torch.ops.aten.sum.dim_IntList and not _reduction_dims(n)
                       or n.target == torch.ops.aten.sum.default],
    # softmax
    "softmax over dim 0, 1 and last": [
        lambda n: n.target == torch.ops.aten._softmax.default and _softmax_dim(n) == 0,
        lambda n: n.target == torch.ops.aten._softmax.default and _softmax_dim(n) == _rank(n) - 1,
        lambda n: n.target == torch.ops.aten._log_softmax.default and _softmax_dim(n) == 1 and _rank(n) == 3],
    # scans
    "scans": ["core:aten.cumsum", "core:aten.cumprod", "core:aten.flip",
              lambda n: n.target == torch.ops.aten.cumsum.default and n.args[1] % _rank(n) == 0],
    # matmul family
    "matmul family": ["core:aten.mm", "core:aten.addmm", "core:aten.bmm", "pre:aten.baddbmm", "pre:aten.linear",
                      lambda n: n.target == torch.ops.aten.mm.default and _val(n, 0).shape[1] >= 16 * max(
                          _val(n, 0).shape[0], _val(n, 1).shape[1])],
    "matrix-vector": [lambda n: n.target.overloadpacket is torch.ops.aten.matmul and _rank(n, 1) == 1],
    "3-D @ 2-D and broadcast batched": [
        lambda n: n.target.overloadpacket is torch.ops.aten.matmul and _rank(n, 0) == 3 and _rank(n, 1) == 2,
        lambda n: n.target.overloadpacket is torch.ops.aten.matmul and _rank(n, 0) == 4
        and _val(n, 0).shape[1] != _val(n, 1).shape[1]],
    "transposed operands": [lambda n: n.target.overloadpacket in (torch.ops.aten.numpy_T, torch.ops.aten.t)],
    # convolution
    "convolution 1-3D": [lambda n, r=r: n.target == torch.ops.aten.convolution.default and _conv(n, False, r)
                         for r in (3, 4, 5)],
    "transposed convolution 1-3D": [lambda n, r=r: n.target == torch.ops.aten.convolution.default
                                    and _conv(n, True, r) for r in (3, 4, 5)],
    "grouped and depthwise convolution": [
        lambda n: n.target == torch.ops.aten.convolution.default and 1 < n.args[8] < _val(n, 0).shape[1],
        lambda n: n.target == torch.ops.aten.convolution.default and n.args[8] == _val(n, 0).shape[1] > 1],
    "strided, padded, dilated convolution": [
        lambda n: n.target == torch.ops.aten.convolution.default and max(n.args[3]) > 1,
        lambda n: n.target == torch.ops.aten.convolution.default and max(n.args[4]) > 0,
        lambda n: n.target == torch.ops.aten.convolution.default and max(n.args[5]) > 1],
    "convolution with and without bias": [
        lambda n: n.target == torch.ops.aten.convolution.default and n.args[2] is None,
        lambda n: n.target == torch.ops.aten.convolution.default and n.args[2] is not None],
    # pooling
    "max and avg pooling 1-3D": ["pre:aten.max_pool1d", "pre:aten.max_pool2d", "pre:aten.max_pool3d",
                                 "pre:aten.avg_pool1d", "pre:aten.avg_pool2d", "pre:aten.avg_pool3d",
                                 "core:aten.max_pool2d_with_indices", "core:aten.max_pool3d_with_indices",
                                 "core:aten.avg_pool2d", "core:aten.avg_pool3d"],
    "pooling with padding, ceil_mode, dilation": [
        lambda n: n.target == torch.ops.aten.max_pool2d_with_indices.default and _pool(n, 3, lambda p: max(p) > 0),
        lambda n: n.target == torch.ops.aten.max_pool2d_with_indices.default and _pool(n, 4, lambda d: max(d) > 1),
        lambda n: n.target.overloadpacket in (torch.ops.aten.max_pool2d_with_indices,
                                              torch.ops.aten.max_pool3d_with_indices) and _pool(n, 5, bool),
        lambda n: n.target == torch.ops.aten.avg_pool2d.default and _pool(n, 4, bool)],
    "adaptive avg pooling": ["pre:aten.adaptive_avg_pool2d", "pre:aten.adaptive_avg_pool3d"],
    # norms
    "norms": ["pre:aten.layer_norm", "pre:aten.group_norm", "pre:aten.batch_norm", "pre:aten.instance_norm",
              "pre:aten.rms_norm", "core:aten.native_layer_norm", "core:aten.native_group_norm",
              "core:aten._native_batch_norm_legit_no_training"],
    # layout and indexing
    "views and slices": ["core:aten.select", "core:aten.permute", "core:aten.view", "core:aten.expand",
                         lambda n: n.target == torch.ops.aten.slice.Tensor and len(n.args) > 4 and n.args[4] > 1,
                         lambda n: n.target == torch.ops.aten.slice.Tensor and n.args[1] == 1],
    "cat and pad": ["core:aten.cat", "core:aten.constant_pad_nd", "pre:aten.pad"],
    "indexing": ["core:aten.index_select", "core:aten.embedding", "core:aten.index", "core:aten.gather"],
    # attention
    "scaled_dot_product_attention (causal and not)": [
        lambda n: n.target.overloadpacket is torch.ops.aten.scaled_dot_product_attention and _causal(n),
        lambda n: n.target.overloadpacket is torch.ops.aten.scaled_dot_product_attention and not _causal(n)],
    # losses
    "losses": ["pre:aten.mse_loss", "pre:aten.cross_entropy_loss", "pre:aten.kl_div", "pre:aten.smooth_l1_loss",
               "pre:aten.cosine_similarity", "pre:aten.binary_cross_entropy_with_logits"],
    # selection, resampling and the other held-out spellings (level 1 141-196)
    "selection and sorting": ["pre:aten.topk", "pre:aten.sort", "pre:aten.median", "pre:aten.logcumsumexp"],
    "upsampling and pixel shuffles": [lambda n: "upsample" in str(n.target) or "interpolate" in str(n.target),
                                      "pre:aten.pixel_unshuffle"],
    "adaptive max pooling with indices": ["pre:aten.adaptive_max_pool2d"],
}

LEVEL2_FAMILIES = {
    "GEMM and convolution (incl. transposed)": ["core:aten.addmm", "core:aten.mm", "core:aten.bmm",
                                                lambda n: n.target == torch.ops.aten.convolution.default
                                                and n.args[6], lambda n: n.target == torch.ops.aten.convolution.default
                                                and not n.args[6]],
    "norms": ["core:aten.native_group_norm", "core:aten.native_layer_norm",
              "core:aten._native_batch_norm_legit_no_training", "core:aten._native_batch_norm_legit"],
    "activations": ["pre:aten.gelu", "pre:aten.mish", "pre:aten.relu", "pre:aten.hardswish", "pre:aten.silu",
                    "pre:aten.leaky_relu", "pre:aten.sigmoid", "pre:aten.tanh"],
    "pooling": ["core:aten.max_pool2d_with_indices", "core:aten.max_pool3d_with_indices", "core:aten.avg_pool2d",
                "core:aten.avg_pool3d"],
    "reductions": ["core:aten.sum", "core:aten.mean", "core:aten.amax", "core:aten.min", "pre:aten.logsumexp"],
    "softmax and scans": ["core:aten._softmax", "core:aten.cumsum"],
    "attention": ["pre:aten.scaled_dot_product_attention"],
}


def _check_families(level: str, families: dict):
    graphs = _graphs(level)
    pre_calls, core_calls = Graphs.calls(graphs.pre), Graphs.calls(graphs.core)
    pre_names, core_names = Graphs.names(graphs.pre), Graphs.names(graphs.core)
    missing = []
    for family, requirements in families.items():
        for req in requirements:
            if callable(req):
                found = any(req(n) for n in core_calls) or any(req(n) for n in pre_calls)
            else:
                where, name = req.split(":", 1)
                found = name in (pre_names if where == "pre" else core_names)
            if not found:
                what = req if isinstance(req, str) else f"the predicate at line {req.__code__.co_firstlineno}"
                missing.append(f"{family}: {what}")
    assert not missing, "families without a problem:\n  " + "\n  ".join(missing)


def test_level1_covers_every_family():
    _check_families("level1", LEVEL1_FAMILIES)


def test_level1_mixes_dtypes_and_plain_numbers():
    dtypes = defaultdict(int)
    numbers = 0
    for path in corpus.problem_paths("level1"):
        inputs = corpus.load(path).get_cpu_inputs()
        dtypes[next(t.dtype for t in inputs if isinstance(t, torch.Tensor))] += 1
        numbers += any(not isinstance(t, torch.Tensor) for t in inputs)
    assert dtypes[torch.float32] >= 0.8 * sum(dtypes.values())
    assert dtypes[torch.bfloat16] >= 3
    assert numbers >= 1, "a plain-number argument to forward"


# Ops that only move, allocate or convert data; with views (ops returning an alias) and pointwise ops, they are
# what a chain's "non-elementwise" ops are not.
_DATA_MOVEMENT = {"aten.clone", "aten._to_copy", "aten.full", "aten.full_like", "aten.scalar_tensor", "aten.arange",
                  "aten.empty", "aten.zeros", "aten.ones", "aten.copy", "aten.cat", "aten.constant_pad_nd"}


def _non_elementwise(node) -> bool:
    return not (_pointwise(node) or str(node.target.overloadpacket) in _DATA_MOVEMENT
                or any(r.alias_info is not None for r in node.target._schema.returns))


def test_level2_chains_are_fusion_problems():
    """The chains cover conv/GEMM, norms, activations, pooling and reductions; at least 30 hold two or more
    non-elementwise ops, and at least 20 feed a bias or scale parameter of the model itself
    (`self.bias = nn.Parameter(...)`, not a layer's weight) into an elementwise op."""
    _check_families("level2", LEVEL2_FAMILIES)
    graphs = _graphs("level2")
    heavy = defaultdict(list)
    for node in Graphs.calls(graphs.core):
        if _non_elementwise(node):
            heavy[graphs.problem_of(node)].append(str(node.target.overloadpacket))
    names = corpus.problem_paths("level2")
    multi = [names[i].stem for i, ops in heavy.items() if len(ops) >= 2]
    assert len(multi) >= 30, (len(multi), dict(heavy))
    assert all(heavy[i] for i in range(len(names))), "every chain holds a non-elementwise op"

    params = graphs.core.graph_signature.inputs_to_parameters
    fed = set()
    for node in graphs.core.graph.nodes:
        match = re.match(r"models\.(\d+)\.[A-Za-z_]\w*$", params.get(node.name, ""))
        if node.op == "placeholder" and match:
            if any(u.op == "call_function" and isinstance(u.target, torch._ops.OpOverload) and _pointwise(u)
                   for u in node.users):
                fed.add(int(match.group(1)))
    assert len(fed) >= 20, sorted(names[i].stem for i in fed)


def test_level2_broadcast_parameters_have_broadcast_shapes():
    """The (C, 1, 1)-style parameters broadcast against the activation they meet, as in the issue's chains."""
    shaped = 0
    for path in corpus.problem_paths("level2"):
        model, _ = corpus.build(corpus.load(path))
        for name, p in model.named_parameters(recurse=False):
            assert p.dim() >= 1, f"{path.stem}.{name}: a 0-d parameter"
            shaped += p.dim() >= 2 and math.prod(p.shape) == p.shape[0]
    assert shaped >= 10, shaped
