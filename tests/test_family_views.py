"""Views, diagrams and tables of every family: roles not class names, periodic and shared folds, the families view."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import networkx as nx
import pytest

from bertgraph.api import Architecture
from bertgraph.graph import roles, stats, views
from bertgraph.graph import schema as g
from bertgraph.model import MODEL_TYPES
from bertgraph.render import dot, families, mermaid
from bertgraph.render.diagram import build_diagram
from bertgraph.render.families import build_families, kinds_of, table_rows
from bertgraph.render.figures import count
from tests.family_configs import TINY
from tests.mermaid_browser import browser_available, render_mermaid, svg_text

pytestmark = pytest.mark.xdist_group("family_views")  # its fixtures are built once, on one worker

_BERT_CLASS = re.compile(r"\bBert[A-Z]\w*")


@pytest.fixture(scope="session")
def tiny(tiny_graph: Callable[[str, str], tuple[object, nx.DiGraph]]) -> Callable[[str], nx.DiGraph]:
    """``tiny(model_type)``: the base model of the tiny config, the session's shared trace (never changed here)."""

    def get(model_type: str) -> nx.DiGraph:
        return tiny_graph(model_type, "base")[1]

    return get


def with_attention(graph: nx.DiGraph, kinds: dict[str, str]) -> nx.DiGraph:
    """A copy whose attention blocks carry kinds, as the facts pass records them in the module table.

    The facts pass is not part of this code yet; the test sets what it would find (``kinds``:
    module path pattern → kind label, e.g. ``sliding-window(16)``), so the display is checked.
    """
    graph = graph.copy()
    graph.graph[g.G_MODULES] = {path: dict(info) for path, info in graph.graph[g.G_MODULES].items()}
    for path, info in graph.graph[g.G_MODULES].items():
        if info.get(g.M_ROLE) not in (roles.SELF_ATTENTION, roles.CROSS_ATTENTION):
            continue
        parent = path.rsplit(".", 1)[0]
        if roles.role_of(graph, parent) in (roles.SELF_ATTENTION, roles.CROSS_ATTENTION):
            continue  # only the block itself, not its parts
        for pattern, label in kinds.items():
            if re.fullmatch(pattern, path):
                kind, _, window = label.partition("(")
                info[g.ATTENTION] = kind
                if window:
                    info[g.WINDOW] = int(window.rstrip(")"))
                break
    return graph


# --- every family, every depth --------------------------------------------------------------


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_every_family_renders_at_every_depth_with_its_total(tiny: Callable[[str], nx.DiGraph], model_type: str) -> None:
    graph = tiny(model_type)
    total = stats.parameter_stats(graph)["total"]
    family = graph.graph[g.G_FAMILY]
    for depth in range(5):
        shown = views.view(graph, depth)
        assert sum(int(d.get(g.PARAMS, 0)) for _, d in shown.nodes(data=True)) == total, depth
        source = dot.generate_dot(graph, depth=depth)
        assert f"{count(total)} parameters" in source
        result = mermaid.generate_mermaid(graph, depth=depth)
        # Within GitHub's limits; only the operator level may step back to fit them.
        assert result.depth == depth or (depth == 4 and result.notes), result.notes
        assert len(result.text) <= mermaid.MAX_TEXT
        if family != "bert":
            # No BERT class reaches another family's diagram, nor BERT's [CLS].
            assert not _BERT_CLASS.findall(source + result.text), (depth, _BERT_CLASS.findall(source))
            assert "[CLS]" not in source + result.text
        kinds = {node.kind for node in build_diagram(graph, depth).nodes}
        if depth == 2 and graph.graph[g.G_STRUCTURE] != "decoder-only":
            assert "embedding" in kinds


def test_roles_give_the_kinds_bert_had_by_class_name(tiny: Callable[[str], nx.DiGraph]) -> None:
    # Every view node, as the plain layout draws it (the compact one draws tables and masks as lines).
    kinds = {node.id: node.kind for node in build_diagram(tiny("bert"), 2, compact=False).nodes}
    assert kinds["encoder.layer.0-2"] == "block"
    assert kinds["embeddings.word_embeddings"] == "embedding"
    assert kinds["embeddings.LayerNorm"] == "normalisation"
    assert kinds["pooler.dense"] == "pooling"
    assert kinds[":ops"] == "mask"


# --- heterogeneous repeats -------------------------------------------------------------------


