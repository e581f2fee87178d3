"""The graph cache serves exactly what a fresh trace gives, and only when it may."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import bertgraph
from bertgraph import cache
from bertgraph.api import load
from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g
from bertgraph.model import resolve

PACKAGE = Path(bertgraph.__file__).resolve().parent


def _cli(folder: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "BERTGRAPH_CACHE_DIR": str(folder), **env}
    if "BERTGRAPH_NO_CACHE" not in env:
        environment.pop("BERTGRAPH_NO_CACHE", None)
    command = [sys.executable, "-m", "bertgraph", *argv]
    return subprocess.run(command, capture_output=True, text=True, env=environment, check=False)


def test_a_cached_graph_is_the_fresh_graph_byte_for_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(tmp_path))
    spec = resolve("bert-tiny", "masked-lm", overrides={"layers": 3})
    fresh = bertgraph.trace("bert-tiny", "masked-lm", layers=3, cache=False).graph
    assert not any(tmp_path.iterdir())  # cache=False wrote nothing
    stored = load(spec).graph  # traces and fills the cache
    served = cache.load(spec)
    assert served is not None and served is not stored
    text = "".join(graph_io.generate_json(fresh))
    assert "".join(graph_io.generate_json(served)) == text
    assert "".join(graph_io.generate_json(load(spec).graph)) == text  # what a warm command gets
    assert sorted(served.edges(data=True)) == sorted(fresh.edges(data=True))
    assert served.graph == fresh.graph


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache holding a sound entry under bert-tiny's real key with one module type renamed: served, it shows."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(folder))
    graph = bertgraph.trace("bert-tiny", cache=False).graph.copy()
    graph.graph[g.G_MODULES]["embeddings"]["type"] = "PlantedEmbeddings"
    cache.store(resolve("bert-tiny"), graph)
    assert cache.load(resolve("bert-tiny")) is not None
    return folder


def test_a_planted_entry_is_served_from_the_cache(planted: Path) -> None:
    served = _cli(planted, "summary", "bert-tiny")
    assert served.returncode == 0, served.stderr
    assert "embeddings: PlantedEmbeddings" in served.stdout


@pytest.mark.parametrize("switch", ["--no-cache", "BERTGRAPH_NO_CACHE=1"])
def test_no_cache_never_reads_a_filled_cache(planted: Path, switch: str) -> None:
    before = sorted((p.name, p.read_bytes()) for p in planted.iterdir())
    argv = ["summary", "bert-tiny"] + (["--no-cache"] if switch.startswith("--") else [])
    env = {} if switch.startswith("--") else {"BERTGRAPH_NO_CACHE": "1"}
    result = _cli(planted, *argv, **env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("bert-tiny · BertModel")
    assert "PlantedEmbeddings" not in result.stdout
    assert sorted((p.name, p.read_bytes()) for p in planted.iterdir()) == before  # nor wrote it


def _key_with_code_of(package: Path) -> str:
    """bert-tiny's key as computed by the cache module of a copy of the package (its own code digest)."""
    spec = importlib.util.spec_from_file_location(f"copied_cache_{package.parent.name}", package / "cache.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert Path(module.__file__ or "").parent == package
    return str(module.key(resolve("bert-tiny")))


def test_the_key_covers_every_module_that_shapes_a_graph(tmp_path: Path) -> None:
    """Each module below model/, tracing/ and graph/ (graph/facts, model/families too), edited, changes the key."""
    copy = tmp_path / "same" / "bertgraph"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "assets"))
    original = _key_with_code_of(copy)
    assert original == _key_with_code_of(shutil.copytree(copy, tmp_path / "again" / "bertgraph"))
    modules = sorted(file for folder in ("model", "tracing", "graph") for file in (copy / folder).rglob("*.py"))
    nested = {file.parent.relative_to(copy).as_posix() for file in modules}
    assert {"graph/facts", "model/families"} <= nested
    for module in modules:
        text = module.read_text(encoding="utf-8")
        module.write_text(text + "\n# an edit\n", encoding="utf-8")
        assert _key_with_code_of(copy) != original, module.relative_to(copy)
        module.write_text(text, encoding="utf-8")
    assert _key_with_code_of(copy) == original


