#!/usr/bin/env python3
"""The import graph of the ``jupyter_quota`` package: modules, cycles, imports that run up the layers.

    python scripts/import_graph.py [ROOT]     # ROOT: a checkout (default: this one)

Reads the sources with ``ast`` (nothing is imported or run). Every import counts, a function's
lazy import included (it still ties the two modules together), except those under
``if TYPE_CHECKING:``. An import names a module: ``from .a import b`` is an edge to ``a.b`` when
that is a module, else to ``a``.

Layers, lowest first (``LAYERS``): the domain floor, the backends, the application layer
(``service``), the adapters and the config (composed of every subsystem's settings) at the top.
A module may import its own layer or lower ones. Exits 1 when the package has an import cycle or
a domain module imports a backend; other imports up the layers are listed, as the figures to
bring down."""

from __future__ import annotations

import ast
import os
import sys

PACKAGE = "jupyter_quota"

#: (layer, module prefixes), lowest first; a module not named here is on the domain floor
#: (quantity, quota, limitrange, estimator, planner, elastic, windows, usage, times, statedir, ...).
LAYERS = [
    ("domain", ()),
    ("backends", ("backends",)),
    ("service", ("service", "metrics")),
    (
        "adapters",
        (
            "handlers",
            "hubservice",
            "cli",
            "increasecli",
            "usagecli",
            "magics",
            "extension",
            "config",  # composed of the subsystems' settings (service/, backends/settings.py)
            "__init__",
            "__main__",
        ),
    ),
]


def main(argv: list[str]) -> int:
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    graph = import_graph(os.path.join(root, PACKAGE))
    cycles = strongly_connected(graph)
    upward = [(a, b) for a in sorted(graph) for b in sorted(graph[a]) if rank(b) > rank(a)]
    floor_to_backend = [(a, b) for a, b in upward if layer(a) == "domain" and layer(b) == "backends"]

    print(f"{PACKAGE} at {root}")
    print(f"modules: {len(graph)}")
    print(f"imports (edges): {sum(len(v) for v in graph.values())}")
    print(f"import cycles: {len(cycles)}")
    for component in cycles:
        print("  cycle: " + " <-> ".join(short(m) for m in component))
    print(f"imports up the layers ({' < '.join(name for name, _ in LAYERS)}): {len(upward)}")
    for a, b in upward:
        print(f"  {short(a)} ({layer(a)}) -> {short(b)} ({layer(b)})")
    print(f"domain -> backend imports: {len(floor_to_backend)}")
    return 1 if cycles or floor_to_backend else 0


def import_graph(package_dir: str) -> dict[str, set[str]]:
    """module -> the package modules it imports (dotted names, ``pkg`` for ``pkg/__init__.py``)."""
    modules = {}
    for folder, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and d != "labextension")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, os.path.dirname(package_dir))[: -len(".py")]
                parts = rel.split(os.sep)
                is_package = parts[-1] == "__init__"
                if is_package:
                    parts = parts[:-1]
                modules[".".join(parts)] = (path, is_package)
    graph = {}
    for module, (path, is_package) in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        here = module if is_package else module.rpartition(".")[0]
        targets = set()
        for node in _imports(tree):
            for target in _targets(node, here):
                found = _resolve(target, modules)
                if found is not None and found != module:
                    targets.add(found)
        graph[module] = targets
    return graph


def _imports(tree: ast.AST):
    """Import nodes anywhere in ``tree``, skipping ``if TYPE_CHECKING:`` bodies."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in _imports_in(child))
            continue
        yield from _imports_in(node)


def _imports_in(node: ast.AST):
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    else:
        yield from _imports(node)


def _targets(node, here: str) -> list[str]:
    """Candidate dotted names an import statement loads (most specific first for ``from``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = here.split(".")
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    return [f"{prefix}.{alias.name}|{prefix}" for alias in node.names]


def _resolve(target: str, modules) -> str | None:
    for name in target.split("|"):
        while name:
            if name in modules:
                return name
            if not name.startswith(PACKAGE):
                return None
            name = name.rpartition(".")[0]
    return None


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: the components with more than one module, each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


#: modules on the domain floor inside a higher package: constants named once, importing nothing
FLOOR = {"hubservice.names"}


def layer(module: str) -> str:
    rest = module[len(PACKAGE) + 1 :] if module != PACKAGE else "__init__"
    if rest in FLOOR:
        return LAYERS[0][0]
    first = rest.split(".")[0]
    for name, prefixes in reversed(LAYERS):
        if first in prefixes:
            return name
    return LAYERS[0][0]


def rank(module: str) -> int:
    return [name for name, _ in LAYERS].index(layer(module))


def short(module: str) -> str:
    return module[len(PACKAGE) + 1 :] or PACKAGE if module != PACKAGE else PACKAGE


if __name__ == "__main__":
    sys.exit(main(sys.argv))