def test_modernbert_folds_by_its_pattern_and_shows_both_kinds(tiny: Callable[[str], nx.DiGraph]) -> None:
    # Tiny ModernBERT: layer 0, then (sliding, sliding, global) three times.
    graph = with_attention(
        tiny("modernbert"), {r"layers\.(0|3|6|9)\.attn": "bidirectional", r"layers\.\d+\.attn": "sliding-window(16)"}
    )
    content = views.sibling_content(graph)
    for depth in (1, 2, 3):
        shown = views.view(graph, depth)
        layers = sorted({views.display_levels(d[g.MODULE])[0] for _, d in shown.nodes(data=True) if d.get(g.MODULE)})
        assert [p for p in layers if p.startswith("layers.")] == [
            "layers.0",
            "layers.1-7/3",
            "layers.2-8/3",
            "layers.3-9/3",
        ]
        # A fold stands only for identical layers: every sibling it covers has the same content.
        for path in layers:
            match = re.fullmatch(r"layers\.(\d+)-(\d+)/(\d+)", path)
            if match:
                first, last, step = (int(x) for x in match.groups())
                assert len({content[f"layers.{i}"] for i in range(first, last + 1, step)}) == 1
        assert sum(int(d.get(g.PARAMS, 0)) for _, d in shown.nodes(data=True)) == stats.parameter_stats(graph)["total"]
    text = mermaid.generate_mermaid(graph, depth=1).text
    assert "layers.1, 4, 7" in text and "layers.1–9 · 3 layers × 3" in text  # the pattern's frame, in run order
    assert "sliding-window(16) attention" in text and "bidirectional attention" in text
    assert "sliding-window attention" in text and "bidirectional attention" in text  # the legend


def test_sliding_and_global_layers_never_fold_together(tiny: Callable[[str], nx.DiGraph]) -> None:
    graph = tiny("modernbert")
    content = views.sibling_content(graph)
    kinds = [content[f"layers.{i}"] for i in range(10)]
    assert kinds[1] == kinds[2] != kinds[3] and kinds[3] == kinds[6] and kinds[0] not in kinds[1:]
    assert views.fold_plan(kinds) == [(0, 1, 1), (1, 3, 3)]


def test_a_stack_of_identical_layers_is_one_run_not_pairs() -> None:
    assert views.fold_plan(list("AAAAAA")) == [(0, 1, 6)]
    assert views.fold_plan(list("ABABAB")) == [(0, 2, 3)]
    assert views.fold_plan(list("ABC")) == [(0, 1, 1), (1, 1, 1), (2, 1, 1)]


def test_pre_norm_layers_fold_at_every_depth(tiny: Callable[[str], nx.DiGraph]) -> None:
    for model_type in ("gpt2", "llama"):
        graph = tiny(model_type)
        for depth in (1, 2, 3):
            modules = {d.get(g.MODULE, "") for _, d in views.view(graph, depth).nodes(data=True)}
            assert not any(re.search(r"(^|\.)(h|layers)\.1(\.|$)", m) for m in modules), (model_type, depth)


def test_albert_draws_its_shared_layer_once_with_its_calls(tiny: Callable[[str], nx.DiGraph]) -> None:
    graph = tiny("albert")
    assert roles.shared_modules(graph) == {"encoder.albert_layer_groups.0": 3}
    text = mermaid.generate_mermaid(graph, depth=2).text
    assert "AlbertLayerGroup × 3 · shared weights" in text
    node = views.view(graph, 2).nodes["encoder.albert_layer_groups.0"]
    once = stats.module_params(graph)["encoder.albert_layer_groups.0"]
    assert node[g.PARAMS] == once and f"{count(once)} params, run 3 times" in text


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_a_graph_stored_without_the_facts_finds_the_shared_layers_the_facts_pass_finds(
    tiny: Callable[[str], nx.DiGraph], model_type: str
) -> None:
    """A graph stored without the facts record (an older cache entry, a graph file) has only its
    ops' call indices; views read its shared layers with the facts pass itself, so the two agree
    (DeBERTa's twice-run projections are no shared layer either way)."""
    import copy

    from bertgraph.graph import facts
    from bertgraph.graph import io as graph_io

    bare = graph_io.from_node_link(json.loads(json.dumps(graph_io.to_node_link(tiny(model_type)))))
    assert g.G_SHARED not in bare.graph and g.G_ATTENTION not in bare.graph
    read = facts.annotate(copy.deepcopy(bare))
    recorded = read.graph.get(g.G_SHARED, {})
    assert roles.shared_modules(bare) == roles.shared_modules(read) == recorded
    assert (recorded != {}) == (model_type == "albert"), recorded


