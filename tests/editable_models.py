"""The models the editable-format tests draw: a T5 of our own (4 encoder, 3 decoder layers) and bert-tiny.

The T5 is traced once per test process (through :func:`tests.conftest.once`) from a config.json
written here; it draws every attention kind a diagram colours (bidirectional, causal, cross), two
stacks of different depths and nested frames. bert-tiny is the committed trace
(:mod:`tests.graph_fixtures`), here with modules renamed to text every format must escape.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx

import bertgraph
from tests.graph_fixtures import bert_tiny
from tests.helpers import rename_modules

T5_CONFIG: dict[str, Any] = {
    "model_type": "t5",
    "vocab_size": 99,
    "d_model": 32,
    "d_kv": 8,
    "d_ff": 37,
    "num_layers": 4,
    "num_decoder_layers": 3,
    "num_heads": 2,
    "relative_attention_num_buckets": 8,
    "relative_attention_max_distance": 16,
    "decoder_start_token_id": 0,
}
# What LaTeX, XML and CSS each read as syntax, and letters beyond ASCII (中 has no glyph in Computer
# Modern: the TikZ file writes its code point instead).
HOSTILE_CLASSIFIER = 'cls #$%&_{}~^\\ <b>"x" né·×中'
HOSTILE_TITLE = "tiny & <odd> #1 {model}_é"


def t5_folder(once: Callable[[Any, Callable[[], Any]], Any], tmp_path_factory: Any) -> Path:
    """A folder holding the T5's config.json (made once per process)."""

    def make() -> Path:
        folder = tmp_path_factory.mktemp("t5-4-3")
        (folder / "config.json").write_text(json.dumps(T5_CONFIG), encoding="utf-8")
        return Path(folder)

    return once(("editable", "t5 folder"), make)


def t5_graph(once: Callable[[Any, Callable[[], Any]], Any], tmp_path_factory: Any) -> nx.DiGraph:
    """The T5 with its LM head, traced once per process (through the run's graph cache)."""
    folder = t5_folder(once, tmp_path_factory)
    return once(("editable", "t5 graph"), lambda: bertgraph.trace(str(folder), "seq2seq-lm").graph)


def hostile_bert() -> nx.DiGraph:
    """bert-tiny (3 layers) whose classifier and title are text every format must escape."""
    return rename_modules(bert_tiny("sequence-classification"), {"classifier": HOSTILE_CLASSIFIER}, HOSTILE_TITLE)