def test_the_key_covers_a_pickled_checkpoint(tmp_path: Path) -> None:
    import torch
    import transformers

    from tests.conftest import TINY_CONFIG

    torch.manual_seed(0)
    config = transformers.BertConfig(**TINY_CONFIG)
    config.save_pretrained(tmp_path)
    weights = tmp_path / "pytorch_model.bin"
    torch.save(transformers.BertModel(config).state_dict(), weights)  # the pickled format transformers reads
    assert weights.is_file() and not (tmp_path / "model.safetensors").exists()
    before = cache.key(resolve(str(tmp_path), allow_pickle=True))
    assert before != cache.key(resolve(str(tmp_path)))  # read only with allow_pickle
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert cache.key(resolve(str(tmp_path), allow_pickle=True)) != before
    weights.write_bytes(weights.read_bytes() + b"\0")
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert cache.key(resolve(str(tmp_path), allow_pickle=True)) != before  # same time, other size


def test_a_warm_command_writes_what_a_cold_one_does(tmp_path: Path) -> None:
    folder, cold, warm = tmp_path / "cache", tmp_path / "cold.dot", tmp_path / "warm.dot"
    reference = ["bert-tiny", "--head", "masked-lm", "--layers", "3"]
    assert _cli(folder, "render", *reference, "--depth", "3", "-o", str(cold)).returncode == 0
    assert len(list(folder.iterdir())) == 1  # the entry the warm commands read
    assert _cli(folder, "render", *reference, "--depth", "3", "-o", str(warm)).returncode == 0
    assert warm.read_bytes() == cold.read_bytes()
    served, fresh = _cli(folder, "summary", *reference), _cli(folder, "summary", *reference, "--no-cache")
    assert served.returncode == fresh.returncode == 0
    assert served.stdout == fresh.stdout and "(0-2): 3 × BertLayer" in served.stdout


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero", "oversized file"])
def test_an_entry_that_is_not_a_bounded_regular_file_is_skipped_with_a_warning(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A FIFO would block the read forever, /dev/zero never ends it: neither is read."""
    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(tmp_path))
    spec = resolve("bert-tiny")
    entry = cache.entry_path(spec)
    if kind == "fifo":
        os.mkfifo(entry)
    elif kind == "link to /dev/zero":
        entry.symlink_to("/dev/zero")
    else:
        monkeypatch.setattr(cache, "MAX_ENTRY_BYTES", 64)
        entry.write_bytes(b"{}" * 64)
    served: list[object] = []
    reader = threading.Thread(target=lambda: served.append(cache.load(spec)), daemon=True)
    reader.start()
    reader.join(timeout=30)  # a blocking or endless read fails here rather than hanging the suite
    assert served == [None], "the cache read did not return"
    warning = capsys.readouterr().err
    assert warning.count("\n") == 1 and warning.startswith("bertgraph: warning: skipped cache entry")
    assert str(entry) in warning and "remove it" in warning


def test_a_write_killed_outright_leaves_nothing_once_the_cache_is_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL after the entry's temporary file is complete, before its move: the next write removes it."""
    killed = (
        "import os, signal, bertgraph\n"
        "from bertgraph import cache\n"
        "from bertgraph.model import resolve\n"
        "graph = bertgraph.trace('bert-tiny', layers=1, cache=False).graph\n"
        "cache.os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)\n"
        "cache.store(resolve('bert-tiny', overrides={'layers': 1}), graph)\n"
    )
    environment = {**os.environ, "BERTGRAPH_CACHE_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", killed], env=environment, capture_output=True, check=False)
    assert result.returncode == -9, result.stderr
    left = [path.name for path in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].endswith(".tmp"), left
    spec = resolve("bert-tiny", overrides={"layers": 2})  # another entry's write cleans the folder
    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(tmp_path))
    cache.store(spec, bertgraph.trace("bert-tiny", layers=2, cache=False).graph)
    assert [path.name for path in tmp_path.iterdir()] == [cache.entry_path(spec).name]
