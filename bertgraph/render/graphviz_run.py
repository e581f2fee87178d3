"""The one place that runs Graphviz: DOT text in, image bytes out.

A missing ``dot`` binary becomes one :class:`RenderError` naming the package to
install; a failed layout carries Graphviz's own message.
"""

from __future__ import annotations

import re

from bertgraph.errors import RenderError

FORMATS = ("svg", "png", "pdf")
INSTALL_HINT = (
    "Graphviz's dot program is not installed; install the graphviz package "
    "(Debian/Ubuntu: apt-get install graphviz, macOS: brew install graphviz)"
)
_PDF_DATE = re.compile(rb"/CreationDate \(D:(\d{14})([^)]*)\)")


def render(dot_source: str, fmt: str) -> bytes:
    """Lay out ``dot_source`` with ``dot`` and return the ``fmt`` bytes (deterministic).

    Raises:
        RenderError: dot is missing or rejects the source.
    """
    import graphviz

    if fmt not in FORMATS:
        raise RenderError(f"unknown image format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    try:
        data = graphviz.pipe("dot", fmt, dot_source.encode("utf-8"), quiet=True)
    except graphviz.ExecutableNotFound as error:
        raise RenderError(INSTALL_HINT) from error
    except graphviz.CalledProcessError as error:
        stderr = (error.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise RenderError(f"Graphviz failed: {stderr[0] if stderr else error}") from error
    return _fixed_pdf_date(data) if fmt == "pdf" else data


def _fixed_pdf_date(data: bytes) -> bytes:
    """Cairo stamps PDFs with the current time; a fixed date of the same length keeps
    the file byte-identical across runs (and its cross-reference offsets valid)."""
    return _PDF_DATE.sub(lambda m: b"/CreationDate (D:20000101000000" + m.group(2) + b")", data)
