"""Model types without a hand-written record: the generic record, mixture-of-experts counts, presets.

A fixed sample of ``make reach`` (``benchmarks/reach.py`` runs every text type): each is built
from its shrunk default config, traced, held to the parameters of the model built on meta, and
its diagram laid out by the real ``dot`` and read back. Active parameters of mixture-of-experts
models are held to what a real forward pass of one token runs through.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

import bertgraph
from bertgraph.errors import ConfigError
from bertgraph.graph import schema as g
from bertgraph.graph import stats
from bertgraph.model.build import build_model
from bertgraph.model.families import family_of, generic_presets
from bertgraph.model.families.generic import small_config
from bertgraph.model.spec import resolve
from bertgraph.render import text
from bertgraph.render.diagram import build_diagram
from bertgraph.tracing import skeleton
from tests.layout import cycles, lay_out, upward_edges

SAMPLE = ("mistral", "gemma2", "phi3", "olmo2", "mixtral", "qwen3_moe", "pegasus", "gpt_neox")
MOE = ("mixtral", "qwen3_moe", "deepseek_v3")
# Totals the model cards publish (head, parameters, active per token).
PUBLISHED: dict[str, tuple[str, int, int | None]] = {
    "Mistral-7B": ("causal-lm", 7_241_732_096, None),
    "Mixtral-8x7B": ("causal-lm", 46_702_792_704, 12_879_925_248),
    "Qwen3-30B-A3B": ("base", 30_220_957_696, 3_041_867_776),
    "DeepSeek-V3": ("base", 670_099_725_312, 36_625_603_584),
}


def small_folder(model_type: str, folder: Path) -> str:
    (folder / "config.json").write_text(json.dumps(small_config(model_type), default=str))
    return str(folder)


@pytest.mark.parametrize("model_type", SAMPLE)
def test_a_type_without_a_record_traces_exactly_and_draws_acyclic(model_type: str, tmp_path: Path) -> None:
    assert family_of(model_type) is None
    folder = small_folder(model_type, tmp_path)
    spec = resolve(folder)
    assert spec.family.inferred
    expected = sum(p.numel() for p in build_model(spec).parameters())
    arch = bertgraph.trace(folder, cache=False)
    graph = arch.graph
    assert stats.parameter_stats(graph)["total"] == expected
    # Every layer list the config counts is a stack, and the parts of a layer have their roles.
    assert len(graph.graph[g.G_STACKS]) == (2 if spec.family.structure == "encoder-decoder" else 1)
    found = {entry.get(g.M_ROLE) for entry in graph.graph[g.G_MODULES].values()}
    assert {"embeddings", "stack", "layer", "self-attention", "feed-forward", "norm"} <= found
    assert ("cross-attention" in found) == (spec.family.structure == "encoder-decoder")
    diagram = build_diagram(graph)
    layout = lay_out(diagram)
    assert cycles(diagram) == [] and upward_edges(layout) == []
    assert nx.is_directed_acyclic_graph(nx.DiGraph([(s, t) for s, t, _ in layout.edges]))
    summary = arch.summary()
    assert "roles inferred from the module tree" in "\n".join(text.generate_summary(summary))
    # A router's softmax chooses experts; only attention is counted as attention.
    for stack in summary["architecture"]["stacks"]:
        assert "bidirectional" not in stack["attention"] or spec.family.structure != "decoder-only", stack


def _experts_touched(model: Any, input_ids: Any) -> dict[str, set[int]]:
    """Experts module path → the experts a real forward pass sends the tokens to (the router's top-k)."""
    chosen: dict[str, set[int]] = {}
    handles = []
    for path, module in model.named_modules():
        if type(module).__name__.endswith("Experts"):

            def hook(_module: Any, args: tuple[Any, ...], path: str = path) -> None:
                chosen.setdefault(path, set()).update(int(e) for e in args[1].flatten())

            handles.append(module.register_forward_pre_hook(hook))
    try:
        model(input_ids=input_ids)
    finally:
        for handle in handles:
            handle.remove()
    return chosen


@pytest.mark.parametrize("model_type", MOE)
def test_active_parameters_are_what_one_token_runs_through(model_type: str, tmp_path: Path) -> None:
    import torch

    spec = resolve(small_folder(model_type, tmp_path))
    model = build_model(spec, weights=True)
    touched = _experts_touched(model, torch.tensor([[7]]))
    assert touched, "no experts module ran"
    experts = spec.config[spec.family.sizes["experts"]]
    modules = dict(model.named_modules())
    total = sum(p.numel() for p in model.parameters())
    # Fused expert tensors [experts, …]: a token runs through the slices of the experts it was sent to.
    in_experts = used = 0
    for path, chosen in touched.items():
        for parameter in modules[path].parameters():
            if parameter.shape[0] == experts:
                in_experts += parameter.numel()
                used += sum(parameter[e].numel() for e in chosen)
    found = stats.parameter_stats(skeleton(spec))
    assert found["experts"] == experts and found["experts_per_token"] == len(next(iter(touched.values())))
    assert found["active"] == total - in_experts + used
    assert found["active"] < found["total"] == total


def test_a_dense_model_has_no_active_count(tmp_path: Path) -> None:
    found = stats.parameter_stats(skeleton(resolve(small_folder("mistral", tmp_path))))
    assert not {"active", "experts", "experts_per_token"} & set(found)


@pytest.mark.parametrize("preset", sorted(generic_presets.PRESETS))
def test_a_preset_counts_the_model_its_config_builds(preset: str) -> None:
    head, published, active = PUBLISHED.get(preset, ("causal-lm", None, None))
    spec = resolve(preset, head)
    found = stats.parameter_stats(skeleton(spec))
    assert found["total"] == sum(p.numel() for p in build_model(spec).parameters())
    if published is not None:
        assert (found["total"], found.get("active")) == (published, active)


def test_hub_ids_name_the_presets() -> None:
    for hub, preset in generic_presets.HUB_IDS.items():
        assert resolve(hub).config == resolve(preset).config


def test_records_win_over_the_generic_record(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(small_config("qwen2")))
    spec = resolve(str(tmp_path))
    assert spec.family.name == "llama" and not spec.family.inferred
    assert g.G_ROLES_FROM not in skeleton(spec).graph


def test_a_model_that_reads_images_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "aimv2"}))
    with pytest.raises(ConfigError, match=r"combines sub-models \(text_config, vision_config\), not a text model"):
        resolve(str(tmp_path))


