"""Masks evaluated from the trace agree with what a real eager forward pass gives weight."""

from __future__ import annotations

import itertools
import json
import xml.etree.ElementTree as ET
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
    # eager attention: each layer adds the mask to its own scores (the evaluation is shared all the same)
    "gemma2-sliding": {
        "model_type": "gemma2",
        "vocab_size": 99,
        "hidden_size": 32,
        "intermediate_size": 37,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "sliding_window": 4,
        "max_position_embeddings": 64,
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
        if getattr(built, "is_decoder", False) or config["model_type"] in ("gpt2", "llama", "qwen2", "qwen3", "gemma2")
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


# --- the figure, read back from the SVG: distinct kinds look distinct, long masks stay small ------

OWN: dict[str, dict[str, Any]] = {
    "bert": {**TINY["bert"], "num_hidden_layers": 2},
    "deberta": {**TINY["deberta-v2"], "num_hidden_layers": 2},  # masks its padding queries' rows too
    "gpt2": {**TINY["gpt2"], "n_layer": 2},
    "t5-4-3": {**TINY["t5"], "num_layers": 4, "num_decoder_layers": 3},
    "modernbert-w8": {**TINY["modernbert"], "num_hidden_layers": 4, "local_attention": 16},  # 8 each side
    "qwen2-w16": {**VARIANTS["qwen2-sliding"], "sliding_window": 16},  # 16 keys, causal
    "gemma2-w4": VARIANTS["gemma2-sliding"],
}
SVG_NS = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory, traced: Callable[..., Any]) -> Callable[[str], Any]:
    def get(name: str) -> Any:
        folder = tmp_path_factory.getbasetemp() / "mask-figures" / name
        if not (folder / "config.json").is_file():
            write_config(folder, OWN[name])
        return traced(str(folder)).graph

    return get


def _box(points: str) -> tuple[float, float, float, float]:
    xs, ys = zip(*((float(x), float(y)) for x, y in (p.split(",") for p in points.split())))
    return min(xs), min(ys), max(xs), max(ys)


def drawn_grids(svg: bytes | str) -> dict[str, Any]:
    """Every grid as drawn: its title's first line → its cells rasterised at one point (a colour's
    index in :data:`CELLS`, -1 between cells), read from the polygons of the SVG."""
    import numpy as np

    from bertgraph.render import masks, style

    cells = [masks.ALLOWED, masks.MASKED, masks.PADDING, masks.PADDING_QUERY]
    kinds = {palette.fill for palette in style.theme("light")["kinds"].values()}
    root = ET.fromstring(svg)
    found: dict[str, Any] = {}
    for group in root.iter(f"{SVG_NS}g"):
        classes = str(group.get("class", "")).split()  # "node" and the model's role class
        if classes[:1] != ["node"] or "role-legend" in classes:
            continue
        polygons = [(p.get("fill"), _box(p.get("points", ""))) for p in group.iter(f"{SVG_NS}polygon")]
        titles = [box for fill, box in polygons if fill in kinds]
        texts = [
            (float(t.get("x", 0)), float(t.get("y", 0)), "".join(t.itertext())) for t in group.iter(f"{SVG_NS}text")
        ]
        members: dict[tuple[float, ...], list[tuple[int, tuple[float, ...]]]] = {}
        for fill, box in polygons:
            if fill in cells:  # the nearest title above and to the left
                above = [t for t in titles if t[0] <= box[0] + 0.5 and t[3] <= box[1] + 0.5]
                members.setdefault(max(above, key=lambda t: (t[3], t[0])), []).append((cells.index(fill), box))
        for title, drawn in members.items():
            first = min((y, text) for x, y, text in texts if title[0] <= x <= title[2] and title[1] <= y <= title[3])
            left, top = min(b[0] for _, b in drawn), min(b[1] for _, b in drawn)
            width, height = max(b[2] for _, b in drawn) - left, max(b[3] for _, b in drawn) - top
            pixels = np.full((round(height), round(width)), -1)
            for colour, (x0, y0, x1, y1) in drawn:
                pixels[round(y0 - top) : round(y1 - top), round(x0 - left) : round(x1 - left)] = colour
            found[f"{len(found)} {first[1]}"] = pixels
    return found


def looks_distinct(first: Any, second: Any) -> bool:
    """Of another shape, or at least 2% of the drawn points of another colour."""
    return bool(first.shape != second.shape or (first != second).mean() >= 0.02)


@pytest.mark.parametrize(
    "names", [("modernbert-w8",), ("qwen2-w16", "t5-4-3"), ("bert", "gpt2", "t5-4-3", "modernbert-w8", "gemma2-w4")]
)
def test_every_kind_looks_distinct_at_the_default_example(
    own: Callable[[str], Any], dot_binary: str, names: tuple[str, ...]
) -> None:
    """Grids of different kinds differ as drawn: a window narrower than the example shows as a band
    (3w tokens for w each side, 2w for a causal one), cross-attention another sequence's grid."""
    from bertgraph.graph.masks import example_for
    from bertgraph.render import masks

    graphs = [own(name) for name in names]
    example = example_for(graphs)
    grids = drawn_grids(masks.figure(masks.masks_of(zip(names, graphs), example), "svg"))
    kinds = {title: title.split(" ", 1)[1].split(": ")[-1] for title in grids}
    assert len(set(kinds.values())) >= 2
    for first, second in itertools.combinations(grids, 2):
        if kinds[first] != kinds[second]:
            assert looks_distinct(grids[first], grids[second]), (first, second, example)


