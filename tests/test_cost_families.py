"""Cost for every family and head: matmul FLOPs equal FlopCounterMode on a real forward pass.

Each tiny model of :mod:`tests.family_configs` is traced by bertgraph (meta device, grown
stacks, named dims) and built again with seeded random weights on the CPU; FlopCounterMode
counts one forward pass of the real model at three sizes, and the graph's polynomial,
evaluated there, must give the same integer. Encoder-decoders get a decoder length (``tgt``)
unlike the encoder's, so cross-attention counted with the wrong length fails. Then the ops
the families add are checked against the per-element rule by hand, ALBERT's shared layer
against its calls, and the command against its decoder-length option.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from bertgraph.cli import main
from bertgraph.graph import cost, costbase, costtable
from bertgraph.graph import schema as g
from bertgraph.graph.poly import Poly
from bertgraph.graph.stats import summary_rows
from bertgraph.model import ModelSpec, build_model, example_inputs, resolve
from bertgraph.render import markdown, text
from bertgraph.render.report import generate_cost_lines
from tests.exported import flop_counter
from tests.family_configs import TINY
from tests.matrix import tiny_head_cases

TinyGraph = Callable[[str, str], tuple[ModelSpec, nx.DiGraph]]

# Every model type once, every head of each structure at least once (every pair with BERTGRAPH_FULL_MATRIX=1).
HEAD_CASES = tiny_head_cases()
# One head of each structure runs in every quick test run; the rest are slow.
QUICK = {("albert", "token-classification"), ("llama", "causal-lm"), ("bart", "seq2seq-lm")}

# (batch, seq, decoder length); the third size is one no trace used.
SIZES = [(1, 5, 3), (2, 11, 7), (3, 16, 9)]
CHOICES = 3


def costed(graph: nx.DiGraph) -> nx.DiGraph:
    """A cost-annotated copy (the traced graph is shared with other tests, which compare it byte for byte)."""
    return cost.annotate(graph.copy())


def sizes_of(spec: ModelSpec, batch: int, seq: int, tgt: int) -> dict[str, int]:
    every = {"batch": batch, "choices": CHOICES, "seq": seq, "tgt": tgt}
    return {name: every[name] for name in spec.dim_names}


def real_inputs(spec: ModelSpec, model: Any, sizes: dict[str, int]) -> dict[str, Any]:
    """The head's inputs on the CPU; a sequence classifier of an encoder-decoder pools its end-of-sequence token."""
    inputs = example_inputs(spec, "cpu", tuple(sizes[name] for name in spec.dim_names))
    if spec.family.structure == "encoder-decoder" and spec.head == "sequence-classification":
        inputs["input_ids"][:, -1] = int(model.config.eos_token_id)
    return inputs


_REAL: dict[tuple[str, str], Any] = {}


def counted(spec: ModelSpec, model_type: str, sizes: dict[str, int]) -> int:
    if (model_type, spec.head) not in _REAL:
        _REAL.clear()  # one real model at a time
        _REAL[model_type, spec.head] = build_model(spec, weights=True)  # seeded random weights, CPU
    model = _REAL[model_type, spec.head]
    return flop_counter(model, real_inputs(spec, model, sizes))


# Ops whose output size depends on the data: an encoder-decoder's classifier selects the
# end-of-sequence tokens with a boolean mask. They move data (0 FLOPs) but their bytes are unknown.
EOS_SELECTION = {
    "aten.index.Tensor (shape unknown)": 1,
    "aten.select.int (shape unknown)": 1,
    "aten.view.default (shape unknown)": 1,
}


def _case(model_type: str, head: str) -> Any:
    marks = [] if (model_type, head) in QUICK else [pytest.mark.slow]
    return pytest.param(model_type, head, marks=marks, id=f"{model_type}-{head}")


@pytest.mark.parametrize(("model_type", "head"), [_case(t, h) for t, h in HEAD_CASES])
def test_matmul_flops_equal_flop_counter_for_every_family_and_head(
    model_type: str, head: str, tiny_graph: TinyGraph
) -> None:
    spec, traced = tiny_graph(model_type, head)
    graph = costed(traced)
    expected_unsupported = (
        EOS_SELECTION if spec.family.structure == "encoder-decoder" and head == "sequence-classification" else {}
    )
    assert cost.unsupported(graph) == expected_unsupported
    matmul = cost.model_totals(graph)[g.MATMUL_FLOPS]
    assert matmul.names() == set(spec.dim_names)  # an encoder-decoder's in both lengths
    for batch, seq, tgt in SIZES:
        at = sizes_of(spec, batch, seq, tgt)
        assert costbase.evaluate(matmul, at) == counted(spec, model_type, at), at


