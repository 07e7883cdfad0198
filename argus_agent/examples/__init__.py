"""Built-in example problems in KernelBench's format (Model, get_inputs, get_init_inputs), each with small
`get_cpu_inputs()` for the CPU interpreter. `EXAMPLES` maps a name to its file."""

from pathlib import Path

HERE = Path(__file__).parent
EXAMPLES = {p.stem: p for p in sorted(HERE.glob("*.py")) if p.stem != "__init__"}
