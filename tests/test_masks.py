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
    layers = {stack: sorted(n for m in masks if m.stack == stack for n in m.layers) for stack in real}
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


def tiny_folder(root: Path, name: str, family: str) -> str:
    return write_config(root / name, TINY[family])


def test_cli_json_is_the_evaluated_masks(tmp_path: Path, traced: Callable[..., Any]) -> None:
    from bertgraph.cli import main

    gpt2 = tiny_folder(tmp_path, "gpt2", "gpt2")
    t5 = tiny_folder(tmp_path, "t5", "t5")
    out = tmp_path / "masks.json"
    assert main(["masks", gpt2, t5, "--seq-len", "6", "--pad", "1", "--decoder-len", "4", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert [entry["model"] for entry in data["models"]] == [gpt2, t5]
    example = Example(6, 1, 4)
    for entry, folder in zip(data["models"], (gpt2, t5)):
        expected = [mask.as_json() for mask in model_masks(traced(folder).graph, example)]
        assert entry["masks"] == expected
    stacks = {(m["stack"], len(m["allowed"]), len(m["allowed"][0])) for m in data["models"][1]["masks"]}
    assert stacks == {("encoder", 6, 6), ("decoder", 4, 4), ("cross", 4, 6)}
    (causal,) = data["models"][0]["masks"]
    assert causal["stack"] == "decoder" and causal["layers"] == [0, 1, 2]
    assert causal["allowed"][4] == [1, 1, 1, 1, 1, 0]  # its own key and those before
    assert causal["allowed"][5] == [1, 1, 1, 1, 1, 0]  # the padding query: every real key, not itself


def test_cli_page_and_figure(tmp_path: Path, dot_binary: str) -> None:
    from bertgraph.cli import main
    from bertgraph.render.masks import ALLOWED, PADDING, PADDING_QUERY

    folder = tiny_folder(tmp_path, 'mb <&> "x"', "modernbert")
    page = tmp_path / "masks.md"
    assert main(["masks", folder, "--seq-len", "5", "--pad", "2", "-o", str(page)]) == 0
    svg = tmp_path / "masks.svg"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["masks.md", "masks.svg", 'mb <&> "x"']
    text = page.read_text()
    assert "![attention masks](masks.svg)" in text
    assert "| encoder | 0, 3, 6, 9 | bidirectional | 5 × 5 | 15 |" in text
    first = svg.read_bytes()
    assert main(["masks", folder, "--seq-len", "5", "--pad", "2", "-o", str(page)]) == 0
    assert svg.read_bytes() == first  # deterministic
    import xml.etree.ElementTree as ET

    root = ET.fromstring(first)
    texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert folder in texts  # the name escaped, read back intact
    assert "encoder: sliding-window(8)" in texts and "layers 1, 2, 4, 5, 7, 8" in texts
    fills = [p.get("fill") for p in root.iter("{http://www.w3.org/2000/svg}polygon")]
    # Two grids of 5 × 5: 3 real queries that may attend 3 real keys, not the 2 padding keys, and 2 padding
    # queries whose rows are drawn alike; one legend square each.
    assert fills.count(ALLOWED.lower()) == 2 * 3 * 3 + 1
    assert fills.count(PADDING.lower()) == 2 * 3 * 2 + 1
    assert fills.count(PADDING_QUERY.lower()) == 2 * 2 * 5 + 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--pad", "8"], "--pad 8 leaves no real token"),
        (["--format", "png"], "--format png does not match"),
    ],
)
def test_cli_bad_input_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    from tests.helpers import one_line_error

    folder = tiny_folder(tmp_path, "bert", "bert")
    out = tmp_path / "masks.svg"
    out.write_text("the user's own file")
    line = one_line_error(["masks", folder, *argv, "-o", str(out)], capsys, status=2)
    assert message in line
    assert out.read_text() == "the user's own file"


def test_cli_unknown_suffix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.helpers import one_line_error

    line = one_line_error(["masks", "bert-base-uncased", "-o", str(tmp_path / "m.txt")], capsys, status=2)
    assert "cannot tell the format of m.txt" in line
    assert list(tmp_path.iterdir()) == []


def test_families_page_and_report_show_the_evaluated_masks_as_grids(tmp_path: Path, traced: Callable[..., Any]) -> None:
    """Each grid's ■ cells are the pairs the evaluated mask allows (held to a real forward above)."""
    from bertgraph.render import families, masks, report

    gpt2 = traced(tiny_folder(tmp_path, "gpt2", "gpt2")).graph
    t5 = traced(tiny_folder(tmp_path, "t5", "t5")).graph
    page = families.generate_page([gpt2, t5], None)
    found = [mask for graph in (gpt2, t5) for mask in model_masks(graph, Example())]
    assert len(found) == 4  # gpt2 decoder; t5 encoder, decoder, cross
    for mask in found:
        grid = masks.text_grid(mask)
        assert "\n".join(grid) in page
        cells = [row.split()[1:] for row in grid[1:]]
        real = [q for q, pad in enumerate(mask.query_padding) if not pad]
        assert [[int(cell == "■") for cell in cells[q]] for q in real] == [list(mask.allowed[q]) for q in real]
        assert all(cells[q] == [] for q, pad in enumerate(mask.query_padding) if pad)  # a padding query's row: blank
        padding = [[cell == "░" for cell in cells[q]] for q in real]
        assert [any(row) for row in zip(*padding)] == [
            pad and any(1 - mask.allowed[q][k] for q in real) for k, pad in enumerate(mask.key_padding)
        ]
    text = report.generate_report(gpt2)
    assert "## Attention masks" in text and "\n".join(masks.text_grid(found[0])) in text
