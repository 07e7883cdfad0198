"""Every construct the language rejects raises a CompileError subclass naming file:line, showing the source
line with a caret and a hint. Kernels are defined inside the tests so the reported line can be checked."""

import inspect

import pytest

import tilepy as tp


def _line_of(fn, needle: str) -> int:
    lines, first = inspect.getsourcelines(fn.fn if isinstance(fn, tp.Kernel) else fn)
    for i, text in enumerate(lines):
        if needle in text:
            return first + i
    raise AssertionError(f"{needle!r} not in source")


def _check(err: tp.CompileError, kernel, needle: str, cls, hint_word: str):
    assert isinstance(err, cls), type(err)
    assert err.span.file == __file__
    assert err.span.line == _line_of(kernel, needle)
    text = str(err)
    assert f"{__file__}:{err.span.line}:" in text
    assert needle in text  # the source line is shown
    caret_line = text.splitlines()[2]
    assert caret_line.strip() == "^"
    assert hint_word.lower() in err.hint.lower()


def test_while_loop_rejected():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"]):
        i = 0
        while i < 4:
            i = i + 1

    with pytest.raises(tp.CompileError) as e:
        k.ir()
    _check(e.value, k, "while i < 4", tp.UnsupportedConstructError, "range")


def test_return_value_rejected():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"]):
        return 1

    with pytest.raises(tp.CompileError) as e:
        k.ir()
    _check(e.value, k, "return 1", tp.UnsupportedConstructError, "tp.store")


def test_print_rejected():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"]):
        print("hello")

    with pytest.raises(tp.CompileError) as e:
        k.ir()
    _check(e.value, k, 'print("hello")', tp.UnsupportedConstructError, "interpreter")


def test_conditional_expression_between_views_rejected():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"], n: tp.i32, BLOCK: tp.constexpr = 128):
        v = X[0:BLOCK] if n > 4 else X[BLOCK:2 * BLOCK]
        tp.store(X[0:BLOCK], tp.load(v))

    with pytest.raises(tp.CompileError) as e:
        k.ir()
    _check(e.value, k, "v = X[0:BLOCK] if n", tp.KernelTypeError, "tp.load")


def test_wrong_dtype_for_mma():
    @tp.kernel(threads=128)
    def k(A: tp.Tensor[tp.f32, "M", "K"], C: tp.Tensor[tp.f32, "M", "N"]):
        a = tp.load(A[0:32, 0:16])
        b = tp.load(A[0:16, 0:32])
        acc = tp.zeros((32, 32), tp.f32, layout=tp.accumulator(tp.nv.mma_m16n8k16_bf16, (32, 32), (2, 2)))
        acc = tp.mma(a, b, acc)
        tp.store(C[0:32, 0:32], acc)

    with pytest.raises(tp.CompileError) as e:
        k.ir()
    _check(e.value, k, "acc = tp.mma(a, b, acc)", tp.KernelTypeError, "cast")


def test_store_shape_mismatch():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"], BLOCK: tp.constexpr = 128):
        x = tp.load(X[0:BLOCK])
        tp.store(X[0:64], x)

    with pytest.raises(tp.CompileError) as e:
        k.ir()
    _check(e.value, k, "tp.store(X[0:64], x)", tp.ShapeError, "slice")


def test_broadcast_mismatch():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"]):
        a = tp.load(X[0:128])
        b = tp.load(X[0:64])
        tp.store(X[0:128], a + b)

    with pytest.raises(tp.CompileError) as e:
        k.ir()
    _check(e.value, k, "tp.store(X[0:128], a + b)", tp.ShapeError, "size-1")


def test_shared_memory_too_large():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"], S: tp.constexpr = 4):
        big = tp.shared((256, 128), tp.f32, stages=S)
        tp.barrier()

    with pytest.raises(tp.CompileError) as e:
        k.ir(target="sm_90a")
    _check(e.value, k, "big = tp.shared", tp.ResourceError, "stages")
    assert "524288 bytes" in str(e.value) and "sm_90a" in str(e.value)
    assert k.ir(target="sm_90a", S=1).shared_bytes == 256 * 128 * 4  # one stage fits Hopper's 227 KB...
    with pytest.raises(tp.ResourceError, match="gfx942"):
        k.ir(target="gfx942", S=1)  # ...but not the 64 KB of LDS on MI300X


def test_instruction_missing_on_target():
    @tp.kernel(threads=128)
    def k(A: tp.Tensor[tp.bf16, "M", "K"], C: tp.Tensor[tp.f32, "M", "N"]):
        a_s = tp.shared((64, 16), tp.bf16)
        b_s = tp.shared((16, 64), tp.bf16)
        acc = tp.zeros((64, 64), tp.f32, layout=tp.accumulator(tp.nv.wgmma_m64n64k16_bf16, (64, 64)))
        acc = tp.mma(a_s, b_s, acc)
        tp.store(C[0:64, 0:64], acc)

    k.ir(target="sm_90a")  # fine on Hopper
    with pytest.raises(tp.CompileError) as e:
        k.ir(target="sm_80")
    _check(e.value, k, "acc = tp.mma(a_s, b_s, acc)", tp.TargetError, "mma_m16n8k16")
    with pytest.raises(tp.TargetError) as e:
        k.ir(target="gfx942")
    assert "mfma" in e.value.hint