# --- the families view -----------------------------------------------------------------------


def test_families_figure_has_the_stacks_cross_edges_and_kinds(tiny: Callable[[str], nx.DiGraph]) -> None:
    graphs = [
        with_attention(tiny("bert"), {r".*": "bidirectional"}),
        with_attention(tiny("gpt2"), {r".*": "causal"}),
        with_attention(
            tiny("t5"), {r"encoder.*": "bidirectional", r"decoder\.block\.\d+\.layer\.1": "cross", r".*": "causal"}
        ),
    ]
    diagram = build_families(graphs)
    titles = {cluster.title for cluster in diagram.clusters}
    for expected in ("encoder-only", "decoder-only", "encoder-decoder"):
        assert any(expected in title for title in titles), expected
    assert any(t.startswith("encoder · T5Stack") for t in titles) and any(
        t.startswith("decoder · T5Stack") for t in titles
    )
    cross = [edge for edge in diagram.edges if edge.style == "cross"]
    assert cross and all(e.source.startswith("m2:encoder") and e.target.startswith("m2:decoder") for e in cross)
    assert {"attention-bidirectional", "attention-causal"} <= set(diagram.kinds)
    source = "\n".join(dot.generate_lines(diagram))
    for legend in ("bidirectional attention", "causal attention", "encoder output into cross-attention"):
        assert legend in source
    assert "bidirectional + cross attention" not in source  # T5's encoder has no cross-attention
    assert "causal + cross attention" in source  # its decoder layers have both
    kinds = {node.id: node.kind for node in diagram.nodes}
    decoder = [kind for node_id, kind in kinds.items() if re.match(r"m2:decoder\.block\.[\d-]+$", node_id)]
    encoder = [kind for node_id, kind in kinds.items() if re.match(r"m2:encoder\.block\.[\d-]+$", node_id)]
    assert decoder and set(decoder) == {"attention-causal"}  # a layer takes its self-attention's colour
    assert encoder and set(encoder) == {"attention-bidirectional"}
    # Every model's layers are boxes: GPT-2's layer list sits at the top, so it is drawn a level up.
    ids = {node.id for node in diagram.nodes}
    assert {"m0:encoder.layer.0-2", "m1:h.0-2"} <= ids
    assert any(re.match(r"m2:encoder\.block\.\d+-\d+", i) for i in ids)
    assert any(re.match(r"m2:decoder\.block\.\d+-\d+", i) for i in ids)


def test_families_table_cells_are_the_traced_values(tiny: Callable[[str], nx.DiGraph]) -> None:
    graphs = [tiny("bert"), tiny("gpt2"), tiny("t5"), tiny("albert")]
    rows = table_rows(kinds_of(graphs))
    for graph, row in zip(graphs, rows):
        hidden = {
            d[g.SHAPE][-1] for _, d in graph.nodes(data=True) if d.get(g.KIND) == g.OUTPUT and len(d[g.SHAPE]) == 3
        }
        assert row[4] == count(hidden.pop())
        assert row[5] == count(stats.parameter_stats(graph)["total"])
    assert rows[0][1:4] == ["encoder-only", "encoder: —", "encoder 3"]
    assert rows[1][1:4] == ["decoder-only", "decoder: —", "decoder 3"]
    assert rows[2][1:4] == ["encoder-decoder", "encoder: —; decoder: —", "encoder 4; decoder 4"]
    assert rows[3][3] == "encoder 3"  # one shared layer run three times
    facts = kinds_of([with_attention(tiny("gpt2"), {r".*": "causal"})])
    assert table_rows(facts)[0][2] == "decoder: causal"
    # What the facts pass records (set here, the pass not being part of this code yet): counts per
    # kind in a stack, and fewer key/value heads than query heads.
    modernbert = tiny("modernbert").copy()
    modernbert.graph[g.G_ATTENTION] = {"layers": {"sliding-window(16)": 6, "bidirectional": 4}}
    assert table_rows(kinds_of([modernbert]))[0][2] == "encoder: bidirectional × 4, sliding-window(16) × 6"
    llama = with_attention(tiny("llama"), {r".*": "causal"})
    for info in llama.graph[g.G_MODULES].values():
        if g.ATTENTION in info:
            info.update({g.Q_HEADS: 4, g.KV_HEADS: 2})
    assert table_rows(kinds_of([llama]))[0][2] == "decoder: causal, grouped-query (4 query / 2 key-value heads)"


