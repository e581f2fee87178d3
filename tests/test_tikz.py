"""TikZ documents compiled by the real pdflatex and read back: text, positions, colours, one style per role.

Three documents, compiled once for the module: bert-tiny with a classifier and a title named with
every character LaTeX reads as syntax (``render`` through :func:`bertgraph.render.write_diagram`),
a T5 of our own with 4 encoder and 3 decoder layers at depth 3 (through the command line), and
the families schematic of both. ``pdftotext -bbox-layout`` reads every box's title back from the
PDF, inside the rectangle Graphviz laid the box out in; ``pdftoppm`` reads each box's fill.
Changing one named colour and compiling again recolours every box of that role and no other.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import unicodedata
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bertgraph import cli
from bertgraph.render import laid_out_source, schematic, write_diagram
from bertgraph.render.layout import Box, Layout, Run, lines, read_layout
from tests.conftest import require
from tests.editable_models import HOSTILE_CLASSIFIER, hostile_bert, t5_folder, t5_graph
from tests.helpers import squash

pytestmark = [pytest.mark.dot, pytest.mark.slow]
XHTML = "{http://www.w3.org/1999/xhtml}"
# What pdflatex prints for characters Computer Modern has no glyph for (render/escape.py tex_text).
NO_GLYPH = re.compile(r"[^\x20-\x7e·×…–—→←≤≥≠±−÷°ßæÆœŒøØłŁıéèêëáàâäóòôöúùûüíìîïñçšžčřåÅÉÖÜ]")


@dataclass(frozen=True)
class Word:
    text: str
    left: float
    top: float
    right: float
    bottom: float
    line: int  # the line pdftotext read it in


@dataclass(frozen=True)
class Compiled:
    """A document, the layout it was drawn from, and what the PDF shows."""

    tex: str
    layout: Layout
    pdf: Path
    words: list[Word]


def pdflatex(tex: Path) -> Path:
    done = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", tex.name],
        cwd=tex.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    log = tex.with_suffix(".log").read_text(errors="replace")
    assert done.returncode == 0, "\n".join(line for line in log.splitlines() if line.startswith("!"))[:2000]
    return tex.with_suffix(".pdf")


def words_of(pdf: Path) -> list[Word]:
    done = subprocess.run(["pdftotext", "-bbox-layout", str(pdf), "-"], capture_output=True, check=True, timeout=60)
    root = ET.fromstring(done.stdout)
    return [
        Word(
            unicodedata.normalize("NFC", w.text or ""),
            *(float(w.get(k, 0)) for k in ("xMin", "yMin", "xMax", "yMax")),
            n,
        )
        for n, line in enumerate(root.iter(f"{XHTML}line"))
        for w in line.iter(f"{XHTML}word")
    ]


def compiled(tex: Path, source: str) -> Compiled:
    pdf = pdflatex(tex)
    return Compiled(tex.read_text(encoding="utf-8"), read_layout(source), pdf, words_of(pdf))


@pytest.fixture(scope="module")
def documents(once: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Compiled]:
    for tool in ("pdflatex", "pdftotext", "pdftoppm", "dot"):
        require(shutil.which(tool) is not None, f"{tool} is not installed (make system)")
    folder = tmp_path_factory.mktemp("tikz")
    found = {}
    bert = hostile_bert()
    write_diagram(bert, folder / "bert.tex", depth=2)
    found["bert"] = compiled(folder / "bert.tex", laid_out_source(bert, "tex", depth=2)[0])
    t5 = t5_graph(once, tmp_path_factory)
    assert cli.main(["render", str(t5_folder(once, tmp_path_factory)), "--head", "seq2seq-lm", "--depth", "3",
                     "-o", str(folder / "t5.tex")]) == 0  # fmt: skip
    found["t5"] = compiled(folder / "t5.tex", laid_out_source(t5, "tex", depth=3)[0])
    from bertgraph.render.families import write_families

    write_families([bert, t5], folder / "schematic.tex", "tex", view="schematic")
    source = "\n".join(schematic.generate_lines([bert, t5])) + "\n"
    found["schematic"] = compiled(folder / "schematic.tex", source)
    return found


def readable(text: str) -> str:
    """What a PDF of ``text`` says: each character Computer Modern lacks as its code point."""
    return NO_GLYPH.sub(lambda m: f"U+{ord(m.group(0)):04X}", text)


def words_in(words: list[Word], box: Box, height: float) -> list[Word]:
    """The words whose centres lie in the box's rectangle (PDF points, y down from the top)."""
    left, right = box.x - box.width / 2 - 1, box.x + box.width / 2 + 1
    top, bottom = height - (box.y + box.height / 2) - 1, height - (box.y - box.height / 2) + 1
    return [w for w in words if left <= (w.left + w.right) / 2 <= right and top <= (w.top + w.bottom) / 2 <= bottom]


def _centre(row: list[Run]) -> float:
    """The middle of a line of runs as Graphviz set it (a run is anchored at its start, middle or end)."""
    starts = [run.x - (run.width / 2 if run.align == "c" else run.width if run.align == "r" else 0) for run in row]
    return (starts[0] + starts[-1] + row[-1].width) / 2


