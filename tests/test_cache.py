"""The on-disk graph cache: warm commands skip torch, bad entries are rebuilt, keys cover inputs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bertgraph import cache
from bertgraph.cli import main
from bertgraph.graph import schema as g
from bertgraph.model import resolve
from tests.helpers import run_with_small_disk

PROBE = (
    "import sys\n"
    "from bertgraph.cli import main\n"
    "status = main(sys.argv[1:])\n"
    "print('imported torch' if 'torch' in sys.modules else 'no torch', 'transformers' in sys.modules)\n"
    "sys.exit(status)\n"
)


def run(folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BERTGRAPH_CACHE_DIR": str(folder)}
    env.pop("BERTGRAPH_NO_CACHE", None)
    return subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=env, check=False)


@pytest.fixture(scope="module")
def cold_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache a cold ``summary`` filled (it imported torch to trace); each test warms a copy of it."""
    folder = tmp_path_factory.mktemp("cold") / "cache"
    cold = run(folder, "summary", "bert-tiny", "--head", "masked-lm")
    assert cold.returncode == 0 and "imported torch" in cold.stdout
    return folder


@pytest.mark.xdist_group("cold-cache")  # one worker fills the cache once
@pytest.mark.parametrize("command", [["summary"], ["params"], ["render", "--format", "dot"]])
def test_warm_commands_import_neither_torch_nor_transformers(
    cold_cache: Path, tmp_path: Path, command: list[str]
) -> None:
    folder = tmp_path / "cache"
    shutil.copytree(cold_cache, folder)
    out = ["-o", str(tmp_path / "x.dot")] if command[0] == "render" else []
    argv = [command[0], "bert-tiny", "--head", "masked-lm", *command[1:], *out]
    warm = run(folder, *argv)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout.strip().endswith("no torch False")


def test_no_cache_neither_reads_nor_writes(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    result = run(folder, "summary", "bert-tiny", "--no-cache")
    assert result.returncode == 0 and "imported torch" in result.stdout
    assert not folder.exists() or not any(folder.iterdir())


def test_corrupt_entry_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bertgraph.api import load

    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    spec = resolve("bert-tiny", "token-classification")
    expected = load(spec).params()
    entry = tmp_path / "cache" / f"{cache.key(spec)}.json"
    assert entry.is_file() and cache.load(spec) is not None
    for garbage in (
        "{not json",
        json.dumps({"format": cache.FORMAT, "graph": {"nodes": 3}}),
        "",
        json.dumps({"format": cache.FORMAT - 1, "graph": {}}),
    ):
        entry.write_text(garbage)
        assert cache.load(spec) is None
        assert load(spec).params() == expected
        assert cache.load(spec) is not None


def test_key_covers_what_changes_the_graph(tmp_path: Path, tiny_checkpoint: Path) -> None:
    base = cache.key(resolve("bert-tiny"))
    assert base == cache.key(resolve("bert-tiny"))
    assert base != cache.key(resolve("bert-tiny", "masked-lm"))
    assert base != cache.key(resolve("bert-tiny", overrides={"layers": 3}))
    assert base != cache.key(resolve("bert-tiny", seq_len=64))
    assert base != cache.key(resolve("bert-tiny", batch=2))
    weights = tiny_checkpoint / "model.safetensors"
    before = cache.key(resolve(str(tiny_checkpoint)))
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert cache.key(resolve(str(tiny_checkpoint))) != before


def _entry_bytes(spec_key_material: dict, graph_data: object) -> bytes:
    body = json.dumps(graph_data, separators=(",", ":")).encode()
    header = {"format": cache.FORMAT, "key": spec_key_material, "digest": hashlib.sha256(body).hexdigest()}
    return json.dumps(header).encode() + b"\n" + body


def test_entry_of_the_wrong_shape_is_rebuilt_not_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    spec = resolve("bert-tiny", "token-classification")
    argv = ["params", "bert-tiny", "--head", "token-classification", "--format", "json"]
    assert main(argv) == 0
    expected = json.loads(capsys.readouterr().out)
    assert expected["total"] == 4_386_178 - 128 * 128 - 128 + 0  # no pooler; a classifier 128 → 2
    from bertgraph.api import load as load_arch

    load_arch(spec)  # a traced entry
    entry = cache.entry_path(spec)
    good = entry.read_bytes()
    graph_data = json.loads(good.split(b"\n", 1)[1])
    empty = {**graph_data, "nodes": [], "edges": []}
    ends = {n["id"] for n in graph_data["nodes"] if n["kind"] in ("input", "output")}
    no_ends = {
        **graph_data,
        "nodes": [n for n in graph_data["nodes"] if n["id"] not in ends],
        "edges": [e for e in graph_data["edges"] if e["source"] not in ends and e["target"] not in ends],
    }

    def forged_cost(text: object) -> dict[str, object]:
        """The entry with its first costed node's matmul FLOPs replaced by ``text``."""
        nodes = [dict(n) for n in graph_data["nodes"]]
        first = next(n for n in nodes if g.MATMUL_FLOPS in n)
        first[g.MATMUL_FLOPS] = text
        return {**graph_data, "nodes": nodes}

    stale = json.loads(good.split(b"\n", 1)[0])
    stale["key"]["versions"]["torch"] = "1.0.0"  # written by another torch: same graph, stale key
    other = resolve("bert-tiny", "sequence-classification")
    load_arch(other)
    for garbage in (
        b"[]",
        b"[]\n[]",
        _entry_bytes(cache.key_material(spec), []),
        _entry_bytes(cache.key_material(spec), empty),
        _entry_bytes(cache.key_material(spec), {**graph_data, "graph": {}}),
        _entry_bytes(cache.key_material(spec), no_ends),  # parameters all there, but no inputs or outputs
        json.dumps(stale).encode() + b"\n" + good.split(b"\n", 1)[1],
        cache.entry_path(other).read_bytes(),  # another model's valid entry under this key
        _entry_bytes(cache.key_material(spec), forged_cost("(batch + seq)**1000000")),  # expands forever
        _entry_bytes(cache.key_material(spec), forged_cost("seq + seq")),  # not canonical text
        _entry_bytes(cache.key_material(spec), forged_cost(12)),
        good[:-10],  # truncated
        good.replace(b'"linear"', b'"lineaR"', 1),  # an edit the digest catches
    ):
        entry.write_bytes(garbage)
        assert cache.load(spec) is None, garbage[:60]
        assert main(argv) == 0
        captured = capsys.readouterr()
        assert json.loads(captured.out) == expected and captured.err == ""
        load_arch(spec)
        assert cache.load(spec) is not None  # rebuilt


def test_entry_whose_parameters_contradict_the_config_is_not_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bertgraph.api import load as load_arch

    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    spec = resolve("bert-tiny")
    load_arch(spec)
    entry = cache.entry_path(spec)
    graph_data = json.loads(entry.read_bytes().split(b"\n", 1)[1])
    # A consistent graph of another size: the pooler's bias row and the node that reads it shrink together.
    row = next(r for r in graph_data["graph"]["parameters"] if r["name"] == "pooler.dense.bias")
    row["shape"], row["numel"] = [100], 100
    reader = next(n for n in graph_data["nodes"] if "pooler.dense.bias" in n.get("param_names", []))
    reader["params"] -= 28
    entry.write_bytes(_entry_bytes(cache.key_material(spec), graph_data))
    from bertgraph.graph.io import from_node_link
    from bertgraph.graph.validate import graph_problem

    assert graph_problem(from_node_link(graph_data)) is None  # well-formed ...
    assert cache.load(spec) is None  # ... but not this config's model


def test_failed_cache_write_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bertgraph.api import load as load_arch

    folder = tmp_path / "cache"
    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(folder))
    spec = resolve("bert-tiny")
    cache.entry_path(spec).mkdir(parents=True)  # the entry path is a folder
    arch = load_arch(spec)
    assert arch.params()["total"] == 4_386_178 - 128 * 2 - 2
    assert [p.name for p in folder.iterdir()] == [cache.entry_path(spec).name]


