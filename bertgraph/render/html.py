"""One self-contained interactive HTML page of a model: every depth, pan and zoom, search, details.

Each depth is laid out by Graphviz here, at render time; the page carries the drawings
(as plain data, :mod:`bertgraph.render.svg_data`; gzip, base64) and a JSON record of every
node, and a small viewer written for this page (``assets/viewer.js``, no third-party code)
shows them. The page makes no network request, works from ``file://`` and inside an iframe,
and is byte-for-byte the same for the same input. Its Content-Security-Policy forbids any
fetch, runs only the viewer (by the hash of its text) and no inline handler, and requires
Trusted Types, so no string can reach an HTML parser.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import json
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import networkx as nx

from bertgraph.files import write_atomic
from bertgraph.graph import schema as g
from bertgraph.graph.views import display_name, view
from bertgraph.render import dot, embed, figures, graphviz_run, svg_data
from bertgraph.render.diagram import build, lookup_path
from bertgraph.render.escape import shown_data
from bertgraph.render.ids import legend_classes
from bertgraph.render.style import KIND_NAMES

DEPTHS = (0, 1, 2, 3, 4)
DEPTH_NAMES = ("model", "parts", "layers", "inside a layer", "operators")
THEMES = ("auto", "light", "dark")
# Above this many nodes a drawing places edge labels after layout instead of giving them
# ranks of their own: bert-large unfolded lays out four to eight times faster (depth 3:
# 78 s → 10 s), with labels that may sit less neatly.
LARGE_DRAWING = 150
# Attributes the panel shows under their own headings; any other number on a node (a cost
# figure a later pass adds) is listed as it is.
_KNOWN = frozenset(
    {
        g.KIND,
        g.OP,
        g.TARGET,
        g.MODULE,
        g.MODULE_TYPE,
        g.SHAPE,
        g.DTYPE,
        g.PARAMS,
        g.PARAM_NAMES,
        g.SHARED_PARAMS,
        g.REPEAT,
        g.ORDER,
        g.OWN_OPS,
        g.OPS,
        # Facts, not figures: argument literals and attention heads are no cost.
        g.LITERALS,
        g.WINDOW,
        g.Q_HEADS,
        g.KV_HEADS,
        g.CALL,
    }
)
# What each cost figure is, in words, and its unit; listed in this order, any other after them.
COST_WORDS: dict[str, tuple[str, str]] = {
    g.MATMUL_FLOPS: ("matrix-multiply FLOPs", "FLOPs"),
    g.OTHER_FLOPS: ("other FLOPs (element-wise, norms, softmax)", "FLOPs"),
    g.ACTIVATION_BYTES: ("activation bytes written", "bytes"),
    g.SAVED_BYTES: ("bytes kept for the backward pass (training)", "bytes"),
    g.PARAM_BYTES: ("parameter bytes", "bytes"),
}


def _asset(name: str) -> str:
    return resources.files("bertgraph.render").joinpath("assets", name).read_text(encoding="utf-8")


def script_json(data: Any) -> str:
    """JSON that is safe inside a ``<script>`` element: no ``<``, ``>``, ``&`` or line separators.

    >>> script_json({"name": "</script><!--"})
    '{"name":"\\\\u003c/script\\\\u003e\\\\u003c!--"}'
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    for char, code in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, code)
    return text