def test_small_config_repairs_what_shrinking_breaks() -> None:
    from bertgraph.model.families.generic import config_class

    config = small_config("phi3")
    assert config["vocab_size"] == 1000 and config["num_hidden_layers"] == 2
    # Phi-3's padding and end-of-text token (32000) lies beyond the shrunk vocabulary: cut back into it.
    names = ("pad_token_id", "bos_token_id", "eos_token_id")
    defaults = config_class("phi3")().to_dict()
    assert any(isinstance(defaults.get(name), int) and defaults[name] >= 1000 for name in names)
    assert all(config[name] < 1000 for name in names if isinstance(config.get(name), int))
    assert config["use_cache"] is False
    gemma = small_config("gemma2")
    assert len(gemma["layer_types"]) == gemma["num_hidden_layers"] == 2


def test_the_readme_shows_what_params_prints_for_a_mixture_of_experts(capsys: pytest.CaptureFixture[str]) -> None:
    from bertgraph.cli import main

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    command = "$ bertgraph params Mixtral-8x7B --head causal-lm"
    shown = [line for line in readme.split(command, 1)[1].split("```", 1)[0].splitlines() if line not in ("", "...")]
    assert main(command.split()[2:]) == 0
    out = capsys.readouterr().out.splitlines()
    assert shown and all(line in out for line in shown)


