"""Model types torch.export cannot trace, the config repairs that make others trace, parallel layer lists.

Real transformers types that fail today: each is refused by ``render`` and ``cost`` with one line
naming its cause, while ``summary`` and ``params`` count it from its module tree (totals held to
the model's own unique parameters). Default configs transformers cannot build or run are repaired
generically (the field the error names, or fields sized for the default model). XLM's per-layer
lists beside each other are no stack, and its drawing stays acyclic and folds as ``summary`` does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers.utils import logging as hf_logging

from bertgraph.cli import main
from bertgraph.graph import stats, views
from bertgraph.model.build import build_model
from bertgraph.model.families.generic import built_config, generic_family, small_config
from bertgraph.model.spec import resolve
from bertgraph.render.diagram import build_diagram
from bertgraph.tracing import causes
from tests.layout import cycles, fold_mismatches, lay_out, upward_edges

# transformers' log handler keeps the stream it is made with: made now, it writes to the session's
# capture, not to the closed capture of whichever test first logged (the next test's stderr would
# then hold a logging error).
hf_logging.get_logger("transformers")

# Types of the pinned transformers that cannot be traced, and why.
UNTRACEABLE = {
    # DBRX's experts loop over the experts a token picked; its config runs since clip_qkv is repaired.
    "dbrx": "data-dependent branch",
    "longformer": "data-dependent branch",
    "switch_transformers": "weights changed in forward",
    "xlnet": "tensor off the model's device",
}


def folder_of(model_type: str, folder: Path) -> str:
    config, _ = built_config(model_type)
    (folder / "config.json").write_text(json.dumps(config, default=str))
    return str(folder)


def errors(stderr: str) -> list[str]:
    """What bertgraph itself printed (transformers' own warnings go to the same stream)."""
    return [line for line in stderr.splitlines() if not line.startswith("[transformers]")]


@pytest.mark.parametrize("model_type", sorted(UNTRACEABLE))
def test_render_refuses_an_untraceable_type_in_one_line_naming_its_cause(
    model_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = folder_of(model_type, tmp_path)
    target = tmp_path / "out.svg"
    assert main(["render", folder, "--no-cache", "-o", str(target)]) == 1
    out, err = capsys.readouterr()
    # One line, no partial graph torch.export prints, nothing written.
    assert out == "" and not target.exists()
    (line,) = errors(err)
    model_class = resolve(folder).model_class
    assert line.startswith(f"bertgraph: error: cannot trace {tmp_path.name} ({model_class}): {UNTRACEABLE[model_type]}")
    assert causes.cause_of(line.removeprefix("bertgraph: error: ")) == UNTRACEABLE[model_type]
    assert " in module '" in line and "`summary` and `params` still work without a trace" in line


def test_cost_refuses_with_the_same_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = folder_of("longformer", tmp_path)
    assert main(["cost", folder, "--no-cache"]) == 1
    out, err = capsys.readouterr()
    (line,) = errors(err)
    assert out == "" and "cannot trace" in line and "data-dependent branch" in line
    assert "modeling_longformer.py:" in line and "`if is_global_attn:`" in line


@pytest.mark.parametrize("model_type", ("longformer", "switch_transformers"))
def test_summary_and_params_count_an_untraceable_type_from_its_module_tree(
    model_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = folder_of(model_type, tmp_path)
    model = build_model(resolve(folder))
    unique = sum(p.numel() for p in model.parameters())  # parameters() yields a tied tensor once
    assert main(["params", folder, "--no-cache", "--format", "json"]) == 0
    params = json.loads(capsys.readouterr().out)
    assert params["total"] == unique and params["trace_cause"] == UNTRACEABLE[model_type]
    assert main(["summary", folder, "--no-cache", "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["total"] == unique and summary["rows"][0]["params"] == unique
    assert summary["not_traced"].startswith(UNTRACEABLE[model_type])
    # Repeats fold as they do for a traced model (Switch's first block, with the position bias, stands apart).
    folded = [row["path"] for row in summary["rows"] if row.get("repeat") == 2]
    assert folded == (["encoder.layer.0"] if model_type == "longformer" else [])
    assert main(["summary", folder, "--no-cache"]) == 0
    out, _ = capsys.readouterr()
    (said,) = [line for line in out.splitlines() if line.startswith("not traced: ")]
    assert UNTRACEABLE[model_type] in said and "counts and folding come from the module tree" in said


def test_every_cause_says_what_to_do() -> None:
    assert set(causes.CAUSES) == set(causes._ADVICE)
    for kind in causes.CAUSES:
        line, said = causes.trace_line("m", "MModel", causes.Cause(kind, ""), " in module 'a' (A)", "boom")
        assert causes.cause_of(line) == kind and said.startswith(kind) and "\n" not in line


def test_default_configs_transformers_cannot_build_are_repaired() -> None:
    # Each of these raised while building its meta model from the shrunk default config.
    dbrx, _ = built_config("dbrx")
    assert dbrx["attn_config"]["rope_theta"] == dbrx["rope_parameters"]["rope_theta"]
    dots1, _ = built_config("dots1")
    assert small_config("dots1")["n_shared_experts"] is None and dots1["n_shared_experts"] == 1
    lfm2, model = built_config("lfm2_moe")
    assert lfm2["layer_types"] == ["full_attention"] * 2
    # One dense layer leads, so the two-layer model still has its experts.
    assert lfm2["num_dense_layers"] == 1 and any("experts" in name for name, _ in model.named_modules())
    compass, _ = built_config("cohere_compass_text")
    assert set(compass["rope_parameters"]) == set(compass["layer_types"]) == {"full_attention"}


def test_default_configs_whose_forward_fails_are_repaired_from_the_error() -> None:
    """A model that builds but whose forward refuses to run (caught on fake inputs, as an export runs it)."""
    from bertgraph.model.families import generic_repairs

    # X-MOD asks for set_default_language(): the first language the config lists.
    assert small_config("xmod")["default_language"] is None
    xmod, _ = built_config("xmod")
    assert xmod["default_language"] == xmod["languages"][0] == "en_XX"
    # DBRX clamps q, k and v at clip_qkv, None by default: clamp(min=None, max=None) is refused.
    assert small_config("dbrx")["attn_config"]["clip_qkv"] is None
    dbrx, _ = built_config("dbrx")
    assert dbrx["attn_config"]["clip_qkv"] == generic_repairs.CLIP_BOUND
    # Keyed on the error: another error leaves such fields alone.
    config = {"attn_config": {"clip_qkv": None}, "languages": ["en_XX"], "default_language": None}
    assert not generic_repairs.repair(config, ValueError("shapes do not match"), 2)
    assert config["attn_config"]["clip_qkv"] is None and config["default_language"] is None


@pytest.mark.parametrize("model_type", ("xmod", "t5gemma"))
def test_types_whose_forward_was_repaired_trace_with_exact_totals(model_type: str, tmp_path: Path) -> None:
    """X-MOD with its default language; T5Gemma, whose config class turns the decoder's cache back on
    (an EncoderDecoderCache torch.export cannot flatten), built with the cache off in every sub-config."""
    import bertgraph

    config, _ = built_config(model_type)
    for part in ("encoder", "decoder"):  # T5Gemma's shrink keeps 26 + 26 layers (8,000 ops to trace): two each
        sub = config.get(part)
        if isinstance(sub, dict) and sub.get("layer_types"):
            sub.update(num_hidden_layers=2, layer_types=sub["layer_types"][:2])
    (tmp_path / "config.json").write_text(json.dumps(config, default=str))
    folder = str(tmp_path)
    model = build_model(resolve(folder))
    assert len(list(model.modules())) < 200
    for name in getattr(model.config, "sub_configs", None) or ():
        assert getattr(getattr(model.config, name), "use_cache", False) is False, name
    graph = bertgraph.trace(folder, cache=False).graph
    assert stats.parameter_stats(graph)["total"] == sum(p.numel() for p in model.parameters())
    assert cycles(build_diagram(graph)) == []


def test_fields_sized_for_the_default_model_follow_the_shrunk_one() -> None:
    gpt_neo = small_config("gpt_neo")
    assert gpt_neo["attention_types"] == [[["global", "local"], 1]]
    assert gpt_neo["attention_layers"] == ["global", "local"]
    reformer = small_config("reformer")
    assert sum(reformer["axial_pos_embds_dim"]) == reformer["hidden_size"] == 64
    glm = small_config("glm4v_moe_text")
    # Rotary sections add up to the frequencies of a shrunk head: 16 wide, half of it rotary.
    assert sum(glm["rope_parameters"]["mrope_section"]) == 16 // 2 // 2
    # Reformer's heads have a size of their own (12 × 64 over 256): no divisibility rule.
    assert resolve_config("reformer", "shallow")["num_attention_heads"] == 12


def resolve_config(model_type: str, level: str) -> dict[str, object]:
    import tempfile

    folder = Path(tempfile.mkdtemp())
    (folder / "config.json").write_text(json.dumps(small_config(model_type, level), default=str))
    return resolve(str(folder)).config


@pytest.mark.parametrize("model_type", ("glm4v_moe_text", "gpt_neo", "esm"))
def test_repaired_types_trace_with_exact_totals(model_type: str, tmp_path: Path) -> None:
    import bertgraph

    folder = folder_of(model_type, tmp_path)
    expected = sum(p.numel() for p in build_model(resolve(folder)).parameters())
    graph = bertgraph.trace(folder, cache=False).graph
    assert stats.parameter_stats(graph)["total"] == expected
    assert cycles(build_diagram(graph)) == []


def test_parallel_layer_lists_are_no_stack_and_draw_acyclic_folding_as_summary(tmp_path: Path) -> None:
    import bertgraph

    family = generic_family("xlm")
    assert family.stacks == ()
    rules = dict(family.roles)
    assert rules[r"attentions\.\d+"] == "self-attention" and rules[r"ffns\.\d+"] == "feed-forward"
    graph = bertgraph.trace(folder_of("xlm", tmp_path), cache=False).graph
    group = ("attentions", "ffns", "layer_norm1", "layer_norm2")
    assert views.parallel_lists(graph) == dict.fromkeys(group, group)
    for depth in (1, 2, 3):
        diagram = build_diagram(graph, depth)
        assert cycles(diagram) == [] and upward_edges(lay_out(diagram)) == []
        assert fold_mismatches(graph, diagram, depth) == set()