def test_full_disk_cache_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    result = run_with_small_disk(folder, "8k", ["summary", "bert-tiny"], env={"BERTGRAPH_CACHE_DIR": str(folder)})
    assert result.returncode == 0, result.stderr
    assert "BertLayer" in result.stdout
    assert result.listing == [], result.listing  # nothing left in the full cache folder


@pytest.mark.parametrize(("value", "on"), [(None, True), ("", True), ("0", True), ("1", False), ("yes", False)])
def test_no_cache_variable_switches_the_cache_off_unless_empty_or_zero(
    value: str | None, on: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process, so a changed variable name or value is seen (subprocess tests run the installed code)."""
    if value is None:
        monkeypatch.delenv("BERTGRAPH_NO_CACHE", raising=False)
    else:
        monkeypatch.setenv("BERTGRAPH_NO_CACHE", value)
    assert cache.enabled() is on


def test_temporaries_an_earlier_version_left_are_removed_once_old(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, traced: Any
) -> None:
    """Earlier versions named their temporary entries without a pid: removed when over an hour old."""
    folder = tmp_path / "cache"
    folder.mkdir()
    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(folder))
    old = [folder / "tmpab12cd_3.tmp", folder / ".entry.zz9y8x7w.tmp"]
    fresh = folder / ".entry.q1w2e3r4.tmp"
    other = folder / "notes.tmp"  # not a name bertgraph ever used
    for path in (*old, fresh, other):
        path.write_bytes(b"partial")
    for path in (*old, other):
        os.utime(path, (1_000_000, 1_000_000))
    cache.store(resolve("bert-tiny"), traced("bert-tiny").graph)
    assert [path.exists() for path in (*old, fresh, other)] == [False, False, True, True]
    assert cache.load(resolve("bert-tiny")) is not None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (g.G_STACKS, ["encoder.layer"]),
        (g.G_STACKS, {"encoder.layer": "sideways"}),
        (g.G_STACKS, None),
        (g.G_STRUCTURE, 3),
        (g.G_FAMILY, ["bert"]),
    ],
)
def test_a_forged_entry_with_malformed_stacks_is_not_served(key: str, value: Any, traced: Any) -> None:
    """Served, these crashed every diagram and summary ('unhashable type: list')."""
    from bertgraph.graph.validate import graph_problem

    graph = traced("bert-tiny").graph.copy()
    assert graph_problem(graph) is None
    graph.graph[key] = value
    assert graph_problem(graph) is not None
