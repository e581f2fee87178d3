"""The structural truth of every diagram, read back from what Graphviz laid out (``dot -Tjson``).

For every family's tiny config, every depth 0-4 (and every head at the depths that differ
by head): the drawn graph is acyclic, every edge runs strictly downward, the diagram folds
exactly what ``summary`` folds, an encoder's column stands left of its decoder's and
cross-attention leaves the encoder's output, every fill is a legend entry that fits the
node's role, and no node at depth ≤ 2 is titled by a list of op names. A few real presets
(the drawings issue 18 names) are checked at depths 2-3.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path

import networkx as nx
import pytest

import bertgraph
from bertgraph.graph import facts, roles, stats, views
from bertgraph.graph import schema as g
from bertgraph.model import ModelSpec, family_of
from bertgraph.render import style, text
from bertgraph.render.diagram import Diagram, build, build_diagram
from tests.colour import delta_e
from tests.family_configs import TINY, UNEVEN, uneven
from tests.layout import (
    Layout,
    cycles,
    decoder_left,
    faint_texts,
    fold_mismatches,
    foreign_inputs,
    lay_out,
    residual_origins,
    summary_folds,
    through_other_stack,
    title_crossings,
    upward_edges,
)

TinyGraph = Callable[[str, str], tuple[ModelSpec, nx.DiGraph]]
DEPTHS = (0, 1, 2, 3, 4)
# Heads change what is drawn at the top of the model only: every head at depths 1-2.
HEAD_DEPTHS = (1, 2)
HEAD_CASES = [(t, h) for t in TINY for h in family_of(t).heads if h != "base"]  # type: ignore[union-attr]
PRESETS = ("gpt2", "t5-small", "bart-base", "albert-base-v2", "modernbert-base", "Qwen3-0.6B", "deberta-v3-base")
# A title that is a list of op names: "unsqueeze, to, mul" or "slice, add …".
OP_LIST = re.compile(r"^[a-z_0-9]+(, [a-z_0-9]+)+( …)?$")

_ANNOTATED: dict[tuple[str, str], nx.DiGraph] = {}


def annotated(tiny_graph: TinyGraph, model_type: str, head: str) -> nx.DiGraph:
    """The tiny graph with its architecture facts, as ``bertgraph.trace`` hands it out (a copy: others share it)."""
    if (model_type, head) not in _ANNOTATED:
        _ANNOTATED[model_type, head] = facts.annotate(tiny_graph(model_type, head)[1].copy())
    return _ANNOTATED[model_type, head]


def check_structure(graph: nx.DiGraph, diagram: Diagram, depth: int, layout: Layout) -> None:
    """Acyclic, every edge downward, folds = summary's, encoder left of decoder, cross edges from its output."""
    assert nx.is_directed_acyclic_graph(graph)
    assert cycles(diagram) == []
    assert upward_edges(layout) == []
    assert fold_mismatches(graph, diagram, depth) == set()
    if roles.structure(graph) != roles.ENCODER_DECODER:
        return
    encoder, decoder = layout.clusters.get("encoder"), layout.clusters.get("decoder")
    if encoder is not None and decoder is not None:
        assert encoder.right <= decoder.left
    io = {n.id for n in diagram.nodes if n.shape == "io"}
    for edge in diagram.edges:
        if edge.style == "cross":
            # The encoder's output: all it feeds besides cross-attention is the model's output.
            others = {e.target for e in diagram.edges if e.source == edge.source and e.style != "cross"}
            assert others <= io, (edge.source, others - io)


def check_colours_and_titles(graph: nx.DiGraph, diagram: Diagram, depth: int, role_titles: bool = True) -> None:
    """Every fill a legend entry; attention colours only on attention; role titles at depth ≤ 2
    (``role_titles``: a model without a record titles a module's own ops by what they are)."""
    for theme in ("light", "dark"):
        legend = {style.look(kind, theme).fill for kind in diagram.kinds}
        assert {style.look(node.kind, theme).fill for node in diagram.nodes if node.heat is None} <= legend
    shown = views.view(graph, depth)
    for node in diagram.nodes:
        says_attention = any(line.endswith(" attention") for line in node.lines)
        if node.kind.startswith("attention") or says_attention:
            assert is_attention(graph, shown.nodes[node.id]), (node.id, node.kind, node.lines)
        if node.shape != "io" and roles.role_of(graph, str(shown.nodes[node.id].get(g.MODULE, ""))) == roles.POSITION:
            assert node.kind == "embedding", (node.id, node.kind)  # DeBERTa's table is computed by a LayerNorm
        if depth <= 2 and role_titles:
            assert not OP_LIST.match(node.title), (node.id, node.title)
        if depth <= 3 and node.shape != "io":
            assert (node.kind == "mask") == (node.title == "attention mask"), (node.id, node.title, node.kind)


