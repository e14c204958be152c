"""py_backend's modules import one another one way: no import circle, counting imports inside
functions and the packages an import runs on the way (``from a.b import c`` runs ``a`` and
``a.b``); and each layer knows only the ones below it (the wire graph no op and no JAX, the
lowering driver no op)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "py_backend"


def module_names(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under the package ``root``."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, wherever the import statement is (module
    level, inside functions, under ``if TYPE_CHECKING``), with the packages on the way."""
    modules = module_names(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}

    def add(source: str, target: str) -> None:
        # importing a.b.c runs a, then a.b, then a.b.c
        parts = target.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in modules and prefix != source:
                graph[source].add(prefix)

    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(name, alias.name)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = _package_of(name, path).split(".")
                    base = base[: len(base) - node.level + 1]
                    module = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    module = node.module or ""
                add(name, module)
                for alias in node.names:  # from a import b: b may be a module of its own
                    add(name, f"{module}.{alias.name}")
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected part of more than one module (or a self-import), as
    a path that returns to its first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1 or v in graph[v]:
                found.append(_circle(graph, set(part), v))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _circle(graph: dict[str, set[str]], part: set[str], start: str) -> list[str]:
    """A path inside ``part`` from ``start`` back to it (breadth first)."""
    paths = {w: [start, w] for w in graph[start] if w in part}
    queue = list(paths)
    while start not in paths:
        v = queue.pop(0)
        for w in sorted(graph[v]):
            if w in part and w not in paths:
                paths[w] = [*paths[v], w]
                queue.append(w)
    return paths[start]


def reaches(graph: dict[str, set[str]], source: str) -> set[str]:
    seen: set[str] = set()
    todo = [source]
    while todo:
        for w in graph[todo.pop()]:
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def test_py_backend_has_no_import_circle() -> None:
    graph = import_graph(PACKAGE)
    assert "py_backend.ops.elementwise" in graph and "py_backend.wire_graph" in graph
    assert "py_backend.ops.rules" in graph["py_backend.ops.elementwise"]
    assert cycles(graph) == []


def test_each_layer_knows_only_the_layers_below() -> None:
    graph = import_graph(PACKAGE)
    ops = {name for name in graph if name.startswith("py_backend.ops")}
    # the wire graph: the data model and its decoding, given the registry by its caller
    assert reaches(graph, "py_backend.wire_graph").isdisjoint(
        {*ops, "py_backend.registry", "py_backend.lower", "py_backend.program"})
    # the lowering driver walks graphs and knows no op's rules
    assert reaches(graph, "py_backend.lower").isdisjoint(
        {*ops, "py_backend.registry", "py_backend.program"})
    # the channel knows nothing of graphs or of what runs them
    assert reaches(graph, "py_backend.channel").isdisjoint(
        {*ops, "py_backend.registry", "py_backend.lower", "py_backend.program",
         "py_backend.wire_graph", "py_backend.cache", "py_backend.request_loop"})


def test_wire_graph_and_channel_import_no_jax() -> None:
    for module in ("wire_graph.py", "channel.py"):
        tree = ast.parse((PACKAGE / module).read_text())
        names = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names]
        names += [node.module or "" for node in ast.walk(tree)
                  if isinstance(node, ast.ImportFrom)]
        assert not [n for n in names if n == "jax" or n.startswith("jax.")], module


@pytest.mark.parametrize("where", ["module", "function", "package"])
def test_the_check_sees_a_circle(tmp_path: Path, where: str) -> None:
    # a circle hidden as the one this package had (an import inside a function), a plain one,
    # and one through a package's __init__ (importing pkg.sub.b runs it)
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "sub" / "__init__.py").write_text(
        "from pkg import a\n" if where == "package" else "")
    (root / "a.py").write_text("from pkg.sub import b\n")
    b_source = {
        "module": "from pkg import a\n",
        "function": "def f():\n    from pkg.a import g\n    return g\n",
        "package": "X = 1\n",
    }[where]
    (root / "sub" / "b.py").write_text(b_source)
    found = cycles(import_graph(root))
    if where == "package":
        assert found == [["pkg.a", "pkg.sub", "pkg.a"]]
    else:
        assert found == [["pkg.a", "pkg.sub.b", "pkg.a"]]
    (root / "sub" / "__init__.py").write_text("")
    (root / "sub" / "b.py").write_text("X = 1\n")
    assert cycles(import_graph(root)) == []
