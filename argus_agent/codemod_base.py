"""The codemod machinery: how a module names tilepy (`import tilepy as tl`, `from tilepy import kernel`), finding
its kernels and their parameters, the `Codemod` base class and its errors. The codemods themselves are in
codemods.py.

Inside `Codemod.apply`, `tp_attr("load")` matches `tilepy.load` however the source spells it and
`spelled("tp.x")` writes new code with the source's own alias.
"""

from __future__ import annotations

import abc
import re
from contextvars import ContextVar

import libcst as cst
import libcst.matchers as m


def kwarg(name: str, value) -> cst.Arg:
    """`name=value` without spaces around `=` (PEP 8 for keyword arguments)."""
    return cst.Arg(value, keyword=cst.Name(name), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))


class NotApplicable(Exception):
    """The codemod's preconditions do not hold on this source (the message says which)."""


class CodemodError(Exception):
    """A codemod was asked for with bad arguments."""


def parse_source(source: str) -> cst.Module:
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as e:
        raise NotApplicable(f"the source does not parse: {e}") from e


class TilepyNames:
    """How a module names tilepy: aliases bound to the module (`import tilepy as tl`) and members imported
    from it (`from tilepy import kernel as k`); `prefix` is the alias new code is written with."""

    def __init__(self, aliases: set, members: dict):
        self.aliases = aliases
        self.members = members          # local name -> tilepy attribute
        self.prefix = "tp" if "tp" in aliases or not aliases else sorted(aliases)[0]
        self.missing = not aliases      # new code needs `import tilepy as tp`

    @classmethod
    def of(cls, module: cst.Module) -> TilepyNames:
        aliases, members = set(), {}
        for node in _imports(module):
            if isinstance(node, cst.Import):
                for a in node.names:
                    dotted = code_of(a.name)
                    if dotted == "tilepy":
                        aliases.add(a.asname.name.value if a.asname else "tilepy")
            elif node.module is not None and code_of(node.module) == "tilepy" and not node.relative \
                    and not isinstance(node.names, cst.ImportStar):
                for a in node.names:
                    members[a.asname.name.value if a.asname else a.name.value] = a.name.value
        return cls(aliases, members)

    def refers(self, node, attr: str) -> bool:
        """Does `node` name `tilepy.<attr>`?"""
        if isinstance(node, cst.Attribute):
            return node.attr.value == attr and isinstance(node.value, cst.Name) and node.value.value in self.aliases
        return isinstance(node, cst.Name) and self.members.get(node.value) == attr

    def qualify(self, text: str) -> str:
        """Source written with `tp.` (our templates, codemod arguments) in this module's spelling."""
        return text if self.prefix == "tp" else re.sub(r"(?<![\w.])tp\.", self.prefix + ".", text)

    def with_import(self, source: str) -> str:
        """Add `import tilepy as tp` when new code uses `tp.` and the module binds no tilepy alias."""
        if not self.missing or not re.search(r"(?<![\w.])tp\.", source):
            return source
        module = cst.parse_module(source)
        body = list(module.body)
        at = max((i + 1 for i, st in enumerate(body) if isinstance(st, cst.SimpleStatementLine)
                  and any(isinstance(x, (cst.Import, cst.ImportFrom)) for x in st.body)), default=0)
        body.insert(at, cst.parse_statement("import tilepy as tp\n"))
        return module.with_changes(body=body).code


def _imports(module: cst.Module):
    class V(cst.CSTVisitor):
        def __init__(self):
            self.found = []

        def visit_Import(self, node):
            self.found.append(node)

        def visit_ImportFrom(self, node):
            self.found.append(node)

    v = V()
    module.visit(v)
    return v.found


_NAMES: ContextVar[TilepyNames | None] = ContextVar("tilepy_names", default=None)
_PLAIN = TilepyNames({"tp"}, {})   # outside `apply`: the usual `import tilepy as tp`


def tp_attr(attr: str):
    """Matcher for `tilepy.<attr>` however this module spells it (`tp.load`, `tl.load`, `load`)."""
    def names():
        return _NAMES.get() or _PLAIN
    return m.OneOf(m.Attribute(value=m.Name(value=m.MatchIfTrue(lambda v: v in names().aliases)), attr=m.Name(attr)),
                   m.Name(value=m.MatchIfTrue(lambda v: names().members.get(v) == attr)))


def spelled(text: str) -> str:
    """Source written with `tp.` in the current module's spelling."""
    return (_NAMES.get() or _PLAIN).qualify(text)


def _is_kernel(fn: cst.FunctionDef, names: TilepyNames) -> bool:
    for d in fn.decorators:
        expr = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        if names.refers(expr, "kernel"):
            return True
    return False


def kernels(module: cst.Module) -> list[cst.FunctionDef]:
    """The module's top-level `@tilepy.kernel` functions, however it spells tilepy."""
    names = _NAMES.get() or TilepyNames.of(module)
    return [s for s in module.body if isinstance(s, cst.FunctionDef) and _is_kernel(s, names)]


def annotation_text(param: cst.Param) -> str:
    return cst.Module([]).code_for_node(param.annotation.annotation) if param.annotation else ""


def constexpr_params(fn: cst.FunctionDef) -> dict[str, str]:
    """{name: default source} of a kernel's constexpr parameters."""
    out = {}
    for p in fn.params.params:
        if annotation_text(p).endswith("constexpr") and p.default is not None:
            out[p.name.value] = cst.Module([]).code_for_node(p.default)
    return out


def tensor_params(fn: cst.FunctionDef) -> list[tuple[str, str]]:
    """[(name, dtype source)] of a kernel's tensor parameters, in order."""
    out = []
    for p in fn.params.params:
        ann = p.annotation.annotation if p.annotation else None
        if isinstance(ann, cst.Subscript) and m.matches(ann.value, tp_attr("Tensor")):
            dtype = cst.Module([]).code_for_node(ann.slice[0].slice.value)
            out.append((p.name.value, dtype))
    return out


def code_of(node) -> str:
    return cst.Module([]).code_for_node(node)


def replace_kernel(module: cst.Module, old: cst.FunctionDef, new: cst.FunctionDef) -> cst.Module:
    return module.with_changes(body=[new if s is old else s for s in module.body])


def pick_kernels(module, kernel: str | None):
    ks = kernels(module)
    if kernel is not None:
        ks = [k for k in ks if k.name.value == kernel]
        if not ks:
            raise NotApplicable(f"no kernel named `{kernel}`")
    if not ks:
        raise NotApplicable("the source defines no @tp.kernel")
    return ks


class Codemod(abc.ABC):
    """A skill's action: a libcst transform of tilepy source text (formatting and comments kept)."""

    name = ""
    args: tuple = ()

    def apply(self, source: str, **args) -> str:
        """The transformed source; raises NotApplicable where the kernel offers nothing to change.

        tilepy is found by qualified name: `import tilepy as tl` or `from tilepy import kernel` work as
        `import tilepy as tp` does, and new code is written with the module's own alias."""
        names = TilepyNames.of(parse_source(source))
        token = _NAMES.set(names)
        try:
            out = self._apply(source, **args)
        finally:
            _NAMES.reset(token)
        return names.with_import(out)

    @abc.abstractmethod
    def _apply(self, source: str, **args) -> str:
        """`apply`'s work, with `tp_attr(...)` and `spelled(...)` resolving tilepy's names for this source."""

    def __repr__(self):
        return f"<codemod {self.name}>"
