"""The parameter total a config implies equals the built model's, for every head."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from bertgraph.model import HEADS, build_model, resolve
from bertgraph.model.counts import bert_parameter_total


@st.composite
def configs(draw: st.DrawFn) -> dict[str, object]:
    heads = draw(st.integers(1, 4))
    config: dict[str, object] = {
        "model_type": "bert",
        "num_attention_heads": heads,
        "hidden_size": heads * draw(st.integers(1, 8)),
        "num_hidden_layers": draw(st.integers(1, 3)),
        "intermediate_size": draw(st.integers(1, 40)),
        "vocab_size": draw(st.integers(1, 60)),
        "max_position_embeddings": draw(st.integers(2, 40)),
        "type_vocab_size": draw(st.integers(1, 4)),
        "pad_token_id": 0,
    }
    if draw(st.booleans()):
        config["num_labels"] = draw(st.integers(1, 9))
    if draw(st.booleans()):
        config["tie_word_embeddings"] = draw(st.booleans())
    if draw(st.booleans()):
        config["is_decoder"] = config["add_cross_attention"] = True
    return config


@settings(max_examples=40, deadline=None)
@given(config=configs(), head=st.sampled_from(sorted(HEADS)))
def test_formula_matches_the_module(config: dict[str, object], head: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "config.json").write_text(json.dumps(config))
        spec = resolve(folder, head)
        model = build_model(spec)
    assert bert_parameter_total(spec.config, head) == sum(p.numel() for p in model.parameters())
