"""Masks evaluated from the trace agree with what a real eager forward pass gives weight."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bertgraph.graph.masks import Example, model_masks
from tests.family_configs import TINY

EXAMPLE = Example(seq_len=7, pad=2, decoder_len=5)
VARIANTS: dict[str, dict[str, Any]] = {
    "modernbert-window4": {**TINY["modernbert"], "num_hidden_layers": 4, "local_attention": 4},
    "qwen2-sliding": {
        **TINY["qwen2"],
        "num_hidden_layers": 4,
        "use_sliding_window": True,
        "sliding_window": 4,
        "max_window_layers": 2,
    },
}
CONFIGS = {**TINY, **VARIANTS}
FAMILIES = sorted(CONFIGS)


def truth(config: dict[str, Any], example: Example) -> dict[str, list[Any]]:
    """Per stack, the head-0 attention probabilities of a real eager forward pass on the example."""
    import torch
    import transformers

    fields = {key: value for key, value in config.items() if key != "model_type"}
    built = transformers.AutoConfig.for_model(config["model_type"], **fields, attn_implementation="eager")
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(built).eval()
    pad_id = int(config.get("pad_token_id") or 0)

    def inputs(length: int) -> tuple[Any, Any]:
        padding = torch.tensor(example.padding(length))
        ids = torch.where(padding, pad_id, pad_id + 1 + torch.arange(length) % 50)[None]
        return ids, (~padding).long()[None]

    ids, mask = inputs(example.seq_len)
    with torch.no_grad():
        if built.is_encoder_decoder:
            tgt_ids, tgt_mask = inputs(example.target_len)
            out = model(
                input_ids=ids,
                attention_mask=mask,
                decoder_input_ids=tgt_ids,
                decoder_attention_mask=tgt_mask,
                output_attentions=True,
            )
            return {
                "encoder": list(out.encoder_attentions),
                "decoder": list(out.decoder_attentions),
                "cross": list(out.cross_attentions),
            }
        out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
    stack = (
        "decoder"
        if getattr(built, "is_decoder", False) or config["model_type"] in ("gpt2", "llama", "qwen2", "qwen3")
        else "encoder"
    )
    return {stack: list(out.attentions)}


def write_config(folder: Path, config: dict[str, Any]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


@pytest.mark.parametrize("family", FAMILIES)
def test_masks_match_a_real_forward_pass(
    family: str, traced: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    import torch

    config = CONFIGS[family]
    folder = write_config(tmp_path_factory.getbasetemp() / "mask-configs" / family, config)
    graph = traced(folder).graph
    masks = model_masks(graph, EXAMPLE)
    real = truth(config, EXAMPLE)
    layers = {stack: sorted(l for m in masks if m.stack == stack for l in m.layers) for stack in real}
    assert layers == {stack: list(range(len(found))) for stack, found in real.items()}
    for mask in masks:
        for layer in mask.layers:
            probabilities = real[mask.stack][layer][0, 0]
            assert list(probabilities.shape) == [len(mask.allowed), len(mask.allowed[0])]
            for q, row in enumerate(mask.allowed):
                given = probabilities[q]
                if any(row):
                    assert (given > 0).int().tolist() == list(row), (mask.stack, mask.kind, layer, q)
                else:  # every key masked: the model's softmax spreads evenly (or gives nothing)
                    assert (
                        torch.isnan(given).all() or torch.allclose(given, given[0].expand_as(given)) or not given.any()
                    )