# --- the ops the families add, by the per-element rule (tiny configs: hidden 32, 4 heads of 8) ------------------

# (model_type, head, module path or op node, matmul FLOPs, other FLOPs), worked out by hand from the rule.
FAMILY_OPS = [
    # RMS norm as LLaMA writes it: x², mean over 32 (per input element), + eps and rsqrt per token,
    # normalise and weight per element: 4·32 + 2 per token.
    ("llama", "base", "layers.0.input_layernorm", "0", "130*batch*seq"),
    # Rotary tables: positions × 4 inverse frequencies, cos and sin of 8, each scaled once.
    ("llama", "base", "rotary_emb", "0", "36*seq"),
    # rotate_half negates half the query (4 heads) and of the key (2 heads, before repeat_kv).
    ("llama", "base", "layers.0.self_attn:neg", "0", "16*batch*seq"),
    ("llama", "base", "layers.0.self_attn:neg_1", "0", "8*batch*seq"),
    # repeat_kv copies keys and values to the 4 query heads: data movement, no FLOPs ...
    ("llama", "base", "layers.0.self_attn:expand", "0", "0"),
    ("llama", "base", "layers.0.self_attn:reshape", "0", "0"),
    # ... and attention counts every query head: 2·2·4·8 per score; softmax 3 + scale 1 + mask 1.
    ("llama", "base", "layers.0.self_attn:scaled_dot_product_attention", "128*batch*seq**2", "20*batch*seq**2"),
    # LayerNorm: normalise 3 per element, +1 for the weight, +1 for the bias; ModernBERT's has no bias.
    ("bert", "base", "embeddings.LayerNorm", "0", "160*batch*seq"),
    ("modernbert", "base", "layers.1.attn_norm", "0", "128*batch*seq"),
    # T5's RMS norm, like LLaMA's.
    ("t5", "base", "encoder.block.1.layer.1.layer_norm", "0", "130*batch*seq"),
    # T5's relative buckets: integer arithmetic is free; log of the float distances, two divisions and a scale.
    ("t5", "base", "encoder.block.0.layer.0.SelfAttention:abs", "0", "0"),
    ("t5", "base", "encoder.block.0.layer.0.SelfAttention:log", "0", "seq**2"),
    ("t5", "base", "decoder.block.0.layer.0.SelfAttention:log", "0", "tgt**2"),
    # Cross-attention: decoder queries (tgt) against encoder keys (seq).
    (
        "t5",
        "base",
        "decoder.block.1.layer.1.EncDecAttention:scaled_dot_product_attention",
        "128*batch*seq*tgt",
        "20*batch*seq*tgt",
    ),
    (
        "bart",
        "seq2seq-lm",
        "model.decoder.layers.1.encoder_attn:scaled_dot_product_attention",
        "128*batch*seq*tgt",
        "20*batch*seq*tgt",
    ),
    # DeBERTa's disentangled attention: q, k, v (6,144·b·s), content scores and values (64·b·s² each),
    # content-to-position and position-to-content against 32 relative positions (2,048·b·s each), and the
    # relative embeddings through the query and key projections once per layer (2·65,536, no batch).
    ("deberta-v2", "base", "encoder.layer.0.attention.self", "128*batch*seq**2 + 10240*batch*seq + 131072", None),
    ("deberta-v2", "base", "encoder.layer.0.attention.self:gather", "0", "0"),
    # ModernBERT: the sliding-window mask is boolean and integer work (free); GeGLU is Wi (32 → 2·37),
    # GELU on one half times the other, Wo (37 → 32).
    ("modernbert", "base", ":abs", "0", "0"),
    ("modernbert", "base", ":le", "0", "0"),
    ("modernbert", "base", "layers.1.mlp", "7104*batch*seq", "74*batch*seq"),
    # MPNet's relative position bias: buckets as T5's, looked up once for all layers.
    ("mpnet", "base", "encoder:log", "0", "seq**2"),
    ("mpnet", "base", "encoder.relative_attention_bias:embedding", "0", "0"),
    # ALBERT's factorised embeddings: 16 → 32, with a bias.
    ("albert", "base", "encoder.embedding_hidden_mapping_in:linear", "1024*batch*seq", "32*batch*seq"),
]