def is_attention(graph: nx.DiGraph, data: dict[str, object]) -> bool:
    """Whether a view node may carry an attention colour or kind: attention itself, or a whole stack or layer."""
    role = roles.role_of(graph, str(data.get(g.MODULE, "")))
    if data.get(g.KIND) == g.OPERATOR:
        return bool(g.attention_label(data)) or role in (roles.SELF_ATTENTION, roles.CROSS_ATTENTION)
    if data.get(g.OWN_OPS):
        return role in (roles.SELF_ATTENTION, roles.CROSS_ATTENTION) or "scaled_dot_product_attention" in data[g.OPS]
    module = str(data.get(g.MODULE, ""))
    parent = module.rsplit(".", 1)[0] if "." in module else ""
    inherited = role in (roles.STACK, roles.LAYER) and roles.role_of(graph, parent) == role
    return role in (roles.SELF_ATTENTION, roles.CROSS_ATTENTION) or (
        role in (roles.STACK, roles.LAYER) and not inherited
    )


# Ops of a dropout, a module's or a functional one's.
DROPOUT = {"dropout", "native_dropout", "feature_dropout", "alpha_dropout"}
# Graphviz's drawing of each shape of style.Look.
DRAWN_SHAPES = {
    "box": ("box", "rounded,filled"),
    "ellipse": ("ellipse", "filled"),
    "io": ("box", "rounded,filled,dashed"),
}


def check_looks(graph: nx.DiGraph, diagram: Diagram, depth: int, layout: Layout) -> None:
    """One role, one look, read off what Graphviz drew: each node as its kind's look in the style
    table; a dropout and position ids as the parameter-free steps they are, whatever module holds them;
    edges from an attention mask dotted, from the encoder into cross-attention bold in its colour."""
    shown = views.view(graph, depth)
    for node in diagram.nodes:
        drawn = layout.shapes[node.id]
        look = style.look(node.kind)
        assert (drawn.shape, drawn.style, drawn.fill) == (*DRAWN_SHAPES[look.shape], look.fill) or node.highlight, (
            node.id,
            drawn,
        )
        ops = (set(shown.nodes[node.id].get(g.OPS, [])) | {shown.nodes[node.id].get(g.OP, "")}) - {""}
        if (node.shape != "io" and ops and ops <= DROPOUT) or node.title == "position ids":
            assert node.kind == "other", (node.id, node.title, node.kind)
    masks = {str(d[g.PADDING_MASK]) for _, d in graph.nodes(data=True) if d.get(g.PADDING_MASK)}
    by_id = {node.id: node for node in diagram.nodes}

    def attends(node: str) -> bool:
        """Whether a drawn node holds attention (a mask line may end there) or computes a mask itself."""
        module = str(shown.nodes[node].get(g.MODULE, "")) if node in shown else ""
        return (
            by_id[node].kind == "mask"
            or bool(roles.attention_labels(graph, module))
            or is_attention(graph, shown.nodes.get(node, {}))
        )

    for line in layout.lines:
        ends_in_data = by_id[line.head].kind in ("pooling", "head", "io")
        if (line.tail in masks or by_id[line.tail].kind == "mask") and not ends_in_data:
            assert (line.style, line.drawn) == ("mask", "dotted"), line
        if line.style == "mask":  # a mask line never ends at a classifier's pooling, its head or an output
            assert by_id[line.head].kind not in ("pooling", "head", "io"), (line.tail, line.head)
    for node in diagram.nodes:
        if any(text.startswith("with attention mask") for text in node.lines):
            assert attends(node.id), (node.id, node.lines)
        if line.style == "cross":
            assert (line.drawn, line.colour) == ("bold", style.edge_look("cross").stroke), line


