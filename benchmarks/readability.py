"""Smallest text on a diagram shown 800 px wide (a docs column): every preset × depth 1–3.

Each drawing is rendered to SVG by the real ``dot``; the smallest ``font-size`` (points) times
800 over the drawing's width (points, from the SVG ``viewBox``) is the smallest text in pixels.
Height is ignored: docs pages scroll. Graphs come from bertgraph's own cache.

    PYTHONPATH=. .venv/bin/python benchmarks/readability.py --out benchmarks/readability-after

``readability-before.md`` is the same table before the compact layout (legend column, inputs and
masks in side columns, shapes on every edge).

Beside the diagrams it measures the families schematic (``bertgraph families``, the default models)
as ``dot`` draws it, and the depth-2 Mermaid diagrams of bert-base-uncased and t5-small as
mermaid.js lays them out in headless Chromium (``tests/mermaid_browser.py``; ``make node`` installs
mermaid). Mermaid writes its text as CSS: the smallest ``font-size`` of its style sheet counts.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))

import bertgraph
from bertgraph.model import presets
from bertgraph.render import render_image, schematic
from bertgraph.render.diagram import build_diagram
from bertgraph.render.families import DEFAULT_MODELS
from bertgraph.render.graphviz_run import MAX_EDGES
from bertgraph.render.mermaid import generate_mermaid

DEPTHS = (1, 2, 3)
COLUMN_PX = 800.0
MERMAID = ("bert-base-uncased", "t5-small")  # drawn at depth 2


def smallest_px(svg: str, column: float = COLUMN_PX) -> tuple[float, float, float]:
    """(smallest text px at ``column`` px wide, drawing width pt, smallest font pt) of an SVG."""
    width = float(re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) [\d.]+"', svg).group(1))
    font = min(float(size) for size in re.findall(r'font-size="([\d.]+)"', svg))
    return font * min(1.0, column / width), width, font


def measure(names: list[str]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for name in names:
        graph = bertgraph.trace(name).graph
        for depth in DEPTHS:
            row: dict[str, object] = {"preset": name, "depth": depth}
            if len(build_diagram(graph, depth).edges) > MAX_EDGES:
                row.update(px="", width_pt="", font_pt="")  # the renderer refuses it too
            else:
                svg = render_image(graph, "svg", depth=depth).decode()
                px, width, font = smallest_px(svg)
                row.update(px=round(px, 1), width_pt=round(width), font_pt=font)
            rows.append(row)
            print(row, file=sys.stderr, flush=True)
    return rows


def mermaid_px(svg: str, column: float = COLUMN_PX) -> tuple[float, float, float]:
    """(smallest text px at ``column`` px wide, drawing width px, smallest font px) of a mermaid.js SVG."""
    from tests.mermaid_browser import svg_width

    width = svg_width(svg)
    font = min(float(size) for size in re.findall(r"font-size:\s*([\d.]+)px", svg))
    return font * min(1.0, column / width), width, font


def measure_figures() -> list[dict[str, object]]:
    """The families schematic (dot) and the depth-2 Mermaid diagrams (mermaid.js in Chromium)."""
    from tests.mermaid_browser import render_mermaid

    graphs = {name: bertgraph.trace(name).graph for name in dict.fromkeys([*DEFAULT_MODELS, *MERMAID])}
    svg = schematic.schematic_text([graphs[name] for name in DEFAULT_MODELS], "svg")
    px, width, font = smallest_px(svg.decode() if isinstance(svg, bytes) else svg)
    rows: list[dict[str, object]] = [
        {
            "figure": "families schematic",
            "models": ", ".join(DEFAULT_MODELS),
            "renderer": "dot",
            "depth": "",
            "px": round(px, 1),
            "width": round(width),
            "font": font,
        }
    ]
    texts = {name: generate_mermaid(graphs[name], 2).text for name in MERMAID}
    for name, result in render_mermaid(texts).items():
        if not result.ok:
            raise SystemExit(f"mermaid.js could not draw {name}: {result.error}")
        px, width, font = mermaid_px(result.svg)
        rows.append(
            {
                "figure": "diagram",
                "models": name,
                "renderer": "mermaid.js (Chromium)",
                "depth": 2,
                "px": round(px, 1),
                "width": round(width),
                "font": font,
            }
        )
    for row in rows:
        print(row, file=sys.stderr, flush=True)
    return rows


def markdown(rows: list[dict[str, object]], figures: list[dict[str, object]]) -> str:
    small = [r for r in rows if r["px"] != "" and float(r["px"]) < (6 if r["depth"] == 3 else 8)]
    lines = [
        f"drawings: {len(rows)} · under 8 px (depth 1–2) or 6 px (depth 3) at {COLUMN_PX:.0f} px wide: {len(small)}",
        "",
        "| preset | depth | smallest text px | width pt | smallest font pt |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {r['preset']} | {r['depth']} | {r['px']} | {r['width_pt']} | {r['font_pt']} |" for r in rows]
    lines += [
        "",
        "Figures beside the diagrams (widths in points for dot, in CSS px for mermaid.js):",
        "",
        "| figure | models | drawn by | depth | smallest text px | width | smallest font |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {f['figure']} | {f['models']} | {f['renderer']} | {f['depth']} | {f['px']} | {f['width']} | {f['font']} |"
        for f in figures
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="", help="comma-separated; default every preset")
    parser.add_argument("--out", type=Path, required=True, help="stem of the .md and .csv written")
    args = parser.parse_args()
    rows = measure(args.presets.split(",") if args.presets else list(presets.PRESETS))
    figures = measure_figures()
    args.out.with_suffix(".md").write_text(markdown(rows, figures))
    # One table, the diagrams' columns first (as readability-before.csv has them); a figure's row
    # names its models and what drew it (mermaid.js widths and fonts are CSS px, dot's points).
    table = [{**r, "figure": "diagram", "drawn_by": "dot"} for r in rows] + [
        {
            "preset": f["models"],
            "depth": f["depth"],
            "px": f["px"],
            "width_pt": f["width"],
            "font_pt": f["font"],
            "figure": f["figure"],
            "drawn_by": f["renderer"],
        }
        for f in figures
    ]
    with args.out.with_suffix(".csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)


if __name__ == "__main__":
    main()
