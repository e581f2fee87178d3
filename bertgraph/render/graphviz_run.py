"""The one place that runs Graphviz: DOT text in, image bytes out.

A missing ``dot`` binary becomes one :class:`RenderError` naming the package to
install; a failed layout carries Graphviz's own message.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from bertgraph.errors import RenderError

FORMATS = ("svg", "png", "pdf")
INSTALL_HINT = (
    "Graphviz's dot program is not installed; install the graphviz package "
    "(Debian/Ubuntu: apt-get install graphviz, macOS: brew install graphviz)"
)
# Graphviz's layout time grows steeply with edges: measured on 2 cores, about 7 s of CPU at
# 500 edges, 40 s at 620 and 95 s at 734 (bert-large with every op of its 24 layers, which
# the interactive page must still draw); beyond 800 it takes minutes.
MAX_EDGES = 800
_PDF_DATE = re.compile(rb"/CreationDate \(D:(\d{14})([^)]*)\)")


def missing_dot(output: Path | None = None) -> str:
    """The error for a missing ``dot``, with the formats that need no Graphviz."""
    other = f" (-o {output.with_suffix('.dot').name})" if output is not None else ""
    return f"{INSTALL_HINT}; or write DOT{other} or Mermaid (.mmd, .md), which need no Graphviz"


def require_dot(output: Path | None = None) -> None:
    """Fail before any work when ``dot`` is missing: the image could never be drawn.

    Raises:
        RenderError: naming the package to install and the formats that need no Graphviz.
    """
    if shutil.which("dot") is None:
        raise RenderError(missing_dot(output))


def check_size(edges: int) -> None:
    """Refuse a layout Graphviz would spend minutes on.

    Raises:
        RenderError: saying how to get a smaller diagram.
    """
    if edges > MAX_EDGES:
        raise RenderError(
            f"the diagram has {edges:,} edges, and Graphviz takes minutes to lay out more than {MAX_EDGES}: "
            "fold repeated layers (no --unfold), choose a smaller --depth, or write the DOT source (.dot)"
        )


def render(dot_source: str, fmt: str) -> bytes:
    """Lay out ``dot_source`` with ``dot`` and return the ``fmt`` bytes (deterministic).

    ``fmt`` is an image format, or ``json`` (Graphviz's own description of what it drew, for the
    checks that read a drawing back). The layout is dot's; it is drawn from its positions by
    ``neato -n2`` after :func:`~bertgraph.render.untangle.clear_titles` has sent the edges that ran
    through a frame's title round it.

    Raises:
        RenderError: dot is missing or rejects the source.
    """
    from bertgraph.render import untangle

    if fmt not in (*FORMATS, "json"):
        raise RenderError(f"unknown image format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    laid = untangle.framed(_pipe("dot", "dot", dot_source.encode("utf-8")).decode("utf-8"))
    drawn = json.loads(_pipe("neato", "json", laid.encode("utf-8"), "-n2"))
    settled = untangle.clear_titles(laid, drawn).encode("utf-8")
    data = _pipe("neato", fmt, settled, "-n2")
    return _fixed_pdf_date(data) if fmt == "pdf" else data


def _pipe(engine: str, fmt: str, data: bytes, *flags: str) -> bytes:
    """One Graphviz run: ``engine`` with ``flags`` turns ``data`` into ``fmt``."""
    import graphviz

    try:
        return graphviz.pipe(engine, fmt, data, quiet=True, neato_no_op=2 if "-n2" in flags else None)
    except graphviz.ExecutableNotFound as error:
        raise RenderError(missing_dot()) from error
    except graphviz.CalledProcessError as error:
        stderr = (error.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise RenderError(f"Graphviz failed: {stderr[0] if stderr else error}") from error


def laid_out(dot_source: str) -> dict[str, Any]:
    """What bertgraph draws of ``dot_source``, as data (Graphviz's ``-Tjson`` of the settled layout:
    positions, sizes, splines, every drawing operation), read by :mod:`bertgraph.render.layout`, so
    that an editable figure is the same drawing as the SVG.

    Raises:
        RenderError: dot is missing or rejects the source.
    """
    try:
        data = json.loads(render(dot_source, "json"))
    except ValueError as error:  # a dot that writes no JSON (built without it) says so here
        raise RenderError(f"Graphviz gave no layout to read: {error}") from error
    if not isinstance(data, dict):
        raise RenderError("Graphviz gave no layout to read")
    return data


def _fixed_pdf_date(data: bytes) -> bytes:
    """Cairo stamps PDFs with the current time; a fixed date of the same length keeps
    the file byte-identical across runs (and its cross-reference offsets valid)."""
    return _PDF_DATE.sub(lambda m: b"/CreationDate (D:20000101000000" + m.group(2) + b")", data)
