"""A laid-out drawing as a standalone LaTeX document with one TikZ picture.

The picture is drawn from :class:`~bertgraph.render.layout.Layout` — Graphviz's coordinates,
the same the SVG uses — so it shows what the SVG shows, where the SVG shows it. For a paper:

- every colour is a named ``xcolor`` definition at the top (``role-attention-fill``, …);
- every role is one TikZ style (``role-attention``, ``kind-causal``, ``cluster-module``,
  ``edge-residual``, …) that sets its colours, lines and arrowheads, so a figure is restyled
  in one place; a box's node is named by its stable id (``bert-encoder-layer-0-11``);
- text is in the document's font (no font package: a paper's own font takes over when the
  picture is copied into it), at the sizes Graphviz laid it out with, every label escaped
  by :func:`~bertgraph.render.escape.tex_text`.

It compiles with pdflatex from a basic TeX Live (the ``latex-base``, ``latex-recommended`` and
``pictures`` collections: ``article``, ``geometry``, ``fix-cm``, TikZ).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

from bertgraph.render.escape import tex_text
from bertgraph.render.layout import Arrow, Box, Frame, Layout, Mark, Paint, Point, Run, lines, number
from bertgraph.version import __version__

# Classes that change a look rather than make one: drawn over the role's style.
MODIFIERS = ("added",)
LINE_HEIGHT = 1.2  # baseline skip per point of font size


@dataclass
class _Look:
    """One style: the paint and text colour of the elements whose last class it is."""

    paint: Paint
    text: str | None
    detail: str | None = None  # the colour of a box's other lines (grey detail under a title)


@dataclass
class _Palette:
    """Colour names, each defined once: a role's own (``role-head-fill``), or one by value."""

    names: dict[str, str] = field(default_factory=dict)  # name → "#rrggbb"

    def name(self, wanted: str, value: str) -> str:
        candidate, number = wanted, 2
        while self.names.get(candidate, value) != value:
            candidate, number = f"{wanted}-{number}", number + 1
        self.names[candidate] = value
        return candidate

    def of(self, value: str) -> str:
        """The name of a colour no role owns (a title's text, a swatch): its value spelt out, so
        restyling a role never recolours the title."""
        return self.name(f"colour-{value.lstrip('#')}", value)


def _owner(classes: tuple[str, ...]) -> str | None:
    """The class whose style draws an element: its most specific one (a kind over a role, a heat bin over both)."""
    own = [name for name in classes if name not in MODIFIERS]
    return own[-1] if own else None


def _first_text(runs: tuple[Run, ...]) -> str | None:
    return runs[0].colour if runs else None


