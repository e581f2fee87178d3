"""The annotated operator graph: its schema, its files, and the views and tables made from it.

Stages read attribute names as ``from bertgraph.graph import schema as g`` (``g.SHAPE``);
the file functions are here too, so ``bertgraph.graph.write_graphml(G, path)`` and
``bertgraph.graph.read_json(path)`` work as the README shows.
"""

from bertgraph.graph.io import (
    from_node_link,
    generate_graphml,
    generate_json,
    graphml_ready,
    read_graphml,
    read_json,
    to_node_link,
    write_graphml,
    write_json,
)

__all__ = [
    "from_node_link",
    "generate_graphml",
    "generate_json",
    "graphml_ready",
    "read_graphml",
    "read_json",
    "to_node_link",
    "write_graphml",
    "write_json",
]
