"""Writing output files safely: all or nothing, never a partial file over a good one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from bertgraph.errors import BertgraphError


def check_writable(path: str | Path) -> Path:
    """The output path, checked before any work is done.

    Raises:
        BertgraphError: the path is a directory or its folder is missing or read-only.
    """
    target = Path(path)
    if target.is_dir():
        raise BertgraphError(f"{target} is a directory; give a file name such as {target / 'bert.svg'}")
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise BertgraphError(f"cannot write {target}: folder {folder} does not exist; create it first")
    if not os.access(folder, os.W_OK):
        raise BertgraphError(f"cannot write {target}: folder {folder} is not writable")
    if target.exists() and not os.access(target, os.W_OK):
        raise BertgraphError(f"cannot write {target}: the file is read-only")
    return target


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` to a temporary file beside ``path``, then move it into place.

    A failure leaves whatever was at ``path`` untouched and no temporary file behind.
    """
    target = check_writable(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    handle, temporary = tempfile.mkstemp(dir=target.parent or ".", prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(payload)
        if target.exists():
            os.chmod(temporary, target.stat().st_mode & 0o777)
        else:
            os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
