"""The plain records a diagram is made of: nodes, edges, clusters and the diagram that holds them.

:mod:`bertgraph.render.diagram` fills them from a view of the graph, :mod:`bertgraph.render.compact`
rewrites them, and the writers (DOT, Mermaid, the interactive page) only read them; all of
them import this module, which imports none of them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from bertgraph.render.style import KIND_NAMES


@dataclass(frozen=True)
class Node:
    id: str
    title: str
    lines: tuple[str, ...]
    tooltip: str
    kind: str
    shape: str  # "module", "op" or "io"
    highlight: bool = False
    heat: int | None = None  # the bin of the annotated figure's share (annotated diagrams only)
    role: str = ""  # the role of the node's module (graph/roles.py), "" for inputs and outputs
    base: str = ""  # the kind before attention refined it (a layer coloured as its self-attention: "block")


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    label: str
    style: str = "data"  # "data", "residual", "mask" or "cross" (the encoder's output into the decoder)
    shape: str = ""  # the shape it carries, whether or not ``label`` shows it


@dataclass(frozen=True)
class Cluster:
    id: str
    title: str
    parent: str | None
    role: str  # "backbone", "head", "module", "variant" or "repeat" (a repeating pattern's layers)
    highlight: bool = False


@dataclass
class Diagram:
    title: str
    subtitle: str
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    clusters: list[Cluster] = field(default_factory=list)
    membership: dict[str, str | None] = field(default_factory=dict)  # node id → innermost cluster id
    same_rank: list[tuple[str, ...]] = field(default_factory=list)
    left_of: list[tuple[str, str]] = field(default_factory=list)  # (a, b): a is drawn left of b, on its rank
    kinds: list[str] = field(default_factory=list)
    compare: bool = False
    scale: str | None = None  # the heat legend's title (annotated diagrams only)
    kind_names: dict[str, str] = field(default_factory=dict)  # legend names that differ from KIND_NAMES
    caption: list[str] = field(default_factory=list)  # the facts under the title (layers, hidden size, heads, …)
    bottom: list[str] = field(default_factory=list)  # nodes drawn on the last rank (the model's outputs)
    below: list[tuple[str, str]] = field(default_factory=list)  # (a, b): b drawn on a rank below a's, no edge drawn
    sides: dict[str, str] = field(default_factory=dict)  # node id → "encoder" or "decoder": the stack it belongs to

    def kind_name(self, kind: str) -> str:
        """The legend's name of a kind (a decoder's layers are decoder layers)."""
        return self.kind_names.get(kind, KIND_NAMES[kind])

    def add_variant(self, prefix: str, title: str, part: Diagram) -> None:
        """Draw ``part`` (built with ids starting ``prefix``) beside the rest, in a box titled ``title``."""
        self.clusters.append(Cluster(f"{prefix}variant", title, None, "variant"))
        self.nodes += part.nodes
        self.edges += part.edges
        self.clusters += part.clusters
        self.membership.update(part.membership)
        self.same_rank += part.same_rank
        self.left_of += part.left_of
        self.bottom += part.bottom
        self.below += part.below
        self.sides.update(part.sides)

    @property
    def cross(self) -> bool:
        """Whether edges carry an encoder's output into a decoder's cross-attention."""
        return any(edge.style == "cross" for edge in self.edges)

    def nodes_by_cluster(self) -> dict[str | None, list[Node]]:
        """Nodes grouped by the innermost cluster they sit in (``None``: outside every cluster)."""
        grouped: dict[str | None, list[Node]] = defaultdict(list)
        for node in self.nodes:
            grouped[self.membership.get(node.id)].append(node)
        return grouped

    def clusters_by_parent(self) -> dict[str | None, list[Cluster]]:
        grouped: dict[str | None, list[Cluster]] = defaultdict(list)
        for cluster in self.clusters:
            grouped[cluster.parent].append(cluster)
        return grouped