def test_modernbert_sliding_window_looks_unlike_its_global_layers(traced: Callable[..., Any], dot_binary: str) -> None:
    from bertgraph.graph.masks import example_for
    from bertgraph.render import masks

    graph = traced("modernbert-base").graph
    example = example_for([graph])
    assert (example.seq_len, example.pad) == (192, 48)  # 3 × its window of 64 each side; a quarter padding
    grids = list(drawn_grids(masks.figure(masks.masks_of([("modernbert-base", graph)], example), "svg")).values())
    assert len(grids) == 2 and looks_distinct(*grids)


@pytest.mark.parametrize("seq_len", [None, 160, 1000])
def test_long_masks_stay_small_and_readable(own: Callable[[str], Any], dot_binary: str, seq_len: int | None) -> None:
    """Drawn to scale as runs of squares: at most 2 MB, text at least 6 px on an 800 px page."""
    from bertgraph.graph.masks import example_for
    from bertgraph.render import masks
    from tests.test_schematic import smallest_px

    names = ("bert", "gpt2", "t5-4-3", "modernbert-w8", "qwen2-w16")
    graphs = [own(name) for name in names]
    found = masks.masks_of(zip(names, graphs), example_for(graphs, seq_len))
    svg = masks.figure(found, "svg")
    data = svg if isinstance(svg, bytes) else svg.encode()
    assert len(data) <= 2_000_000
    assert smallest_px(data.decode(), 800) >= 6
    assert len(drawn_grids(data)) == sum(len(entry.masks) for entry in found)  # every mask drawn


@pytest.mark.parametrize("seq_len", [None, 40])
def test_padding_query_rows_look_alike_in_every_grid(
    own: Callable[[str], Any], dot_binary: str, seq_len: int | None
) -> None:
    """BERT lets a padding query attend, DeBERTa masks its whole row: nothing reads either, and both are
    drawn alike — every row of points that shows a padding query shows nothing else."""
    from bertgraph.graph.masks import example_for
    from bertgraph.render import masks

    names = ("bert", "deberta", "gpt2", "t5-4-3")
    graphs = [own(name) for name in names]
    grids = drawn_grids(masks.figure(masks.masks_of(zip(names, graphs), example_for(graphs, seq_len)), "svg"))
    assert len(grids) == 6
    query_padding = 3  # masks.PADDING_QUERY's index in drawn_grids
    for title, pixels in grids.items():
        rows = [set(row.tolist()) - {-1} for row in pixels if query_padding in row]
        assert rows and all(row == {query_padding} for row in rows), title


def test_cli_draws_on_an_example_that_shows_the_window_and_lists_json_on_eight(tmp_path: Path, dot_binary: str) -> None:
    """Without --seq-len a drawing's example is long enough for the window (ModernBERT's 8 each side:
    24 tokens, 6 padding); JSON, which lists every cell, keeps 8; a --pad the chosen length cannot hold
    is refused after the models are read, and nothing is written."""
    from bertgraph.cli import main

    folder = tiny_folder(tmp_path, "modernbert", "modernbert")
    assert main(["masks", folder, "-o", str(tmp_path / "m.svg")]) == 0
    texts = {t.text for t in ET.fromstring((tmp_path / "m.svg").read_bytes()).iter(f"{SVG_NS}text")}
    assert {"queries ↓ 0–23, keys → 0–23", "padding from 18"} <= texts
    assert main(["masks", folder, "-o", str(tmp_path / "m.json")]) == 0
    (first, *_) = json.loads((tmp_path / "m.json").read_text())["models"][0]["masks"]
    assert len(first["allowed"]) == 8


def test_cli_refuses_a_pad_the_chosen_example_cannot_hold(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.helpers import one_line_error

    folder = tiny_folder(tmp_path, "modernbert", "modernbert")
    line = one_line_error(["masks", folder, "--pad", "24", "-o", str(tmp_path / "m.svg")], capsys, status=2)
    assert "--pad 24 leaves no real token" in line
    assert not (tmp_path / "m.svg").exists()


def test_a_chosen_example_fits_each_windowed_model_and_the_limit(
    tmp_path: Path, traced: Callable[..., Any], dot_binary: str
) -> None:
    """A causal window of 16 keys wants 32 tokens; with 20 positions the model draws on its 20 (a
    BERT beside it changes nothing), and the command takes that default without a word. A window
    wider than half the limit draws on the longest example a user may ask for."""
    from bertgraph.cli import main
    from bertgraph.graph.masks import example_for
    from bertgraph.model.fields import LIMITS

    short = write_config(
        tmp_path / "short", {**VARIANTS["qwen2-sliding"], "sliding_window": 16, "max_position_embeddings": 20}
    )
    wide = {**VARIANTS["qwen2-sliding"], "sliding_window": LIMITS["mask"].maximum, "max_position_embeddings": 32768}
    bert = traced(tiny_folder(tmp_path, "bert", "bert")).graph
    assert example_for([traced(short).graph]).seq_len == example_for([bert, traced(short).graph]).seq_len == 20
    assert example_for([traced(write_config(tmp_path / "wide", wide)).graph]).seq_len == LIMITS["mask"].maximum
    assert main(["masks", short, "-o", str(tmp_path / "m.svg")]) == 0
    texts = {t.text for t in ET.fromstring((tmp_path / "m.svg").read_bytes()).iter(f"{SVG_NS}text")}
    assert "queries ↓ 0–19, keys → 0–19" in texts