class _Styles:
    """The looks of one drawing: a style per owning class, named colours for each."""

    def __init__(self, layout: Layout) -> None:
        self.palette = _Palette()
        self.looks: dict[str, _Look] = {}
        self.modifiers: dict[str, str] = {}  # modifier → the stroke colour name it sets
        elements: list[Frame | Box | Arrow] = [*layout.frames, *layout.boxes, *layout.arrows]
        # A look is taken from an element without modifiers where there is one (a head box is
        # always highlighted, a changed attention block only in a comparison).
        for plain in (True, False):
            for element in elements:
                owner = _owner(element.classes)
                modified = any(name in MODIFIERS for name in element.classes)
                if owner is None or owner in self.looks or modified == plain:
                    continue
                text = _first_text(element.runs)
                details = [run.colour for run in element.runs[1:] if run.colour != text]
                self.looks[owner] = _Look(element.paint, text, details[0] if details else None)
        for element in elements:
            for name in element.classes:
                if name in MODIFIERS and name not in self.modifiers and element.paint.stroke:
                    self.modifiers[name] = self.palette.name(f"{name}-draw", element.paint.stroke)
        self.colour_names: dict[str, dict[str, str]] = {}
        for owner, look in self.looks.items():
            names = {}
            for part, value in (
                ("fill", look.paint.fill),
                ("draw", look.paint.stroke),
                ("text", look.text),
                ("detail", look.detail),
            ):
                if value:
                    names[part] = self.palette.name(f"{owner}-{part}", value)
            self.colour_names[owner] = names

    def definitions(self) -> Iterable[str]:
        for name, value in self.palette.names.items():
            yield f"\\definecolor{{{name}}}{{HTML}}{{{value.lstrip('#').upper()}}}"

    def style_lines(self, layout: Layout) -> Iterable[str]:
        heads = {_owner(a.classes): a.head for a in layout.arrows if a.tip is not None}
        yield "  bertgraph text/.style={inner sep=0pt, outer sep=0pt},"
        # baselines exactly a baseline skip apart, however tall a line's letters (lines set as Graphviz sets them)
        yield "  bertgraph box/.style={bertgraph text, align=center, execute at begin node={\\lineskiplimit=-1000pt}},"
        for owner, look in self.looks.items():
            names = self.colour_names[owner]
            options = [
                f"fill={names['fill']}" if "fill" in names else "",
                f"draw={names['draw']}" if "draw" in names else "",
            ]
            options += [f"text={names['text']}" if "text" in names else ""]
            if look.paint.stroke:
                options.append(f"line width={number(look.paint.width)}bp")
            if look.paint.dash != "solid":
                options.append(look.paint.dash)
            if owner in heads:
                length, width = heads[owner]
                options.append(f"-{{Latex[length={number(length)}bp, width={number(width)}bp]}}")
            yield f"  {owner}/.style={{{', '.join(option for option in options if option)}}},"
        for modifier, name in self.modifiers.items():
            yield f"  {modifier}/.style={{draw={name}}},"
        # a class whose elements all take their colours from a more specific one (a layer's from its
        # attention kind) still has its style: a place for what the role shares (a line width, a font)
        for name in layout.looks():
            if name not in self.looks and name not in self.modifiers:
                yield f"  {name}/.style={{}},"

    def overrides(self, element: Frame | Box | Arrow) -> list[str]:
        """Options an element needs beyond its styles: where its paint differs from its role's."""
        owner = _owner(element.classes)
        look = self.looks.get(owner or "")
        paint = element.paint
        expected = look.paint if look else Paint(None, None, 0.0, "solid")
        modified_stroke = next(
            (self.palette.names[self.modifiers[m]] for m in MODIFIERS if m in element.classes and m in self.modifiers),
            None,
        )
        options = []
        if paint.fill != expected.fill:
            options.append(f"fill={self.palette.of(paint.fill)}" if paint.fill else "fill=none")
        if paint.stroke != (modified_stroke or expected.stroke):
            options.append(f"draw={self.palette.of(paint.stroke)}" if paint.stroke else "draw=none")
        if paint.stroke and paint.width != expected.width:
            options.append(f"line width={number(paint.width)}bp")
        if paint.dash != expected.dash:
            options.append(paint.dash)
        return options

    def styles_of(self, element: Frame | Box | Arrow) -> list[str]:
        return list(element.classes)

    def run_colour(self, run: Run, owner: str | None, first: bool) -> str | None:
        """The ``\\color`` a run needs inside its element (None: the element's text colour)."""
        look = self.looks.get(owner or "")
        if look is not None and run.colour == look.text:
            return None
        if look is not None and run.colour == look.detail and not first:
            return self.colour_names[owner or ""]["detail"]
        return self.palette.of(run.colour)


def _run_text(run: Run, colour: str | None) -> str:
    size = number(run.size)
    switches = f"\\fontsize{{{size}}}{{{number(run.size * LINE_HEIGHT)}}}\\selectfont"
    switches += "\\bfseries" if run.bold else ""
    switches += "\\itshape" if run.italic else ""
    switches += f"\\color{{{colour}}}" if colour else ""
    return f"{{{switches} {tex_text(run.text.strip())}}}"


def _at(point: Point) -> str:
    return f"({number(point[0])},{number(point[1])})"


