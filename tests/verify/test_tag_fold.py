"""The verifier's loop summary of an accumulator (tilepy_verify/values.py `fold`): a register tile carried
through a loop whose tag changes every iteration is ("fold", n, k, t) for each iteration k of the n folded so
far (the iteration index inside the body, the trip count after the loop), t its update's tag at k with the
carried values read as before the loop, and ("fold", n, None, t0) for its value before the loop; a tag
predicate's `and` / `or` stops at a left operand the verifier decides, so one side may index a tag shape the
other side excludes. Each claim is checked against a kernel that breaks it."""

import tilepy as tp
import tilepy_verify as tv


def _errors(k, **constexprs):
    return [f for f in tv.verify(k, target="sm_90a", **constexprs).errors if f.check == "tag_assertion"]


@tp.kernel(threads=32)
def chunked_sum(x: tp.Tensor[tp.f32, 4, 64], out: tp.Tensor[tp.f32, 4], TRIPS: tp.constexpr = 4):
    tp.tag(x, lambda a, b: ("x", a, b))
    # every element of row i's four 16-wide chunks, chunk k at iteration k, and exactly 4 iterations
    tp.assert_tag(out, lambda t, i: t[0] == "fold" and t[1] == 4 and (t[2] == None or t[3][1][1] == i and t[3][1][2] // 16 == t[2]) and (t[2] != None or t[3] == None))  # noqa: E501, E711
    m0 = tp.block_id(0)
    acc = tp.full((1, 16), 0.0, tp.f32)
    for k in range(TRIPS):
        acc = acc + tp.load(x[m0:m0 + 1, k * 16:k * 16 + 16])
    tp.store(out[m0:m0 + 1], tp.sum(acc, axis=1))


def test_a_fold_over_every_chunk_is_proved():
    assert _errors(chunked_sum, TRIPS=4) == []


def test_a_fold_that_skips_the_last_chunk_shows_its_count():
    (f,) = _errors(chunked_sum, TRIPS=3)[:1]
    stored = f.counterexample["tags"]["stored"]
    assert stored[:2] == ("fold", 3), stored


@tp.kernel(threads=32)
def same_chunk(x: tp.Tensor[tp.f32, 4, 64], out: tp.Tensor[tp.f32, 4]):
    tp.tag(x, lambda a, b: ("x", a, b))
    tp.assert_tag(out, lambda t, i: t[0] == "fold" and t[1] == 4 and (t[2] == None or t[3][1][1] == i and t[3][1][2] // 16 == t[2]))  # noqa: E501, E711
    m0 = tp.block_id(0)
    acc = tp.full((1, 16), 0.0, tp.f32)
    for k in range(4):
        acc = acc + tp.load(x[m0:m0 + 1, 0:16])      # chunk 0 at every iteration
    tp.store(out[m0:m0 + 1], tp.sum(acc, axis=1))


def test_an_iteration_reading_another_chunk_is_caught():
    (f,) = _errors(same_chunk)[:1]
    stored = f.counterexample["tags"]["stored"]
    assert stored[0] == "fold" and stored[2] != stored[3][1][2] // 16, stored


@tp.kernel(threads=32)
def running_carry(x: tp.Tensor[tp.f32, 4, 64], out: tp.Tensor[tp.f32, 4, 64]):
    tp.tag(x, lambda a, b: ("x", a, b))
    # inside the loop the carry has folded the chunks before this one: n is the iteration index (j // 16)
    tp.assert_tag(out, lambda t, i, j: t[1][0] == "fold" and t[1][1] == j // 16 and (t[1][2] == None or t[1][3][1][2] // 16 == t[1][2]))  # noqa: E501, E711
    m0 = tp.block_id(0)
    carry = tp.full((1, 1), 0.0, tp.f32)
    for k in range(4):
        v = tp.load(x[m0:m0 + 1, k * 16:k * 16 + 16])
        tp.store(out[m0:m0 + 1, k * 16:k * 16 + 16], v + carry)
        carry = carry + tp.sum(v, axis=1, keepdims=True)


@tp.kernel(threads=32)
def carry_too_early(x: tp.Tensor[tp.f32, 4, 64], out: tp.Tensor[tp.f32, 4, 64]):
    tp.tag(x, lambda a, b: ("x", a, b))
    tp.assert_tag(out, lambda t, i, j: t[1][0] == "fold" and t[1][1] == j // 16 and (t[1][2] == None or t[1][3][1][2] // 16 == t[1][2]))  # noqa: E501, E711
    m0 = tp.block_id(0)
    carry = tp.full((1, 1), 0.0, tp.f32)
    for k in range(4):
        v = tp.load(x[m0:m0 + 1, k * 16:k * 16 + 16])
        carry = carry + tp.sum(v, axis=1, keepdims=True)    # this chunk folded in before its own use
        tp.store(out[m0:m0 + 1, k * 16:k * 16 + 16], v + carry)


def test_the_carry_inside_the_loop_folds_the_iterations_before_it():
    assert _errors(running_carry) == []
    assert _errors(carry_too_early)


@tp.kernel(threads=32)
def guarded(x: tp.Tensor[tp.f32, 64], out: tp.Tensor[tp.f32, 64]):
    tp.tag(x, lambda j: ("x", j))
    # t[1] is the constant's tag, None: `or` stops there, its right side would index None
    tp.assert_tag(out, lambda t, j: t[0] == ("x", j) and (t[1] == None or t[1][0] == 1))  # noqa: E711
    v = tp.load(x[0:64])
    tp.store(out[0:64], v * 2.0)


def test_a_decided_left_operand_stops_the_predicate():
    assert _errors(guarded) == []
