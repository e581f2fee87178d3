"""The on-disk graph cache: warm commands skip torch, bad entries are rebuilt, keys cover inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bertgraph import cache
from bertgraph.model import resolve

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


@pytest.mark.parametrize("command", [["summary"], ["params"], ["render", "--format", "dot"]])
def test_warm_commands_import_neither_torch_nor_transformers(tmp_path: Path, command: list[str]) -> None:
    folder = tmp_path / "cache"
    out = ["-o", str(tmp_path / "x.dot")] if command[0] == "render" else []
    argv = [command[0], "bert-tiny", "--head", "masked-lm", *command[1:], *out]
    cold = run(folder, "summary", "bert-tiny", "--head", "masked-lm")
    assert cold.returncode == 0 and "imported torch" in cold.stdout
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
