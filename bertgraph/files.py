"""Files on disk: what a path names, and writing output files all or nothing.

The rules for an output path (``-o``, and every file ``gallery`` writes):

* a missing file is created; a regular file is replaced in one step (a temporary file
  beside it, then ``os.replace``), keeping its permission bits;
* a symbolic link to a regular file in the link's own folder (or below it) is written
  through: its target is replaced and the link stays a link. A link that leads out of
  that folder (``out.svg -> ~/.bashrc``) is refused: the user named the link, not the file
  it reaches, so they name that file itself if they mean to replace it. The one
  exception is the process's own standard streams (``/dev/stdout``, ``/proc/self/fd/1``),
  written through only when they are regular files;
* a name ending in ``/`` names a folder, and is refused;
* anything else is refused before any work: a directory, a FIFO, a device, a socket, a
  broken link, a link loop, a read-only file, a folder that is missing, read-only or
  cannot hold new files (``/proc``);
* so is a file the command reads (:func:`refuse_inputs`: a checkpoint, a config.json,
  the .onnx file being drawn);
* the same checks run again just before the write; a failed write (a full disk) leaves
  the old file as it was and no temporary file behind.

Work in progress lives beside its target under a name that says whose it is —
``.NAME.PID.XXXXXXXX.tmp``, a file (:func:`write_atomic`) or a folder
(:func:`staging_folder`) — and stays locked (``flock``) while its process lives. A run
stopped by a signal removes it on the way out; one killed outright (SIGKILL, power loss)
leaves it, and the next write to the same target removes it, once its process is gone
and its lock is free. Nothing else is ever removed: not another process's work in
progress, not a file of the user's.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import NamedTuple

from bertgraph.errors import BertgraphError


class PathKind(NamedTuple):
    """What a path names: ``missing``, ``file``, ``directory``, ``special`` (anything else that
    exists, a broken link or a link loop) or ``unreachable``, and the same in words."""

    kind: str
    description: str


_SPECIAL = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def expand_user(path: str | os.PathLike[str]) -> Path:
    """``path`` with a leading ``~`` or ``~user`` expanded, as a shell would.

    Raises:
        BertgraphError: the user does not exist (or has no home folder).

    >>> expand_user("plain/file.svg")
    PosixPath('plain/file.svg')
    >>> expand_user("~no-such-user-here/x.svg")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bertgraph.errors.BertgraphError: cannot expand ~no-such-user-here in ...: no such user; give the folder's full path
    """
    text = os.fspath(path)
    if not text.startswith("~"):
        return Path(text)
    expanded = os.path.expanduser(text)
    if expanded == text:
        user = text.split(os.sep, 1)[0]
        reason = "no such user" if user != "~" else "the home folder is unknown (HOME is not set)"
        raise BertgraphError(f"cannot expand {user} in {text}: {reason}; give the folder's full path")
    return Path(expanded)


def path_kind(path: Path) -> PathKind:
    """What ``path`` names, following symbolic links, without opening it.

    >>> path_kind(Path("/")).kind, path_kind(Path("/no/such/path")).kind
    ('directory', 'missing')
    >>> path_kind(Path("/dev/null"))
    PathKind(kind='special', description='a character device')
    """
    try:
        info = path.stat()
    except ValueError:  # a NUL character, which no file name can hold
        return PathKind("unreachable", "a file name cannot hold a NUL character")
    except OSError as error:
        if error.errno == errno.ELOOP:
            return PathKind("special", "a symbolic link loop")
        if error.errno in (errno.ENOENT, errno.ENOTDIR):
            if path.is_symlink():
                return PathKind("special", f"a broken symbolic link (to {os.readlink(path)}, which does not exist)")
            return PathKind("missing", "missing")
        return PathKind("unreachable", _reason(error))
    if stat.S_ISREG(info.st_mode):
        return PathKind("file", "a regular file")
    if stat.S_ISDIR(info.st_mode):
        return PathKind("directory", "a directory")
    for test, description in _SPECIAL:
        if test(info.st_mode):
            return PathKind("special", description)
    return PathKind("special", "not a regular file")


_WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


def check_writable(path: str | os.PathLike[str]) -> Path:
    """The regular file writing ``path`` replaces (the link's target for a symbolic link).

    Called before any work and again by :func:`write_atomic`; the rules are in the
    module docstring.

    Raises:
        BertgraphError: one line saying why ``path`` cannot be written and what to do.
    """
    if os.fspath(path).endswith(os.sep) and os.fspath(path).strip(os.sep):
        raise BertgraphError(f"cannot write {os.fspath(path)}: a name ending in / is a folder; give a file name")
    requested = expand_user(path)
    found = path_kind(requested)
    if found.kind == "directory":
        raise BertgraphError(f"{requested} is a directory; give a file name such as {requested / 'bert.svg'}")
    if found.kind == "special":
        raise BertgraphError(
            f"cannot write {requested}: it is {found.description}; bertgraph only replaces regular files, "
            "so give the path of a new or regular file"
        )
    if found.kind == "unreachable":
        raise BertgraphError(f"cannot write {requested}: {found.description}")
    target = Path(os.path.realpath(requested)) if found.kind == "file" else requested
    if found.kind == "file" and requested.is_symlink():
        _check_link(requested, target)
    folder = target.parent
    if found.kind == "missing":
        parent = path_kind(folder)
        if parent.kind == "missing":
            raise BertgraphError(f"cannot write {requested}: folder {folder} does not exist; create it first")
        if parent.kind == "unreachable":
            raise BertgraphError(f"cannot write {requested}: folder {folder}: {parent.description}")
        if parent.kind != "directory":
            raise BertgraphError(f"cannot write {requested}: {folder} is {parent.description}, not a folder")
    elif not target.stat().st_mode & _WRITE_BITS:
        raise BertgraphError(f"cannot write {requested}: the file is read-only; make it writable or choose another")
    # Mode bits, not os.access: root may write anywhere, but a read-only file or folder says "leave me".
    if not folder.stat().st_mode & _WRITE_BITS:
        raise BertgraphError(f"cannot write {requested}: folder {folder} is read-only; choose another folder")
    _probe_folder(requested, folder)
    return target


# Links that stand for this process's own standard streams: named, they mean "where my output goes".
_STREAM_LINKS = ("/dev/stdout", "/dev/stderr")
_STREAM_FOLDERS = ("/proc/self/fd", "/dev/fd")


def _check_link(requested: Path, target: Path) -> None:
    """Refuse a link whose target lies outside the link's own folder (see the module docstring)."""
    absolute = os.path.abspath(requested)
    if absolute in _STREAM_LINKS or os.path.dirname(absolute) in _STREAM_FOLDERS:
        return
    home = Path(os.path.realpath(requested.parent if str(requested.parent) else "."))
    if target.is_relative_to(home):
        return
    raise BertgraphError(
        f"cannot write {requested}: it is a symbolic link to {target}, outside {home}; bertgraph writes "
        f"through links only within their own folder, so give {target} itself as the output "
        "if you mean to replace that file"
    )


def refuse_inputs(output: str | os.PathLike[str], inputs: Iterable[Path]) -> None:
    """Refuse an output path that names a file the command reads (its checkpoint, config or .onnx file).

    Compared as files, not names: a link or hard link to an input is refused too.

    Raises:
        BertgraphError: ``output`` is one of ``inputs``.
    """
    requested = expand_user(output)
    for source in inputs:
        with suppress(OSError, ValueError):
            if os.path.samefile(requested, source):
                raise BertgraphError(
                    f"cannot write {requested}: it is {source}, which this command reads; "
                    "give the output a name of its own"
                )


def _probe_folder(requested: Path, folder: Path) -> None:
    """Create and remove a temporary file in ``folder``: the one test of writability that never lies
    (``os.access`` says yes to root on read-only mounts and in ``/proc``)."""
    try:
        handle, probe = tempfile.mkstemp(dir=folder, prefix=_prefix(requested), suffix=".tmp")
    except OSError as error:
        raise BertgraphError(
            f"cannot write {requested}: folder {folder} cannot hold new files ({_reason(error)})"
        ) from error
    os.close(handle)
    os.unlink(probe)


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` to ``path`` in one step: a temporary file beside it, then ``os.replace``.

    ``path`` is checked again first (:func:`check_writable`). A failure leaves whatever
    was at ``path`` untouched and no temporary file behind. Returns ``path`` as given
    (expanded), not the link target written through.

    Raises:
        BertgraphError: the path breaks a rule or the write failed (a full disk).
    """
    requested = expand_user(path)
    target = check_writable(requested)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    temporary = ""
    try:
        handle, temporary = temporary_file(target)
        with os.fdopen(handle, "wb") as stream:
            stream.write(payload)
        mode = target.stat().st_mode & 0o777 if target.exists() else 0o666 & ~_umask()
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except OSError as error:
        _remove(temporary)
        raise BertgraphError(
            f"cannot write {requested}: {_reason(error)}; nothing was written (the old file, if any, is unchanged)"
        ) from error
    except BaseException:
        _remove(temporary)
        raise
    return requested


def _remove(temporary: str) -> None:
    if temporary:
        Path(temporary).unlink(missing_ok=True)


def _reason(error: OSError) -> str:
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left on the device; free some space and run again"
    return error.strerror.lower() if error.strerror else str(error)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# What follows ".NAME." in the name of a temporary file or folder: owner pid, mkstemp's 8 characters.
_TEMPORARY = re.compile(r"(?:^|\.)(?P<pid>[1-9][0-9]*)\.[a-z0-9_]{8}\.tmp$")


@contextmanager
def staging_folder(target: Path) -> Iterator[Path]:
    """A private folder beside ``target`` for files moved into place only once complete.

    Removed on the way out, whatever happens (an interrupting signal included); a
    folder left by an earlier run that was killed outright is removed first.
    """
    remove_stale(target)
    folder = Path(tempfile.mkdtemp(dir=_folder(target), prefix=_prefix(target), suffix=".tmp"))
    lock = -1
    try:
        lock = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        _lock(lock)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if lock >= 0:
            os.close(lock)


def remove_stale(target: Path) -> list[Path]:
    """Remove what killed runs left beside ``target``: temporary files and folders of dead processes.

    An entry is removed only when its name is one bertgraph gives (``.NAME.PID.XXXXXXXX.tmp``,
    not a symlink), no process with that id is alive, and nobody holds its lock.
    Returns what was removed.
    """
    return _remove_stale(_folder(target), f".{target.name}.")


def remove_stale_in(folder: Path) -> list[Path]:
    """:func:`remove_stale` for every target in ``folder`` (a cache's entries): same rules, any NAME."""
    return _remove_stale(folder, ".")


def _remove_stale(folder: Path, prefix: str) -> list[Path]:
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        match = _TEMPORARY.search(entry.name[len(prefix) :])
        if match is None or entry.is_symlink() or _alive(int(match["pid"])):
            continue
        if _remove_unlocked(Path(entry.path), entry.is_dir(follow_symlinks=False)):
            removed.append(Path(entry.path))
    return removed


def temporary_file(target: Path) -> tuple[int, str]:
    """A new, locked temporary file beside ``target`` (after removing stale ones): its handle and path."""
    remove_stale(target)
    handle, temporary = tempfile.mkstemp(dir=_folder(target), prefix=_prefix(target), suffix=".tmp")
    _lock(handle)
    return handle, temporary


@contextmanager
def exclusive_lock(path: Path, mode: int = 0o666) -> Iterator[bool]:
    """Hold ``flock`` on ``path`` (made if missing, never through a link) for the ``with`` block,
    so processes take turns; where the file cannot be opened there is no lock (``False``)."""
    try:
        handle = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, mode)
    except OSError:
        yield False
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(handle)


def _lock(handle: int) -> None:
    """Hold ``flock`` on a new temporary entry; where the file system has no locks, the pid still protects it."""
    with suppress(OSError):
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _prefix(target: Path) -> str:
    return f".{target.name}.{os.getpid()}."


def _folder(target: Path) -> Path:
    return target.parent if str(target.parent) else Path(".")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive
    return True


def _remove_unlocked(path: Path, is_dir: bool) -> bool:
    """Remove ``path`` if its lock can be taken (its owner is gone); hold the lock while removing."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | (os.O_DIRECTORY if is_dir else 0)
    try:
        handle = os.open(path, flags)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return False
            raise
        if is_dir:
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        return True
    except OSError:
        return False
    finally:
        os.close(handle)
