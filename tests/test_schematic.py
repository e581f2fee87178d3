"""The families schematic: readable when scaled, drawn downward, facts read off the traces."""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET
from typing import Any

import networkx as nx
import pytest

from bertgraph.graph.schematic import columns
from bertgraph.render import schematic
from tests.family_configs import TINY

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


@pytest.mark.parametrize(
    "models", [THREE, ("albert-base-v2", "answerdotai/ModernBERT-base", "bart-base", "TinyLlama-1.1B")]
)
def test_no_cycle_and_no_upward_edge(traced: Any, dot_binary: str, models: tuple[str, ...]) -> None:
    source = str(schematic.schematic_text(_graphs(traced, models), "dot"))
    ys, edges = laid_out(source)
    assert nx.is_directed_acyclic_graph(nx.DiGraph(edges))
    assert [(a, b) for a, b in edges if ys[a] <= ys[b]] == []
    # cross-attention reads the encoder's output, not a step inside it (the encoder-decoder is drawn last)
    last = f"m{len(models) - 1}"
    crossing = [(a, b) for a, b in edges if a.startswith(f"{last}c0") and b.startswith(f"{last}c1")]
    assert crossing and {a for a, _ in crossing} == {f"{last}c0out"}


def test_encoder_column_left_of_decoder(traced: Any, dot_binary: str) -> None:
    source = str(schematic.schematic_text(_graphs(traced, ("t5-small",)), "dot"))
    data = json.loads(subprocess.run(["dot", "-Tjson"], input=source.encode(), capture_output=True, check=True).stdout)
    x = {o["name"]: float(o["pos"].split(",")[0]) for o in data["objects"] if "pos" in o}
    assert x["m0c0emb"] < x["m0c1emb"]


@pytest.mark.parametrize(
    ("model", "order"),
    [
        ("bert-base-uncased", [["attention", "residual", "norm", "feed-forward", "residual", "norm"]]),  # post-norm
        ("gpt2", [["norm", "attention", "residual", "norm", "feed-forward", "residual"]]),  # pre-norm
        (
            "t5-small",
            [
                ["norm", "attention", "residual", "norm", "feed-forward", "residual"],
                [
                    "norm",
                    "attention",
                    "residual",
                    "norm",
                    "cross-attention",
                    "residual",
                    "norm",
                    "feed-forward",
                    "residual",
                ],
            ],
        ),
    ],
)
def test_layer_order_read_off_the_ops(traced: Any, model: str, order: list[list[str]]) -> None:
    _, cols = columns(traced(model).graph)
    assert [[step.role for step in column.steps] for column in cols] == order


@pytest.mark.parametrize(
    ("model", "skips"),
    [
        # post-norm: the layer's input around attention, the attention's norm around the FFN
        ("bert-base-uncased", [[(-1, 1), (2, 4)]]),
        # pre-norm: each residual starts before the sublayer's norm (T5's starts at the layer's input,
        # read through the no-op cast its norm begins with)
        ("gpt2", [[(-1, 2), (2, 5)]]),
        ("t5-small", [[(-1, 2), (2, 5)], [(-1, 2), (2, 5), (5, 8)]]),
    ],
)
def test_residuals_start_where_the_added_tensor_was_made(
    traced: Any, model: str, skips: list[list[tuple[int, int]]]
) -> None:
    _, cols = columns(traced(model).graph)
    assert [column.skips for column in cols] == skips


@pytest.mark.parametrize(
    "model",
    ["bert-base-uncased", "gpt2", "t5-small", "albert-base-v2", "modernbert-base", "TinyLlama-1.1B", "bart-base"],
)
def test_ffn_width_is_the_configured_intermediate_size(traced: Any, model: str) -> None:
    """Gated FFNs included: ModernBERT's fused input projection is twice its width, LLaMA's has two."""
    graph = traced(model).graph
    _, cols = columns(graph)
    expected = graph.graph["config"]["intermediate"]
    hidden = graph.graph["config"]["hidden"]
    for column in cols:
        (ffn,) = [step.text for step in column.steps if step.role == "feed-forward"]
        assert ffn.endswith(f"{hidden}→{expected}→{hidden}"), ffn