def _fit(row: list[Run], text: str) -> str:
    """A line of text at its size, narrowed only where the document's font needs more room than
    Graphviz measured for it (``\\bgfit``, defined in the preamble): the layout stays as laid out."""
    width = row[-1].x + row[-1].width - row[0].x if row else 0.0
    return f"\\bgfit{{{number(width)}bp}}{{{text}}}"


def _options(*groups: list[str]) -> str:
    return ", ".join(option for group in groups for option in group if option)


def _box_lines(box: Box, styles: _Styles) -> Iterable[str]:
    owner = _owner(box.classes)
    rows = lines(box.runs)
    texts = [
        _fit(
            row,
            "".join(
                _run_text(run, styles.run_colour(run, owner, index == 0 and column == 0))
                for column, run in enumerate(row)
            ),
        )
        for index, row in enumerate(rows)
    ]
    # Lines as far apart as Graphviz set them (its HTML labels set lines a font size apart, tighter
    # than TeX's leading): the node's baseline skip is the smallest gap, a wider one adds the rest.
    gaps = [above[0].y - below[0].y for above, below in itertools.pairwise(rows)]
    pitch = min(gaps, default=rows[0][0].size if rows else 10.0)
    content = texts[0] if texts else ""
    for gap, text in zip(gaps, texts[1:]):
        content += (f"\\\\[{number(gap - pitch)}bp]" if gap - pitch >= 0.05 else "\\\\") + text
    shape = {"ellipse": "ellipse", "circle": "circle"}.get(box.shape, "rectangle")
    geometry = [shape, f"minimum width={number(box.width)}bp", f"minimum height={number(box.height)}bp"]
    geometry.append(f"font=\\fontsize{{{number(pitch)}}}{{{number(pitch)}}}\\selectfont")
    if box.radius:
        geometry.append(f"rounded corners={number(box.radius)}bp")
    if len(rows) > 1 and len({round(row[0].x, 1) for row in rows}) == 1 and rows[0][0].align == "l":
        geometry.append("align=left")
    options = _options(["bertgraph box"], styles.styles_of(box), geometry, styles.overrides(box))
    yield f"\\node[{options}] ({box.id}) at ({number(box.x)},{number(box.y)}) {{{content}}};"


def _placed_runs(runs: Iterable[Run], styles: _Styles, owner: str | None) -> Iterable[str]:
    """Texts outside boxes (titles of frames and of the drawing, edge labels), each where Graphviz put it."""
    anchors = {"l": "base west", "c": "base", "r": "base east"}
    own = styles.colour_names.get(owner or "", {})
    for run in runs:
        colour = styles.run_colour(run, owner, True) or own["text"]
        yield (
            f"\\node[bertgraph text, anchor={anchors.get(run.align, 'base west')}, text={colour}] at "
            f"({number(run.x)},{number(run.y)}) {{{_fit([run], _run_text(run, None))}}};"
        )


def _frame_lines(frame: Frame, styles: _Styles) -> Iterable[str]:
    options = _options(
        styles.styles_of(frame),
        [f"rounded corners={number(frame.radius)}bp"] if frame.radius else [],
        styles.overrides(frame),
    )
    corners = f"({number(frame.left)},{number(frame.bottom)}) rectangle ({number(frame.right)},{number(frame.top)})"
    yield f"\\path[{options}] {corners};  % {frame.id}"
    yield from _placed_runs(frame.runs, styles, _owner(frame.classes))


def _arrow_lines(arrow: Arrow, styles: _Styles) -> Iterable[str]:
    points = arrow.points
    if not points:
        return
    path = [_at(points[0])]
    for index in range(1, len(points) - 2, 3):
        a, b, c = points[index : index + 3]
        path.append(f".. controls {_at(a)} and {_at(b)} .. {_at(c)}")
    if arrow.tip is not None:
        path.append(f"-- {_at(arrow.tip)}")
    options = _options(styles.styles_of(arrow), styles.overrides(arrow), [] if arrow.tip is not None else ["-"])
    yield f"\\draw[{options}] {' '.join(path).strip()};  % {arrow.source} -> {arrow.target}"
    yield from _placed_runs(arrow.runs, styles, _owner(arrow.classes))


