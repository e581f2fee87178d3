"""No import cycle anywhere in the package: every module's imports, read from its source.

Imports inside functions count (a cycle hidden in a function is still a cycle: the layers it
joins can no longer be told apart), and so do imports under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import bertgraph

PACKAGE = Path(bertgraph.__file__).parent

# Cycles known and being removed: each entry must still be a cycle (remove it when it is gone).
KNOWN_CYCLES: frozenset[frozenset[str]] = frozenset()


def module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, name: str, is_package: bool, modules: set[str]) -> list[tuple[str, int]]:
    """The package's modules ``tree`` imports, with the line of each import.

    ``from a.b import c`` imports the module ``a.b.c`` when there is one, else the name ``c`` of ``a.b``.
    """
    here = name if is_package else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.append((target if target in modules else base, node.lineno))
    return [(target, line) for target, line in found if target in modules and target != name]


def import_graph(package: Path = PACKAGE) -> nx.DiGraph:
    """Module → module it imports (edge attribute ``line``), over every module of ``package``."""
    paths = {module_name(path, package): path for path in sorted(package.rglob("*.py"))}
    graph = nx.DiGraph()
    graph.add_nodes_from(paths)
    for name, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for target, line in imported(tree, name, path.name == "__init__.py", set(paths)):
            graph.add_edge(name, target, line=line)
    return graph


def cycles(graph: nx.DiGraph) -> set[frozenset[str]]:
    """The groups of modules that import each other, directly or through others."""
    return {frozenset(group) for group in nx.strongly_connected_components(graph) if len(group) > 1}


def describe(graph: nx.DiGraph, group: frozenset[str]) -> str:
    """One cycle through ``group``, each import with its line: ``a:12 imports b, b:3 imports a``."""
    loop = nx.find_cycle(graph.subgraph(group), source=min(group))
    return f"{sorted(group)}: " + ", ".join(f"{a}:{graph.edges[a, b]['line']} imports {b}" for a, b in loop)


def test_no_module_is_part_of_an_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 100 and graph.number_of_edges() > 300  # the whole package was read
    found = cycles(graph)
    new = found - KNOWN_CYCLES
    assert not new, "\n".join(describe(graph, group) for group in sorted(new, key=sorted))
    gone = KNOWN_CYCLES - found
    assert not gone, f"no longer cycles, remove them from KNOWN_CYCLES: {sorted(map(sorted, gone))}"


def test_the_cost_tables_sit_above_the_cost_primitives() -> None:
    """The base module imports no cost module; every cost module imports it, and only the table
    imports the planning modules."""
    graph = import_graph()
    cost_modules = {f"bertgraph.graph.{m}" for m in ("cost", "generation", "masked", "memory", "moe", "saved")}
    base, table = "bertgraph.graph.costbase", "bertgraph.graph.costtable"
    assert not nx.descendants(graph, base) & (cost_modules | {table})
    assert all(nx.has_path(graph, module, base) for module in cost_modules | {table})
    assert not any(nx.has_path(graph, module, table) for module in cost_modules)


def test_imports_inside_functions_and_relative_ones_are_read(tmp_path: Path) -> None:
    """The reader sees an import in a function, a relative one and ``from package import module``."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from . import low\n")
    (package / "sub" / "low.py").write_text("def f():\n    from ..top import thing\n")
    (package / "top.py").write_text("from pkg.sub import low\nthing = 1\n")
    graph = import_graph(package)
    assert set(graph.edges) == {("pkg.sub", "pkg.sub.low"), ("pkg.sub.low", "pkg.top"), ("pkg.top", "pkg.sub.low")}
    assert cycles(graph) == {frozenset({"pkg.sub.low", "pkg.top"})}