def check(graph: nx.DiGraph, depth: int, role_titles: bool = True) -> None:
    diagram = build_diagram(graph, depth)
    layout = lay_out(diagram)
    check_structure(graph, diagram, depth, layout)
    check_colours_and_titles(graph, diagram, depth, role_titles)
    check_looks(graph, diagram, depth, layout)
    assert faint_texts(layout) == []  # every text at 4.5:1 at least on what lies under it (WCAG AA)
    assert title_crossings(layout) == []  # no edge through a frame's title, read off the drawn routes
    # A skip connection starts where the tensor it adds was made (not at LLaMA's norm, whose
    # returning cast the export records as the reader of the layer's input).
    assert residual_origins(graph, diagram, depth, layout) == []
    check_sides(graph, diagram, depth, layout)


def check_sides(graph: nx.DiGraph, diagram: Diagram, depth: int, layout: Layout) -> None:
    """An encoder-decoder: the encoder left of the decoder (its frame, or its box at depth 1), each input
    in the frame of a stack that reads it (the encoder's attention mask in the encoder's), and no edge
    through a stack's frame without an end in it (the encoder's output snaking between decoder blocks)."""
    assert decoder_left(graph, diagram, depth, layout) == []
    assert foreign_inputs(graph, diagram, depth) == []
    assert through_other_stack(graph, diagram, depth, layout) == []


@pytest.mark.parametrize("model_type", sorted(TINY))
def test_every_depth_of_every_family_is_drawn_true(model_type: str, tiny_graph: TinyGraph, dot_binary: str) -> None:
    graph = annotated(tiny_graph, model_type, "base")
    for depth in DEPTHS:
        check(graph, depth)


@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "head"), HEAD_CASES, ids=[f"{t}-{h}" for t, h in HEAD_CASES])
def test_every_head_is_drawn_true(model_type: str, head: str, tiny_graph: TinyGraph, dot_binary: str) -> None:
    graph = annotated(tiny_graph, model_type, head)
    for depth in HEAD_DEPTHS:
        check(graph, depth)


@pytest.mark.slow
@pytest.mark.parametrize("name", PRESETS)
def test_the_presets_issue_18_names_are_drawn_true(
    name: str, traced: Callable[..., bertgraph.Architecture], dot_binary: str
) -> None:
    graph = traced(name).graph
    for depth in (2, 3):
        check(graph, depth)


# --- the cases issue 18 reports, each named ----------------------------------------------------


def _view_nodes(tiny_graph: TinyGraph, model_type: str, depth: int) -> list[str]:
    return [node.id for node in build_diagram(annotated(tiny_graph, model_type, "base"), depth).nodes]


def test_a_pre_norm_layers_two_residual_adds_are_two_nodes(tiny_graph: TinyGraph) -> None:
    shown = _view_nodes(tiny_graph, "gpt2", 2)
    assert [n for n in shown if n.startswith("h.0-2:ops")] == ["h.0-2:ops", "h.0-2:ops.1"]


@pytest.mark.parametrize("model_type", ["gpt2", "llama", "qwen2", "modernbert"])
def test_a_pre_norm_layers_residual_adds_are_drawn_alike(model_type: str, tiny_graph: TinyGraph) -> None:
    # At depth 3 the second add reads the first, which lives in the layer itself: its skip edge
    # is still a skip edge, and both adds carry the role title.
    diagram = build_diagram(annotated(tiny_graph, model_type, "base"), 3)
    layer = re.compile(r"^(h|model\.layers|layers)\.[\d/-]+:add(_\d+)?$")  # an add the layer itself runs
    adds = [n for n in diagram.nodes if layer.match(n.id)]
    assert len(adds) >= 2, [n.id for n in diagram.nodes]
    for node in adds:
        skips = [e.source for e in diagram.edges if e.target == node.id and e.style == "residual"]
        assert (node.title, len(skips)) == ("add (residual)", 1), (node.id, node.title, skips)


