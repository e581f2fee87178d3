"""Every drawn element carries a stable id and classes naming its role, in the SVG Graphviz writes.

Read back from real Graphviz SVG: ids are unique within a drawing; a module keeps its id at every
depth it is drawn at (as a box or as a frame) and in another run (the committed bert-tiny trace
against a fresh one, drawn by the command line in a process of its own); every box has exactly
one role class, every frame a ``cluster-`` and every arrow an ``edge-`` class; attention boxes
name their kind; the legend's swatches carry the classes of what they explain; the page's
viewer keys its boxes by the same ids.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from bertgraph.graph.views import view
from bertgraph.render import dot, graphviz_run, ids, schematic
from bertgraph.render.diagram import build
from bertgraph.render.escape import element_id
from tests.conftest import require
from tests.editable_models import t5_graph
from tests.graph_fixtures import bert_tiny

pytestmark = pytest.mark.dot
SVG = "{http://www.w3.org/2000/svg}"
DEPTHS = (0, 1, 2, 3, 4)


def drawn(svg: bytes | str) -> list[tuple[str, str, list[str]]]:
    """``(kind, id, classes)`` of every node, cluster and edge group in a Graphviz SVG."""
    root = ET.fromstring(svg)
    found = []
    for group in root.iter(f"{SVG}g"):
        classes = str(group.get("class", "")).split()
        if classes and classes[0] in ("node", "cluster", "edge"):
            found.append((classes[0], str(group.get("id", "")), classes[1:]))
    return found


def every_id(svg: bytes | str) -> list[str]:
    return [str(element.get("id")) for element in ET.fromstring(svg).iter() if element.get("id") is not None]


def svg_of(graph: nx.DiGraph, depth: int) -> bytes:
    source = "\n".join(dot.generate_lines(build(graph, depth))) + "\n"
    return graphviz_run.render(source, "svg")


@pytest.fixture(scope="module")
def t5(once: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory) -> nx.DiGraph:
    require(shutil.which("dot") is not None, "Graphviz dot is not installed (apt-get install graphviz)")
    return t5_graph(once, tmp_path_factory)


@pytest.fixture(scope="module")
def bert_svgs() -> dict[int, bytes]:
    return {depth: svg_of(bert_tiny("sequence-classification"), depth) for depth in DEPTHS}


def test_ids_are_unique_and_every_element_says_its_role(bert_svgs: dict[int, bytes], t5: nx.DiGraph) -> None:
    drawings = {f"bert-tiny depth {d}": svg for d, svg in bert_svgs.items()}
    drawings |= {f"t5 depth {d}": svg_of(t5, d) for d in (1, 2, 3)}
    drawings["schematic"] = graphviz_run.render("\n".join(schematic.generate_lines([bert_tiny("base"), t5])), "svg")
    for name, svg in drawings.items():
        found = every_id(svg)
        assert len(found) == len(set(found)), (name, sorted({i for i in found if found.count(i) > 1}))
        for kind, ident, classes in drawn(svg):
            assert ident and ident[0].isalpha() and all(c.isalnum() or c in "-_" for c in ident), (name, ident)
            prefix = {"node": "role-", "cluster": "cluster-", "edge": "edge-"}[kind]
            assert len([c for c in classes if c.startswith(prefix)]) == 1, (name, kind, ident, classes)


def test_attention_boxes_name_their_kind(t5: nx.DiGraph) -> None:
    """Depth 3 of an encoder-decoder: the encoder's self-attention bidirectional, the decoder's causal,
    its cross-attention cross — each the kind the facts pass found, as a class."""
    classes = {ident: cls for kind, ident, cls in drawn(svg_of(t5, 3)) if kind == "node"}
    kinds = {ident: [c for c in cls if c.startswith("kind-")] for ident, cls in classes.items()}
    encoder = [i for i in kinds if i.startswith("encoder-block-") and "-layer-0-SelfAttention" in i]
    decoder_self = [i for i in kinds if i.startswith("decoder-block-") and "-layer-0-SelfAttention" in i]
    decoder_cross = [i for i in kinds if i.startswith("decoder-block-") and "-layer-1-EncDecAttention" in i]
    # the attention ops carry the kind; the projections around them are attention without one
    for boxes, kind in ((encoder, "kind-bidirectional"), (decoder_self, "kind-causal"), (decoder_cross, "kind-cross")):
        assert {tuple(kinds[i]) for i in boxes} == {(), (kind,)}, (kind, {i: kinds[i] for i in boxes})
        assert all("role-attention" in classes[i] for i in boxes if kinds[i])


def _paths_by_id(graph: nx.DiGraph, depth: int, svg: bytes) -> dict[str, str]:
    """Each drawn element's id and the module path (or view node) it stands for."""
    diagram = build(graph, depth)
    names = {element_id(node.id): node.id for node in diagram.nodes}
    names |= {element_id(dot.cluster_name(cluster)): dot.cluster_name(cluster) for cluster in diagram.clusters}
    return {ident: names[ident] for kind, ident, _ in drawn(svg) if kind != "edge"}