@pytest.mark.parametrize(
    ("model_type", "head", "where", "matmul", "other"), FAMILY_OPS, ids=[f"{c[0]}-{c[2]}" for c in FAMILY_OPS]
)
def test_the_ops_families_add_follow_the_rule(
    model_type: str, head: str, where: str, matmul: str, other: str | None, tiny_graph: TinyGraph
) -> None:
    _, graph = tiny_graph(model_type, head)
    graph = costed(graph)
    if where in graph:
        found = {key: costbase.node_poly(graph.nodes[where], key) for key in (g.MATMUL_FLOPS, g.OTHER_FLOPS)}
        assert g.COST_UNSUPPORTED not in graph.nodes[where]
    else:
        found = cost.module_costs(graph)[where]
    assert found[g.MATMUL_FLOPS] == Poly.parse(matmul)
    if other is not None:
        assert found[g.OTHER_FLOPS] == Poly.parse(other)


def test_albert_shared_layer_costs_every_call_and_counts_its_parameters_once(tiny_graph: TinyGraph) -> None:
    """One layer module runs once per layer: its FLOPs and bytes are paid every call, its weights once."""
    spec, traced = tiny_graph("albert", "base")
    graph = costed(traced)
    calls = int(spec.config["num_hidden_layers"])
    layer = "encoder.albert_layer_groups.0.albert_layers.0"
    ops = [
        d for _, d in graph.nodes(data=True) if d.get(g.KIND) == g.OPERATOR and _inside(str(d.get(g.MODULE, "")), layer)
    ]
    per_call: dict[int, dict[str, Poly]] = {}
    for data in ops:
        entry = per_call.setdefault(int(data.get(g.CALL, 0)), {key: Poly() for key in g.POLY_ATTRS})
        for key in g.POLY_ATTRS:
            entry[key] = entry[key] + costbase.node_poly(data, key)
    assert sorted(per_call) == list(range(calls))
    first = per_call[0]
    assert first[g.MATMUL_FLOPS] != Poly() and all(entry == first for entry in per_call.values())
    module = cost.module_costs(graph)[layer]
    for key in g.POLY_ATTRS:
        assert module[key] == calls * first[key], key
    # Its parameters are read by every call and counted at the first.
    read = [d for d in ops if d.get(g.PARAM_NAMES)]
    assert read and all(int(d.get(g.CALL, 0)) == 0 for d in read)
    layer_params = sum(int(d[g.PARAMS]) for d in read)
    assert layer_params == sum(p.numel() for p in build_model(spec).encoder.albert_layer_groups[0].parameters())
    assert sum(int(d.get(g.PARAM_BYTES, 0)) for d in ops) == 4 * layer_params
    # The table's row for the layer: its parameters once, its FLOPs for every call.
    report = costtable.cost_report(graph, [{"batch": 1, "seq": 128}])
    row = next(r for r in report["rows"] if r["path"] == layer)
    assert row["matmul_flops"]["values"] == [calls * first[g.MATMUL_FLOPS].evaluate({"batch": 1, "seq": 128})]
    assert {r["path"]: r for r in summary_rows(graph)}[layer]["params"] == layer_params
    # …and says so in words: the FLOPs are every call's.
    group = next(r for r in report["rows"] if r["path"] == layer.rsplit(".", 2)[0])
    assert group["calls"] == calls and "calls" not in row
    line = next(line for line in text.generate_cost(report) if "AlbertLayerGroup" in line)
    assert f"AlbertLayerGroup × {calls} · shared weights" in line


def _inside(module: str, path: str) -> bool:
    return module == path or module.startswith(path + ".")


# --- the command and the report, for every family ---------------------------------------------------------------


def _table_case(model_type: str) -> Any:
    marks = [] if model_type in {"t5", "gpt2", "modernbert"} else [pytest.mark.slow]
    return pytest.param(model_type, marks=marks, id=model_type)


