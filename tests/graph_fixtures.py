"""Small graphs for in-process tests of the graph code: no tracing, no subprocess.

``bert_tiny(head)`` is a committed node-link file bertgraph wrote for bert-tiny with 3 layers
(``tests/test_graph_fixtures.py`` checks it is still what a fresh trace gives, and says how to
rewrite it). ``chain(...)`` builds an operator graph of one list container by hand.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import networkx as nx

from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g

FIXTURES = Path(__file__).parent / "fixtures"
HEADS = ("base", "sequence-classification")


def fixture_path(head: str) -> Path:
    return FIXTURES / f"bert-tiny-3-{head}.json"


@functools.cache
def _read(head: str) -> nx.DiGraph:
    return graph_io.read_json(fixture_path(head))


def bert_tiny(head: str = "sequence-classification") -> nx.DiGraph:
    """A fresh copy of the traced bert-tiny (3 layers) operator graph with ``head``."""
    return copy.deepcopy(_read(head))  # tests change nested attributes too


def op(module: str, name: str, order: int, **attrs: Any) -> dict[str, Any]:
    """Attributes of an operator node."""
    data: dict[str, Any] = {
        g.KIND: g.OPERATOR,
        g.OP: name,
        g.TARGET: f"aten.{name}.default",
        g.MODULE: module,
        g.MODULE_TYPE: attrs.pop("module_type", "Linear"),
        g.SHAPE: ["batch", 4],
        g.DTYPE: "float32",
        g.PARAMS: 0,
        g.ORDER: order,
    }
    data.update(attrs)
    return data


def chain(kinds: list[str], container: str = "stack.layer", params: int = 10) -> nx.DiGraph:
    """``input → container.0 → container.1 → … → output``: one op per sibling, its op named by ``kinds``.

    Each sibling's op reads ``params`` parameters, named after the sibling; the module table
    records the container as a ModuleList and each sibling as a ``Block``.
    """
    graph = g.new_graph(**{g.G_BACKBONE: "", g.G_MODEL_CLASS: "Toy", g.G_NAME: "toy", g.G_HEAD: "base"})
    modules: dict[str, dict[str, Any]] = {"": {"type": "Toy"}, container.split(".")[0]: {"type": "Stack"}}
    modules[container] = {"type": "ModuleList", "sizes": str(len(kinds))}
    parameters = []
    graph.add_node("x", **g.io_attributes(g.INPUT, ["batch", 4], "float32", 0))
    previous = "x"
    for index, kind in enumerate(kinds):
        module = f"{container}.{index}"
        modules[module] = {"type": "Block"}
        node = f"{module}:{kind}"
        name = f"{module}.weight"
        graph.add_node(
            node, **op(module, kind, index + 1, module_type="Block", params=params, param_names=[name], param_bytes=40)
        )
        parameters.append({"name": name, "shape": [params], "numel": params, "trainable": True, "module": module})
        graph.add_edge(previous, node, **{g.SHAPE: ["batch", 4], g.DTYPE: "float32"})
        previous = node
    graph.add_node("y", **g.io_attributes(g.OUTPUT, ["batch", 4], "float32", len(kinds) + 1))
    graph.add_edge(previous, "y", **{g.SHAPE: ["batch", 4], g.DTYPE: "float32"})
    graph.graph[g.G_MODULES] = modules
    graph.graph[g.G_PARAMETERS] = parameters
    return graph


def interleaved_chain(count: int = 3) -> nx.DiGraph:
    """``chain`` of ``count`` identical siblings with an op of their parent between each two (a flip,
    as VITS's flows have): ``x → layer.0 → stack:flip → layer.1 → stack:flip_1 → … → y``."""
    graph = chain(["A"] * count)
    for index in range(count - 1):
        flip = "stack:flip" + (f"_{index}" if index else "")
        source, target = f"stack.layer.{index}:A", f"stack.layer.{index + 1}:A"
        graph.remove_edge(source, target)
        graph.add_node(flip, **op("stack", "flip", graph.nodes[source][g.ORDER], module_type="Stack"))
        graph.add_edge(source, flip, **{g.SHAPE: ["batch", 4], g.DTYPE: "float32"})
        graph.add_edge(flip, target, **{g.SHAPE: ["batch", 4], g.DTYPE: "float32"})
    for number, node in enumerate(nx.topological_sort(graph)):  # each flip right after the sibling it reads
        graph.nodes[node][g.ORDER] = number
    return graph
