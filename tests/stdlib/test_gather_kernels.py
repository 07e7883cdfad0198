"""The gather/scatter/atomic stdlib kernels (issue 19's bar) on the CPU interpreter against torch in float64,
on shapes that are not multiples of the tiles, and verified clean on every target."""

import pytest
import torch

import tilepy_verify
from stdlib_kernels import conv, cumsum, embedding, max_pool, scatter_add

TARGETS = ("sm_80", "sm_90a", "gfx942")


def test_embedding_matches_torch():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(300, 100, generator=g)
    ids = torch.randint(0, 300, (45,), generator=g)
    y = torch.full((45, 100), float("nan"))
    embedding.launch(w, ids, y)
    assert torch.equal(y, torch.nn.functional.embedding(ids, w))


def test_scatter_add_matches_torch_index_add():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(77, 90, generator=g)
    index = torch.randint(0, 13, (77,), generator=g)
    y0 = torch.randn(13, 90, generator=g)
    y = y0.clone()
    scatter_add.launch(x, index, y)
    ref = y0.double().index_add(0, index, x.double())
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pad", [0, 1])
def test_max_pool_3x3_stride_2_matches_torch(pad):
    x = torch.randn(2, 3, 37, 30, generator=torch.Generator().manual_seed(2))
    ref = torch.nn.functional.max_pool2d(x, 3, 2, pad)
    y = torch.full(ref.shape, float("nan"))
    max_pool.launch(x, y, PAD=pad)
    assert torch.equal(y, ref)


@pytest.mark.parametrize("n,exclusive", [(5000, False), (1024, True), (1, False), (70001, True)])
def test_cumsum_across_blocks_matches_torch(n, exclusive):
    x = torch.randn(n, generator=torch.Generator().manual_seed(n))
    y = torch.full((n,), float("nan"))
    cumsum.launch(x, y, exclusive=exclusive)
    ref = torch.cumsum(x.double(), 0) - (x.double() if exclusive else 0)
    torch.testing.assert_close(y.double(), ref, rtol=1e-4, atol=1e-3)


def _bf16(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


@pytest.mark.parametrize("target", TARGETS)
def test_conv2d_stride_2_dilation_2_padding_1_matches_torch(target):
    x, w = _bf16(2, 6, 19, 14, seed=3), _bf16(36, 6, 3, 3, seed=4)
    ref = torch.nn.functional.conv2d(x.double(), w.double(), stride=2, padding=1, dilation=2)
    y = torch.full(ref.shape, float("nan"))
    conv.launch(conv.conv2d, x, w, y, target=target, S=2, P=1, D=2)
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_conv_transpose2d_stride_2_matches_torch(target):
    x, w = _bf16(2, 7, 9, 6, seed=5), _bf16(7, 33, 3, 3, seed=6)
    ref = torch.nn.functional.conv_transpose2d(x.double(), w.double(), stride=2)
    y = torch.full(ref.shape, float("nan"))
    conv.launch(conv.conv_transpose2d, x, w, y, target=target, S=2, P=0, D=1)
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["embedding", "scatter_add", "max_pool2d", "conv2d", "conv_transpose2d",
                                  "cumsum_block_sums", "cumsum_block_scan"])
def test_verified_clean(name, target):
    from stdlib_kernels import KERNELS

    cx = conv.PRESETS[target] if name.startswith("conv") else {}
    report = tilepy_verify.verify(KERNELS[name], target=target, **cx)
    assert report.ok, str(report)


def test_conv_tag_assertion_catches_a_wrong_weight_channel():
    """The channel assertion is proved, not vacuous: shifting the weight's channel index breaks it."""
    import inspect

    from tilepy.kernel import kernels_from_source

    src = inspect.getsource(conv).replace("b = tp.load(Wt[co, kb // (KH * KW),",
                                          "b = tp.load(Wt[co, (kb + 9) // (KH * KW),")
    assert "(kb + 9)" in src
    mutant = kernels_from_source(src, "conv_mutant.py")["conv2d"]
    (f,) = tilepy_verify.verify(mutant, target="sm_80", **conv.PRESETS["sm_80"]).errors
    assert f.check == "tag_assertion" and "a[1] == b[1]" in f.message


def test_scatter_add_without_the_atomic_is_a_race():
    import inspect

    from tilepy.kernel import kernels_from_source

    src = inspect.getsource(scatter_add).replace("tp.atomic_add(Y[dest[:, None], cols[None, :]], x)",
                                                 "tp.store(Y[dest[:, None], cols[None, :]], x)")
    mutant = kernels_from_source(src, "scatter_mutant.py")["scatter_add"]
    errors = tilepy_verify.verify(mutant).errors
    assert errors and {f.check for f in errors} == {"global_race"}
    assert any("other_block" in f.counterexample for f in errors)


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_embedding_bag_matches_torch(mode):
    """stdlib embedding_bag (bags of one size): sum / mean / max against torch in float64, columns past D and
    indices past the bag masked (D = 70 in 64-wide blocks, S = 13 in steps of 8), negative indices wrap once;
    verified clean on every target."""
    from stdlib_kernels import embedding_bag

    g = torch.Generator().manual_seed(3 + mode)
    w = torch.randn(50, 70, generator=g)
    ids = torch.randint(-50, 50, (6, 13), generator=g)
    y = torch.full((6, 70), float("nan"))
    embedding_bag.launch(w, ids, y, MODE=mode, BJ=8, BD=64)
    rows = w.double()[torch.where(ids < 0, ids + 50, ids)]
    ref = rows.sum(1) if mode == 0 else rows.mean(1) if mode == 1 else rows.amax(1)
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-5)
    for t in TARGETS:
        assert tilepy_verify.verify_ir(embedding_bag.embedding_bag.ir(t, MODE=mode, BJ=8, BD=64)).ok