@pytest.mark.parametrize(
    ("model", "activation", "norm"),
    [
        ("bert-base-uncased", "GELU", "LayerNorm"),
        ("albert-base-v2", "GELU (tanh)", "LayerNorm"),  # its activation is a module of the layer, not of an FFN
        ("modernbert-base", "GeGLU", "LayerNorm"),
        ("TinyLlama-1.1B", "SwiGLU", "RMSNorm"),
        ("t5-small", "ReLU", "RMSNorm"),  # T5LayerNorm does not centre: an RMS norm
    ],
)
def test_activation_and_norm_kind_read_off_the_ops(traced: Any, model: str, activation: str, norm: str) -> None:
    _, cols = columns(traced(model).graph)
    steps = cols[0].steps
    assert [s.text.split(" · ")[0] for s in steps if s.role == "feed-forward"] == [f"FFN {activation}"]
    assert {s.text for s in steps if s.role == "norm"} == {norm}


@pytest.mark.parametrize(
    ("model", "outer"),
    [
        ("bert-base-uncased", [(True, False)]),  # embeddings' LayerNorm, no final norm
        ("gpt2", [(False, True)]),  # ln_f
        ("bart-base", [(True, False), (True, False)]),  # layernorm_embedding runs before the layers
        ("t5-small", [(False, True), (False, True)]),
    ],
)
def test_norms_outside_the_layers_before_or_after_them(traced: Any, model: str, outer: list[tuple[bool, bool]]) -> None:
    _, cols = columns(traced(model).graph)
    assert [(c.embedding_norm, c.final_norm) for c in cols] == outer


def test_a_shared_layer_keeps_its_attention_kind(traced: Any) -> None:
    _, (albert,) = columns(traced("albert-base-v2").graph)
    assert albert.pattern == ["bidirectional"]
    source = str(schematic.schematic_text([traced("albert-base-v2").graph], "dot"))
    assert "bidirectional self-attention" in source and "12 × (one shared layer)" in source


def test_layers_that_slide_past_max_window_layers_are_runs(tmp_path: Any) -> None:
    """Qwen2 with sliding layers from ``max_window_layers`` on: no repeating cycle, runs of layers."""
    import bertgraph
    from tests.test_sliding_window_layers import WINDOW, sliding_config

    config = sliding_config("qwen2", layers=5, window_layers=2)
    (tmp_path / "config.json").write_text(json.dumps(config))
    graph = bertgraph.trace(str(tmp_path), cache=False).graph
    _, (column,) = columns(graph)
    sliding = f"causal-sliding-window({WINDOW})"
    assert column.runs == [(1, 2, "causal"), (3, 5, sliding)]
    source = str(schematic.schematic_text([graph], "dot"))
    assert "layers 1–2: causal" in source and f"layers 3–5: {sliding}" in source and "repeating" not in source


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


@pytest.mark.browser
def test_mermaid_schematic_as_mermaid_js_lays_it_out(traced: Any) -> None:
    """Rendered in Chromium: the models left to right in tutorial order, the encoder left of its decoder,
    every arrow and residual path downward, the cross-attention arrow leaving the encoder's output."""
    from tests.conftest import require
    from tests.mermaid_browser import browser_available, node_centres, render_mermaid

    reason = browser_available()
    require(reason is None, reason or "")
    text = schematic.mermaid_text(_graphs(traced, ("t5-small", "gpt2", "bert-base-uncased")))
    (result,) = render_mermaid({"schematic": text}).values()
    assert result.ok, result.error
    at = node_centres(result.svg)
    x = [at[node][0] for node in ("m0c0emb", "m1c0emb", "m2c0emb", "m2c1emb")]  # bert, gpt2, t5 encoder, decoder
    assert x == sorted(x)
    edges = re.findall(r"^  (\w+) (?:-->|-\.->|==>) (\w+)$", text, re.MULTILINE)
    assert len(edges) > 40 and [(a, b) for a, b in edges if at[a][1] >= at[b][1]] == []
    assert {a for a, b in edges if a.startswith("m2c0") and b.startswith("m2c1")} == {"m2c0out"}


