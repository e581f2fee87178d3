"""Output paths: only regular files are replaced, checked before any work and again at write time."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bertgraph.errors import BertgraphError
from bertgraph.files import check_writable, write_atomic
from tests.helpers import one_line_error, run_with_small_disk

# Every command that writes a file, with the suffix it writes.
WRITERS = [
    (["params", "bert-tiny"], ".txt"),
    (["summary", "bert-tiny"], ".txt"),
    (["diff", "bert-tiny", "--head", "masked-lm"], ".txt"),
    (["render", "bert-tiny"], ".svg"),
    (["render", "bert-tiny"], ".mmd"),
    (["report", "bert-tiny"], ".md"),
    (["graph", "bert-tiny"], ".graphml"),
    (["onnx", "bert-tiny"], ".onnx"),
]

# Runs main() and reports whether torch was imported: refusing must come before any work.
PROBE = (
    "import sys\n"
    "from bertgraph.cli import main\n"
    "status = main(sys.argv[1:])\n"
    "print('torch' in sys.modules)\n"
    "sys.exit(status)\n"
)


def probe(*argv: str, stdout: Any = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", PROBE, *argv]
    return subprocess.run(command, stdout=stdout, stderr=subprocess.PIPE, text=True, check=False)


def special_files(folder: Path, suffix: str) -> dict[str, Path]:
    """One of each kind of path that is not a regular file, made without privileges."""
    fifo = folder / f"fifo{suffix}"
    os.mkfifo(fifo)
    sock = folder / f"socket{suffix}"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock))
    server.close()
    device = folder / f"device{suffix}"
    device.symlink_to("/dev/null")
    dangling = folder / f"dangling{suffix}"
    dangling.symlink_to(folder / "nowhere" / "x")
    loop = folder / f"loop{suffix}"
    loop.symlink_to(loop)
    directory = folder / f"dir{suffix}"
    directory.mkdir()
    return {
        "a FIFO": fifo,
        "a socket": sock,
        "a character device": device,
        "a broken symbolic link": dangling,
        "a symbolic link loop": loop,
        "is a directory": directory,
    }


def snapshot(folder: Path) -> dict[str, tuple[int, str]]:
    return {p.name: (p.lstat().st_mode, os.readlink(p) if p.is_symlink() else "") for p in folder.iterdir()}


@pytest.mark.parametrize(("argv", "suffix"), WRITERS, ids=lambda v: v if isinstance(v, str) else v[0])
def test_every_writer_refuses_what_is_not_a_regular_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], suffix: str
) -> None:
    specials = special_files(tmp_path, suffix)
    before = snapshot(tmp_path)
    for what, path in specials.items():
        line = one_line_error([*argv, "-o", str(path)], capsys, status=1)
        assert what in line, line
    assert snapshot(tmp_path) == before  # nothing replaced, nothing left behind


def test_refused_before_any_work(tmp_path: Path) -> None:
    fifo = tmp_path / "out.svg"
    os.mkfifo(fifo)
    result = probe("render", "bert-tiny", "--no-cache", "-o", str(fifo))
    assert result.returncode == 1
    assert result.stdout.strip() == "False"  # torch never imported: nothing traced
    assert "it is a FIFO (named pipe); bertgraph only replaces regular files" in result.stderr


def test_symlink_to_a_regular_file_is_written_through(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    real = elsewhere / "real.md"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "link.md"
    link.symlink_to(real)
    chain = tmp_path / "chain.md"
    chain.symlink_to(link)
    from bertgraph.cli import main

    assert main(["params", "bert-tiny", "--format", "markdown", "-o", str(chain)]) == 0
    assert f"wrote {chain}" in capsys.readouterr().err
    assert chain.is_symlink() and link.is_symlink() and os.readlink(chain) == str(link)
    assert real.read_text().startswith("## Parameters of bert-tiny")
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert sorted(p.name for p in elsewhere.iterdir()) == ["real.md"]  # no temporary file beside the target
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chain.md", "elsewhere", "link.md"]


def test_proc_self_fd_follows_what_standard_output_is(tmp_path: Path) -> None:
    piped = probe("params", "bert-tiny", "-o", "/proc/self/fd/1")
    assert piped.returncode == 1 and "it is a FIFO (named pipe)" in piped.stderr
    captured = tmp_path / "stdout.txt"
    with captured.open("w") as stream:
        to_file = probe("params", "bert-tiny", "-o", "/proc/self/fd/1", stdout=stream)
    assert to_file.returncode == 0, to_file.stderr
    assert "total" in captured.read_text()  # a regular file behind the link: written through


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("/proc/x.svg", "folder /proc is read-only"),
        ("~nouser-bertgraph/x.svg", "cannot expand ~nouser-bertgraph in ~nouser-bertgraph/x.svg: no such user"),
        ("missing/x.svg", "does not exist; create it first"),
        ("plain.txt/x.svg", "plain.txt is a regular file, not a folder"),
        ("readonly/x.svg", "folder {tmp}/readonly is read-only"),
        ("readonly.svg", "the file is read-only"),
    ],
)
def test_unwritable_places(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, message: str) -> None:
    (tmp_path / "plain.txt").write_text("x")
    (tmp_path / "readonly").mkdir(mode=0o555)
    (tmp_path / "readonly.svg").write_text("keep")
    (tmp_path / "readonly.svg").chmod(0o444)
    target = name if name.startswith(("/", "~")) else str(tmp_path / name)
    before = snapshot(tmp_path)
    line = one_line_error(["render", "bert-tiny", "-o", target], capsys)
    assert message.format(tmp=tmp_path) in line
    assert snapshot(tmp_path) == before and (tmp_path / "readonly.svg").read_text() == "keep"


def test_checked_again_at_write_time(tmp_path: Path) -> None:
    target = tmp_path / "x.svg"
    assert check_writable(target) == target
    os.mkfifo(target)  # what the path names changed while bertgraph worked
    with pytest.raises(BertgraphError, match="it is a FIFO"):
        write_atomic(target, "data")
    assert stat.S_ISFIFO(target.lstat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["x.svg"]


def test_full_disk_is_one_line_and_keeps_the_old_file(tmp_path: Path) -> None:
    folder = tmp_path / "small"
    folder.mkdir()
    result = run_with_small_disk(
        folder,
        "8k",
        ["render", "bert-tiny", "--format", "dot", "-o", str(folder / "x.dot")],
        prepare='printf old > "$1/x.dot"',
        after='cat "$1/x.dot"',
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"bertgraph: error: cannot write {folder / 'x.dot'}: no space left on the device; "
        "free some space and run again; nothing was written (the old file, if any, is unchanged)"
    ]
    assert result.listing == ["x.dot"] and result.after == "old"


def test_folder_that_cannot_hold_new_files_is_refused_before_any_work(tmp_path: Path) -> None:
    folder = tmp_path / "noinodes"
    folder.mkdir()
    result = run_with_small_disk(folder, "8k,nr_inodes=1", ["render", "bert-tiny", "-o", str(folder / "x.svg")])
    assert result.returncode == 1
    assert result.stderr == (
        f"bertgraph: error: cannot write {folder / 'x.svg'}: folder {folder} cannot hold new files "
        "(no space left on the device; free some space and run again)\n"
    )
    assert result.listing == []


def test_full_standard_output_is_one_line() -> None:
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "bertgraph", "params", "bert-tiny"], stdout=full, stderr=subprocess.PIPE, text=True
        )
    assert result.returncode == 1
    assert result.stderr == (
        "bertgraph: error: cannot write to standard output: no space left on the device; use -o FILE or free some "
        "space\n"
    )


def test_closed_pipe_exits_quietly() -> None:
    reader, writer = os.pipe()
    os.close(reader)  # the reader has gone, as after `| head -1`
    result = subprocess.run(
        [sys.executable, "-m", "bertgraph", "params", "bert-tiny"], stdout=writer, stderr=subprocess.PIPE, text=True
    )
    os.close(writer)
    assert result.returncode == 141
    assert result.stderr == ""


def test_gallery_checks_every_file_before_any_work(tmp_path: Path) -> None:
    folder = tmp_path / "gallery"
    folder.mkdir()
    os.mkfifo(folder / "report.md")  # the last file the gallery would write
    (folder / "bert-depth1.svg").write_text("old")
    result = probe("gallery", "--model", "bert-tiny", "--no-cache", "-o", str(folder))
    assert result.returncode == 1
    assert result.stdout.strip() == "False"  # refused before torch was imported
    assert f"cannot write {folder / 'report.md'}: it is a FIFO" in result.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["bert-depth1.svg", "report.md"]
    assert (folder / "bert-depth1.svg").read_text() == "old"


def _tiny_folder(folder: Path) -> Path:
    """A config folder with a (placeholder) checkpoint: both are files the commands read."""
    from tests.family_configs import TINY

    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY["bert"]))
    (folder / "model.safetensors").write_bytes(b"weights the user has")
    (folder / "m.onnx").write_bytes(b"an onnx file the user has")
    return folder


# (command with MODEL at {m}, output at {o}): each output names a file the command reads.
READS_ITS_OUTPUT = [
    (["summary", "{m}", "-o", "{m}/model.safetensors"], "model.safetensors"),
    (["params", "{m}/config.json", "-o", "{m}/config.json"], "config.json"),
    (["cost", "{m}", "-o", "{m}/config.json"], "config.json"),
    (["diff", "{m}", "--head", "masked-lm", "-o", "{m}/model.safetensors"], "model.safetensors"),
    (["render", "{m}/m.onnx", "--format", "svg", "-o", "{m}/m.onnx"], "m.onnx"),
    (["graph", "{m}/m.onnx", "-o", "{m}/hard.json"], "hard.json"),  # a hard link to the .onnx file
    (["families", "bert-tiny", "{m}", "--format", "dot", "-o", "{m}/model.safetensors"], "model.safetensors"),
]


@pytest.mark.parametrize(("argv", "name"), READS_ITS_OUTPUT, ids=lambda v: v[0] if isinstance(v, list) else v)
def test_an_output_that_names_a_file_the_command_reads_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], name: str
) -> None:
    folder = _tiny_folder(tmp_path / "ck")
    os.link(folder / "m.onnx", folder / "hard.json")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    line = one_line_error([part.format(m=folder) for part in argv], capsys)
    assert f"{folder / name}: it is " in line and "which this command reads" in line, line
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_a_link_leading_out_of_its_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``-o link.svg`` where link.svg -> ~/.bashrc: the user named the link, so the file it reaches is left alone."""
    outside = tmp_path / "home" / ".bashrc"
    outside.parent.mkdir()
    outside.write_text("export PATH=...\n")
    (tmp_path / "work").mkdir()
    for name, target in (("link.txt", outside), ("relative.txt", Path("../home/.bashrc"))):
        link = tmp_path / "work" / name
        link.symlink_to(target)
        line = one_line_error(["params", "bert-tiny", "-o", str(link)], capsys)
        assert f"it is a symbolic link to {outside}, outside {tmp_path / 'work'}" in line, line
        assert f"give {outside} itself as the output" in line
        with pytest.raises(BertgraphError, match="outside"):
            write_atomic(link, "x")
    assert outside.read_text() == "export PATH=...\n"
    assert all(p.is_symlink() for p in (tmp_path / "work").iterdir())