def packed(data: Any) -> str:
    """JSON, gzipped (no timestamp, so the bytes are stable) and base64-encoded."""
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def _numbers(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    return isinstance(value, dict) and bool(value) and all(_numbers(v) for v in value.values())


def _cost_figures(graph: nx.DiGraph, data: dict[str, Any]) -> dict[str, Any]:
    """The numbers on a node besides the known ones; cost polynomials evaluated at the example size."""
    from bertgraph.graph.costbase import CostError, evaluate, sizes_for
    from bertgraph.graph.poly import Poly, PolyError

    found = {key: value for key, value in data.items() if key not in _KNOWN and _numbers(value)}
    sizes = sizes_for(graph)
    for key in g.POLY_ATTRS:
        if isinstance(data.get(key), str):
            try:
                found[key] = evaluate(Poly.parse(data[key]), sizes)
            except (CostError, PolyError):
                continue
    return dict(sorted(found.items()))


def _words(key: str) -> tuple[str, str]:
    """What a cost figure is called and its unit; a figure a later pass adds is named from its key."""
    if key in COST_WORDS:
        return COST_WORDS[key]
    words = key.replace("_", " ").replace("flops", "FLOPs")
    unit = "bytes" if words.endswith("bytes") else "FLOPs" if words.endswith("FLOPs") else ""
    return words, unit


def cost_rows(found: dict[str, Any]) -> list[list[Any]]:
    """``[words, number, unit]`` for each figure, the known ones first; a figure with parts has a row per part.

    >>> cost_rows({"memory": {"peak_bytes": 8}, "matmul_flops": 512})
    [['matrix-multiply FLOPs', 512, 'FLOPs'], ['memory · peak bytes', 8, 'bytes']]
    """
    order = list(COST_WORDS)
    rows = []
    for key in sorted(found, key=lambda k: (order.index(k) if k in order else len(order), k)):
        value = found[key]
        words, unit = _words(key)
        if isinstance(value, dict):
            rows += [[f"{words} · {part}", number, part_unit] for part, number, part_unit in cost_rows(value)]
            continue
        rows.append([words, value, unit])
    return rows


def _tensors(graph: nx.DiGraph, data: dict[str, Any], repeat: int) -> list[list[Any]]:
    """``[name, shape, count]`` of the parameters a node owns; one instance when it stands for a fold."""
    rows = {row["name"]: row for row in g.parameter_rows(graph)}
    names = list(data.get(g.PARAM_NAMES, []))
    if repeat > 1:
        first = lookup_path(data.get(g.MODULE, ""))
        own = [name for name in names if name.startswith(first + ".")]
        names = own or names
    return [[name, rows[name]["shape"], rows[name]["numel"]] for name in names if name in rows]


def node_details(
    graph: nx.DiGraph, shown: nx.DiGraph, node_id: str, title: str, kind: str, kind_name: str = ""
) -> dict[str, Any]:
    """What the side panel says about one drawn node (plain data; ``kind_name`` is the legend's word for ``kind``)."""
    data = shown.nodes[node_id]
    backbone = graph.graph.get(g.G_BACKBONE, "")
    module = data.get(g.MODULE, "")
    repeat = int(data.get(g.REPEAT, 1))
    info = g.module_info(graph, lookup_path(module))
    inputs = sorted({figures.shape(e.get(g.SHAPE, [])) for _, _, e in shown.in_edges(node_id, data=True)})
    details: dict[str, Any] = {
        "title": title,
        "kind": kind,
        "kind_name": kind_name,
        "role": data.get(g.KIND, ""),
        "module": module,
        "path": display_name(module, backbone),
        "type": data.get(g.MODULE_TYPE) or info.get("type", ""),
        "sizes": info.get("sizes", ""),
        "op": data.get(g.TARGET) or data.get(g.OP, ""),
        "ops": [op for op in data.get(g.OPS, []) if op],
        "shape": figures.shape(data.get(g.SHAPE, [])),
        "dtype": data.get(g.DTYPE, ""),
        "inputs": inputs,
        "params": int(data.get(g.PARAMS, 0)),
        "repeat": repeat,
        "tensors": _tensors(graph, data, repeat),
        "shared": list(data.get(g.SHARED_PARAMS, [])),
        "cost": cost_rows(_cost_figures(graph, data)),
    }
    return {key: value for key, value in details.items() if value not in ("", [], {}, None)}


def _depth_records(
    graph: nx.DiGraph, depth: int, fold: bool, compare: nx.DiGraph | None, edge_labels: str = "changes"
) -> tuple[str, dict[str, Any]]:
    """The DOT source of one depth and the details of its nodes, keyed by the stable id each node's SVG group has."""
    diagram = build(graph, depth, fold, compare, edge_labels=edge_labels)
    ids: dict[str, str] = {}
    large = len(diagram.nodes) > LARGE_DRAWING
    source = "\n".join(dot.generate_lines(diagram, "light", edge_xlabels=large, element_ids=ids)) + "\n"
    sides = {"": graph} if compare is None else {"a:": graph, "b:": compare}
    shown = {prefix: view(side, depth, fold=fold) for prefix, side in sides.items()}
    nodes: dict[str, Any] = {}
    for node in diagram.nodes:
        prefix = node.id[:2] if compare is not None else ""
        side_graph, side_view = sides[prefix], shown[prefix]
        words = diagram.kind_name(node.kind) if node.kind in KIND_NAMES else ""
        record = node_details(side_graph, side_view, node.id[len(prefix) :], node.title, node.kind, words)
        nodes[ids[node.id]] = record
    graphviz_run.check_size(len(diagram.edges))
    record = {"title": diagram.title, "subtitle": diagram.subtitle, "nodes": nodes, "sizes": example_words(graph)}
    return source, shown_data(record)


def example_words(graph: nx.DiGraph) -> str:
    """The example size the cost figures are for, in words.

    >>> example_words(nx.DiGraph(example={"batch": 1, "seq": 128, "tgt": 128}))
    'batch 1, sequence length 128, decoder length 128'
    """
    from bertgraph.graph.costbase import DECODER, sizes_for

    names = {"seq": "sequence length", "sequence": "sequence length", DECODER: "decoder length"}
    return ", ".join(f"{names.get(name, name)} {value}" for name, value in sizes_for(graph).items())


def _layouts(sources: list[str]) -> list[list[Any]]:
    """Lay out every depth (the ``dot`` processes run side by side); each drawing as data."""
    with ThreadPoolExecutor(max_workers=len(sources)) as pool:
        images = list(pool.map(lambda source: graphviz_run.render(source, "svg"), sources))
    return [svg_data.svg_data(embed.clean_svg(legend_classes(image.decode("utf-8")))) for image in images]


def generate_html(
    graph: nx.DiGraph,
    depth: int = 2,
    fold: bool = True,
    theme: str = "auto",
    compare: nx.DiGraph | None = None,
    edge_labels: str = "changes",
    css: str = "",
) -> str:
    """The interactive page of ``graph`` (beside ``compare`` when given), opening at ``depth``.

    ``edge_labels`` (``shapes``, ``changes``, ``none``) says which edges show their shape, at every depth;
    ``css`` restyles the drawings (:mod:`bertgraph.render.restyle`, scoped to the drawing's canvas).
    """
    if theme not in THEMES:
        raise ValueError(f"unknown theme {theme!r}; choose one of: {', '.join(THEMES)}")
    records = [_depth_records(graph, level, fold, compare, edge_labels) for level in DEPTHS]
    drawings = _layouts([source for source, _ in records])
    levels = []
    for level, ((_, record), drawing) in enumerate(zip(records, drawings, strict=True)):
        levels.append({"depth": level, "name": DEPTH_NAMES[level], "bundle": packed({**record, "drawing": drawing})})
    title = records[min(depth, len(DEPTHS) - 1)][1]["title"]
    data = {"depth": min(depth, len(DEPTHS) - 1), "levels": levels, "title": title}
    return "".join(_page(title, theme, data, css))


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def content_security_policy(script: str, style_sheet: str) -> str:
    """The page's policy: nothing fetched, only ``script`` and ``style_sheet`` (by hash), Trusted Types required.

    A hash rather than a nonce keeps the file reproducible; with it no inline handler or
    other script runs, and ``require-trusted-types-for`` makes the browser refuse any string
    given to ``innerHTML`` and the like (the viewer builds every element itself).
    """
    return "; ".join(
        (
            "default-src 'none'",
            f"script-src '{_sha256(script)}'",
            f"style-src '{_sha256(style_sheet)}'",
            "base-uri 'none'",
            "form-action 'none'",
            "require-trusted-types-for 'script'",
            "trusted-types 'none'",
        )
    )


def _page(title: str, theme: str, data: dict[str, Any], css: str = "") -> Iterable[str]:
    from bertgraph.render.restyle import scoped

    style_sheet = "".join(
        (
            "\n",
            _asset("viewer.css"),
            embed.dark_rules((':root[data-theme="dark"] #canvas',)) + "\n",
            "@media (prefers-color-scheme: dark) {\n",
            embed.dark_rules((':root[data-theme="auto"] #canvas',)) + "\n}\n",
            # the user's sheet last, so it wins over the viewer's and the dark theme's rules of equal weight
            scoped(css, "#canvas") + "\n" if css.strip() else "",
        )
    )
    script = f"\n{_asset('viewer.js')}"
    policy = content_security_policy(script, style_sheet)
    yield "<!doctype html>\n"
    yield f'<html lang="en" data-theme="{theme}">\n<head>\n<meta charset="utf-8">\n'
    yield '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
    yield f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n'
    yield '<meta name="generator" content="bertgraph">\n'
    yield f"<title>{html.escape(title, quote=False)}</title>\n<style>{style_sheet}</style>\n</head>\n<body>\n"
    yield _asset("viewer.html")
    yield f'<script type="application/json" id="bertgraph-data">{script_json(data)}</script>\n'
    yield f"<script>{script}</script>\n</body>\n</html>\n"


def write_html(graph: nx.DiGraph, path: str | Path, **options: Any) -> Path:
    return write_atomic(path, generate_html(graph, **options))