@pytest.mark.parametrize("model_type", ("mixtral", "qwen3_moe"))
def test_moe_flops_are_the_experts_a_token_runs_as_a_real_forward_counts(model_type: str, tmp_path: Path) -> None:
    """Matmul FLOPs against FlopCounterMode on a forward whose experts run eagerly (each on the tokens
    routed to it; the grouped kernel hides its products from the counter), at two sizes; the dense
    count is every expert on every token; the diagram's block says how many experts a token runs."""
    import torch
    import transformers
    from torch.utils.flop_counter import FlopCounterMode

    from bertgraph.graph import costbase, costtable, moe

    folder = small_folder(model_type, tmp_path)
    graph = bertgraph.trace(folder, cache=False, attention="eager").graph
    config = dict(small_config(model_type))
    kind = config.pop("model_type")
    built = transformers.AutoConfig.for_model(
        kind, **config, attn_implementation="eager", experts_implementation="eager"
    )
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(built).eval()
    sizes = [{"batch": 1, "seq": 16}, {"batch": 2, "seq": 9}]
    report = costtable.cost_report(graph, sizes)
    found = moe.active_parameters(graph)
    assert found is not None
    for index, size in enumerate(sizes):
        ids = torch.randint(0, built.vocab_size, (size["batch"], size["seq"]))
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(input_ids=ids)
        assert report["total"]["matmul_flops"]["values"][index] == counter.get_total_flops()
    per_token = {"batch": 1, "seq": 1}
    grouped = sum(
        costbase.evaluate(costbase.node_poly(d, g.MATMUL_FLOPS), per_token)
        for _, d in graph.nodes(data=True)
        if str(d.get(g.TARGET, "")).startswith(moe.GROUPED_PRODUCTS)
    )
    assert grouped > 0
    dense = report["total"]["all_experts_matmul_flops"]["values"]
    active = report["total"]["matmul_flops"]["values"]
    scale = found["experts"] // found["experts_per_token"] - 1
    assert [d - a for d, a in zip(dense, active)] == [grouped * scale * s["batch"] * s["seq"] for s in sizes]
    line = f"{found['experts']} experts, {found['experts_per_token']} active per token"
    assert line in bertgraph.Architecture(graph).to_dot(depth=2)
    assert "every expert" in "\n".join(text.generate_cost(report))


def test_a_type_whose_heads_say_nothing_claims_no_structure(tiny_graph: Any) -> None:
    """A base model alone (VITS, text to speech) is no encoder-only model, whatever its stacks are
    called; a type with a masked-LM or causal-LM head is what that head says. On a traced graph the
    ops can still tell a decoder: stacks whose every attention is causal."""
    from bertgraph.graph import facts, roles
    from bertgraph.model.families import generic

    assert generic.generic_family("vits").structure == generic.UNTOLD == ""
    assert generic.generic_family("mistral").structure == "decoder-only"
    assert generic.generic_family("xmod").structure == "encoder-only"
    for model_type, said in (("gpt2", "decoder-only"), ("bert", "")):
        graph = facts.annotate(tiny_graph(model_type, "base")[1].copy())
        graph.graph[g.G_STRUCTURE] = generic.UNTOLD
        assert roles.structure(graph) == said, model_type
        backbone = next(c.title for c in build_diagram(graph).clusters if c.role == "backbone")
        assert backbone.startswith(f"{said} backbone · " if said else "backbone · "), backbone


@pytest.mark.slow
@pytest.mark.xdist_group("vits")
def test_vits_states_the_example_it_was_traced_at_and_claims_no_structure(real_vits: nx.DiGraph) -> None:
    """VITS's sizes can be named neither from one export, nor two, nor a dynamic one: it is traced at
    fixed sizes, and the example its drawing, summary and costs state is that size, not the spec's."""
    from bertgraph.graph import costbase

    graph = real_vits
    traced = graph.nodes["input_ids"][g.SHAPE]
    assert all(type(size) is int for size in traced) and traced[0] == 2  # a batch of 1 would be specialised
    assert graph.graph[g.G_EXAMPLE] == dict(zip(("batch", "seq"), traced))
    assert costbase.sizes_for(graph) == graph.graph[g.G_EXAMPLE]
    dot = bertgraph.Architecture(graph).to_dot(depth=2)
    assert f"example input batch={traced[0]}, seq={traced[1]}" in dot
    backbone = next(c.title for c in build_diagram(graph).clusters if c.role == "backbone")
    assert backbone.startswith("backbone · VitsModel"), backbone
    assert "encoder-only" not in dot
