"""Diagrams readable in a docs column: the smallest text, read back from the SVG Graphviz wrote.

Shown 800 px wide, a drawing's smallest text is its smallest ``font-size`` times 800 over its
width (the SVG ``viewBox``, points). Targets (issue 18): at least 8 px at depths 1-2 and 6 px
at depth 3. ``benchmarks/readability.py`` measures every preset the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

import bertgraph
from bertgraph.render import dot, graphviz_run
from bertgraph.render.diagram import build_diagram
from tests.family_configs import uneven

COLUMN_PX = 800.0
TARGET_PX = {1: 8.0, 2: 8.0, 3: 6.0}
SAMPLE = ("bert-base-uncased", "gpt2", "t5-small", "mt5-small", "bart-base", "modernbert-base", "deberta-v3-base")
# Drawings still over the width the target allows (benchmarks/readability-after.md); strict, so a
# fix makes them fail loudly and they leave this set. Empty since T5's and BART's depth-3 drawings
# took the compact layout.
OPEN: set[tuple[str, int]] = set()
CASES = [
    pytest.param(
        name, depth, marks=[pytest.mark.xfail(strict=True, reason="still too wide")] if (name, depth) in OPEN else []
    )
    for name in SAMPLE
    for depth in TARGET_PX
]


def smallest_px(svg: str) -> float:
    """The smallest text of ``svg`` in pixels when the drawing is shown ``COLUMN_PX`` wide."""
    width = float(re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) [\d.]+"', svg).group(1))  # type: ignore[union-attr]
    font = min(float(size) for size in re.findall(r'font-size="([\d.]+)"', svg))
    return font * min(1.0, COLUMN_PX / width)


def svg_of(graph: object, depth: int) -> str:
    """The SVG bertgraph draws (Graphviz's layout, titles kept clear: render/graphviz_run.py)."""
    source = "\n".join(dot.generate_lines(build_diagram(graph, depth)))  # type: ignore[arg-type]
    return graphviz_run.render(source, "svg").decode()


@pytest.mark.parametrize(("name", "depth"), CASES)
def test_smallest_text_at_docs_width(
    name: str, depth: int, traced: Callable[..., bertgraph.Architecture], dot_binary: str
) -> None:
    assert smallest_px(svg_of(traced(name).graph, depth)) >= TARGET_PX[depth]


def test_the_promised_sizes_hold_for_a_head_and_a_config_of_no_preset(
    traced: Callable[..., bertgraph.Architecture], tmp_path: Path, dot_binary: str
) -> None:
    # BART's sequence classifier at depth 2 read 6.4 px (README: 8); a T5 of 4 + 3 layers 5.7 px at depth 3.
    assert smallest_px(svg_of(traced("bart-base", "sequence-classification").graph, 2)) >= TARGET_PX[2]
    assert smallest_px(svg_of(uneven("t5-4+3", "base", tmp_path), 3)) >= TARGET_PX[3]


@pytest.mark.parametrize("name", ["bert-base-uncased", "t5-small", "Qwen2.5-0.5B", "modernbert-base"])
def test_the_caption_states_the_configs_facts(name: str, traced: Callable[..., bertgraph.Architecture]) -> None:
    """Layers, hidden size, heads, FFN width and parameters as the real model's config and modules have them."""
    from bertgraph.model import build_model, resolve
    from bertgraph.model.build import make_config
    from bertgraph.render import figures

    spec = resolve(name)
    model = build_model(spec)
    config = make_config(spec, type(model))
    total = sum(p.numel() for p in model.parameters())
    caption = build_diagram(traced(name).graph, 2).caption
    layers = getattr(config, "num_hidden_layers", None) or config.num_layers
    hidden = getattr(config, "hidden_size", None) or config.d_model
    heads = getattr(config, "num_attention_heads", None) or config.num_heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    width = getattr(config, "intermediate_size", None) or config.d_ff
    text = " · ".join(caption)
    head_text = f"{heads} heads" if kv == heads else f"{heads} query / {kv} key-value heads"
    for fact in (
        f"{layers} layers",
        f"hidden {hidden}",
        head_text,
        f"FFN {width}",
        f"{figures.short(total)} parameters",
    ):
        assert fact in text, (fact, caption)
    if getattr(config, "is_encoder_decoder", False):
        decoder_layers = getattr(config, "num_decoder_layers", None) or layers
        (decoder,) = [i for i, line in enumerate(caption) if line.startswith("decoder: ")]
        assert caption[0].startswith(f"encoder: {layers} layers")
        assert caption[decoder].startswith(f"decoder: {decoder_layers} layers")
        assert "causal + cross attention" in " · ".join(caption[decoder:])
        assert "bidirectional attention" in " · ".join(caption[:decoder])