# --- configs of our own: what acts inside attention, colours, encoder left of decoder -------------

OWN: dict[str, Any] = {
    # q_norm and k_norm on each head's queries and keys
    "qwen3": {"model_type": "qwen3", **TINY["qwen3"], "num_hidden_layers": 2},
    # q_norm and k_norm over the whole projection, and norms after each sublayer (OLMo-2)
    "olmo2": {
        "model_type": "olmo2",
        "vocab_size": 99,
        "hidden_size": 32,
        "intermediate_size": 40,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 64,
    },
    "llama": {**TINY["llama"], "num_hidden_layers": 2},
    "t5-4-3": {**TINY["t5"], "num_layers": 4, "num_decoder_layers": 3},
    "bart-3-3": TINY["bart"],
    "deberta": {**TINY["deberta-v2"], "num_hidden_layers": 2},
    "mpnet": {**TINY["mpnet"], "num_hidden_layers": 2},
    "bert": {**TINY["bert"], "num_hidden_layers": 2},
}


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory, traced: Any) -> Any:
    """``own(name)``: the traced graph of one of :data:`OWN`'s configs."""

    def get(name: str) -> nx.DiGraph:
        folder = tmp_path_factory.getbasetemp() / "schematic-configs" / name
        if not (folder / "config.json").is_file():
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "config.json").write_text(json.dumps(OWN[name]))
        return traced(str(folder)).graph

    return get


def _attention_steps(graph: nx.DiGraph) -> list[list[Any]]:
    return [[s for s in column.steps if s.role == "attention"] for column in columns(graph)[1]]


@pytest.mark.parametrize(
    ("name", "order"),
    [
        ("qwen3", ["norm", "attention", "residual", "norm", "feed-forward", "residual"]),
        ("olmo2", ["attention", "norm", "residual", "feed-forward", "norm", "residual"]),  # norms after sublayers
    ],
)
def test_query_and_key_norms_act_inside_attention(own: Any, name: str, order: list[str]) -> None:
    """A norm between attention's first op and its product, on the query and key paths only, is said
    inside the attention step ("q/k RMSNorm"), never drawn as norms after attention."""
    graph = own(name)
    (column,) = columns(graph)[1]
    assert [step.role for step in column.steps] == order
    ((attention,),) = _attention_steps(graph)
    assert "q/k RMSNorm" in attention.details
    assert schematic.step_text(column, attention).split(" · ")[:2] == ["causal self-attention", "q/k RMSNorm"]


def test_qwen3_published_has_its_norms_inside_attention(traced: Any) -> None:
    (column,) = columns(traced("Qwen3-0.6B").graph)[1]
    assert [step.role for step in column.steps][:3] == ["norm", "attention", "residual"]
    source = str(schematic.schematic_text([traced("Qwen3-0.6B").graph], "dot"))
    assert "causal self-attention<br/>q/k RMSNorm" in source


@pytest.mark.parametrize("name", ["llama", "bert", "t5-4-3", "bart-3-3"])
def test_a_norm_before_attention_stays_a_step(own: Any, name: str) -> None:
    """The layer's input norm feeds queries, keys and values (T5's cross-attention norm the queries
    alone, before the block's first op): no attention step says a norm."""
    for steps in _attention_steps(own(name)):
        assert not any("Norm" in detail for step in steps for detail in step.details)


