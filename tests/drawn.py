"""What a rendered file shows, read back from the file: nodes, edges, labels, page size.

Tests compare these with the view the diagram was drawn from, so a renderer that drops a
node, an edge or a label fails, whatever the file's size.
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import networkx as nx

from bertgraph.render.diagram import Diagram

SVG = "{http://www.w3.org/2000/svg}"
MERMAID_NODE = re.compile(r"^\s*(n_\w+)(\[|\(|\{|>)", re.MULTILINE)
MERMAID_EDGE = re.compile(r"^\s*(n_\w+) (-->|-\.->|==>)(?:\|[^|]*\|)? (n_\w+)$", re.MULTILINE)


@dataclass(frozen=True)
class Drawing:
    """Nodes (by Graphviz name), edges, every text shown, and the page size in points."""

    nodes: list[str]
    edges: list[str]
    texts: str
    width: float
    height: float


def read_svg(svg: bytes) -> Drawing:
    """A Graphviz SVG: node and edge groups with their ``<title>``, all text, the page size."""
    root = ET.fromstring(svg)  # well-formed XML or an exception

    def titles(kind: str) -> list[str]:
        return [
            "".join(group.find(f"{SVG}title").itertext())  # type: ignore[union-attr]
            for group in root.iter(f"{SVG}g")
            if kind in str(group.get("class", "")).split()  # Graphviz's class, then bertgraph's role classes
        ]

    texts = "\n".join("".join(t.itertext()) for t in root.iter(f"{SVG}text"))
    return Drawing(titles("node"), titles("edge"), texts, _points(root.get("width")), _points(root.get("height")))


def _points(size: str | None) -> float:
    assert size and size.endswith("pt"), size
    return float(size[:-2])


def expected_nodes(view: nx.DiGraph, diagram: Diagram) -> list[str]:
    """The node names a Graphviz diagram draws: the diagram's nodes, each a node of ``view``.

    The compact layout (``render/compact.py``) draws attention masks and merged embedding
    tables as lines of other nodes, so a diagram draws a subset of its view; the legend is
    part of the title, not a node. Module paths are safe DOT ids as they are; the whole
    model's empty path is drawn as ``_``.
    """
    ids = [node.id for node in diagram.nodes]
    assert set(ids) <= set(view.nodes), set(ids) - set(view.nodes)
    return sorted(node or "_" for node in ids)


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG that decodes, checking it is not one flat colour."""
    from PIL import Image

    image = Image.open(io.BytesIO(data))
    image.load()
    colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 8, "the PNG is (nearly) one colour"
    return image.size


def pdf_page(data: bytes) -> tuple[float, float]:
    """Width and height in points of a one-page PDF (Graphviz writes the page objects uncompressed)."""
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    assert len(re.findall(rb"/Type\s*/Page\b(?!s)", data)) == 1
    (box,) = re.findall(rb"/MediaBox\s*\[\s*([\d.\s]+)\]", data)
    x0, y0, x1, y1 = map(float, box.split())
    return x1 - x0, y1 - y0


def mermaid_nodes(text: str) -> list[str]:
    """Node ids a Mermaid flowchart defines, legend left out."""
    return [name for name, _ in MERMAID_NODE.findall(text) if not name.startswith("n_legend")]


def mermaid_edges(text: str) -> list[tuple[str, str]]:
    return [(a, b) for a, _, b in MERMAID_EDGE.findall(text)]


# Every link mermaid.js draws, the invisible ones too (they put the legend under the drawing).
MERMAID_LINK = re.compile(r"^\s*(n_\w+) (-->|-\.->|==>|~~~)(?:\|[^|]*\|)? (n_\w+)$", re.MULTILINE)


def mermaid_links(text: str) -> list[tuple[str, str]]:
    return [(a, b) for a, _, b in MERMAID_LINK.findall(text)]


MERMAID_SVG_NODE = re.compile(r'<g class="node[ "][^>]*? id="[^"]*?flowchart-(n_\w+)-\d+"')


def mermaid_svg_nodes(svg: str) -> list[str]:
    """Node ids mermaid.js drew (its SVG names each ``…flowchart-ID-N``), legend left out."""
    return [name for name in MERMAID_SVG_NODE.findall(svg) if not name.startswith("n_legend")]


def mermaid_svg_edges(svg: str) -> int:
    return svg.count('data-edge="true"')