def _mark_lines(mark: Mark, classes: tuple[str, ...], styles: _Styles) -> Iterable[str]:
    """A legend swatch, drawn with the style of the role it stands for (restyling the role restyles it)."""
    xs, ys = [x for x, _ in mark.points], [y for _, y in mark.points]
    corners = f"({number(min(xs))},{number(min(ys))}) rectangle ({number(max(xs))},{number(max(ys))})"
    owner = _owner(classes[1:])
    if owner is not None and owner in styles.looks:
        names = styles.colour_names[owner]
        if owner.startswith("edge-") and "draw" in names:  # a line's swatch: a bar of its colour
            yield f"\\path[fill={names['draw']}, draw={names['draw']}] {corners};"
        else:
            yield f"\\path[{', '.join(classes[1:])}, line width=0.75bp, solid, -] {corners};"
        return
    fill = f"fill={styles.palette.of(mark.paint.fill)}" if mark.paint.fill else ""
    draw = f"draw={styles.palette.of(mark.paint.stroke)}" if mark.paint.stroke else ""
    yield f"\\path[{_options([fill, draw])}] {corners};"


def generate_tikz(layout: Layout, title: str = "") -> Iterable[str]:
    """The lines of the LaTeX document drawing ``layout`` (``title`` goes in its opening comment)."""
    styles = _Styles(layout)
    styles.palette.name("background", layout.background or "#ffffff")
    body: list[str] = []
    body.append(f"\\fill[background] (0,0) rectangle ({number(layout.width)},{number(layout.height)});")
    body += _placed_runs(layout.title, styles, None)
    for mark in layout.marks:
        body += _mark_lines(mark, layout.legend_classes(mark), styles)
    for frame in layout.frames:
        body += _frame_lines(frame, styles)
    for arrow in layout.arrows:
        body += _arrow_lines(arrow, styles)
    for box in layout.boxes:
        body += _box_lines(box, styles)
    yield f"% {tex_text(title)}" if title else "% a bertgraph figure"
    yield f"% Drawn by bertgraph {__version__} from Graphviz's layout, the one its SVG is drawn from."
    yield "% Restyle it here: each colour is a named definition below and each role one TikZ style"
    yield "% (role-…, kind-…, cluster-…, edge-…). To put it in a paper, copy the colours, \\bgfit, the"
    yield "% \\tikzset and the tikzpicture: its text takes the paper's font."
    yield "\\RequirePackage{fix-cm}"
    yield "\\documentclass{article}"
    width, height = number(layout.width), number(layout.height)
    yield f"\\usepackage[paperwidth={width}bp, paperheight={height}bp, margin=0pt]{{geometry}}"
    yield "\\usepackage{tikz}"
    yield "\\usetikzlibrary{arrows.meta, shapes.geometric}"
    yield "\\pagestyle{empty}"
    yield "\\setlength{\\parindent}{0pt}"
    yield "\\setlength{\\topskip}{0pt}"
    yield "% a line of text at its size, narrowed where the font is wider than the room the layout gave it"
    yield "\\newsavebox{\\bgline}"
    yield (
        "\\newcommand{\\bgfit}[2]{\\sbox{\\bgline}{#2}"
        "\\ifdim\\wd\\bgline>#1\\relax\\resizebox{#1}{!}{\\usebox{\\bgline}}\\else\\usebox{\\bgline}\\fi}"
    )
    yield ""
    yield "% colours"
    yield from styles.definitions()
    yield ""
    yield "% one style per role"
    yield "\\tikzset{"
    yield from styles.style_lines(layout)
    yield "}"
    yield ""
    yield "\\begin{document}"
    yield "\\begin{tikzpicture}[x=1bp, y=1bp]"
    yield f"\\useasboundingbox (0,0) rectangle ({width},{height});"
    yield from body
    yield "\\end{tikzpicture}"
    yield "\\end{document}"


def tikz_text(layout: Layout, title: str = "") -> str:
    return "\n".join(generate_tikz(layout, title)) + "\n"
