"""The renderers import one another in one direction only: no module of ``bertgraph/render`` is
reached again from what it imports, imports inside functions included."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import bertgraph

PACKAGE = Path(bertgraph.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every bertgraph module ``path`` imports, at any place in the file.

    ``from bertgraph.render import dot`` names the submodule ``dot``, not the package: the
    package's own imports are not the importer's.
    """
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bertgraph"):
            submodules = [f"{node.module}.{alias.name}" for alias in node.names]
            real = [name for name in submodules if _exists(name)]
            found |= set(real)
            if len(real) < len(submodules):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("bertgraph")}
    return found


def _exists(name: str) -> bool:
    path = PACKAGE.parent / name.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def import_graph(folder: Path) -> nx.DiGraph:
    graph = nx.DiGraph()
    for path in sorted(folder.rglob("*.py")):
        name = module_name(path)
        graph.add_node(name)
        graph.add_edges_from((name, imported) for imported in imports_of(path))
    return graph


def test_no_renderer_imports_one_that_imports_it_back() -> None:
    graph = import_graph(PACKAGE / "render")
    render = {node for node in graph if node.startswith("bertgraph.render.")}
    cycles = [sorted(piece) for piece in nx.strongly_connected_components(graph.subgraph(render)) if len(piece) > 1]
    assert cycles == []


def test_the_imports_are_read_inside_functions_too(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text("def later():\n    from bertgraph.render import compact\n    import bertgraph.graph.views\n")
    assert imports_of(source) == {"bertgraph.render.compact", "bertgraph.graph.views"}
