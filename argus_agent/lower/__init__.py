"""PyTorch programs to tilepy: torch.export capture, core-ATen lowering, implicit fusion, code generation.

    prog = lower_model(model, inputs)        # LoweringError names the op and the reference's line
    source = render_program(prog)            # kernels + argus_forward(model, *inputs)
"""

from .codegen import render_program
from .graph import LoweringError, capture_program
from .program import LoweredProgram, lower_model

__all__ = ["LoweringError", "LoweredProgram", "capture_program", "lower_model", "render_program"]
