"""The layering rules of docs/architecture.md, checked on the source (with ast, nothing is imported):

* no import cycle between the modules of our packages (imports inside functions count: they only hide a
  cycle from the import machinery, not from the reader);
* `tilepy` imports none of the packages built on it (it names no verifier, backend or agent);
* no package imports another package's private names (`_x`), or reaches them through a module it imported.

Each rule is checked against a small synthetic tree too, so a checker that finds nothing is caught."""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tilepy", "tilepy_verify", "tilepy_hip", "argus_agent", "stdlib_kernels")
# what tilepy must not import: everything built on it
NOT_BELOW_TILEPY = ("tilepy_verify", "tilepy_hip", "argus_agent", "stdlib_kernels")


@dataclass(frozen=True)
class Edge:
    src: str  # importing module
    dst: str  # imported module
    line: int
    text: str  # the import statement


@dataclass(frozen=True)
class PrivateUse:
    src: str
    line: int
    name: str  # dotted: module.private_name


def module_files(root: Path, packages=PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the packages under `root`."""
    mods = {}
    for pkg in packages:
        for f in sorted((root / pkg).rglob("*.py")):
            parts = f.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = f
    return mods


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module):
    """Import statements that run (those under `if TYPE_CHECKING:` do not)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                todo.extend(child.orelse)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child
            todo.append(child)


def _base(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` names."""
    if not node.level:
        return node.module or ""
    parts = mod.split(".") if is_pkg else mod.split(".")[:-1]
    if node.level > 1:
        parts = parts[:len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _known(name: str, mods) -> str | None:
    """The longest prefix of a dotted name that is one of our modules."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        cand = ".".join(parts[:n])
        if cand in mods:
            return cand
    return None


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _package(mod: str) -> str:
    return mod.split(".")[0]


def analyse(root: Path, packages=PACKAGES):
    """(module files, import edges between our modules, private names used across packages)."""
    mods = module_files(root, packages)
    edges: list[Edge] = []
    private: list[PrivateUse] = []
    for mod, path in mods.items():
        src = path.read_text()
        tree = ast.parse(src, str(path))
        lines = src.splitlines()
        is_pkg = path.name == "__init__.py"
        bound: dict[str, str] = {}  # local name -> our module it is bound to

        def edge(dst, node, mod=mod, lines=lines):
            if dst != mod:
                edges.append(Edge(mod, dst, node.lineno, lines[node.lineno - 1].strip()))

        for node in _imports(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    dst = _known(a.name, mods)
                    if dst is None:
                        continue
                    edge(dst, node)
                    if _package(dst) != _package(mod) and any(_private(p) for p in a.name.split(".")):
                        private.append(PrivateUse(mod, node.lineno, a.name))
                    if a.asname:
                        bound[a.asname] = dst
                    else:
                        top = a.name.split(".")[0]
                        if top in mods:
                            bound[top] = top
                continue
            base = _base(mod, is_pkg, node)
            owner = _known(base, mods)
            if owner is None:
                continue
            foreign = _package(owner) != _package(mod)
            if foreign and any(_private(p) for p in base.split(".")):
                private.append(PrivateUse(mod, node.lineno, base))
            for a in node.names:
                sub = f"{base}.{a.name}"
                if sub in mods:  # a module: the edge goes to it
                    edge(sub, node)
                    bound[a.asname or a.name] = sub
                else:  # a name defined in `base` (or a star)
                    edge(owner, node)
                    if foreign and _private(a.name):
                        private.append(PrivateUse(mod, node.lineno, f"{base}.{a.name}"))
        # module.attribute chains through a module of another package: module._private
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            chain, cur = [], node
            while isinstance(cur, ast.Attribute):
                chain.append(cur.attr)
                cur = cur.value
            if not isinstance(cur, ast.Name) or cur.id not in bound:
                continue
            target = bound[cur.id]
            if _package(target) == _package(mod):
                continue
            dotted = target
            for attr in reversed(chain):
                if _private(attr):
                    private.append(PrivateUse(mod, node.lineno, f"{dotted}.{attr}"))
                    break
                if f"{dotted}.{attr}" not in mods:
                    break
                dotted = f"{dotted}.{attr}"
    return mods, edges, sorted(set(private), key=lambda p: (p.src, p.line, p.name))


def cycles(mods, edges) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set] = {m: set() for m in mods}
    for e in edges:
        graph[e.src].add(e.dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set = set()
    out = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def _describe(comp, edges) -> str:
    inside = set(comp)
    lines = [f"  {e.src} -> {e.dst}   ({e.src.replace('.', '/')}.py:{e.line}: {e.text})"
             for e in edges if e.src in inside and e.dst in inside]
    return "import cycle between " + ", ".join(comp) + ":\n" + "\n".join(sorted(set(lines)))


@pytest.fixture(scope="module")
def repo():
    return analyse(ROOT)


# ------------------------------------------------------------------------------------------ the rules


def test_packages_found(repo):
    mods, edges, _ = repo
    for pkg in PACKAGES:
        assert pkg in mods, f"package {pkg} not found under the repository root"
    # the graph is not empty: tilepy's front end imports its IR
    assert any(e.src == "tilepy.frontend" and e.dst == "tilepy.ir" for e in edges)


def test_no_import_cycles(repo):
    mods, edges, _ = repo
    found = cycles(mods, edges)
    assert not found, ("modules that import each other (move what both need into a module of its own):\n"
                       + "\n".join(_describe(c, edges) for c in found))


def test_tilepy_imports_no_package_built_on_it(repo):
    _, edges, _ = repo
    bad = [e for e in edges if _package(e.src) == "tilepy" and _package(e.dst) in NOT_BELOW_TILEPY]
    assert not bad, ("tilepy must not import the packages built on it (the backend registers itself, see "
                     "tilepy.register_gpu_backend):\n"
                     + "\n".join(f"  {e.src.replace('.', '/')}.py:{e.line}: {e.text}" for e in bad))


def test_no_private_names_across_packages(repo):
    _, _, private = repo
    assert not private, ("private names (_x) used from another package: make them public in their module, "
                         "or move the code that needs them:\n"
                         + "\n".join(f"  {p.src.replace('.', '/')}.py:{p.line}: {p.name}" for p in private))


# ------------------------------------------------------------------------------------------ the checker itself


def _tree(tmp_path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(textwrap.dedent(text))
    return tmp_path


def test_checker_finds_cycles(tmp_path):
    root = _tree(tmp_path, {
        "pa/__init__.py": "from .a import A\n",
        "pa/a.py": "from . import b\nA = 1\n",
        "pa/b.py": "def f():\n    from .c import C\n    return C\n",  # hidden in a function: still a cycle
        "pa/c.py": "import pa.a\nC = 2\n",
        "pa/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .e import E\n",
        "pa/e.py": "from .d import TYPE_CHECKING\n",  # d -> e only for type checkers: no cycle
        "pa/sub/__init__.py": "",
        "pa/sub/x.py": "from ..sub import y\n",
        "pa/sub/y.py": "from .. import sub\nfrom ...pa.sub.x import X\n",
    })
    mods, edges, _ = analyse(root, ("pa",))
    assert cycles(mods, edges) == [["pa.a", "pa.b", "pa.c"], ["pa.sub.x", "pa.sub.y"]]
    text = _describe(["pa.a", "pa.b", "pa.c"], edges)
    assert "pa/b.py:2: from .c import C" in text


def test_checker_finds_private_and_layering(tmp_path):
    root = _tree(tmp_path, {
        "pa/__init__.py": "",
        "pa/m.py": "_hidden = 1\npublic = 2\n",
        "pa/_impl.py": "X = 1\n",
        "pa/own.py": "from .m import _hidden\n",  # the same package: allowed
        "pb/__init__.py": "",
        "pb/ok.py": "from pa.m import public\nimport pa.m as mm\nprint(mm.public, mm.__name__)\n",
        "pb/bad1.py": "from pa.m import _hidden\n",
        "pb/bad2.py": "from pa import m\nprint(m._hidden)\n",
        "pb/bad3.py": "import pa.m\nprint(pa.m._hidden)\n",
        "pb/bad4.py": "from pa._impl import X\n",
        "pa/up.py": "import pb.ok\n",
    })
    mods, edges, private = analyse(root, ("pa", "pb"))
    assert [(p.src, p.name) for p in private] == [
        ("pb.bad1", "pa.m._hidden"), ("pb.bad2", "pa.m._hidden"), ("pb.bad3", "pa.m._hidden"),
        ("pb.bad4", "pa._impl")]
    assert any(e.src == "pa.up" and e.dst == "pb.ok" for e in edges)
    assert not any(e.src == "pa.own" and e.dst != "pa.m" for e in edges)