def test_debertas_position_dropout_sits_on_the_position_path(tiny_graph: TinyGraph) -> None:
    # Each layer drops out the relative-position embeddings before projecting them with its own
    # query and key weights: a step of that path, drawn between the table and the projections —
    # not a "with pos_dropout" line on both projections as if it were a mask read from aside.
    graph = annotated(tiny_graph, "deberta-v2", "base")
    assert not [n.id for n in build_diagram(graph, 2).nodes if "pos_dropout" in n.id]  # inside the layer's box
    diagram = build_diagram(graph, 3)
    by_id = {n.id: n for n in diagram.nodes}
    (dropout,) = [n for n in diagram.nodes if n.id.endswith("attention.self.pos_dropout")]
    assert [by_id[e.source].title for e in diagram.edges if e.target == dropout.id] == ["relative-position embeddings"]
    projections = [by_id[e.target] for e in diagram.edges if e.source == dropout.id]
    assert sorted(n.title for n in projections) == ["key_proj", "query_proj"]
    assert all(n.id.endswith("#2") for n in projections)  # the second call of each: on positions
    assert not [n.id for n in diagram.nodes if any("pos_dropout" in line for line in n.lines)]


# What each family's norms do and where its positions act, as the papers say (not read by bertgraph's
# code): RMSNorm scales by the root mean square without centring; rotary and relative positions act
# inside every attention layer, absolute ones at the embeddings.
NORMS = {"llama": "RMSNorm", "qwen2": "RMSNorm", "qwen3": "RMSNorm", "t5": "RMSNorm", "mt5": "RMSNorm"}
POSITIONS = {
    "deberta-v2": ["relative positions"],
    "modernbert": ["rotary positions"],
    "mpnet": ["absolute positions", "bucketed relative positions"],
    "llama": ["rotary positions"],
    "qwen2": ["rotary positions"],
    "qwen3": ["rotary positions"],
    "t5": ["bucketed relative positions"],
    "mt5": ["bucketed relative positions"],
}
ACTS_IN = {
    "absolute": {roles.EMBEDDINGS, roles.POSITION, roles.STACK, roles.MODEL},
    "attention": {roles.SELF_ATTENTION, roles.LAYER, roles.STACK, roles.MODEL},
}
CLASS_NAMED_NORM = re.compile(r"^\w+(LayerNorm|RMSNorm)\b")


@pytest.mark.parametrize("model_type", sorted(TINY))
def test_depths_one_and_two_name_the_norm_and_where_positions_act(
    model_type: str, tiny_graph: TinyGraph, dot_binary: str
) -> None:
    # T5's drawings said "T5LayerNorm" and never that its norms are RMSNorms or its positions relative.
    graph = annotated(tiny_graph, model_type, "base")
    norm = NORMS.get(model_type, "LayerNorm")
    positions = POSITIONS.get(model_type, ["absolute positions"])
    for depth in (1, 2):
        diagram = build_diagram(graph, depth)
        drawn = [text.text for text in lay_out(diagram).texts]
        assert any(
            norm in text.split(" · ") or text in (f"norms: {norm}",) or text.startswith(f"{norm} ") for text in drawn
        )
        assert not [text for text in drawn if CLASS_NAMED_NORM.match(text)]
        for words in positions:
            holders = [node for node in diagram.nodes if any(words in line.split(" · ") for line in node.lines)]
            assert holders, (depth, words)
            # where they act: in attention for rotary and relative, at the embeddings for absolute (or the
            # stack or model holding them)
            where = ACTS_IN["absolute" if words == "absolute positions" else "attention"]
            assert {node.role for node in holders} <= where, [(node.id, node.role) for node in holders]
        caption = " · ".join(diagram.caption)
        assert f" · {norm}" in caption and all(w in caption for w in positions)


