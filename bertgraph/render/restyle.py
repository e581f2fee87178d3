"""A style sheet of the user's over a drawing: the restyling hook of SVGs, pages and docs.

Every box, frame and arrow Graphviz draws for bertgraph carries a stable id and classes naming
its role (:mod:`bertgraph.render.ids`: ``role-attention kind-causal``, ``cluster-module``,
``edge-residual``), so a style sheet restyles a figure by role. CSS rules win over the
colours Graphviz writes as presentation attributes::

    .role-attention > path, .role-attention > ellipse { fill: #fde0dd; stroke: #c51b8a; }
    .edge-residual > path { stroke-dasharray: 2 2; }

``render --css FILE`` puts the sheet inside the SVG (or the page's style sheet), the Sphinx
directive's and MkDocs fence's ``css`` option inside the docs page, scoped to that one drawing.
A drawing fetches nothing, so a sheet that would (``@import``, ``url(…)``) is refused, and so is
text that could end the element it sits in (``<``, ``\\``, ``]]>``).
"""

from __future__ import annotations

import re
from pathlib import Path

from bertgraph.errors import BertgraphError

MAX_BYTES = 256 * 1024
# CSS that fetches: imports and the functions that take a URL (a string in image-set() is one).
_FETCHES = re.compile(
    r"@import|(?<![\w-])(url|src|image|image-set|-webkit-image-set|cross-fade|element)\(", re.IGNORECASE
)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u202a-\u202e\u2066-\u2069]")


class StyleSheetError(BertgraphError):
    """A style sheet bertgraph will not put into a drawing."""


def check_style_sheet(text: str, where: str = "the style sheet") -> str:
    """``text`` when it can sit in an SVG ``<style>`` element and a page without fetching anything.

    Raises:
        StyleSheetError: naming ``where`` and the line of the first thing refused.

    >>> check_style_sheet(".role-attention > path { fill: #fde0dd; }")
    '.role-attention > path { fill: #fde0dd; }'
    >>> check_style_sheet("a {}\\n@import 'x.css';", "print.css")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bertgraph.render.restyle.StyleSheetError: print.css line 2: @import fetches a file, ...
    """
    checks = (
        (_FETCHES, "{0} fetches a file, and a drawing fetches nothing; keep to colours, lines and fonts"),
        (re.compile(r"<"), "'<' cannot stand in a style sheet inside a drawing (it could end the element)"),
        (
            re.compile(r"\\"),
            "a backslash escape cannot stand in a style sheet inside a drawing; write the text as it is",
        ),
        (re.compile(r"\]\]>"), "']]>' cannot stand in a style sheet inside a drawing"),
        (_CONTROL, "a control or bidi character cannot stand in a style sheet (U+{1:04X})"),
    )
    for pattern, message in checks:
        match = pattern.search(text)
        if match:
            line = text.count("\n", 0, match.start()) + 1
            found = match.group(0)
            shown = found + "…)" if found.endswith("(") else found
            raise StyleSheetError(f"{where} line {line}: " + message.format(shown, ord(found[0])))
    return text


def read_style_sheet(path: str | Path) -> str:
    """The checked text of the style sheet at ``path`` (UTF-8, at most 256 KB).

    Raises:
        StyleSheetError: the file cannot be read, is too large, is not UTF-8, or is refused.
    """
    path = Path(path)
    try:
        with path.open("rb") as file:
            data = file.read(MAX_BYTES + 1)
    except OSError as error:
        raise StyleSheetError(f"cannot read the style sheet {path}: {error.strerror or error}") from None
    if len(data) > MAX_BYTES:
        raise StyleSheetError(
            f"the style sheet {path} is over {MAX_BYTES // 1024} KB; a drawing's style sheet is short"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise StyleSheetError(f"the style sheet {path} is not UTF-8 text") from None
    return check_style_sheet(text, path.name)


def style_element(css: str) -> str:
    """A ``<style>`` element for inside an SVG (XML, or HTML's inline SVG: CDATA reads the same in both).

    >>> style_element("a > b { fill: red; }")
    '<style type="text/css"><![CDATA[\\na > b { fill: red; }\\n]]></style>'
    """
    return f'<style type="text/css"><![CDATA[\n{check_style_sheet(css).strip()}\n]]></style>'


_SVG_OPEN = re.compile(r"<svg\b[^>]*>")


def restyled_svg(svg: str, css: str) -> str:
    """Graphviz's SVG with ``css`` as its first child (after it, the drawing: CSS beats its colours).

    >>> restyled_svg('<?xml version="1.0"?>\\n<svg width="1pt">\\n<g/></svg>', ".x{}")
    '<?xml version="1.0"?>\\n<svg width="1pt">\\n<style type="text/css"><![CDATA[\\n.x{}\\n]]></style>\\n<g/></svg>'
    """
    if not css.strip():
        return svg
    opening = _SVG_OPEN.search(svg)
    if opening is None:
        raise StyleSheetError("the drawing has no <svg> element to restyle")
    return svg[: opening.end()] + "\n" + style_element(css) + svg[opening.end() :]


def scoped(css: str, scope: str) -> str:
    """``css`` applied within ``scope`` only (CSS nesting): a docs page holds other drawings and the theme.

    >>> scoped(".role-head > path { fill: red; }", ".bertgraph-css-1")
    '.bertgraph-css-1 {\\n.role-head > path { fill: red; }\\n}'
    """
    return f"{scope} {{\n{check_style_sheet(css).strip()}\n}}"