@pytest.mark.parametrize(
    ("name", "embedded", "inside"),
    [
        ("bert", ["absolute"], []),
        ("bart-3-3", ["absolute"], []),
        ("llama", [], ["rotary positions on q/k"]),
        ("qwen3", [], ["rotary positions on q/k"]),
        ("t5-4-3", [], ["relative-position bias on scores"]),
        ("deberta", [], ["relative positions on scores"]),
        ("mpnet", ["absolute"], ["relative-position bias on scores"]),
    ],
)
def test_positions_are_drawn_where_they_act(own: Any, name: str, embedded: list[str], inside: list[str]) -> None:
    """Absolute positions are added at the embeddings; rotary and relative ones act in every layer's
    self-attention (on q/k, or on the scores), never in cross-attention, and not at the embeddings."""
    graph = own(name)
    cols = columns(graph)[1]
    for column in cols:
        assert column.positions == embedded
        words = schematic.embeddings_text(column).split(" · ")
        assert [w for w in words if w.endswith("positions")] == [f"{k} positions" for k in embedded]
        (attention,) = [s for s in column.steps if s.role == "attention"]
        assert [d for d in attention.details if "positions" in d or "bias" in d] == inside
        assert all(not s.details for s in column.steps if s.role == "cross-attention")
    source = str(schematic.schematic_text([graph], "dot"))
    emb = re.findall(r'"m0c\demb" \[label=<([^>]*(?:<br/>[^>]*)*)>', source)
    assert emb and all(not any(w in label for w in ("rotary", "relative")) for label in emb)


def _fills(source: str) -> dict[str, tuple[str, str]]:
    """(fill, border) of every node that has a fill, read from the laid-out ``dot -Tjson``."""
    data = json.loads(subprocess.run(["dot", "-Tjson"], input=source.encode(), capture_output=True, check=True).stdout)
    return {o["name"]: (o["fillcolor"], o.get("color", "")) for o in data["objects"] if "fillcolor" in o}


