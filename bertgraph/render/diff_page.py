"""Two models compared on one HTML page: the figure inline, then every table of the comparison.

The page runs no script and fetches nothing: its policy allows only its own style sheet (by
hash, so the file stays byte-for-byte reproducible). Every text is escaped for HTML.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Iterable

from bertgraph.graph.compare import Comparison
from bertgraph.render.diff import headline, sections
from bertgraph.render.embed import clean_svg
from bertgraph.render.escape import visible

STYLE = (
    "body{font-family:Helvetica,Arial,sans-serif;margin:1.5rem auto;max-width:60rem;padding:0 1rem;color:#1f2328}"
    "svg{max-width:100%;height:auto}table{border-collapse:collapse;margin:.5rem 0 1rem}"
    "th,td{padding:.2rem .6rem;border-bottom:1px solid #d0d7de;text-align:left;vertical-align:top}"
    "td.number{text-align:right;font-variant-numeric:tabular-nums}"
)


def _text(value: str) -> str:
    return html.escape(visible(value), quote=True)


def policy() -> str:
    """Nothing fetched, no script, only the page's own style sheet."""
    digest = base64.b64encode(hashlib.sha256(STYLE.encode("utf-8")).digest()).decode("ascii")
    return f"default-src 'none'; style-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"


def _lines(comparison: Comparison, svg: str) -> Iterable[str]:
    title = f"{comparison.models[0]} vs {comparison.models[1]}"
    yield "<!DOCTYPE html>"
    yield '<html lang="en">\n<head>\n<meta charset="utf-8">'
    yield '<meta name="viewport" content="width=device-width, initial-scale=1">'
    yield f'<meta http-equiv="Content-Security-Policy" content="{policy()}">'
    yield '<meta name="generator" content="bertgraph">'
    yield f"<title>{_text(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>"
    yield f"<h1>{_text(title)}</h1>\n<p>{_text(headline(comparison))}</p>"
    figure = clean_svg(svg).replace("<svg", f'<svg role="img" aria-label="{_text(title)}"', 1)
    yield f"<figure>\n{figure}\n</figure>"
    for section in sections(comparison):
        yield f"<h2>{_text(section.title[0].upper() + section.title[1:])}</h2>"
        if section.said():
            yield f"<p>{_text(section.said()[0].upper() + section.said()[1:])}.</p>"
        if section.rows:
            yield "<table>"
            yield "<tr>" + "".join(f"<th>{_text(header)}</th>" for header in section.headers) + "</tr>"
            for row in section.rows:
                cells = (
                    f'<td class="number">{_text(cell)}</td>' if right else f"<td>{_text(cell)}</td>"
                    for cell, right in zip(row, section.right)
                )
                yield "<tr>" + "".join(cells) + "</tr>"
            yield "</table>"
        for note in section.notes:
            yield f"<p>Note: {_text(note)}.</p>"
    yield "</body>\n</html>"


def page(comparison: Comparison, svg: str) -> str:
    """The page, with ``svg`` (the figure Graphviz drew) inline."""
    return "\n".join(_lines(comparison, svg)) + "\n"
