"""Diagrams as pieces of an HTML page: inline SVG, a light/dark switch in CSS, an iframe.

A docs page holds many diagrams next to the theme's own markup, so an inlined SVG loses
its XML prolog, gets ids of its own (``prefix``) and scales with the column. Dark mode
restyles the light drawing with CSS (:func:`dark_rules`) instead of laying it out twice.
"""

from __future__ import annotations

import html
import re

from bertgraph.render import style

_PROLOG = re.compile(r"<\?xml[^>]*\?>|<!DOCTYPE[^>]*>|<!--.*?-->", re.DOTALL)
# Graphviz quotes attribute values with '"' and writes '"' in text as '&quot;', so
# ' id="' only ever starts an attribute.
_ID = re.compile(r'(\sid=")([^"]*")')
_REFERENCE = re.compile(r'(url\(#|href="#)')

# Where docs themes say which colour scheme a page shows (checked in this order):
# Furo, PyData and sphinx-book-theme (data-theme), MkDocs Material (data-md-color-scheme),
# MkDocs' own theme and Bootstrap (data-bs-theme). A theme that says "auto" follows the
# reader's system setting; a theme that says nothing is taken to be light.
DARK_PAGE = ('[data-theme="dark"]', '[data-md-color-scheme="slate"]', '[data-bs-theme="dark"]')
AUTO_PAGE = ('[data-theme="auto"]', '[data-bs-theme="auto"]')


def clean_svg(svg: str) -> str:
    """Graphviz's SVG without the XML declaration, doctype and comments (for inlining).

    >>> clean_svg('<?xml version="1.0"?>\\n<!DOCTYPE svg>\\n<!-- x -->\\n<svg></svg>\\n')
    '<svg></svg>'
    """
    return _PROLOG.sub("", svg).strip()


def inline_svg(svg: str, prefix: str, label: str = "") -> str:
    """An SVG ready to sit inside an HTML page: ids made unique, width following the column.

    >>> print(inline_svg('<svg width="10pt"><g id="node1"></g></svg>', "d1-", "a <b>"))
    <svg role="img" aria-label="a &lt;b&gt;" style="max-width:100%;height:auto" width="10pt"><g id="d1-node1"></g></svg>
    """
    body = _ID.sub(lambda m: f"{m.group(1)}{prefix}{m.group(2)}", clean_svg(svg))
    body = _REFERENCE.sub(lambda m: f"{m.group(1)}{prefix}", body)
    attributes = 'role="img"' + (f' aria-label="{html.escape(label, quote=True)}"' if label else "")
    return body.replace("<svg", f'<svg {attributes} style="max-width:100%;height:auto"', 1)


def dark_rules(scopes: tuple[str, ...]) -> str:
    """CSS that turns a light Graphviz drawing inside any of ``scopes`` into the dark theme.

    CSS rules win over SVG presentation attributes, so each light colour is matched by
    attribute and replaced (:func:`bertgraph.render.style.recolouring`).
    """
    scope = scopes[0] if len(scopes) == 1 else f":is({', '.join(scopes)})"
    rules = []
    for (paint, colour), replacement in sorted(style.recolouring().items()):
        if paint == "text":
            rules.append(f'{scope} text[fill="{colour}"]{{fill:{replacement}}}')
        elif paint == "stroke":
            rules.append(f'{scope} [stroke="{colour}"]{{stroke:{replacement}}}')
        else:
            rules.append(f'{scope} :not(text)[fill="{colour}"]{{fill:{replacement}}}')
    return "\n".join(rules)


def auto_theme_style(scope_class: str) -> str:
    """A ``<style>`` element: diagrams in ``.scope_class`` turn dark where the page is dark."""
    explicit = tuple(f"{page} .{scope_class}" for page in DARK_PAGE)
    follows_system = tuple(f"{page} .{scope_class}" for page in AUTO_PAGE)
    return (
        "<style>\n"
        + dark_rules(explicit)
        + "\n@media (prefers-color-scheme: dark) {\n"
        + dark_rules(follows_system)
        + "\n}\n</style>"
    )


def iframe(page: str, title: str, height: str = "36rem") -> str:
    """A self-contained page shown in an iframe (``srcdoc``), its scripts kept apart from the host page.

    The element is one line (newlines as ``&#10;``), so Markdown passes it through whole.

    >>> iframe("<p>\\"x\\" & y</p>", "t")[:60]
    '<iframe class="bertgraph-page" title="t" sandbox="allow-scri'
    """
    return (
        f'<iframe class="bertgraph-page" title="{html.escape(title, quote=True)}" sandbox="allow-scripts" '
        f'loading="lazy" style="width:100%;height:{height};border:1px solid #8c959f66;border-radius:6px" '
        f'srcdoc="{html.escape(page, quote=True).replace(chr(10), "&#10;")}"></iframe>'
    )


def preformatted(text: str, css_class: str = "bertgraph-table") -> str:
    """Plain text (a table) as an HTML ``<pre>`` block.

    >>> preformatted("a <b> & c")
    '<pre class="bertgraph-table">a &lt;b&gt; &amp; c</pre>'
    """
    return f'<pre class="{css_class}">{html.escape(text, quote=False)}</pre>'
