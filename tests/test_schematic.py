"""The families schematic: readable when scaled, drawn downward, facts read off the traces."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import networkx as nx
import pytest

from bertgraph.graph.schematic import columns
from bertgraph.render import schematic

THREE = ("bert-base-uncased", "gpt2", "t5-small")


def _graphs(traced: Any, models: tuple[str, ...]) -> list[nx.DiGraph]:
    return [traced(model).graph for model in models]


def smallest_px(svg: str, page_px: float) -> float:
    """The smallest text on a page ``page_px`` wide: font size × page width / drawing width."""
    width = float(re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+)', svg).group(1))  # type: ignore[union-attr]
    sizes = [float(s) for s in re.findall(r'font-size="([\d.]+)"', svg)]
    return min(sizes) * page_px / width


def laid_out(source: str) -> tuple[dict[str, float], list[tuple[str, str]]]:
    """Node heights (y, upward) and visible edges from the real ``dot -Tjson``."""
    data = json.loads(subprocess.run(["dot", "-Tjson"], input=source.encode(), capture_output=True, check=True).stdout)
    names, ys = {}, {}
    for item in data.get("objects", []):
        if "pos" in item:
            names[item["_gvid"]] = item["name"]
            ys[item["name"]] = float(item["pos"].split(",")[1])
    edges = [(names[e["tail"]], names[e["head"]]) for e in data.get("edges", []) if e.get("style") != "invis"]
    return ys, edges


def test_three_models_read_at_9px_on_800px(traced: Any, dot_binary: str) -> None:
    svg = schematic.schematic_text(_graphs(traced, THREE), "svg")
    assert smallest_px(svg.decode() if isinstance(svg, bytes) else svg, 800) >= 9


def test_no_cycle_and_no_upward_edge(traced: Any, dot_binary: str) -> None:
    source = str(schematic.schematic_text(_graphs(traced, THREE), "dot"))
    ys, edges = laid_out(source)
    assert nx.is_directed_acyclic_graph(nx.DiGraph(edges))
    assert [(a, b) for a, b in edges if ys[a] <= ys[b]] == []


def test_encoder_column_left_of_decoder(traced: Any, dot_binary: str) -> None:
    source = str(schematic.schematic_text(_graphs(traced, ("t5-small",)), "dot"))
    data = json.loads(subprocess.run(["dot", "-Tjson"], input=source.encode(), capture_output=True, check=True).stdout)
    x = {o["name"]: float(o["pos"].split(",")[0]) for o in data["objects"] if "pos" in o}
    assert x["m0c0emb"] < x["m0c1emb"]


@pytest.mark.parametrize(
    ("model", "order"),
    [
        ("bert-base-uncased", [["attention", "norm", "feed-forward", "norm"]]),  # post-norm
        ("gpt2", [["norm", "attention", "norm", "feed-forward"]]),  # pre-norm
        (
            "t5-small",
            [
                ["norm", "attention", "norm", "feed-forward"],
                ["norm", "attention", "norm", "cross-attention", "norm", "feed-forward"],
            ],
        ),
    ],
)
def test_layer_order_read_off_the_ops(traced: Any, model: str, order: list[list[str]]) -> None:
    _, cols = columns(traced(model).graph)
    assert [[step.role for step in column.steps] for column in cols] == order


def test_column_facts_match_the_config(traced: Any) -> None:
    kind, cols = columns(traced("t5-small").graph)
    assert [c.kind for c in cols] == ["encoder", "decoder"]
    assert [c.layers for c in cols] == [6, 6]
    assert [c.pattern for c in cols] == [["bidirectional"], ["causal"]]
    assert "FFN ReLU · 512→2048→512" in [s.text for s in cols[0].steps]
    assert kind["position"] == ["relative-buckets"]


FIVE = ("bert-base-uncased", "gpt2", "t5-small", "answerdotai/ModernBERT-base", "albert-base-v2")


def test_five_models_read_at_8px_on_1200px(traced: Any, dot_binary: str) -> None:
    svg = schematic.schematic_text(_graphs(traced, FIVE), "svg")
    assert smallest_px(svg.decode() if isinstance(svg, bytes) else svg, 1200) >= 8


def test_patterns_and_shared_layers(traced: Any) -> None:
    _, (modern,) = columns(traced("answerdotai/ModernBERT-base").graph)
    assert modern.layers == 22 and len(modern.pattern) == 3  # [global, window, window] repeating
    assert modern.pattern[0] == "bidirectional" and modern.pattern[1] == modern.pattern[2] != "bidirectional"
    _, (albert,) = columns(traced("albert-base-v2").graph)
    assert albert.shared and albert.layers == 12