def test_async_copy_missing_on_target():
    @tp.kernel(threads=128)
    def k(X: tp.Tensor[tp.f32, "N"]):
        bar = tp.mbarrier(1)
        tp.barrier()

    with pytest.raises(tp.CompileError) as e:
        k.ir(target="sm_80")
    _check(e.value, k, "bar = tp.mbarrier(1)", tp.TargetError, "barrier")


def test_runtime_value_where_constant_needed():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"], n: tp.i32):
        t = tp.zeros((n,), tp.f32)
        tp.store(X[0:64], t)

    with pytest.raises(tp.CompileError) as e:
        k.ir()
    _check(e.value, k, "t = tp.zeros((n,), tp.f32)", tp.ConstexprError, "constexpr")


def test_slice_without_constant_size():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"], n: tp.i32):
        x = tp.load(X[0:n])
        tp.store(X[0:64], x)

    with pytest.raises(tp.CompileError) as e:
        k.ir()
    _check(e.value, k, "x = tp.load(X[0:n])", tp.ConstexprError, "SIZE")


def test_wait_count_must_be_constant():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"], n: tp.i32):
        tp.wait_async(n)

    with pytest.raises(tp.CompileError) as e:
        k.ir()
    _check(e.value, k, "tp.wait_async(n)", tp.ConstexprError, "constexpr")


def test_arithmetic_on_global_tile():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"]):
        y = X[0:64] * 2.0
        tp.store(X[0:64], y)

    with pytest.raises(tp.CompileError) as e:
        k.ir()
    _check(e.value, k, "y = X[0:64] * 2.0", tp.KernelTypeError, "tp.load")


def test_unknown_name():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"]):
        x = tp.load(X[0:64]) * undefined_scale  # noqa: F821
        tp.store(X[0:64], x)

    with pytest.raises(tp.CompileError) as e:
        k.ir()
    _check(e.value, k, "undefined_scale", tp.KernelTypeError, "define")


def test_variable_changes_type():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"]):
        x = tp.load(X[0:64])
        for i in range(4):
            x = tp.load(X[0:32])
        tp.store(X[0:64], x)

    with pytest.raises(tp.CompileError) as e:
        k.ir()
    _check(e.value, k, "x = tp.load(X[0:32])", tp.KernelTypeError, "new name")


def test_non_power_of_two_register_tile():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"]):
        x = tp.load(X[0:100])
        tp.store(X[0:100], x)

    with pytest.raises(tp.CompileError) as e:
        k.ir()
    _check(e.value, k, "x = tp.load(X[0:100])", tp.ShapeError, "power of two")


def test_wrong_builtin_arguments():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"]):
        x = tp.load(X[0:64], 1, 2, 3, 4)
        tp.store(X[0:64], x)

    with pytest.raises(tp.CompileError) as e:
        k.ir()
    _check(e.value, k, "x = tp.load(X[0:64], 1, 2, 3, 4)", tp.KernelTypeError, "tp.load(")


def test_reassigning_a_parameter():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"], BLOCK: tp.constexpr = 64):
        BLOCK = 32
        tp.store(X[0:BLOCK], tp.zeros((BLOCK,), tp.f32))

    with pytest.raises(tp.CompileError) as e:
        k.ir()
    _check(e.value, k, "BLOCK = 32", tp.ConstexprError, "new variable")


def test_too_many_registers():
    @tp.kernel(threads=32)
    def k(X: tp.Tensor[tp.f32, "M", "N"]):
        x = tp.load(X[0:128, 0:128])
        tp.store(X[0:128, 0:128], x)

    with pytest.raises(tp.CompileError) as e:
        k.ir()
    _check(e.value, k, "x = tp.load(X[0:128, 0:128])", tp.ResourceError, "more threads")


def test_missing_annotation_and_bad_threads():
    def no_annotation(X):
        pass

    with pytest.raises(tp.CompileError) as e:
        tp.kernel(no_annotation)
    assert "annotate" in e.value.hint
    assert e.value.span.line == _line_of(no_annotation, "def no_annotation")

    @tp.kernel(threads=100)
    def k(X: tp.Tensor[tp.f32, "N"]):
        tp.barrier()

    with pytest.raises(tp.ResourceError) as e:
        k.ir()
    assert "multiple of 32" in str(e.value)


def test_missing_constexpr_value():
    @tp.kernel
    def k(X: tp.Tensor[tp.f32, "N"], BLOCK: tp.constexpr):
        tp.store(X[0:BLOCK], tp.zeros((BLOCK,), tp.f32))

    with pytest.raises(tp.ConstexprError) as e:
        k.ir()
    assert "BLOCK=" in e.value.hint
    assert k.ir(BLOCK=64).constexprs == {"BLOCK": 64}


def test_builtin_called_outside_kernel():
    with pytest.raises(RuntimeError, match="only works inside"):
        tp.load(None)
    assert tp.cdiv(10, 4) == 3  # cdiv also means something in plain Python (grids)


def test_per_thread_tile_offset_rejected():
    @tp.kernel(threads=64)
    def k(O: tp.Tensor[tp.i32, 4, 64]):
        t = tp.thread_id()
        tp.store(O[0, t:t + 1], tp.zeros((1,), tp.i32) + 1)

    with pytest.raises(tp.CompileError) as e:
        k.ir()
    _check(e.value, k, "tp.store(O[0, t:t + 1]", tp.KernelTypeError, "warp-role")