@pytest.mark.parametrize("name", ["x.svg/", "sub/x.txt/"])
def test_a_name_ending_in_a_slash_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    (tmp_path / "sub").mkdir()
    output = f"{tmp_path}/{name}"
    line = one_line_error(["params", "bert-tiny", "-o", output], capsys, status=2)
    assert "ends in /, so it names a folder; give a file name" in line
    with pytest.raises(BertgraphError, match="a name ending in / is a folder"):
        check_writable(output)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub"] and not any((tmp_path / "sub").iterdir())


def test_report_never_replaces_a_plot_it_was_not_told_about(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plot = tmp_path / "rep-flops.png"
    plot.write_bytes(b"the user's own picture")
    line = one_line_error(["report", "bert-tiny", "-o", str(tmp_path / "rep.md")], capsys, status=2)
    assert f"{plot} exists and is not the plot of an earlier report rep.md" in line
    assert "move that file away or give the report another name" in line
    assert plot.read_bytes() == b"the user's own picture" and not (tmp_path / "rep.md").exists()
    plot.unlink()
    from bertgraph.cli import main

    for _ in range(2):  # a report run again replaces its own plot
        assert main(["report", "bert-tiny", "-o", str(tmp_path / "rep.md")]) == 0
    assert plot.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("command", ["summary", "params", "cost", "diff"])
@pytest.mark.parametrize(
    ("suffix", "given", "written"),
    [(".json", None, "json"), (".md", None, "markdown"), (".txt", "json", "json"), (".json", "text", None)],
)
def test_a_table_follows_its_suffix_or_refuses_one_that_contradicts_format(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    suffix: str,
    given: str | None,
    written: str | None,
) -> None:
    from bertgraph.cli import main

    output = tmp_path / f"table{suffix}"
    argv = [command, "bert-tiny", *(["--head", "masked-lm"] if command == "diff" else []), "-o", str(output)]
    argv += ["--format", given] if given else []
    if written is None:
        line = one_line_error(argv, capsys, status=2)
        assert f"--format {given} does not match the file name {output.name}" in line
        assert not output.exists()
        return
    assert main(argv) == 0
    text = output.read_text()
    if written == "json":
        assert isinstance(json.loads(text), dict)
    else:
        assert text.startswith("## ") and "|" in text


@pytest.mark.parametrize(
    ("options", "message"),
    [(["--model", "bert-huge"], "unknown model 'bert-huge'"), (["--head", "causal-lm"], "has no causal-lm head")],
)
def test_gallery_with_a_bad_model_leaves_no_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], message: str
) -> None:
    target = tmp_path / "outputs" / "nested"
    line = one_line_error(["gallery", *options, "-o", str(target)], capsys)
    assert message in line
    assert list(tmp_path.iterdir()) == []  # neither outputs/ nor outputs/nested


def test_gallery_without_graphviz_leaves_no_folder(tmp_path: Path) -> None:
    environment = {**os.environ, "PATH": str(tmp_path / "empty-bin")}
    command = [sys.executable, "-m", "bertgraph", "gallery", "-o", str(tmp_path / "outputs" / "nested")]
    done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    assert done.returncode == 1 and "Graphviz" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []
