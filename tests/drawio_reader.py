"""Read a draw.io file with mxGraph, the library draw.io itself is built on, inside headless Chromium.

The pinned ``mxgraph`` package lives in ``tests/drawio`` (``npm ci --prefix tests/drawio``); Chromium is
Debian's, driven by :mod:`tests.cdp`. :func:`page` writes one page that decodes the file into an
``mxGraph`` (the codec draw.io uses, ``UserObject`` cells included) and draws it, beside the SVG of the
same figure (hidden), so a test can ask both where each element is.
"""

from __future__ import annotations

import json
from pathlib import Path

DRAWIO_DIR = Path(__file__).resolve().parent / "drawio"
MXGRAPH = DRAWIO_DIR / "node_modules" / "mxgraph" / "javascript"
SETUP_HINT = "npm ci --prefix tests/drawio"

_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>draw.io reading</title>
<script>
  var mxBasePath = "__BASE__", mxImageBasePath = "__BASE__/src/images";
  var mxLoadResources = false, mxLoadStylesheets = false, mxForceIncludes = false;
</script>
<script src="__BASE__/mxClient.min.js"></script>
</head>
<body style="margin:0;background:#ffffff">
<div id="graph" style="position:absolute;left:0;top:0;width:__WIDTH__px;height:__HEIGHT__px;overflow:hidden"></div>
<div id="svg" style="position:absolute;left:0;top:0;visibility:hidden"></div>
<script type="application/json" id="drawio">__DRAWIO__</script>
<script type="application/json" id="svgtext">__SVG__</script>
<script>
window.read = () => {
  const text = JSON.parse(document.getElementById("drawio").textContent);
  const doc = mxUtils.parseXml(text);
  const model = doc.getElementsByTagName("mxGraphModel")[0];
  const graph = new mxGraph(document.getElementById("graph"));
  graph.setHtmlLabels(true);
  graph.foldingEnabled = false;  // draw.io reads collapsible=0; mxGraph alone would draw a fold icon
  // draw.io shows a UserObject's label attribute; plain mxGraph would show the element's name
  graph.convertValueToString = (cell) =>
    mxUtils.isNode(cell.value) ? cell.value.getAttribute("label") || "" : cell.value || "";
  new mxCodec(doc).decode(model, graph.getModel());
  const cells = {};
  for (const [id, cell] of Object.entries(graph.getModel().cells)) {
    const state = graph.view.getState(cell);
    if (!state || id === "0" || id === "1") continue;
    const value = mxUtils.isNode(cell.value) ? cell.value : null;
    cells[id] = {
      x: state.x, y: state.y, width: state.width, height: state.height,
      vertex: Boolean(cell.vertex), edge: Boolean(cell.edge), parent: cell.parent ? cell.parent.id : null,
      source: cell.source ? cell.source.id : null, target: cell.target ? cell.target.id : null,
      points: (state.absolutePoints || []).filter(Boolean).map((p) => [p.x, p.y]),
      classes: value ? value.getAttribute("class") || "" : "", label: graph.convertValueToString(cell),
      style: cell.style || "",
    };
  }
  return cells;
};
window.svgBoxes = () => {
  const holder = document.getElementById("svg");
  const text = JSON.parse(document.getElementById("svgtext").textContent);
  const parsed = new DOMParser().parseFromString(text, "image/svg+xml");
  holder.replaceChildren(document.importNode(parsed.documentElement, true));
  const boxes = {};
  for (const group of holder.querySelectorAll("g.node, g.cluster")) {
    const shape = group.querySelector("polygon, path, ellipse");
    const box = (shape || group).getBBox();  // in Graphviz's own units, y negated
    boxes[group.id] = [box.x, box.y, box.width, box.height];
  }
  return boxes;
};
</script>
</body></html>
"""


def available() -> str | None:
    """Why mxGraph cannot be loaded here, or None."""
    if not (MXGRAPH / "mxClient.min.js").is_file():
        return f"mxGraph is not installed ({MXGRAPH} is missing); run: {SETUP_HINT}"
    return None


def page(folder: Path, drawio: str, svg: str, width: int, height: int) -> Path:
    """A page in ``folder`` that reads ``drawio`` with mxGraph (``read()``) beside ``svg`` (``svgBoxes()``)."""

    def data(text: str) -> str:
        return json.dumps(text).replace("<", "\\u003c")  # nothing in it can end its <script> early

    html = (
        _PAGE.replace("__BASE__", MXGRAPH.as_uri())
        .replace("__WIDTH__", str(width))
        .replace("__HEIGHT__", str(height))
        .replace("__DRAWIO__", data(drawio))
        .replace("__SVG__", data(svg))
    )
    path = folder / "drawio.html"
    path.write_text(html, encoding="utf-8")
    return path