def test_a_module_keeps_its_id_at_every_depth(bert_svgs: dict[int, bytes]) -> None:
    graph = bert_tiny("sequence-classification")
    seen: dict[str, set[str]] = {}  # module path → every id it was drawn with
    owners: dict[str, set[str]] = {}  # id → every module path drawn with it
    for depth, svg in bert_svgs.items():
        for ident, path in _paths_by_id(graph, depth, svg).items():
            seen.setdefault(path.removesuffix(":ops"), set()).add(ident.removesuffix("--ops"))
            owners.setdefault(ident, set()).add(path)
    assert all(len(found) == 1 for found in seen.values()), {p: f for p, f in seen.items() if len(f) > 1}
    assert all(len(paths) == 1 for paths in owners.values())
    # the pooler: a box at depth 1, the frame of its dense layer and activation at depth 2; a layer likewise
    at = {depth: {ident: kind for kind, ident, _ in drawn(svg)} for depth, svg in bert_svgs.items()}
    assert at[1]["bert-pooler"] == "node" and at[2]["bert-pooler"] == "cluster"
    assert at[2]["bert-encoder-layer-0-2"] == "node" and at[3]["bert-encoder-layer-0-2"] == "cluster"
    assert at[3]["bert-encoder-layer-0-2-attention-self-query"] == "node"
    assert at[4]["bert-encoder-layer-0-2-attention-self-query--linear"] == "node"


def test_ids_are_the_same_in_another_run(bert_svgs: dict[int, bytes], tmp_path: Path) -> None:
    """bert-tiny with 3 layers drawn by a fresh trace in a process of its own: the ids of the committed trace."""
    output = tmp_path / "bert.svg"
    command = [sys.executable, "-m", "bertgraph", "render", "bert-tiny", "--layers", "3"]
    command += ["--head", "sequence-classification", "--depth", "3", "--no-cache", "-o", str(output)]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    fresh = [(kind, ident, classes) for kind, ident, classes in drawn(output.read_bytes())]
    committed = drawn(bert_svgs[3])
    assert sorted(fresh) == sorted(committed)
    assert len(fresh) > 30


def test_legend_swatches_carry_the_classes_of_their_boxes(bert_svgs: dict[int, bytes]) -> None:
    from bertgraph.render import render_image

    svg = render_image(bert_tiny("sequence-classification"), "svg", depth=2).decode()
    root = ET.fromstring(svg)
    swatches = [p for p in root.iter(f"{SVG}polygon") if "legend" in str(p.get("class", "")).split()]
    box_roles = {c for kind, _, cls in drawn(svg) if kind == "node" for c in cls if c.startswith(("role-", "kind-"))}
    legend_roles = {c for p in swatches for c in str(p.get("class")).split() if c.startswith(("role-", "kind-"))}
    # a fill and its outline per legend entry: input/output, embedding, bidirectional attention, norm, pooler,
    # other (the parameter-free steps: dropout), head
    assert len(swatches) == 2 * 7
    assert legend_roles <= box_roles and {"role-io", "kind-bidirectional", "role-head"} <= legend_roles
    filled = {p.get("fill") for p in swatches if p.get("fill") != "none"}
    assert "#b9d1fb" in filled  # the bidirectional attention swatch, classed by its colour


def test_the_page_keys_its_boxes_by_the_drawn_ids() -> None:
    from bertgraph.render.html import _depth_records

    graph = bert_tiny("sequence-classification")
    for depth in (1, 3):
        source, record = _depth_records(graph, depth, True, None)
        svg = graphviz_run.render(source, "svg")
        nodes = {ident for kind, ident, _ in drawn(svg) if kind == "node"}
        assert set(record["nodes"]) == nodes
        shown = view(graph, depth)
        assert {element_id(n) for n in shown.nodes} >= set(record["nodes"])


def test_ids_are_unique_when_names_spell_alike() -> None:
    table = ids.ElementIds()
    assert [table("a.b"), table("a-b"), table("a.b"), table.edge("a.b", "a-b")] == ["a-b", "a-b-2", "a-b", "a-b__a-b-2"]
    assert json.dumps(table.names()) == '{"a.b": "a-b", "a-b": "a-b-2"}'


def test_the_schematic_legend_swatches_carry_the_classes_of_their_boxes(t5: nx.DiGraph) -> None:
    """The families schematic's legend (a swatch per look it draws) is classed like the boxes it explains."""
    built = schematic.built_columns([bert_tiny("base"), t5])
    svg = str(schematic.schematic_text([bert_tiny("base"), t5], "svg"), "utf-8")
    swatches = [p for p in ET.fromstring(svg).iter(f"{SVG}polygon") if "legend" in str(p.get("class", "")).split()]
    box_roles = {c for kind, _, cls in drawn(svg) if kind == "node" for c in cls if c.startswith(("role-", "kind-"))}
    legend_roles = {c for p in swatches for c in str(p.get("class")).split() if c.startswith(("role-", "kind-"))}
    assert len(swatches) == 2 * len(schematic.figure_kinds(built))  # a fill and its outline per look
    assert legend_roles <= box_roles and {"role-io", "kind-causal", "kind-cross", "role-feed-forward"} <= legend_roles
