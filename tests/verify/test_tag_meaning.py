"""A tag assertion that cannot mean anything is an error with a hint, never a proof: `mma_operands` of a
value no tp.mma produced (the issue's `lambda a, b: False` verified clean), and an assertion no block or
iteration reaches. The meaningful forms next to them still prove, or fail, as before."""

import tilepy as tp
import tilepy_verify as tv

I16 = tp.nv.mma_m16n8k16_bf16


@tp.kernel(threads=32, target="sm_80")
def operands_of(A: tp.Tensor[tp.bf16, 16, 16], B: tp.Tensor[tp.bf16, 16, 8], C: tp.Tensor[tp.f32, 16, 8],
                WHAT: tp.constexpr = "mma", PRED: tp.constexpr = "false"):
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    acc = tp.zeros((16, 8), tp.f32, layout=tp.accumulator(I16, (16, 8)))
    if WHAT == "mma":
        a = tp.load(A[0:16, 0:16], layout=tp.mma_layout(I16, "a", (16, 16)))
        b = tp.load(B[0:16, 0:8], layout=tp.mma_layout(I16, "b", (16, 8)))
        acc = tp.mma(a, b, acc)
    if PRED == "false":
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: False)
    else:
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
    tp.store(C[0:16, 0:8], acc)


@tp.kernel(threads=32, target="sm_80")
def unreachable(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, 32], LO: tp.constexpr = 0):
    tp.tag(X, lambda i: ("X", i))
    for i in range(LO, 0):
        x = tp.load(X[i * 32:(i + 1) * 32])
        tp.assert_tag(x, lambda t: t[1] >= 0)
        tp.store(Y[0:32], x)


def test_mma_operands_of_a_non_mma_value_is_an_error_with_a_hint():
    for pred in ("false", "contraction"):
        report = tv.verify(operands_of, WHAT="zeros", PRED=pred)
        f = [f for f in report.errors if f.check == "tag_assertion"]
        assert len(f) == 1 and "cannot mean anything" in f[0].message and "not the result of a tp.mma" in f[0].message
        assert "acc = tp.mma(" in f[0].counterexample["hint"] and "hint = " in str(f[0])


def test_meaningful_operand_assertions_still_prove_and_fail():
    assert tv.verify(operands_of, WHAT="mma", PRED="contraction").ok
    report = tv.verify(operands_of, WHAT="mma", PRED="false")
    f = [f for f in report.errors if f.check == "tag_assertion"]
    assert f and "fails for accumulator element" in f[0].message and "k_index" in f[0].counterexample


def test_unreachable_assertion_is_an_error():
    report = tv.verify(unreachable)
    f = [f for f in report.errors if f.check == "tag_assertion"]
    assert len(f) == 1 and "no block and no loop iteration ever reaches it" in f[0].message, str(report)
    assert "hint" in f[0].counterexample
    report = tv.verify(unreachable, LO=-2)  # reachable: the predicate is checked (negative indices: fails)
    f = [f for f in report.errors if f.check == "tag_assertion"]
    assert f and "fails for element" in f[0].message
