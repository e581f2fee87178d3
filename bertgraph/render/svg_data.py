"""Graphviz's SVG as plain data, for a viewer that builds the drawing with DOM calls.

The interactive page never hands markup to the browser's HTML parser (its Content-Security-Policy
requires Trusted Types, so ``innerHTML`` is refused outright): each depth's drawing travels as
nested lists, ``[tag, {attribute: value}, child, …]`` with text children as strings, and the
viewer creates every element with ``createElementNS`` and every text with a text node. A
drawing holds only the elements Graphviz writes for bertgraph's diagrams; anything else (a
script, a link, an event handler) is refused here rather than carried into a page.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
# What Graphviz writes for a diagram: groups, shapes, text, tooltips (an <a> without a link),
# and gradients for two-colour fills. The viewer refuses every other tag too.
TAGS = frozenset(
    {
        "svg", "g", "title", "text", "tspan", "path", "polygon", "polyline", "ellipse", "circle",
        "rect", "line", "a", "defs", "linearGradient", "radialGradient", "stop",
    }
)  # fmt: skip
# Whitespace is kept only where it is text a reader sees.
_TEXT_TAGS = frozenset({"title", "text", "tspan"})


class DrawingError(ValueError):
    """The SVG holds something a page's drawing must not carry."""


def svg_data(svg: str) -> list[Any]:
    """``svg`` (one ``<svg>`` element, without prolog) as ``[tag, attributes, *children]``.

    >>> svg_data('<svg xmlns="http://www.w3.org/2000/svg" width="8pt"><text x="1">a &lt;b&gt;</text>\\n</svg>')
    ['svg', {'width': '8pt'}, ['text', {'x': '1'}, 'a <b>']]
    """
    if "<!" in svg:  # a doctype or a comment: clean_svg removes both; entities would come with a doctype
        raise DrawingError("the drawing still has a doctype or comment")
    return _element(ET.fromstring(svg))


def _element(element: ET.Element) -> list[Any]:
    tag = _local(element.tag, SVG_NS)
    if tag not in TAGS:
        raise DrawingError(f"a drawing has no <{tag}> element")
    node: list[Any] = [tag, {_attribute(name): value for name, value in element.attrib.items()}]
    keep_space = tag in _TEXT_TAGS
    if element.text and (keep_space or element.text.strip()):
        node.append(element.text)
    for child in element:
        node.append(_element(child))
        if child.tail and (keep_space or child.tail.strip()):
            node.append(child.tail)
    return node


def _local(name: str, namespace: str) -> str:
    prefix = "{" + namespace + "}"
    if not name.startswith(prefix):
        raise DrawingError(f"a drawing has no element {name!r} outside SVG")
    return name[len(prefix) :]


def _attribute(name: str) -> str:
    if name.startswith("{" + XLINK_NS + "}"):
        local = name[len(XLINK_NS) + 2 :]
        if local != "title":  # a tooltip; xlink:href would be a link
            raise DrawingError(f"a drawing has no attribute xlink:{local}")
        return "xlink:title"
    if name.startswith("{") or name.lower().startswith("on") or name.lower() == "href" or name == "style":
        raise DrawingError(f"a drawing has no attribute {name!r}")
    return name
