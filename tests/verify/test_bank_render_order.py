"""The bank check judges a register tile's shared store in the order the GPU render emits it (tilepy.banks.bank_turn,
the same choice tilepy_hip.render.tiles makes): the large class's f32 pieces (wgmma accumulator pairs into 128-byte
swizzled rows) are 2-way in value order and reported so, and not reported in the render's per-lane order."""

from __future__ import annotations

import pytest

import tilepy as tp
import tilepy_verify as tv
from stdlib_kernels import gemm_hopper
from tilepy_verify.checks import banks


def _f32_pieces():
    M, N, K = 8192, 8192, 1024
    return gemm_hopper.plan_kernel(M, N, tp.f32, gemm_hopper.policy(M, N, K, tp.f32, fixup=True), K)


def test_the_f32_pieces_are_conflict_free_in_the_render_order():
    kernel, kp = _f32_pieces()
    report = tv.verify(kernel, target="sm_90a", **kp)
    assert report.ok and not report.by_check("bank_conflict"), str(report)


def test_the_f32_pieces_in_value_order_are_two_way(monkeypatch):
    monkeypatch.setattr(banks, "rendered_order", lambda acc, base, *args: base)
    kernel, kp = _f32_pieces()
    found = tv.verify_ir(kernel.ir("sm_90a", **kp), checks=("bank_conflict",)).by_check("bank_conflict")
    assert found and all(f.severity == "performance" for f in found)
    assert {f.counterexample["degree"] for f in found} == {2}
    assert all("'c_s'" in f.message for f in found)


@pytest.mark.parametrize("out", [tp.bf16])
def test_the_bf16_pieces_need_no_order(out):
    M, N, K = 8192, 8192, 1024
    kernel, kp = gemm_hopper.plan_kernel(M, N, out, gemm_hopper.policy(M, N, K, out, fixup=True), K)
    assert not tv.verify(kernel, target="sm_90a", **kp).by_check("bank_conflict")
