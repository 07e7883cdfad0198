"""Readable text form of the tile IR (`print(kernel.ir(...))` or `tilepy.format_ir`)."""

from __future__ import annotations

from . import ir


def format_expr(e) -> str:
    if isinstance(e, ir.Const):
        return repr(e.value)
    if isinstance(e, ir.Var):
        return e.name
    if isinstance(e, ir.BinOp):
        return f"({format_expr(e.lhs)} {e.op} {format_expr(e.rhs)})"
    if isinstance(e, ir.UnOp):
        return f"({e.op} {format_expr(e.operand)})" if e.op == "not" else f"{e.op}{format_expr(e.operand)}"
    if isinstance(e, ir.Call):
        args = [format_expr(a) for a in e.args]
        args += [f"{k}={_attr(v)}" for k, v in e.attrs.items() if k not in ("type",)]
        return f"{e.op}({', '.join(args)})"
    return repr(e)


def _attr(v) -> str:
    if isinstance(v, ir.TagFn):
        return v.source
    if hasattr(v, "name") and hasattr(v, "family"):
        return v.name
    if hasattr(v, "num_threads") and hasattr(v, "tile"):
        return str(v)
    return str(v)


def format_stmts(stmts, indent: int = 1) -> list[str]:
    pad = "  " * indent
    out = []
    for s in stmts:
        loc = f"  # {s.span.line}"
        if isinstance(s, ir.Assign):
            out.append(f"{pad}{s.name}: {s.value.type} = {format_expr(s.value)}{loc}")
        elif isinstance(s, ir.Eval):
            out.append(f"{pad}{format_expr(s.call)}{loc}")
        elif isinstance(s, ir.For):
            extra = f", stages={s.stages}" if s.stages else ""
            out.append(f"{pad}for {s.var} in {s.kind}({format_expr(s.start)}, {format_expr(s.stop)}, "
                       f"{format_expr(s.step)}{extra}):{loc}")
            out += format_stmts(s.body, indent + 1) or [f"{pad}  pass"]
        elif isinstance(s, ir.If):
            out.append(f"{pad}if[{s.kind}] {format_expr(s.cond)}:{loc}")
            out += format_stmts(s.then, indent + 1) or [f"{pad}  pass"]
            if s.orelse:
                out.append(f"{pad}else:")
                out += format_stmts(s.orelse, indent + 1)
    return out


def format_ir(k: ir.KernelIR) -> str:
    params = ", ".join(f"{p.name}: {p.type}" for p in k.params)
    consts = ", ".join(f"{n}={v}" for n, v in k.constexprs.items())
    head = [f"kernel {k.name}({params}) [{consts}] threads={k.num_threads} target={k.target} "
            f"shared={k.shared_bytes}B  # {k.file}:{k.line}"]
    return "\n".join(head + format_stmts(k.body))


# str(kir) prints the IR: the printer installs itself on the IR class (importing tilepy imports this module),
# so the data model does not import its printer.
ir.KernelIR.__str__ = format_ir
