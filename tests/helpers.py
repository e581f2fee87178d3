"""Graphs made for tests: hostile module names, shuffled insertion order."""

from __future__ import annotations

import copy
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import networkx as nx

from bertgraph.graph import schema as g

# What a depth-2 diagram of bert-base with the sequence-classification head must show, in any format.
DEPTH_TWO_LABELS = (
    "layer.0-11",
    "BertLayer × 12",
    "7.09M params each · 85.1M in all",
    "[batch, seq, 768]",
    "classifier",
    "Linear 768 → 2",
)

HOSTILE_NAMES = [
    'say "hi"',
    "<script>alert(1)</script>",
    "#35; not an entity",
    "a|b",
    "end",
    "style:#1;",
    "{curly} [square] (round)",
    "back\\slash",
    "new\nline",
    "ünïcödé ✓ 模型",
    "&amp; &lt;",
    "`tick`",
    "classDef",
    "subgraph",
    "<br/>",
    "%%{init: {'theme': 'dark'}}%%",
    "%% a comment",
    "bell\x07 escape\x1b[31m nul\x00",
    "c1\x85\x9b",
    "user\u202etxt-exe",
    "\u2066isolate\u2069 \u202aembed\u202c",
    "line\u2028sep",
    "\ufeffbom first",  # JavaScript's trim() drops a leading byte-order mark
]

# Characters that reorder or hide text around them; no diagram, table or page may carry them raw.
BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def fuzz_examples(default: int) -> int:
    """Examples per generated-input test: ``default``, or ``$BERTGRAPH_FUZZ_EXAMPLES`` for a long run."""
    return int(os.environ.get("BERTGRAPH_FUZZ_EXAMPLES", default))


def _rename(path: str, mapping: dict[str, str]) -> str:
    return ".".join(mapping.get(part, part) for part in path.split(".")) if path else path


def rename_modules(graph: nx.DiGraph, mapping: dict[str, str], title: str | None = None) -> nx.DiGraph:
    """A copy of ``graph`` whose module path components are renamed (``classifier`` → anything)."""
    result = nx.DiGraph()
    result.graph.update(copy.deepcopy(graph.graph))
    result.graph[g.G_MODULES] = {_rename(p, mapping): v for p, v in graph.graph[g.G_MODULES].items()}
    rows: list[dict[str, Any]] = []
    for row in graph.graph[g.G_PARAMETERS]:
        rows.append({**row, "name": _rename(row["name"], mapping), "module": _rename(row["module"], mapping)})
    result.graph[g.G_PARAMETERS] = rows
    if title is not None:
        result.graph[g.G_NAME] = title
    for node, data in graph.nodes(data=True):
        attrs = dict(data)
        attrs[g.MODULE] = _rename(data.get(g.MODULE, ""), mapping)
        attrs[g.PARAM_NAMES] = [_rename(n, mapping) for n in data.get(g.PARAM_NAMES, [])]
        result.add_node(node, **attrs)
    result.add_edges_from(graph.edges(data=True))
    return result


def retype_modules(graph: nx.DiGraph, types: dict[str, str]) -> nx.DiGraph:
    """A copy of ``graph`` in which the modules at the paths in ``types`` have that class name."""
    result = rename_modules(graph, {})
    for path, name in types.items():
        result.graph[g.G_MODULES][path] = {**result.graph[g.G_MODULES][path], "type": name}
    for _, data in result.nodes(data=True):
        if data.get(g.MODULE) in types:
            data[g.MODULE_TYPE] = types[data[g.MODULE]]
    return result


def squash(text: str) -> str:
    """Text without whitespace, for comparing what a reader sees."""
    return "".join(text.split())


def shuffled(graph: nx.DiGraph, seed: int) -> nx.DiGraph:
    """The same graph with nodes and edges inserted in a random order."""
    result = nx.DiGraph()
    result.graph.update(graph.graph)
    nodes = list(graph.nodes(data=True))
    random.Random(seed).shuffle(nodes)
    result.add_nodes_from(nodes)
    edges = list(graph.edges(data=True))
    random.Random(seed + 1).shuffle(edges)
    result.add_edges_from(edges)
    return result


def one_line_error(argv: list[str], capsys: Any, status: int = 1) -> str:
    """Run the command line in-process; it must fail with ``status`` and one clean line on stderr.

    Returns that line. "internal error" (a bertgraph bug) or a traceback fails the test.
    """
    from bertgraph.cli import main

    assert main(argv) == status, argv
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("bertgraph: error: "), captured.err
    assert "internal error" not in captured.err and "Traceback" not in captured.err
    return str(captured.err.strip())


class SmallDiskRun(NamedTuple):
    """A command run with a folder on a tiny file system, and that folder's state afterwards."""

    returncode: int
    stdout: str
    stderr: str
    listing: list[str]  # names in the folder after the command (seen inside the namespace)
    after: str  # what the ``after`` shell snippet printed


_SMALL_DISK_SCRIPT = """
folder="$1"; size="$2"; prepare="$3"; after="$4"; shift 4
mount -t tmpfs -o size="$size" tmpfs "$folder" || exit 97
sh -c "$prepare" sh "$folder" || exit 98
"$@"
status=$?
echo "@@listing@@" >&2
ls -A "$folder" >&2
echo "@@after@@" >&2
sh -c "$after" sh "$folder" >&2
exit $status
"""


def run_with_small_disk(
    folder: Path,
    size: str,
    argv: list[str],
    env: dict[str, str] | None = None,
    prepare: str = "true",
    after: str = "true",
) -> SmallDiskRun:
    """Run ``python -m bertgraph ARGV`` with ``folder`` a tmpfs of ``size`` in a private mount namespace.

    A write that does not fit fails with ENOSPC, exactly as on a full disk. ``prepare`` and
    ``after`` are shell snippets run with the folder as ``$1`` before and after the command.
    Skips when user and mount namespaces are unavailable (``unshare -rm``).
    """
    import shutil

    import pytest

    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"user and mount namespaces are unavailable here: {probe.stderr.decode().strip()}")
    command = [
        "unshare", "-rm", "sh", "-c", _SMALL_DISK_SCRIPT, "sh", str(folder), size, prepare, after,
        sys.executable, "-m", "bertgraph", *argv,
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **(env or {})}, check=False)
    assert result.returncode not in (97, 98), result.stderr
    stderr, _, rest = result.stderr.partition("@@listing@@\n")
    listing, _, after_text = rest.partition("@@after@@\n")
    return SmallDiskRun(result.returncode, result.stdout, stderr, listing.split(), after_text)
