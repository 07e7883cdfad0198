"""Resource estimates from the IR, before any compiler runs: shared memory, threads and registers per
thread, checked against a target's limits. The tuner prunes its search space with these; the compiled
kernel's own report (tilepy_hip) is the final word."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from . import ir
from .targets import get_target
from .types import RegType

BASE_REGISTERS = 24  # indices, addresses, loop counters and predicates every kernel keeps live
NO_DEVICE_CODE = ("tag", "assert_tag", "schedule")  # verification and scheduling ops: no registers


@dataclass(frozen=True)
class Resources:
    threads: int
    shared_bytes: int
    registers: int  # estimated 32-bit registers per thread
    fits: bool
    reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return asdict(self)


def _regs(t: RegType) -> int:
    return -(-t.layout.num_values * max(t.dtype.bytes, 4) // 4)


def estimate(kir: ir.KernelIR) -> Resources:
    """Estimate what one block of `kir` needs on its target.

    Registers: every register-tile variable counted as live for the whole kernel (an upper bound, since the
    variables of one kernel are usually live together in its main loop), plus the largest temporary of any
    one expression, plus a fixed base for scalars."""
    target = get_target(kir.target)
    var_regs = sum(_regs(t) for t in kir.var_types.values() if isinstance(t, RegType))
    temp = 0
    for stmt in ir.walk(kir.body):
        roots = [stmt.value] if isinstance(stmt, ir.Assign) else [stmt.call] if isinstance(stmt, ir.Eval) else []
        for root in roots:
            if isinstance(root, ir.Call) and root.op in NO_DEVICE_CODE:
                continue
            for e in ir.walk_exprs(root):
                if e is not root and isinstance(e.type, RegType) and not isinstance(e, ir.Var):
                    temp = max(temp, _regs(e.type))
    registers = BASE_REGISTERS + var_regs + temp
    reasons = []
    if kir.shared_bytes > target.shared_bytes:
        reasons.append(f"shared memory {kir.shared_bytes} B > {target.shared_bytes} B")
    if registers > target.max_registers:
        reasons.append(f"~{registers} registers per thread > {target.max_registers}")
    if registers * kir.num_threads > target.register_file:
        reasons.append(f"~{registers} registers x {kir.num_threads} threads > {target.register_file}")
    if kir.num_threads > target.max_threads:
        reasons.append(f"{kir.num_threads} threads > {target.max_threads}")
    return Resources(kir.num_threads, kir.shared_bytes, registers, not reasons, tuple(reasons))
