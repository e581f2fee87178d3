"""draw.io files read by mxGraph (the library draw.io is built on) in headless Chromium, against the SVG.

A T5 of our own (4 encoder, 3 decoder layers) at depth 3 — frames four deep, every attention kind —
written by the command line, and the families schematic of it and bert-tiny. mxGraph's codec decodes
each file; every box and frame is a cell where the SVG of the same figure puts it (read with
``getBBox`` from Graphviz's SVG in the same page); boxes sit in their frames' containers; every edge
is attached to its source and target; cells of one role share one style; the screenshot shows the
drawing in its colours.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bertgraph import cli
from bertgraph.render import laid_out_source, schematic
from bertgraph.render.families import write_families
from bertgraph.render.layout import Layout, read_layout
from tests import drawio_reader
from tests.cdp import Browser, file_url
from tests.conftest import require
from tests.editable_models import hostile_bert, t5_folder, t5_graph
from tests.mermaid_browser import chromium_path

pytestmark = [pytest.mark.dot, pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("drawio")]
TOLERANCE = 0.6  # points: both files round to a hundredth, Graphviz's SVG to a tenth or so
# Keys that place one cell (where an edge leaves and enters its boxes, where a frame's title starts).
# A rounded box's corner grows with its size, as Graphviz draws it.
# A box's shape is its own: an op of a role is an ellipse, a module of it a rounded box.
SHAPE = re.compile(r"ellipse;|(shape|perimeter|rounded|absoluteArcSize|aspect)=[^;]*;")
PLACING = re.compile(r"(exit|entry)(X|Y|Perimeter)=[^;]*;|spacing(Left|Top)=[^;]*;|arcSize=[^;]*;")


@dataclass
class Read:
    layout: Layout
    cells: dict[str, dict[str, Any]]
    svg: dict[str, list[float]]
    screenshot: Path
    text: str  # every text mxGraph drew
    markup: int  # elements the labels' text would have made, read as markup


@pytest.fixture(scope="module")
def read(once: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Read]:
    require(chromium_path() is not None, "Chromium is not installed (apt-get install chromium)")
    require(shutil.which("dot") is not None, "Graphviz dot is not installed (apt-get install graphviz)")
    require(drawio_reader.available() is None, str(drawio_reader.available()))
    folder = tmp_path_factory.mktemp("drawio")
    t5 = t5_graph(once, tmp_path_factory)
    model = str(t5_folder(once, tmp_path_factory))
    for fmt in ("drawio", "svg"):
        assert cli.main(["render", model, "--head", "seq2seq-lm", "--depth", "3", "-o", str(folder / f"t5.{fmt}")]) == 0
        write_families([hostile_bert(), t5], folder / f"schematic.{fmt}", fmt, view="schematic")
    sources = {
        "t5": laid_out_source(t5, "drawio", depth=3)[0],
        "schematic": "\n".join(schematic.generate_lines([hostile_bert(), t5])) + "\n",
    }
    found = {}
    with Browser(width=900, height=1100) as browser:
        for name, source in sources.items():
            layout = read_layout(source)
            svg = (folder / f"{name}.svg").read_text(encoding="utf-8")
            drawio = (folder / f"{name}.drawio").read_text(encoding="utf-8")
            page = drawio_reader.page(
                folder, drawio, svg[svg.index("<svg") :], round(layout.width), round(layout.height)
            )
            browser.open(file_url(page))
            browser.wait_for("typeof mxGraph === 'function' && typeof window.read === 'function'")
            cells, boxes = browser.evaluate("window.read()"), browser.evaluate("window.svgBoxes()")
            shown = browser.evaluate(
                "[document.getElementById('graph').textContent, document.querySelectorAll('odd, b b').length]"
            )
            time.sleep(0.3)  # labels are HTML in foreign objects: let them paint
            shot = browser.screenshot(folder / f"{name}.png")
            assert browser.problems() == []
            found[name] = Read(layout, cells, boxes, shot, *shown)
    return found


@pytest.mark.parametrize("name", ["t5", "schematic"])
def test_the_file_decodes_into_every_box_frame_and_edge(read: dict[str, Read], name: str) -> None:
    layout, cells = read[name].layout, read[name].cells
    for box in layout.boxes:
        assert cells[box.id]["vertex"], box.id
        assert cells[box.id]["parent"] == (box.parent or "1"), box.id  # inside its frame's container
        assert cells[box.id]["classes"] == " ".join(box.classes)
    for frame in layout.frames:
        assert cells[frame.id]["vertex"] and cells[frame.id]["parent"] == (frame.parent or "1"), frame.id
    for arrow in layout.arrows:
        cell = cells[arrow.id]
        assert cell["edge"] and (cell["source"], cell["target"]) == (arrow.source, arrow.target), arrow.id
    assert len(layout.frames) >= (6 if name == "t5" else 5) and len(layout.arrows) > 20


@pytest.mark.parametrize("name", ["t5", "schematic"])
def test_every_cell_sits_where_the_svg_puts_it(read: dict[str, Read], name: str) -> None:
    layout, cells = read[name].layout, read[name].cells
    shaped = {box.id for box in layout.boxes if box.shape != "none"} | {frame.id for frame in layout.frames}
    assert shaped <= set(read[name].svg)
    moved = {}
    for ident in shaped:
        x, y, width, height = read[name].svg[ident]  # Graphviz's points, y negated
        cell = cells[ident]
        expected = (x, layout.height + y, width, height)
        drawn = (cell["x"], cell["y"], cell["width"], cell["height"])
        if max(abs(a - b) for a, b in zip(drawn, expected)) > TOLERANCE:
            moved[ident] = (drawn, expected)
    assert moved == {}
    assert len(shaped) > 20


def _on(point: list[float], cell: dict[str, Any], slack: float = 1.0) -> bool:
    x, y = point
    return cell["x"] - slack <= x <= cell["x"] + cell["width"] + slack and (
        cell["y"] - slack <= y <= cell["y"] + cell["height"] + slack
    )


@pytest.mark.parametrize("name", ["t5", "schematic"])
def test_every_edge_leaves_its_source_and_reaches_its_target(read: dict[str, Read], name: str) -> None:
    layout, cells = read[name].layout, read[name].cells
    for arrow in layout.arrows:
        points = cells[arrow.id]["points"]
        source, target = cells[arrow.source], cells[arrow.target]
        assert len(points) >= 3, arrow.id  # through waypoints along Graphviz's spline
        assert _on(points[0], source) and _on(points[-1], target), (arrow.id, points[0], points[-1])
        start = (arrow.points[0][0], layout.height - arrow.points[0][1])
        assert max(abs(a - b) for a, b in zip(points[0], start)) <= 2.0, (arrow.id, points[0], start)
        if arrow.tip is not None:
            tip = (arrow.tip[0], layout.height - arrow.tip[1])
            # mxGraph 4 takes entryPerimeter=0 as set (a string), so it projects the tip onto the outline again
            assert max(abs(a - b) for a, b in zip(points[-1], tip)) <= 2.0, (arrow.id, points[-1], tip)


@pytest.mark.parametrize("name", ["t5", "schematic"])
def test_cells_of_one_role_share_one_style(read: dict[str, Read], name: str) -> None:
    styles: dict[tuple[str, str], set[str]] = {}
    for cell in read[name].cells.values():
        if cell["classes"] and cell["classes"] != "title":  # the title block's texts are no role
            kind = "edge" if cell["edge"] else "vertex"
            look = SHAPE.sub("", PLACING.sub("", cell["style"]))
            styles.setdefault((kind, cell["classes"]), set()).add(look)
    assert {key: found for key, found in styles.items() if len(found) > 1} == {}
    assert len(styles) > 8


def test_labels_are_text_as_written(read: dict[str, Read]) -> None:
    """The schematic names bert-tiny ``tiny & <odd> #1 {model}_é``: drawn as that text, no element made of it."""
    assert "tiny & <odd> #1 {model}_é" in read["schematic"].text and read["schematic"].markup == 0
    assert "cross-attention" in read["schematic"].text and "T5ForConditionalGeneration" in read["t5"].text


def test_the_screenshot_shows_the_drawing_in_its_colours(read: dict[str, Read]) -> None:
    """The schematic drawn by mxGraph: its attention, feed-forward, norm and embedding fills (the
    diagrams' looks per role) are on screen."""
    from PIL import Image

    from bertgraph.render import style

    image = Image.open(read["schematic"].screenshot).convert("RGB")
    counts: dict[tuple[int, int, int], int] = {}
    for pixel in image.getdata():
        counts[pixel] = counts.get(pixel, 0) + 1
    kinds = style.theme("light")["kinds"]
    for kind in ("attention-bidirectional", "attention-causal", "feed-forward", "normalisation", "embedding"):
        fill = kinds[kind].fill
        rgb = tuple(int(fill[i : i + 2], 16) for i in (1, 3, 5))
        assert counts.get(rgb, 0) > 300, (kind, fill)  # boxes' worth of pixels, not a stray one
    assert counts.get((255, 255, 255), 0) < 0.95 * image.width * image.height
