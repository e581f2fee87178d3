"""The committed bert-tiny graphs the in-process tests read are what bertgraph traces today.

When the graph code changes what a trace holds, rewrite them with::

    .venv/bin/bertgraph graph bert-tiny --layers 3 --no-cache -o tests/fixtures/bert-tiny-3-base.json
    .venv/bin/bertgraph graph bert-tiny --layers 3 --head sequence-classification --no-cache \\
        -o tests/fixtures/bert-tiny-3-sequence-classification.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import bertgraph
from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g
from tests import generation_runs
from tests.graph_fixtures import HEADS, bert_tiny, fixture_path

ROOT = Path(__file__).resolve().parent.parent


def _comparable(graph: object) -> str:
    data = graph_io.to_node_link(graph)  # type: ignore[arg-type]
    data["graph"].pop(g.G_VERSIONS)  # the installed torch and transformers may differ from the writer's
    return json.dumps(data, sort_keys=True)


@pytest.mark.parametrize("head", HEADS)
def test_the_committed_graph_is_a_fresh_trace(head: str) -> None:
    fresh = bertgraph.trace("bert-tiny", head, cache=False, layers=3).graph
    assert _comparable(bert_tiny(head)) == _comparable(fresh), (
        f"rewrite {fixture_path(head)} (see this file's docstring)"
    )


def test_the_committed_planning_graphs_are_fresh_traces_whatever_the_string_hashing(tmp_path: Path) -> None:
    """Traced in a process of their own: a fresh interpreter, as the files were written, so no other
    test's state (transformers' or torch's settings) reaches the traces.

    ModernBERT loops over ``set(config.layer_types)``, whose order follows Python's string hashing:
    the files were written with hash seed 0 and are traced here with seed 1, which order that set apart.
    """
    assert generation_runs.WRITE_SEED == "0"
    done = subprocess.run(
        [sys.executable, "-m", "tests.generation_runs", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for name, attention in generation_runs.FIXTURE_GRAPHS:
        path = generation_runs.fixture_path(name, attention)
        fresh = graph_io.read_json(tmp_path / path.name)
        assert _comparable(graph_io.read_json(path)) == _comparable(fresh), (
            f"rewrite {path}: python -m tests.generation_runs"
        )