@pytest.mark.parametrize("names", [("t5-4-3",), ("bert", "llama", "bart-3-3")])
def test_families_figure_has_the_diagrams_look_per_role_and_a_legend(
    own: Any, dot_binary: str, names: tuple[str, ...]
) -> None:
    """Each step's fill and border are the diagrams' for its role (render/style.py), the cross-attention
    arrow is cross-attention's colour, and every look drawn is in the legend."""
    from bertgraph.render import style

    graphs = [own(name) for name in names]
    source = str(schematic.schematic_text(graphs, "dot"))
    kinds = style.theme("light")["kinds"]
    fills = _fills(source)
    built = schematic.built_columns(graphs)
    for number, (_, cols) in enumerate(built):
        for side, column in enumerate(cols):
            prefix = f"m{number}c{side}"
            assert fills[f"{prefix}emb"] == (kinds["embedding"].fill, kinds["embedding"].border)
            for index, step in enumerate(column.steps):
                expected = {
                    "norm": "normalisation",
                    "feed-forward": "feed-forward",
                    "cross-attention": "attention-cross",
                    "attention": style.attention_kind("attention", column.pattern),
                }.get(step.role)
                if expected:
                    assert fills[f"{prefix}s{index}"] == (kinds[expected].fill, kinds[expected].border), step
    cross = kinds["attention-cross"].border
    crossing = re.findall(r'"m\d+c0out" -> "m\d+c1s\d+" \[([^]]*)\]', source)
    assert crossing and all(f'color="{cross}"' in attrs for attrs in crossing)
    legend = schematic.legend_entries(built)
    drawn = {fill for fill, _ in fills.values()} - {"white", "#ffffff"}
    assert drawn <= {kinds[kind].fill for kind, _ in legend if kind in kinds}
    assert ("cross", "encoder output into cross-attention") in legend
    svg = schematic.schematic_text(graphs, "svg")
    texts = {t.text for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")}
    assert {name for _, name in legend} <= texts


@pytest.mark.parametrize("names", [("t5-4-3",), ("bart-3-3",), ("bart-3-3", "bert", "t5-4-3")])
def test_encoder_left_of_decoder_for_any_config(own: Any, dot_binary: str, names: tuple[str, ...]) -> None:
    source = str(schematic.schematic_text([own(name) for name in names], "dot"))
    data = json.loads(subprocess.run(["dot", "-Tjson"], input=source.encode(), capture_output=True, check=True).stdout)
    x = {o["name"]: float(o["pos"].split(",")[0]) for o in data["objects"] if "pos" in o}
    pairs = [(f"m{n}c0emb", f"m{n}c1emb") for n in range(len(names)) if f"m{n}c1emb" in x]
    assert pairs and all(x[encoder] < x[decoder] for encoder, decoder in pairs)


@pytest.mark.browser
def test_mermaid_schematic_of_own_configs_keeps_order_and_looks(own: Any) -> None:
    """As mermaid.js lays them out: every encoder left of its decoder (T5 4+3, BART 3+3, alone and beside
    others), every box filled as the diagrams fill its role, the cross-attention arrows in its colour,
    and one model's text at least 6 px when the figure is shown in an 800 px column."""
    from bertgraph.render import style
    from tests.conftest import require
    from tests.mermaid_browser import browser_available, node_centres, render_mermaid, svg_width

    reason = browser_available()
    require(reason is None, reason or "")
    kinds = style.theme("light")["kinds"]
    figures = {"t5": ("t5-4-3",), "bart": ("bart-3-3",), "three": ("bart-3-3", "bert", "t5-4-3")}
    texts = {key: schematic.mermaid_text([own(name) for name in names]) for key, names in figures.items()}
    results = render_mermaid(texts)
    for key, result in results.items():
        assert result.ok, result.error
        at = node_centres(result.svg)
        models = [n for n in range(len(figures[key])) if f"m{n}c1emb" in at]
        assert models and all(at[f"m{n}c0emb"][0] < at[f"m{n}c1emb"][0] for n in models)
        fills = dict(re.findall(r'class="node default (k_\w+)"[^>]*>\s*<rect[^>]*style="fill:(#\w+)', result.svg))
        assert fills and all(fills[name] == kinds[name[2:].replace("_", "-")].fill for name in fills)
        cross = re.findall(r'id="[^"]*L_m\d+c0out_m\d+c1s\d+_\d+"[^>]*style="([^"]*)"', result.svg)
        assert cross and all(f"stroke:{kinds['attention-cross'].border}" in look for look in cross)
        if len(figures[key]) == 1:  # five columns side by side are read on a wider page
            sizes = [float(s) for s in re.findall(r"font-size:\s*([\d.]+)px", result.svg)] or [16.0]
            assert min(sizes) * min(1.0, 800 / svg_width(result.svg)) >= 6, key


def test_the_dark_theme_gives_the_diagrams_dark_look(
    own: Any, dot_binary: str, tmp_path: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``families --theme dark``: the schematic takes the dark palette, as the diagrams do."""
    from bertgraph.cli import main
    from bertgraph.render import style

    dark = style.theme("dark")
    own("t5-4-3")  # its config written and traced
    folder = tmp_path_factory.getbasetemp() / "schematic-configs" / "t5-4-3"
    assert main(["families", str(folder), "--theme", "dark", "-o", str(tmp_path / "f.dot")]) == 0
    fills = _fills((tmp_path / "f.dot").read_text())
    assert fills["m0c0emb"] == (dark["kinds"]["embedding"].fill, dark["kinds"]["embedding"].border)
    assert fills["m0c1s4"] == (dark["kinds"]["attention-cross"].fill, dark["kinds"]["attention-cross"].border)
    assert main(["families", str(folder), "--theme", "dark", "-o", str(tmp_path / "f.mmd")]) == 0
    text = (tmp_path / "f.mmd").read_text()
    assert '%%{init: {"theme": "dark"}}%%' in text and f"fill:{dark['kinds']['embedding'].fill}" in text