def test_families_command_writes_the_figure_and_table(tmp_path: Path, tiny: Callable[[str], nx.DiGraph]) -> None:
    folders = []
    for model_type in ("bert", "gpt2", "t5"):
        folder = tmp_path / model_type
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(TINY[model_type]))
        folders.append(str(folder))
    command = [sys.executable, "-m", "bertgraph", "families", *folders]
    done = subprocess.run(
        [*command, "-o", str(tmp_path / "f.dot"), "--table", str(tmp_path / "t.md")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    table = (tmp_path / "t.md").read_text()
    assert table.startswith("| model | structure | attention per stack |") and "encoder-decoder" in table
    assert "cross-attention" in (tmp_path / "f.dot").read_text()
    page = subprocess.run([*command, "-o", str(tmp_path / "f.md")], capture_output=True, text=True)
    assert page.returncode == 0, page.stderr
    assert "```mermaid" in (tmp_path / "f.md").read_text() and "| model |" in (tmp_path / "f.md").read_text()
    refused = subprocess.run(
        [*command, "-o", str(tmp_path / "g.md"), "--table", str(tmp_path / "u.md")], capture_output=True, text=True
    )
    assert refused.returncode == 2 and "already holds the table" in refused.stderr
    assert not (tmp_path / "g.md").exists() and not (tmp_path / "u.md").exists()
    bad = subprocess.run([*command, "-o", str(tmp_path / "x.txt")], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.browser
def test_families_and_folds_render_in_a_browser(tiny: Callable[[str], nx.DiGraph]) -> None:
    if browser_available():
        pytest.skip(str(browser_available()))
    diagrams = {
        "families": families._mermaid([tiny("bert"), tiny("gpt2"), tiny("t5")], 2, "light", None),
        "modernbert": mermaid.generate_mermaid(tiny("modernbert"), depth=2).text,
        "albert": mermaid.generate_mermaid(tiny("albert"), depth=2).text,
        "bart": mermaid.generate_mermaid(tiny("bart"), depth=3).text,
    }
    results = render_mermaid(diagrams)
    assert {name: r.error for name, r in results.items() if not r.ok} == {}
    assert "encoder output into cross-attention" in svg_text(results["families"].svg)
    assert "shared weights" in svg_text(results["albert"].svg)


@pytest.mark.slow
def test_the_published_modernbert_and_albert_fold_as_the_readme_says(traced: Callable[..., Architecture]) -> None:
    modernbert = traced("modernbert-base").graph
    text = mermaid.generate_mermaid(modernbert, depth=1).text
    for title in ("layers.0", "layers.1, 4, …, 19", "layers.2, 5, …, 20", "layers.3, 6, …, 21"):
        assert f"<b>{title}</b>" in text, title
    assert text.count("ModernBertEncoderLayer × 7") == 3 and "layers.1–21 · 3 layers × 7" in text
    albert = traced("albert-base-v2").graph
    assert "AlbertLayerGroup × 12 · shared weights" in mermaid.generate_mermaid(albert, depth=2).text
    rows = table_rows(kinds_of([albert, modernbert]))
    assert [row[3] for row in rows] == ["encoder 12", "encoder 22"]


def test_the_report_says_the_architecture_kind(tiny: Callable[[str], nx.DiGraph]) -> None:
    from bertgraph.render.report import generate_report

    text = generate_report(
        with_attention(tiny("t5"), {r"encoder.*": "bidirectional", r".*\.layer\.1": "cross", r".*": "causal"})
    )
    section = text.split("### Architecture kind", 1)[1].split("##", 1)[0]
    assert "**encoder-decoder**" in section
    assert "encoder stack `encoder.block`: 4 layers, attention bidirectional" in section
    assert "decoder stack `decoder.block`: 4 layers, attention causal, cross" in section
    assert "hidden size 32" in section and "Typically used for text to text" in section


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_only_albert_has_a_shared_layer_once_the_facts_are_read(
    tiny: Callable[[str], nx.DiGraph], model_type: str
) -> None:
    """DeBERTa runs its query and key projections twice per layer (over the relative embeddings):
    that is not a shared layer, and its layers are counted once each."""
    from bertgraph.graph import facts

    graph = facts.annotate(tiny(model_type).copy())
    shared = roles.shared_modules(graph)
    assert (shared != {}) == (model_type == "albert"), shared
    if model_type == "deberta-v2":
        assert table_rows(kinds_of([graph]))[0][3] == f"encoder {TINY['deberta-v2']['num_hidden_layers']}"
