"""The agent's first candidate for a problem: its whole program lowered, plus the precision and tolerance.

    first = lower_problem(problem, target="cpu")   # LoweringError names the op and the reference's line
    first.source, first.tol, first.precision, first.describe()
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .codegen import render_program
from .program import LoweredProgram, lower_model
from .values import compute_dtype

# An fp32 program is matched at fp32 accuracy: reductions only reorder sums (relative error ~1e-6 for the
# sizes we meet). Where PyTorch itself computes below fp32 (half types; convolutions under cuDNN's default
# TF32 on a GPU) the comparison can be no tighter than that, and KernelBench's 1e-2 is the ceiling.
FP32_TOL = 1e-4
REDUCED_TOL = 1e-2


@dataclass
class LoweredCandidate:
    source: str
    tol: float
    precision: str
    program: LoweredProgram
    ops: list = field(default_factory=list)

    @property
    def kind(self) -> str:
        """The kinds of kernel the program holds (what the knowledge base's `kernel_kind` conditions match)."""
        from .core import Pointwise, Reduction, RowFused, Scan
        kinds = set()
        for k in self.program.kernels:
            if isinstance(k, Pointwise):
                kinds.add("elementwise")
            elif isinstance(k, Reduction):
                kinds.add("reduction")
                if k.extra.get("matmul"):
                    kinds.add("matmul")
            elif isinstance(k, RowFused):   # whole rows in registers: softmax (max, then sum), norms (one sum)
                kinds.add("reduction")
                stage_kinds = [st.kind for st in k.stages]
                if stage_kinds[:2] == ["max", "sum"]:
                    kinds.add("softmax")
                elif not k.per_row and stage_kinds == ["sum"]:
                    kinds.add("rmsnorm")
            elif isinstance(k, Scan):
                kinds.add("scan")
            elif type(k).__name__ == "AttentionTemplate":   # stdlib attention: not a GEMM for the GEMM skills
                kinds.add("attention")
            elif type(k).__name__ in ("MoeTemplate", "ScatterAddTemplate"):   # stdlib MoE / atomic scatter
                kinds.add("moe" if type(k).__name__ == "MoeTemplate" else "scatter")
            elif type(k).__name__ == "RnnTemplate":   # stdlib recurrent steps: small GEMMs and a cell each
                kinds.add("rnn")
            elif type(k).__name__ == "SortTemplate":   # stdlib bitonic row sort
                kinds.add("sort")
            elif type(k).__name__ == "EmbeddingBagTemplate":   # stdlib embedding bag: a gathering reduction
                kinds.add("reduction")
            elif type(k).__name__ == "DepthwiseTemplate":   # stdlib depthwise stencil
                kinds.add("conv")
            else:
                kinds.add("matmul")
        return "|".join(sorted(kinds)) or "elementwise"

    def describe(self) -> str:
        n = len(self.program.kernels)
        return f"lowered program: {n} kernel{'s' if n != 1 else ''} from {len(self.program.ops)} core-ATen ops"


def precision_of(program: LoweredProgram, inputs: list, on_gpu: bool) -> tuple[str, float]:
    """The precision the program computes at (PyTorch's settings or the user's `--precision`, read when it
    was lowered: `program.precision`) and the comparison tolerance that follows: fp32 grows with the longest
    reduction, anything below fp32 is KernelBench's 1e-2, and nothing is looser than that."""
    from .precision import resolve

    prec = program.precision or resolve(None)
    # (the bf16 copies --precision bf16 makes of matmul/conv operands are the precision's, not the reference's)
    dtypes = {t.dtype for t in inputs if isinstance(t, torch.Tensor)} | {b.dtype for b in program.buffers
                                                                          if "_bf16" not in b.name}
    half = any(compute_dtype(d) != d for d in dtypes if d.is_floating_point)
    conv = any("convolution" in op for op in program.ops)
    mm = any(op.split(".")[1] in ("mm", "bmm", "addmm", "baddbmm") for op in program.ops if op.count(".") >= 1)
    notes = []
    reduced = False
    if conv and prec.conv != "fp32" and (on_gpu or prec.asked):
        notes.append(f"convolutions in {prec.conv}" + ("" if prec.asked else " (torch.backends.cudnn.allow_tf32)"))
        reduced = True
    if mm and prec.matmul != "fp32" and (on_gpu or prec.asked):
        notes.append(f"matmuls in {prec.matmul}" + ("" if prec.asked else
                                                    " (torch.backends.cuda.matmul.allow_tf32 / "
                                                    "set_float32_matmul_precision)"))
        reduced = True
    rnn = any(op.startswith(("aten.lstm.", "aten.gru.", "aten.rnn_tanh.", "aten.rnn_relu.")) for op in program.ops)
    if rnn and prec.conv != "fp32" and (on_gpu or prec.asked):
        notes.append("recurrent layers in tf32" + ("" if prec.asked else " (torch.backends.cudnn.allow_tf32, "
                                                                         "as cuDNN's RNNs)"))
        reduced = True
    if half:
        notes.append("half-precision tensors (computed in fp32, rounded where stored)")
    # Two fp32 sums of the same K terms in different orders agree only to about K * 2^-24 of the terms'
    # magnitude (the reference carries that error too): the fp32 tolerance grows with the longest reduction
    # the program's outputs depend on, up to KernelBench's 1e-2.
    longest = max((_reduction_length(k) for k in program.kernels), default=1)
    fp32_tol = min(REDUCED_TOL, max(FP32_TOL, longest * 2.0**-24 * 8))
    head = prec.asked or ("tf32" if reduced else "fp32")
    text = f"{head} (kernels accumulate in fp32" + ("; " + "; ".join(notes) if notes else "") + ")"
    return text, (REDUCED_TOL if (half or reduced) else fp32_tol)


def _reduction_length(kernel) -> int:
    from .core import Reduction, RowFused, Scan
    from .templates import ConvTemplate, Fp32GemmTemplate, MatmulTemplate

    if isinstance(kernel, (Reduction, RowFused)):
        return kernel.R
    if isinstance(kernel, Scan):      # a running sum of N terms carries the error of an N-term sum
        return kernel.N
    if isinstance(kernel, (ConvTemplate, Fp32GemmTemplate, MatmulTemplate)):
        return kernel.K
    if type(kernel).__name__ in ("ScatterAddTemplate", "MoeTemplate", "RnnTemplate", "EmbeddingBagTemplate",
                                 "DepthwiseTemplate"):   # atomic adds of N rows; the MoE's GEMMs; a bag or window sum
        return kernel.K
    return 1


def lower_problem(problem, target: str = "cpu", precision: str | None = None) -> LoweredCandidate:
    """Lower the problem's Model at its base inputs into a candidate module; `precision` (fp32, tf32, bf16)
    overrides PyTorch's settings for fp32 matmuls and convolutions (lower/precision.py)."""
    model = problem.make_model()
    inputs = list(problem.base_inputs)
    prog = lower_model(model, inputs, "cpu" if target == "cpu" else target, precision)
    precision, tol = precision_of(prog, inputs, target != "cpu" and torch.cuda.is_available())
    source = render_program(prog, precision)
    ops = sorted({op.split(".")[1] if op.count(".") >= 1 else op for op in prog.ops})
    return LoweredCandidate(source, tol, precision, prog, ops)
