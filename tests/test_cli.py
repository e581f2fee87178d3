"""The command line as a user meets it: fast help, one-line errors, safe output files."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bertgraph.api import Architecture
from bertgraph.cli import main
from tests.helpers import one_line_error

PYTHON = sys.executable


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "bertgraph", *argv], capture_output=True, text=True, env=env, check=False)


def test_help_imports_neither_torch_nor_transformers() -> None:
    code = (
        "import sys\n"
        "from bertgraph.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('torch' in sys.modules, 'transformers' in sys.modules, 'networkx' in sys.modules)"
    )
    result = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True)
    assert "usage: bertgraph" in result.stdout
    assert result.stdout.strip().endswith("False False False")


def test_bare_command_prints_usage_on_stderr_and_exits_2() -> None:
    """argparse's convention for a missing command: standard output stays empty for a pipe."""
    result = run()
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("usage: bertgraph") and "summary" in result.stderr


@pytest.mark.parametrize("model", ["", "   "])
def test_an_empty_model_says_what_to_give(model: str, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.helpers import one_line_error

    line = one_line_error(["summary", model], capsys)
    assert line == (
        "bertgraph: error: MODEL is empty; give a preset such as bert-base-uncased, a directory with "
        "config.json, a config.json file, a hub id such as org/name, or an .onnx file"
    )


def test_module_entry_point_and_version() -> None:
    result = run("--version")
    assert result.returncode == 0 and result.stdout.startswith("bertgraph ")


@pytest.mark.parametrize(
    ("argv", "message", "status"),
    [
        (["params", "bert-bsae-uncased"], "unknown model 'bert-bsae-uncased'; closest presets: bert-base-uncased", 1),
        (["params", "bert-tiny", "--head", "sentiment"], "unknown head 'sentiment'", 1),
        (["summary", "bert-tiny", "--seq-len", "600"], "--seq-len 600 is above max_position_embeddings 512", 1),
        (["summary", "bert-tiny", "--hidden", "0"], "argument --hidden: must be a positive integer, got 0", 2),
        (["summary", "bert-tiny", "--layers", "-3"], "argument --layers: must be a positive integer, got -3", 2),
        (["summary", "bert-tiny", "--hidden", "101"], "hidden_size 101 is not a multiple of num_attention_heads 2", 1),
        (["params", "no/such/dir/"], "no such file or directory: no/such/dir/", 1),
        (
            ["diff", "bert-tiny", "--head", "base", "--head", "masked-lm", "--head", "pretraining"],
            "diff needs two heads",
            2,
        ),
        (["render", "bert-tiny", "-o", "out.xyz"], "cannot tell the format of out.xyz", 1),
        (["render", "bert-tiny", "--format", "png", "-o", "out.svg"], "--format png does not match", 1),
        (["frobnicate"], "invalid choice: 'frobnicate'", 2),
    ],
)
def test_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], message: str, status: int) -> None:
    assert main(argv) == status
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("bertgraph: error: ")
    assert message in captured.err
    assert "Traceback" not in captured.err


def test_malformed_config_from_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        '{"model_type": "bert", "hidden_size": 64, "num_attention_heads": 4, "vocab_size": "many"}'
    )
    result = run("summary", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"bertgraph: error: {tmp_path / 'config.json'}: field 'vocab_size' must be a positive integer, got 'many'"
    )


def test_debug_shows_the_traceback() -> None:
    result = run("params", "bert-bsae-uncased", "--debug")
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "ModelReferenceError" in result.stderr


def test_output_into_missing_folder_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "missing" / "summary.txt"
    assert main(["summary", "bert-tiny", "-o", str(target)]) == 1
    assert f"folder {target.parent} does not exist; create it first" in capsys.readouterr().err
    assert not target.parent.exists()


def test_failed_command_keeps_the_existing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "diagram.svg"
    target.write_text("the user's own file")
    assert main(["render", "bert-tiny", "--seq-len", "9999", "-o", str(target)]) == 1
    assert target.read_text() == "the user's own file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["diagram.svg"]


def test_output_file_written_in_one_piece(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "params.md"
    assert main(["params", "bert-tiny", "--format", "markdown", "-o", str(target)]) == 0
    text = target.read_text()
    assert text.startswith("## Parameters of bert-tiny") and "| embeddings | 3,972,864 | 90.58% |" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.md"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["render", "m.onnx", "--head", "masked-lm", "-o", "x.svg"], "--head does not apply to an .onnx file"),
        (["render", "m.onnx", "--compare", "masked-lm", "-o", "x.svg"], "--compare does not apply"),
        (["summary", "m.onnx", "--layers", "4", "--seq-len", "9"], "--layers, --seq-len do not apply"),
        (["params", "m.onnx", "--batch", "2"], "--batch does not apply to an .onnx file"),
        (["report", "m.onnx", "--num-labels", "3", "-o", "r.md"], "--num-labels does not apply"),
        (["graph", "m.onnx", "--allow-pickle", "-o", "g.json"], "--allow-pickle does not apply"),
        (["render", "m.onnx", "--kv-heads", "2", "-o", "x.svg"], "--kv-heads does not apply to an .onnx file"),
        (["summary", "m.onnx", "--heads", "2", "--kv-heads", "1"], "--heads, --kv-heads do not apply"),
        (["diff", "m.onnx", "--head", "masked-lm"], "diff compares two heads of one config; an .onnx file has one"),
        (["render", "bert-tiny", "--depth", "99", "-o", "x.svg"], "--depth: must be 0 to 4 (4 draws every operator)"),
        (["report", "bert-tiny", "--depth", "5", "-o", "r.md"], "--depth: must be 0 to 4"),
        (["graph", "bert-tiny", "--depth", "7", "-o", "g.json"], "--depth: must be 0 to 4"),
        (["graph", "bert-tiny", "--unfold", "-o", "g.json"], "--unfold keeps repeated layers in a view: give --depth"),
        (["render", "bert-tiny", "--compare", "masked-lm", "-o", "g.graphml"], "--compare applies to diagrams"),
        (["render", "bert-tiny", "--theme", "dark", "-o", "g.json"], "--theme applies to diagrams"),
    ],
)
def test_options_that_would_be_ignored_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and message in captured.err, captured.err
    assert list(tmp_path.iterdir()) == []


def test_diagram_title_names_the_depth_drawn(traced: Callable[..., Architecture]) -> None:
    arch = traced("bert-tiny")
    assert arch.to_dot(99) == arch.to_dot(4)
    assert "depth 4 ·" in arch.to_dot(99) and "depth 99" not in arch.to_dot(99)
    assert arch.to_mermaid(99) == arch.to_mermaid(4)


@pytest.mark.dot
def test_layouts_too_large_for_graphviz_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "x.svg"
    argv = ["render", "bert-tiny", "--layers", "28", "--depth", "4", "--unfold", "-o", str(target)]
    line = one_line_error(argv, capsys)
    assert "edges, and Graphviz takes minutes to lay out more than 800: fold repeated layers" in line
    assert not target.exists()
    assert main([*argv[:-1], str(tmp_path / "x.dot")]) == 0  # DOT needs no layout
