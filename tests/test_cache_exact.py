"""The graph cache in-process: what a key covers, what an entry holds, and every reason an entry is refused.

The graph is the committed bert-tiny fixture (the graph of ``bert-tiny --layers 3`` with the
sequence-classification head), so nothing is traced; these tests also serve the mutation run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from bertgraph import cache
from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g
from bertgraph.model import ModelSpec, resolve
from tests.graph_fixtures import bert_tiny


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(tmp_path / "graphs"))
    monkeypatch.delenv("BERTGRAPH_NO_CACHE", raising=False)
    return tmp_path / "graphs"


def spec(**overrides: Any) -> ModelSpec:
    return resolve("bert-tiny", "sequence-classification", overrides={"layers": 3, **overrides})


def same(a: nx.DiGraph, b: nx.DiGraph) -> bool:
    return json.dumps(graph_io.to_node_link(a), sort_keys=True) == json.dumps(graph_io.to_node_link(b), sort_keys=True)


def test_the_cache_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", "~/graphs-here")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / "graphs-here"
    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    default = cache.cache_dir()
    assert default.name == "graphs" and default.parent.name == "bertgraph"
    if sys.platform.startswith("linux"):
        assert default == tmp_path / "xdg" / "bertgraph" / "graphs"


@pytest.mark.parametrize(("value", "on"), [(None, True), ("", True), ("0", True), ("1", False), ("false", False)])
def test_the_variable_switches_the_cache_off(value: str | None, on: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if value is None:
        monkeypatch.delenv("BERTGRAPH_NO_CACHE", raising=False)
    else:
        monkeypatch.setenv("BERTGRAPH_NO_CACHE", value)
    assert cache.enabled() is on


def test_versions_come_from_package_metadata() -> None:
    assert cache._version("networkx") == nx.__version__
    assert cache._version("no-such-package-bertgraph") == "absent"


def test_the_identity_of_weights_files(tmp_path: Path) -> None:
    assert cache._file_identity(None) is None
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"12345")
    stat = weights.stat()
    assert cache._file_identity(weights) == {"files": [[str(weights.resolve()), 5, stat.st_mtime_ns]]}
    missing = tmp_path / "gone.bin"
    assert cache._file_identity(missing) == {"files": [[str(missing), None, None]]}
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(
        json.dumps({"weight_map": {"a": "two.safetensors", "b": "one.safetensors", "c": "two.safetensors"}})
    )
    (tmp_path / "one.safetensors").write_bytes(b"1")
    files = cache._file_identity(index)["files"]  # type: ignore[index]
    assert [Path(f[0]).name for f in files] == ["model.safetensors.index.json", "one.safetensors", "two.safetensors"]
    assert files[1][1] == 1 and files[2][1:] == [None, None]
    index.write_text("not json")
    assert [Path(f[0]).name for f in cache._file_identity(index)["files"]] == ["model.safetensors.index.json"]  # type: ignore[index]


def test_the_code_digest_covers_the_graph_code() -> None:
    digest = cache._code_digest()
    assert re.fullmatch(r"[0-9a-f]{16}", digest)
    package = Path(cache.__file__).parent
    expected = hashlib.sha256()
    files = sorted(file for folder in ("model", "tracing", "graph") for file in (package / folder).rglob("*.py"))
    for file in files:
        expected.update(file.relative_to(package).as_posix().encode())
        expected.update(file.read_bytes())
    assert digest == expected.hexdigest()[:16]
    assert any("facts" in file.parts for file in files) and any("families" in file.parts for file in files)


def test_the_key_material(tmp_path: Path) -> None:
    from bertgraph.version import __version__

    material = cache.key_material(spec())
    assert material["format"] == cache.FORMAT == 3
    assert material["kind"] == "trace"
    assert material["name"] == "bert-tiny" and material["head"] == "sequence-classification"
    assert material["config"]["num_hidden_layers"] == 3
    assert material["example"] == [1, 128]
    assert material["weights"] is None and material["pickle"] is None and material["checkpoint"] is None
    assert material["versions"] == {
        "bertgraph": __version__,
        "code": cache._code_digest(),
        "torch": cache._version("torch"),
        "transformers": cache._version("transformers"),
        "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
    }
    assert list(material) == sorted(material)  # plain, sorted JSON data
    assert list(material) == [
        "attention",
        "checkpoint",
        "config",
        "dtype",
        "example",
        "format",
        "head",
        "kind",
        "name",
        "pickle",
        "versions",
        "weights",
    ]
    assert (material["attention"], material["dtype"]) == (spec().attention, spec().dtype)
    other = dataclasses.replace(spec(), attention="sdpa", dtype="bfloat16")
    assert (cache.key_material(other)["attention"], cache.key_material(other)["dtype"]) == ("sdpa", "bfloat16")
    assert cache.key_material(spec(), "onnx")["kind"] == "onnx"


def test_the_key_covers_every_tensor_a_checkpoint_stores() -> None:
    """A hub model's headers are the checkpoint's identity (no file to stat): a tensor more is another key."""
    from bertgraph.model.stored import Checkpoint, StoredTensor

    one = StoredTensor("a.weight", "BF16", (2, 2), 8, "model.safetensors", "weight")
    stored = Checkpoint("org/name@" + "0" * 40, ("model.safetensors",), False, (one,))
    more = dataclasses.replace(stored, tensors=(one, one._replace(name="b.weight")))
    keys = {cache.key(dataclasses.replace(spec(), checkpoint=found)) for found in (None, stored, more)}
    assert len(keys) == 3
    assert cache.key_material(dataclasses.replace(spec(), checkpoint=stored))["checkpoint"] == stored.digest()


def test_the_key_covers_a_pickled_checkpoint_only_when_allowed(tmp_path: Path) -> None:
    pickled = tmp_path / "pytorch_model.bin"
    pickled.write_bytes(b"pickle")
    allowed = dataclasses.replace(spec(), pickle_weights=pickled, allow_pickle=True)
    refused = dataclasses.replace(spec(), pickle_weights=pickled, allow_pickle=False)
    assert cache.key_material(allowed)["pickle"] == {"files": [[str(pickled.resolve()), 6, pickled.stat().st_mtime_ns]]}
    assert cache.key_material(refused)["pickle"] is None
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"w")
    assert cache.key_material(dataclasses.replace(spec(), weights=weights))["weights"]["files"][0][1] == 1


def test_keys() -> None:
    key = cache.key(spec())
    assert re.fullmatch(r"[0-9a-f]{32}", key)
    text = json.dumps(cache.key_material(spec()), sort_keys=True)
    assert key == hashlib.sha256(text.encode()).hexdigest()[:32]
    assert cache.key(spec(), "onnx") != key
    assert cache.key(spec(layers=2)) != key
    assert cache.key(dataclasses.replace(spec(), seq_len=64)) != key
    assert cache.key(resolve("bert-tiny", "base", overrides={"layers": 3})) != key


def test_entry_path(folder: Path) -> None:
    assert cache.entry_path(spec()) == folder / f"{cache.key(spec())}.json"


def test_a_stored_entry_is_served_as_it_was_stored(folder: Path) -> None:
    graph = bert_tiny()
    assert cache.load(spec()) is None  # nothing stored yet
    cache.store(spec(), graph)
    assert [p.name for p in folder.iterdir()] == [f"{cache.key(spec())}.json"]  # no temporary file left
    header, body = cache.entry_path(spec()).read_bytes().split(b"\n", 1)
    assert json.loads(header) == {
        "format": cache.FORMAT,
        "key": cache.key_material(spec()),
        "digest": hashlib.sha256(body).hexdigest(),
    }
    assert body == json.dumps(graph_io.to_node_link(graph), separators=(",", ":")).encode()
    served = cache.load(spec())
    assert served is not None and same(served, graph)
    assert sorted(served.edges) == sorted(graph.edges)
    assert cache.load(spec(layers=2)) is None  # another key


def _rewrite(folder: Path, change: Any) -> None:
    path = cache.entry_path(spec())
    header_line, body = path.read_bytes().split(b"\n", 1)
    header = json.loads(header_line)
    header, body = change(header, body)
    path.write_bytes(json.dumps(header).encode() + b"\n" + body)


def _with_graph(edit: Any) -> Any:
    def change(header: dict[str, Any], body: bytes) -> tuple[dict[str, Any], bytes]:
        data = json.loads(body)
        edit(data)
        body = json.dumps(data).encode()
        return dict(header, digest=hashlib.sha256(body).hexdigest()), body

    return change


REFUSED = {
    "another format": lambda h, b: (dict(h, format=cache.FORMAT + 1), b),
    "no format": lambda h, b: ({k: v for k, v in h.items() if k != "format"}, b),
    "another key": lambda h, b: (dict(h, key=dict(h["key"], head="base")), b),
    "another digest": lambda h, b: (dict(h, digest="0" * 64), b),
    "a changed body": lambda h, b: (h, b.replace(b"bert-tiny", b"bert-tinx")),
    "not a header": lambda h, b: ([h], b),
    "another name": _with_graph(lambda d: d["graph"].update(name="bert-small")),
    "another head": _with_graph(lambda d: d["graph"].update(head="base")),
    "another class": _with_graph(lambda d: d["graph"].update(model_class="BertModel")),
    "other sizes": _with_graph(lambda d: d["graph"]["config"].update(layers=2)),
    "a parameter too many": _with_graph(
        lambda d: d["graph"]["parameters"][0].update(numel=d["graph"]["parameters"][0]["numel"] + 1)
    ),
    "not node-link": _with_graph(lambda d: d.pop("nodes")),
    "an unsound graph": _with_graph(lambda d: d["edges"].append({"source": "logits", "target": "nowhere"})),
}


@pytest.mark.parametrize("change", list(REFUSED))
def test_an_entry_in_doubt_is_not_served(folder: Path, change: str) -> None:
    cache.store(spec(), bert_tiny())
    assert cache.load(spec()) is not None
    _rewrite(folder, REFUSED[change])
    assert cache.load(spec()) is None


def test_an_entry_is_its_first_line_of_header_and_everything_after_it(folder: Path) -> None:
    """The graph after the header may span lines (written by hand, or by a later version): the
    digest covers all of it, so it is served as it stands."""
    cache.store(spec(), bert_tiny())

    def spread(header: dict[str, Any], body: bytes) -> tuple[dict[str, Any], bytes]:
        body = json.dumps(json.loads(body), indent=1).encode()
        assert body.count(b"\n") > 100
        return dict(header, digest=hashlib.sha256(body).hexdigest()), body

    _rewrite(folder, spread)
    served = cache.load(spec())
    assert served is not None and same(served, bert_tiny())


@pytest.mark.parametrize("content", [b"", b"{}\n", b"not json\n{}", b"[" * 100_000 + b"\n", b'{"format": 3}'])
def test_an_unreadable_entry_is_not_served(folder: Path, content: bytes) -> None:
    folder.mkdir(parents=True)
    cache.entry_path(spec()).write_bytes(content)
    assert cache.load(spec()) is None


def test_a_folder_in_place_of_an_entry_is_not_served(folder: Path) -> None:
    cache.entry_path(spec()).mkdir(parents=True)
    assert cache.load(spec()) is None
    cache.store(spec(), bert_tiny())  # cannot replace a folder: skipped, nothing left behind
    assert sorted(p.name for p in folder.iterdir()) == [cache.entry_path(spec()).name]


def test_checked_graph_reasons() -> None:
    graph = bert_tiny()
    data = graph_io.to_node_link(graph)
    assert same(cache.checked_graph(data, spec()), graph)  # type: ignore[arg-type]
    assert cache._spec_problem(graph, spec()) is None
    assert cache._spec_problem(graph, spec(layers=2)) == "other sizes"
    assert cache._spec_problem(graph, resolve("bert-tiny", "base", overrides={"layers": 3})) == "another model or head"
    assert cache._row_total(graph) == 4_584_450
    graph.graph[g.G_PARAMETERS][0]["numel"] += 1
    assert cache._spec_problem(graph, spec()) == "4584451 parameters where the config implies 4584450"
    assert cache.checked_graph(graph_io.to_node_link(graph), spec()) is None
    assert cache.checked_graph({"nodes": []}, spec()) is None


def test_a_graph_of_another_family_is_checked_without_berts_total(family_dirs: dict[str, Path]) -> None:
    other = resolve(str(family_dirs["roberta"]), "base")
    graph = bert_tiny("base")
    graph.graph.update(
        {g.G_NAME: other.name, g.G_HEAD: other.head, g.G_MODEL_CLASS: other.model_class, g.G_CONFIG: other.summary()}
    )
    assert cache._spec_problem(graph, other) is None  # BERT's closed form does not apply


def test_a_failed_store_leaves_nothing(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    cache.store(spec(), bert_tiny())
    assert list(folder.iterdir()) == []
    folder.rmdir()
    folder.write_text("a file where the folder should be")
    cache.store(spec(), bert_tiny())  # the folder cannot be made: skipped
    assert folder.read_text() == "a file where the folder should be"


def test_building_holds_a_lock_file_per_key(folder: Path) -> None:
    import fcntl

    with cache.building(spec()):
        lock = folder / f"{cache.key(spec())}.lock"
        assert lock.is_file()
        handle = os.open(lock, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(handle)
    handle = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released
    finally:
        os.close(handle)


def test_building_without_a_writable_folder_runs_unlocked(folder: Path) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.write_text("not a folder")
    with cache.building(spec()):
        pass
    assert folder.read_text() == "not a folder"


def test_an_entry_is_written_beside_its_place_under_a_hidden_name(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    moves: list[tuple[str, str]] = []
    replace = os.replace

    def record(source: str, target: Any) -> None:
        moves.append((str(source), str(target)))
        replace(source, target)

    monkeypatch.setattr(os, "replace", record)
    cache.store(spec(), bert_tiny())
    [(source, target)] = moves
    assert Path(source).parent == folder  # one filesystem: the move is atomic
    # hidden, never taken for an entry; named as files.py names temporaries, so a killed write's is cleaned
    assert re.fullmatch(re.escape("." + cache.entry_path(spec()).name) + r"\.\d+\.\w{8}\.tmp", Path(source).name)
    assert target == str(cache.entry_path(spec()))
    header = cache.entry_path(spec()).read_bytes().split(b"\n", 1)[0]
    assert header == json.dumps(json.loads(header), separators=(",", ":")).encode()  # compact


def test_the_cache_folder_is_made_with_its_parents_and_entries_are_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / "a" / "b" / "graphs"
    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(deep))
    first = bert_tiny()
    cache.store(spec(), first)
    assert cache.load(spec()) is not None
    second = bert_tiny()
    second.graph[g.G_WEIGHTS] = "random"
    cache.store(spec(), second)  # the folder exists now: written again all the same
    assert cache.load(spec()).graph[g.G_WEIGHTS] == "random"  # type: ignore[union-attr]


def test_a_store_touches_nothing_outside_the_cache(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bystander = tmp_path / "XXXX"
    bystander.write_text("keep")
    monkeypatch.chdir(tmp_path)
    cache.store(spec(), bert_tiny())
    folder.joinpath(cache.entry_path(spec()).name).unlink()
    folder.rmdir()
    folder.write_text("a file where the folder should be")
    cache.store(spec(), bert_tiny())
    assert bystander.read_text() == "keep"


def test_a_temporary_file_already_gone_is_no_error(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def vanish(source: str, target: Any) -> None:
        os.unlink(source)
        raise OSError("moved away")

    monkeypatch.setattr(os, "replace", vanish)
    cache.store(spec(), bert_tiny())  # skipped quietly
    assert list(folder.iterdir()) == []


# --- what the cache reads, and the temporaries it clears -----------------------------------------


def test_an_entry_that_is_no_regular_file_or_too_large_is_skipped_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert cache._read_entry(fifo) is None  # opened without waiting for a writer
    assert capsys.readouterr().err == (
        f"bertgraph: warning: skipped cache entry {fifo}: it is not a regular file; remove it\n"
    )
    monkeypatch.setattr(cache, "MAX_ENTRY_BYTES", 3 << 20)
    largest, larger = tmp_path / "largest.json", tmp_path / "larger.json"
    largest.write_bytes(b"x" * (3 << 20))
    larger.write_bytes(b"x" * ((3 << 20) + 1))
    assert cache._read_entry(largest) == b"x" * (3 << 20)
    assert capsys.readouterr().err == ""
    assert cache._read_entry(larger) is None
    assert capsys.readouterr().err == (
        f"bertgraph: warning: skipped cache entry {larger}: larger than 3 MB, so not an entry; remove it\n"
    )
    assert cache._read_entry(tmp_path / "missing.json") is None
    assert capsys.readouterr().err == ""


def test_old_temporaries_are_removed_and_nothing_else(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    now = 1_800_000_000.0
    monkeypatch.setattr(time, "time", lambda: now)
    folder = tmp_path / "graphs"
    folder.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")

    def made(name: str, age: float, kind: str = "file") -> Path:
        path = folder / name
        if kind == "file":
            path.write_text("partial")
        elif kind == "folder":
            path.mkdir()
        else:
            path.symlink_to(outside)
        os.utime(path, (now - age, now - age), follow_symlinks=False)
        return path

    old = [made(".entry.abcd1234.tmp", 7200), made("tmpz_9y8x7w.tmp", 3601)]
    kept = [
        made(".entry.abcd5678.tmp", 3600),  # an hour old exactly: maybe still being written
        made(".entry.young123.tmp", 60),
        made(".entry.linkname.tmp", 7200, kind="link"),  # a link: never followed, never removed
        made(".entry.folder12.tmp", 7200, kind="folder"),
        *(made(name, 7200) for name in ("a.json", "a.lock", ".entry.SHORT.tmp", "tmpabcdefgh.json", "notes.tmp")),
    ]
    assert sorted(cache.remove_old_temporaries(folder)) == sorted(old)
    assert sorted(folder.iterdir()) == sorted(kept)
    assert outside.read_text() == "keep"
    assert cache.remove_old_temporaries(tmp_path / "absent") == []
    # The folder named, not the working directory.
    monkeypatch.chdir(tmp_path)
    stray = made(".entry.efgh5678.tmp", 7200)
    (tmp_path / stray.name).write_text("not the cache's")
    os.utime(tmp_path / stray.name, (now - 7200, now - 7200))
    assert cache.remove_old_temporaries(folder) == [stray]
    assert (tmp_path / stray.name).exists()


def test_a_store_clears_abandoned_temporaries_of_the_cache_folder_and_not_of_the_working_directory(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Temporaries of a killed process (its pid is gone) and an earlier version's (over an hour old)
    are removed by the next store, in the cache folder only."""
    work = tmp_path / "work"
    for place in (folder, work):
        place.mkdir(parents=True)
        (place / ".other.json.99999999.abcd1234.tmp").write_text("stale")  # pid 99999999 runs nowhere
        (place / ".entry.abcd1234.tmp").write_text("old")
        os.utime(place / ".entry.abcd1234.tmp", (1_000_000_000, 1_000_000_000))
    monkeypatch.chdir(work)
    cache.store(spec(), bert_tiny())
    assert sorted(p.name for p in folder.iterdir()) == [cache.entry_path(spec()).name]
    assert sorted(p.name for p in work.iterdir()) == [".entry.abcd1234.tmp", ".other.json.99999999.abcd1234.tmp"]
