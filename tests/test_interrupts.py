"""Signals stop a run cleanly: real signals sent to real ``bertgraph`` processes at each stage.

Every signal a user or a CI runner sends (SIGINT, SIGTERM, SIGHUP, SIGQUIT) must remove
what the run had staged, leave the user's file as it was, and end in one line with exit
status 128 + the signal. What a SIGKILL leaves is removed by the next write to the same
target — and nothing that belongs to a live process or to the user ever is.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bertgraph.files import remove_stale, staging_folder, write_atomic

# bert-tiny with a 200,000-token vocabulary: 100 MB of weights, so writing and verifying
# take long enough to be interrupted, while the export (two small layers) stays quick.
BIG_TINY = ["bert-tiny", "--vocab", "200000"]
GOOD = b"the user's file\n"


def _start(argv: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "bertgraph", *argv],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _wait_for(process: subprocess.Popen[str], marker: str, timeout: float = 300) -> list[str]:
    """Read stderr until a progress line containing ``marker``; returns the lines read."""
    assert process.stderr is not None
    lines = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        lines.append(line)
        if marker in line:
            return lines
    process.kill()
    raise AssertionError(f"no progress line with {marker!r}; stderr: {''.join(lines)}")


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != "m.onnx")


# The stage's progress line → the signal sent when it appears; every signal and every stage once.
STAGES = [
    ("exporting", "SIGQUIT"),
    ("writing", "SIGTERM"),
    ("checking with onnx.checker", "SIGINT"),
    ("running PyTorch", "SIGTERM"),
    ("verifying with onnxruntime", "SIGHUP"),
]


@pytest.mark.slow
@pytest.mark.onnx
@pytest.mark.parametrize(("stage", "name"), STAGES, ids=[f"{n}-{s.split()[0]}" for s, n in STAGES])
def test_signal_during_onnx_export_cleans_up(stage: str, name: str, tmp_path: Path) -> None:
    target = tmp_path / "m.onnx"
    target.write_bytes(GOOD)
    process = _start(["onnx", *BIG_TINY, "-o", str(target)], tmp_path)
    _wait_for(process, stage)
    process.send_signal(getattr(signal, name))
    _, err = process.communicate(timeout=300)
    signum = int(getattr(signal, name))
    assert process.returncode == 128 + signum, err
    assert err.strip().splitlines()[-1] == "bertgraph: interrupted", err
    assert "Traceback" not in err and "internal error" not in err
    assert target.read_bytes() == GOOD  # the user's file is as it was
    assert _leftovers(tmp_path) == []  # no staging folder, no temporary file


@pytest.mark.slow
@pytest.mark.onnx
def test_staging_left_by_sigkill_is_removed_by_the_next_export(tmp_path: Path) -> None:
    target = tmp_path / "m.onnx"
    process = _start(["onnx", *BIG_TINY, "-o", str(target)], tmp_path)
    _wait_for(process, "writing")
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    stale = _leftovers(tmp_path)
    assert len(stale) == 1 and stale[0].startswith(f".m.onnx.{process.pid}.")  # what SIGKILL leaves

    # Beside it: the work of a live process, one of a dead pid whose lock is held (another pid
    # namespace sharing the folder), and files of the user's that only look alike.
    live = tmp_path / f".m.onnx.{os.getpid()}.abcdefgh.tmp"
    live.mkdir()
    held = tmp_path / f".m.onnx.{_dead_pid()}.heldlock.tmp"
    held.mkdir()
    lock = os.open(held, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(lock, fcntl.LOCK_EX)
    users = [tmp_path / ".m.onnx.backup.tmp", tmp_path / f".m.onnx.{_dead_pid()}.tmp", tmp_path / "m.onnx.1.a.tmp"]
    for path in users:
        path.write_bytes(GOOD)
    link = tmp_path / f".m.onnx.{_dead_pid()}.symlinkd.tmp"
    link.symlink_to(tmp_path / ".m.onnx.backup.tmp")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bertgraph", "onnx", "bert-tiny", "-o", str(target), "--no-verify"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
    finally:
        os.close(lock)
    assert not (tmp_path / stale[0]).exists()
    assert live.is_dir() and held.is_dir() and link.is_symlink()
    assert all(path.read_bytes() == GOOD for path in users)
    assert target.stat().st_size > 0


def test_signal_during_an_atomic_write_removes_its_temporary_file(tmp_path: Path) -> None:
    """write_atomic under SIGTERM: the temporary file goes, the target stays as it was."""
    target = tmp_path / "out.svg"
    target.write_bytes(GOOD)
    script = textwrap.dedent(
        f"""
        import sys
        from bertgraph import interrupts
        from bertgraph.files import write_atomic
        interrupts.install()
        payload = bytes(300_000_000)
        print("ready", flush=True)
        try:
            for _ in range(20):
                write_atomic({str(target)!r}, payload)
        except KeyboardInterrupt:
            sys.exit(128 + interrupts.received())
        """
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=120)
    assert process.returncode == 128 + signal.SIGTERM
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.svg"]
    assert target.read_bytes() in (GOOD, bytes(300_000_000))  # old or new, never partial


def test_stale_temporary_files_of_dead_processes_are_removed(tmp_path: Path) -> None:
    target = tmp_path / "table.md"
    dead = _dead_pid()
    stale_file = tmp_path / f".table.md.{dead}.k2j4h5g6.tmp"
    stale_file.write_bytes(b"partial")
    stale_folder = tmp_path / f".table.md.{dead}.a1b2c3d4.tmp"
    (stale_folder / "inner").mkdir(parents=True)
    mine = tmp_path / f".table.md.{os.getpid()}.zzzzzzzz.tmp"
    mine.write_bytes(b"live")
    other_target = tmp_path / f".other.md.{dead}.k2j4h5g6.tmp"
    other_target.write_bytes(b"another target's")
    write_atomic(target, "done\n")
    assert target.read_text() == "done\n"
    assert not stale_file.exists() and not stale_folder.exists()
    assert mine.exists() and other_target.exists()  # a live process's; another target's (left for its own writes)
    assert remove_stale(target) == []


def test_staging_folder_is_named_for_its_process_and_locked(tmp_path: Path) -> None:
    target = tmp_path / "m.onnx"
    with staging_folder(target) as folder:
        assert folder.parent == tmp_path and folder.name.startswith(f".m.onnx.{os.getpid()}.")
        (folder / "m.onnx").write_bytes(b"partial")
        handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with pytest.raises(BlockingIOError):  # what another process's cleanup would meet
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(handle)
        assert remove_stale(target) == []
    assert list(tmp_path.iterdir()) == []


def _dead_pid() -> int:
    """The id of a process that has ended."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_no_progress_line_follows_the_interrupted_line() -> None:
    """The export's reference thread kept printing progress after "interrupted", even mid-line."""
    probe = textwrap.dedent(
        """
        import os, signal, sys, threading, time
        from bertgraph import cli, interrupts
        interrupts.install()
        stop = threading.Event()
        def chatter():
            while not stop.is_set():
                cli._warn("running PyTorch at batch 3 × sequence 45")
        worker = threading.Thread(target=chatter)
        worker.start()
        try:
            time.sleep(0.2)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except KeyboardInterrupt:
            cli._say_interrupted()
        time.sleep(0.2)
        stop.set()
        worker.join()
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    lines = done.stderr.splitlines()
    assert lines[-1] == "bertgraph: interrupted", done.stderr[-500:]
    assert all(
        line in ("bertgraph: interrupted", "bertgraph: running PyTorch at batch 3 × sequence 45") for line in lines
    )