def check_pattern_frame(graph: nx.DiGraph, depth: int, period: int, count: int) -> None:
    """The period's layers inside one "× count" frame, in run order (read off the layout), and every
    attention kind drawn said as a direction and a reach."""
    diagram = build_diagram(graph, depth)
    layout = lay_out(diagram)
    (frame,) = [c for c in diagram.clusters if c.role == "repeat"]
    assert f"{period} layers × {count}" in frame.title
    inside = [c.id for c in diagram.clusters if c.parent == frame.id]
    inside += [n.id for n in diagram.nodes if diagram.membership.get(n.id) == frame.id]
    firsts = sorted(int(re.search(r"\.(\d+)-\d+/\d+$", m).group(1)) for m in inside)  # type: ignore[union-attr]
    assert len(inside) == period and firsts == list(range(firsts[0], firsts[0] + period)), inside
    tops = [layout.clusters[m].top if m in layout.clusters else layout.centres[m][1] for m in inside]
    order = [m for _, m in sorted(zip(tops, inside), reverse=True)]  # top of the page first
    assert order == sorted(inside, key=lambda m: int(re.search(r"\.(\d+)-", m).group(1))), order  # type: ignore[union-attr]
    box = layout.clusters[frame.id]
    assert all(
        box.holds(*layout.centres[n]) for n in layout.centres if diagram.membership.get(n) in [frame.id, *inside]
    )
    texts = [text.text for text in layout.texts]
    bare = [t for t in texts if re.search(r"(?<!bidirectional )(?<!causal )sliding-window", t)]
    assert bare == [] and any("bidirectional sliding-window" in t for t in texts)


def test_modernberts_pattern_is_one_repeating_group_in_run_order(tiny_graph: TinyGraph, dot_binary: str) -> None:
    # Drawn as three folds one after another, "layers 1, 4, … (× 3) → 2, 5, … (× 3) → 3, 6, … (× 3)" read as
    # three local, three local, three global; the legend set "bidirectional" against "sliding-window".
    graph = annotated(tiny_graph, "modernbert", "base")
    for depth in (1, 2, 3):
        check_pattern_frame(graph, depth, 3, 3)


@pytest.mark.slow
def test_a_pattern_of_four_layers_is_framed_too(tmp_path: Path, dot_binary: str) -> None:
    # A ModernBERT of no preset: a global layer every fourth, nine layers (layer 0, then the pattern twice).
    import transformers

    config = transformers.ModernBertConfig(
        vocab_size=99,
        hidden_size=32,
        intermediate_size=37,
        num_hidden_layers=9,
        num_attention_heads=4,
        global_attn_every_n_layers=4,
        local_attention=16,
        max_position_embeddings=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        cls_token_id=1,
        sep_token_id=2,
    )
    config.save_pretrained(tmp_path)
    graph = bertgraph.trace(str(tmp_path)).graph
    for depth in (1, 2):
        check_pattern_frame(graph, depth, 4, 2)
        check(graph, depth)


@pytest.fixture(scope="module")
def configs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("uneven")


@pytest.mark.parametrize("name", sorted(UNEVEN))
def test_an_encoder_decoder_of_any_config_draws_its_encoder_left(name: str, configs: Path, dot_binary: str) -> None:
    graph = uneven(name, "base", configs)
    for depth in DEPTHS:
        check(graph, depth)
    classifier = uneven(name, "sequence-classification", configs) if name.startswith("bart") else None
    for depth in HEAD_DEPTHS if classifier is not None else ():
        check(classifier, depth)


# A classifier's pooling, by the head's family: what it picks from each sequence.
POOLING = {"gpt2": "last non-padding token", "bart": "EOS token"}


@pytest.mark.parametrize("model_type", sorted(POOLING))
def test_a_classifiers_pooling_is_a_step_on_its_data(model_type: str, tiny_graph: TinyGraph, dot_binary: str) -> None:
    # GPT-2's head picks the last token that is not padding, BART's the EOS token: both compare token
    # ids, and were drawn as an attention mask — a "with attention mask [batch, 2]" line on the logits,
    # dotted edges into them. A step of the data, on solid edges, coloured as pooling.
    graph = annotated(tiny_graph, model_type, "sequence-classification")
    for depth in (1, 2, 3):
        diagram = build_diagram(graph, depth)
        (pooling,) = [node for node in diagram.nodes if node.title == POOLING[model_type]]
        assert pooling.kind == "pooling"
        edges = [e for e in diagram.edges if pooling.id in (e.source, e.target)]
        assert len(edges) >= 2 and {e.style for e in edges} == {"data"}, edges
        assert not [
            n.id for n in diagram.nodes if any("attention mask" in line for line in n.lines) and n.shape == "io"
        ]
        check(graph, depth)


def test_a_module_called_twice_is_two_nodes(tiny_graph: TinyGraph) -> None:
    shown = _view_nodes(tiny_graph, "t5", 2)
    assert {"encoder.dropout", "encoder.dropout#2", "decoder.dropout", "decoder.dropout#2"} <= set(shown)
    diagram = build_diagram(annotated(tiny_graph, "t5", "base"), 2)
    assert {e.source for e in diagram.edges if e.style == "cross"} == {"encoder.dropout#2"}


def test_a_shared_layer_is_drawn_once_at_every_depth(tiny_graph: TinyGraph) -> None:
    graph = annotated(tiny_graph, "albert", "base")
    layers = TINY["albert"]["num_hidden_layers"]
    for depth in DEPTHS:
        diagram = build_diagram(graph, depth)
        queries = [n for n in diagram.nodes if "attention.query" in n.id]
        assert len(queries) == (1 if depth >= 3 else 0)
        titles = [c.title for c in diagram.clusters] + [line for n in diagram.nodes for line in n.lines]
        if depth >= 2:
            assert any(f"× {layers} · shared weights" in text for text in titles)


# --- the legend's colours ---------------------------------------------------------------------


@pytest.mark.parametrize("model_type", ["bert", "gpt2", "t5", "modernbert", "deberta-v2"])
def test_every_text_is_readable_on_its_fill_in_both_themes(
    model_type: str, tiny_graph: TinyGraph, dot_binary: str
) -> None:
    # The grey detail lines were 2.3:1 on causal attention, 2.8:1 on embeddings: each text is
    # measured against the fill painted under it in the laid-out drawing, annotated and compared too.
    graph = annotated(tiny_graph, model_type, "base")
    heads = [h for h in family_of(model_type).heads if h != "base"]  # type: ignore[union-attr]
    other = annotated(tiny_graph, model_type, heads[0])
    for theme in ("light", "dark"):
        for depth in (1, 2, 3):
            assert faint_texts(lay_out(build_diagram(graph, depth), theme)) == [], (theme, depth)
        assert faint_texts(lay_out(build_diagram(graph, 2, annotate="flops"), theme)) == [], theme
        assert faint_texts(lay_out(build(graph, 2, compare=other), theme)) == [], theme


# The contrast rule: any two kinds' fills differ by CIEDE2000 ΔE ≥ 10 in each theme (ΔE 2.3 is a
# just-noticeable difference; 10 is plain at a glance, also on small legend swatches).
MIN_DELTA_E = 10.0


@pytest.mark.parametrize("theme", sorted(style.LOOKS))
def test_legend_fills_are_pairwise_distinguishable(theme: str) -> None:
    fills = {kind: style.look(kind, theme).fill for kind in style.KIND_NAMES}
    close = [
        (a, b, round(delta_e(fills[a], fills[b]), 1))
        for a, b in itertools.combinations(style.KIND_NAMES, 2)
        if delta_e(fills[a], fills[b]) < MIN_DELTA_E
    ]
    assert close == []


def test_a_tied_head_says_what_it_is_tied_to(tiny_graph: TinyGraph) -> None:
    graph = annotated(tiny_graph, "gpt2", "causal-lm")
    for depth in (1, 2, 3):
        (head,) = [n for n in build_diagram(graph, depth).nodes if n.id == "lm_head"]
        assert any(line.endswith("tied to wte") for line in head.lines), head.lines


def test_summary_folds_siblings_in_index_order_whatever_the_tables_order(tiny_graph: TinyGraph) -> None:
    # A graph read from JSON (the cache's) has its module table sorted: layers.1, layers.10, layers.2, …
    graph = annotated(tiny_graph, "modernbert", "base")
    shuffled = graph.copy()
    shuffled.graph[g.G_MODULES] = dict(reversed(list(graph.graph[g.G_MODULES].items())))
    assert summary_folds(shuffled, 4) == summary_folds(graph, 4) != set()


# --- shapes on edges --------------------------------------------------------------------------

GROUPED_QUERY = ("llama", "qwen2", "qwen3")


@pytest.mark.parametrize("model_type", GROUPED_QUERY)
def test_grouped_query_k_and_v_edges_show_the_key_value_heads(
    model_type: str, tiny_graph: TinyGraph, dot_binary: str
) -> None:
    # The anatomy bridges over layout ops, a head repeat (unsqueeze, expand, reshape) among them:
    # K and V both reach attention's own ops at the key/value heads, not one before and one after.
    config = TINY[model_type]
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    assert kv_heads < heads
    layout = lay_out(build_diagram(annotated(tiny_graph, model_type, "base"), 3))
    into_attention = {
        tail.rsplit(".", 1)[-1]: label
        for (tail, head), label in layout.labels.items()
        if head.endswith("self_attn:ops") and tail.rsplit(".", 1)[-1] in ("k_proj", "k_norm", "v_proj")
    }
    assert {"v_proj"} < set(into_attention) <= {"k_proj", "k_norm", "v_proj"}, into_attention
    head_dim = config.get("head_dim", config["hidden_size"] // heads)
    assert set(into_attention.values()) == {f"[batch, {kv_heads}, seq, {head_dim}]"}, into_attention


# --- role titles of position computations --------------------------------------------------------


def drawn_texts(diagram: Diagram) -> list[str]:
    """Every text line of the SVG Graphviz renders for the diagram."""
    import html
    import subprocess

    from bertgraph.render import dot

    source = "\n".join(dot.generate_lines(diagram, "light"))
    svg = subprocess.run(["dot", "-Tsvg"], input=source.encode(), capture_output=True, check=True).stdout.decode()
    return [html.unescape(text).strip() for text in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]


# Family → (the depth where its position computations are nodes, the titles the drawing must
# show, how many attention masks it draws: the padding masks only, one per stack and kind).
POSITION_TITLES: dict[str, tuple[int, set[str], int]] = {
    "deberta-v2": (2, {"relative-position embeddings", "relative position buckets"}, 1),
    "mpnet": (2, {"relative position buckets", "relative position bias"}, 1),
    "t5": (3, {"relative position buckets", "relative position bias"}, 3),
}


def check_position_titles(graph: nx.DiGraph, depth: int, wanted: set[str], masks: int) -> None:
    texts = drawn_texts(build_diagram(graph, depth))
    assert wanted <= set(texts), wanted - set(texts)
    # A mask is a node titled so (and the legend's swatch), or, in the compact layout, a line of what
    # reads it — of each reader (T5's first layer and its folded ones): counted once per shape it has.
    titled = max(texts.count("attention mask") - 1, 0)
    assert titled + len({text for text in texts if text.startswith("with attention mask")}) == masks


@pytest.mark.parametrize("model_type", sorted(POSITION_TITLES))
def test_relative_position_computations_are_titled_by_role(
    model_type: str, tiny_graph: TinyGraph, dot_binary: str
) -> None:
    check_position_titles(annotated(tiny_graph, model_type, "base"), *POSITION_TITLES[model_type])


@pytest.mark.slow
@pytest.mark.parametrize(("name", "model_type"), [("deberta-v3-base", "deberta-v2"), ("all-mpnet-base-v2", "mpnet")])
def test_the_presets_relative_positions_are_titled_by_role(
    name: str, model_type: str, traced: Callable[..., bertgraph.Architecture], dot_binary: str
) -> None:
    check_position_titles(traced(name).graph, *POSITION_TITLES[model_type])


# --- a real model without a record ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.xdist_group("vits")
def test_real_vits_is_drawn_true_and_says_what_never_runs(real_vits: nx.DiGraph, dot_binary: str) -> None:
    """VITS through the generic path: its flows (a flip between each two) drawn without a cycle, and
    the flows used only in training (``post_flows``) folded by ``summary`` but said not to run, as
    the drawing, which draws what the trace runs, leaves them out."""
    graph = real_vits
    for depth in (1, 2):
        check(graph, depth, role_titles=False)
    rows = {row["path"]: row for row in stats.summary_rows(graph, depth=2)}
    assert rows["duration_predictor.post_flows.1"]["repeat"] == 4
    assert rows["duration_predictor.post_flows.1"]["runs"] is False
    assert "runs" not in rows["duration_predictor.flows.0"]
    lines = list(text.generate_summary(stats.summary(graph, depth=2)))
    assert any("post_flows" in line and text.NOT_RUN in line for line in lines)
    assert not any(re.search(r"─ flows\b", line) and text.NOT_RUN in line for line in lines)
