"""The bulk_copy_start check: a TMA-only bulk copy or store must start on a 16-byte column (H100 faults on a box
starting off one: an illegal instruction, benchmarks/profile/lead_tma_offset.py). A first column off 16 bytes in
some block is an error naming that block and the column; tile-multiple columns are proven clean; a copy with a
fallback (the render tests its column at run time) is not asked about."""


import pytest

import tilepy as tp
import tilepy_verify as tv


@tp.kernel(threads=128, target="sm_90a")
def shifted_store(X: tp.Tensor[tp.bf16, "M", "N"], Y: tp.Tensor[tp.bf16, "M", "N"], C0: tp.constexpr = 3,
                  FALLBACK: tp.constexpr = False):
    c0 = tp.block_id(1) * 64 + C0
    s = tp.shared((64, 64), tp.bf16, swizzle=tp.Swizzle(3, 3, 3))
    tp.store(s, tp.load(X[0:64, c0:c0 + 64]))
    tp.barrier()
    tp.store_bulk(s, Y[0:64, c0:c0 + 64], fallback=FALLBACK)
    tp.store_bulk_wait(s)


@tp.kernel(threads=128, target="sm_90a")
def stepped_load(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, "M", "N"], STEP: tp.constexpr = 2):
    """Block j reads columns j * STEP ...: f32 needs a multiple of 4 columns, so STEP 2 is off 16 bytes at odd j."""
    c0 = tp.block_id(1) * STEP
    s = tp.shared((32, 32), tp.f32)
    bar = tp.mbarrier(1)
    tp.copy_bulk(X[0:32, c0:c0 + 32], s, bar, fallback=False)
    tp.mbarrier_arrive(bar)
    tp.mbarrier_wait(bar, 0)
    tp.store(Y[0:32, c0:c0 + 32], tp.load(s))


def _found(kernel, **kp):
    return tv.verify(kernel, target="sm_90a", checks=("bulk_copy_start",), **kp).by_check("bulk_copy_start")


def test_a_tma_only_store_off_16_bytes_is_an_error_with_its_column():
    (f,) = _found(shifted_store, C0=3)
    assert f.severity == "error" and "tp.store_bulk of 'Y'" in f.message and "column 3" in f.message
    assert f.span.line > 0 and f.counterexample["block"][0] == 0
    assert "6 bytes" in f.counterexample["detail"]


@pytest.mark.parametrize("c0", [0, 8, 16])
def test_tile_multiple_columns_are_clean(c0):
    assert not _found(shifted_store, C0=c0)


def test_a_copy_with_a_fallback_is_not_asked_about():
    assert not _found(shifted_store, C0=3, FALLBACK=True)


def test_a_run_time_column_off_16_bytes_in_some_block_only():
    """Block 0 starts at column 0 (fine); the counterexample is a block whose column is off 16 bytes."""
    (f,) = _found(stepped_load, STEP=2)
    assert "tp.copy_bulk of 'X'" in f.message
    col = int(f.message.split("column ")[1].split(",")[0])
    assert col % 4 and f.counterexample["block"][1] * 2 == col
    assert not _found(stepped_load, STEP=4)
