"""What torch, transformers and onnxruntime do beside bertgraph's own output, kept out of the way.

A command's stderr is bertgraph's lines alone: the libraries' log records (torch's fake-tensor
tracebacks when a config does not run, transformers' notes) and Python warnings are dropped
while it runs, unless ``--debug`` asks for everything. A run leaves nothing but what the user
named: what the libraries create in the temporary folder on their own, unasked — torch's
empty compiler-cache folder, made when ``torch.export`` imports ``torch._dynamo``, and
onnxruntime's telemetry session file ``.ses``, written when it is imported — is removed
afterwards, when the run made it.
"""

from __future__ import annotations

import getpass
import logging
import os
import re
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path


@contextmanager
def libraries_quiet() -> Iterator[None]:
    """No log record of any library and no Python warning reaches stderr inside the block.

    Process-wide (``logging.disable``), and restored on the way out, so a caller's own logging
    (a Sphinx build calling the command line in-process) is as it was.
    """
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


def library_leftovers() -> list[Path]:
    """Where the libraries put things of their own in the temporary folder: torch's compiler cache
    folder (``$TORCHINDUCTOR_CACHE_DIR``, else ``torchinductor_USER``) and onnxruntime's ``.ses``."""
    folder = Path(tempfile.gettempdir())
    inductor = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    return [Path(inductor) if inductor else folder / f"torchinductor_{_user()}", folder / ".ses"]


def _user() -> str:
    """The user name as torch's ``default_cache_dir`` spells it in the folder's name."""
    try:
        name = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        name = f"uid_{os.getuid()}"
    return re.sub(r'[\\/:*?"<>|]', "_", name)


@contextmanager
def no_leftovers() -> Iterator[None]:
    """Remove what the libraries left in the temporary folder during the block, where it was not
    there before: a folder only while empty (torch would reuse one it had filled), the session file."""
    made = [path for path in library_leftovers() if not os.path.lexists(path)]
    try:
        yield
    finally:
        for path in made:
            with suppress(OSError):
                if path.is_dir() and not path.is_symlink():
                    path.rmdir()  # fails, and keeps it, unless empty
                elif path.is_file() and not path.is_symlink():
                    path.unlink()