@pytest.mark.parametrize("name", ["bert", "t5", "schematic"])
def test_every_box_title_reads_back_inside_its_box(documents: dict[str, Compiled], name: str) -> None:
    document = documents[name]
    checked = 0
    for box in document.layout.boxes:
        rows = lines(box.runs)
        if not rows:
            continue
        title = " ".join(run.text.strip() for run in rows[0])
        inside = words_in(document.words, box, document.layout.height)
        assert inside, f"{box.id}: nothing drawn inside the box"
        first = min(inside, key=lambda w: w.top).line  # the box's first line, as pdftotext read it
        top_line = " ".join(w.text for w in sorted(inside, key=lambda w: w.left) if w.line == first)
        assert squash(top_line) == squash(readable(title)), (box.id, top_line, title)
        # where Graphviz set it: centred on the run's centre, its letters just above the run's baseline
        words = [w for w in inside if w.line == first]
        centre = (min(w.left for w in words) + max(w.right for w in words)) / 2
        middle = (min(w.top for w in words) + max(w.bottom for w in words)) / 2
        assert abs(centre - _centre(rows[0])) <= 2, (box.id, centre, _centre(rows[0]))
        assert -5 <= middle - (document.layout.height - rows[0][0].y) <= 0, (box.id, middle, rows[0][0].y)
        checked += 1
    assert checked == len([box for box in document.layout.boxes if box.runs]) > 5


def test_latex_syntax_and_unicode_read_back_as_written(documents: dict[str, Compiled]) -> None:
    """The classifier is named ``cls #$%&_{}~^\\ <b>"x" né·×中``: each character as itself, 中 by its code point."""
    text = " ".join(w.text for w in documents["bert"].words)
    assert 'cls #$%&_{}~^\\ <b>"x" né·×U+4E2D' in text
    assert readable(HOSTILE_CLASSIFIER) == 'cls #$%&_{}~^\\ <b>"x" né·×U+4E2D'
    assert "tiny & <odd> #1 {model}_é · BertForSequenceClassification" in text  # the title block


def test_every_box_is_a_named_node_styled_by_its_role(documents: dict[str, Compiled]) -> None:
    """Colours are named definitions before the document; a box's options name its styles and no colour."""
    for document in documents.values():
        preamble, body = document.tex.split("\\begin{document}")
        assert "\\definecolor" not in body and "\\definecolor" in preamble
        named = {name: options for options, name in re.findall(r"\\node\[([^\n]*?)\] \(([^)]+)\) at", body)}
        assert set(named) == {box.id for box in document.layout.boxes}
        styles = re.findall(r"^  ([\w-]+)/\.style=", preamble, re.MULTILINE)
        assert len(styles) == len(set(styles))  # one style per role
        for box in document.layout.boxes:
            options = named[box.id].split(", ")
            assert box.classes and all(c in styles for c in box.classes), (box.id, box.classes)
            assert [o for o in options if o in styles] == list(box.classes), (box.id, options)
            assert not [o for o in options if o.startswith(("fill=", "draw=", "text="))], (box.id, options)


def _pixels(pdf: Path) -> Any:
    from PIL import Image

    subprocess.run(["pdftoppm", "-r", "72", "-png", "-singlefile", str(pdf), str(pdf.with_suffix(""))], check=True)
    return Image.open(pdf.with_suffix(".png")).convert("RGB")


def _fill_at(image: Any, box: Box, height: float) -> tuple[int, int, int]:
    """The colour just inside a box's left side, halfway down (clear of its text and its border)."""
    return tuple(image.getpixel((round(box.x - box.width / 2 + 4), round(height - box.y))))  # type: ignore[no-any-return]


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def _close(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return max(abs(x - y) for x, y in zip(a, b)) <= 3


def test_every_box_is_filled_with_its_role_colour(documents: dict[str, Compiled]) -> None:
    document = documents["t5"]
    image = _pixels(document.pdf)
    boxes = [box for box in document.layout.boxes if box.paint.fill and box.shape in ("box", "ellipse")]
    assert len(boxes) > 20
    wrong = {box.id: _fill_at(image, box, document.layout.height) for box in boxes}
    wrong = {i: c for i, c in wrong.items() if not _close(c, _rgb(document.layout.box(i).paint.fill or ""))}
    assert wrong == {}


def test_one_colour_definition_restyles_every_box_of_its_role(documents: dict[str, Compiled], tmp_path: Path) -> None:
    document = documents["t5"]
    definition = re.search(r"\\definecolor\{kind-causal-fill\}\{HTML\}\{[0-9A-F]{6}\}", document.tex)
    assert definition is not None
    restyled = tmp_path / "restyled.tex"
    restyled.write_text(document.tex.replace(definition.group(0), "\\definecolor{kind-causal-fill}{HTML}{FF0000}"))
    image = _pixels(pdflatex(restyled))
    filled = [b for b in document.layout.boxes if b.shape in ("box", "ellipse") and b.paint.fill]
    causal = [b for b in filled if "kind-causal" in b.classes]
    others = [b for b in filled if "kind-causal" not in b.classes]
    assert causal and others
    assert all(_close(_fill_at(image, b, document.layout.height), (255, 0, 0)) for b in causal)
    assert all(_close(_fill_at(image, b, document.layout.height), _rgb(b.paint.fill or "")) for b in others), (
        "a colour of one role changed another"
    )


def test_the_page_is_the_layout(documents: dict[str, Compiled]) -> None:
    for document in documents.values():
        info = subprocess.run(["pdfinfo", str(document.pdf)], capture_output=True, text=True, check=True).stdout
        size = re.search(r"Page size:\s+([\d.]+) x ([\d.]+) pts", info)
        assert size is not None and re.search(r"^Pages:\s+1$", info, re.MULTILINE)
        assert abs(float(size.group(1)) - document.layout.width) < 0.5
        assert abs(float(size.group(2)) - document.layout.height) < 0.5


def test_the_document_is_the_same_every_time(documents: dict[str, Compiled], tmp_path: Path) -> None:
    write_diagram(hostile_bert(), tmp_path / "again.tex", depth=2)
    assert (tmp_path / "again.tex").read_text(encoding="utf-8") == documents["bert"].tex