@pytest.mark.parametrize("model_type", [_table_case(t) for t in TINY])
def test_cost_tables_and_report_section_for_every_family(model_type: str, tiny_graph: TinyGraph) -> None:
    spec, traced = tiny_graph(model_type, "base")
    graph = costed(traced)
    sizes = [costbase.sizes_for(graph, seq=16), costbase.sizes_for(graph, seq=32, batch=2)]
    report = costtable.cost_report(graph, sizes)
    totals = cost.model_totals(graph)
    matmul = [costbase.evaluate(totals[g.MATMUL_FLOPS], s) for s in sizes]
    assert report["total"]["matmul_flops"]["values"] == matmul
    assert report["rows"][0]["path"] == "" and report["rows"][0]["matmul_flops"]["values"] == matmul
    # The tree folds repeated layers like summary does, and a folded row sums every layer it stands for.
    folded = [row for row in report["rows"] if row["repeat"] > 1]
    # ALBERT runs one shared layer group three times: one row (its cost covers every call), nothing folded.
    assert folded or model_type == "albert", "tiny configs have at least three layers per stack"
    modules = cost.module_costs(graph)
    for row in folded:
        parent, first = row["path"].rsplit(".", 1)
        members = [f"{parent}.{int(first) + i}" for i in range(row["repeat"])]
        expected = [sum(costbase.evaluate(modules[m][g.MATMUL_FLOPS], s) for m in members) for s in sizes]
        assert row["matmul_flops"]["values"] == expected, row["path"]
    assert all(peak > 0 for peak in report["memory"]["peak_activation_bytes"])
    text_out = "".join(f"{line}\n" for line in text.generate_cost(report))
    markdown_out = "".join(f"{line}\n" for line in markdown.generate_cost(report))
    for out in (text_out, markdown_out):
        assert f"{matmul[0]:,}" in out and f"{matmul[1]:,}" in out
    assert json.loads(json.dumps(report)) == report
    if "tgt" in spec.dim_names:
        assert "tgt=16" in text_out and "tgt=32" in text_out  # the decoder as long as the input
    section = "".join(f"{line}\n" for line in generate_cost_lines(graph))
    assert (
        section.startswith("## Cost")
        and f"{costbase.evaluate(totals[g.MATMUL_FLOPS], costbase.sizes_for(graph)):,}" in section
    )


def test_decoder_length_is_an_option_of_the_cost_command(
    family_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--decoder-len`` sets the decoder length apart from ``--seq-len``; the figures are FlopCounterMode's."""
    folder = str(family_dirs["t5"])
    assert main(["cost", folder, "--seq-len", "16", "40", "--decoder-len", "6", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sizes"] == [{"batch": 1, "seq": 16, "tgt": 6}, {"batch": 1, "seq": 40, "tgt": 6}]
    spec = resolve(folder)
    model = build_model(spec, weights=True)
    for at, value in zip(report["sizes"], report["total"]["matmul_flops"]["values"]):
        assert value == flop_counter(model, real_inputs(spec, model, at)), at
    assert main(["cost", folder, "--seq-len", "16", "40", "--decoder-len", "6", "9", "--format", "json"]) == 0
    assert [s["tgt"] for s in json.loads(capsys.readouterr().out)["sizes"]] == [6, 9]
    assert main(["cost", folder, "--seq-len", "16", "40", "--format", "json"]) == 0
    assert [s["tgt"] for s in json.loads(capsys.readouterr().out)["sizes"]] == [16, 40]


@pytest.mark.parametrize(
    ("model_type", "extra", "message"),
    [
        ("gpt2", ["--decoder-len", "8"], "--decoder-len applies to encoder-decoder models"),
        ("bert", ["--decoder-len", "8"], "has no decoder length"),
        ("t5", ["--seq-len", "8", "9", "--decoder-len", "1", "2", "3"], "one length or one per --seq-len (2), not 3"),
    ],
)
def test_a_decoder_length_that_does_not_apply_is_one_line(
    model_type: str,
    extra: list[str],
    message: str,
    family_dirs: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    target = tmp_path / "cost.txt"
    assert main(["cost", str(family_dirs[model_type]), *extra, "-o", str(target)]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and "\n" not in error
    assert not target.exists()


def test_a_decoder_length_past_the_positions_is_refused_as_a_sequence_length_is(
    family_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "cost.txt"
    for option in ("--seq-len", "--decoder-len"):
        assert main(["cost", str(family_dirs["bart"]), option, "65", "-o", str(target)]) == 1
        error = capsys.readouterr().err
        assert error == f"bertgraph: error: {option} 65 is above max_position_embeddings 64; use {option} 64 or less\n"
    assert not target.exists()
