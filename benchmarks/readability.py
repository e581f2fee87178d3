"""Smallest text on a diagram shown 800 px wide (a docs column): every preset × depth 1–3.

Each drawing is rendered to SVG by the real ``dot``; the smallest ``font-size`` (points) times
800 over the drawing's width (points, from the SVG ``viewBox``) is the smallest text in pixels.
Height is ignored: docs pages scroll. Graphs come from bertgraph's own cache.

    PYTHONPATH=. .venv/bin/python benchmarks/readability.py --out benchmarks/readability-after

``readability-before.md`` is the same table before the compact layout (legend column, inputs and
masks in side columns, shapes on every edge).
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
from bertgraph.render import render_image
from bertgraph.render.diagram import build_diagram
from bertgraph.render.graphviz_run import MAX_EDGES

DEPTHS = (1, 2, 3)
COLUMN_PX = 800.0


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


def markdown(rows: list[dict[str, object]]) -> str:
    small = [r for r in rows if r["px"] != "" and float(r["px"]) < (6 if r["depth"] == 3 else 8)]
    lines = [
        f"drawings: {len(rows)} · under 8 px (depth 1–2) or 6 px (depth 3) at {COLUMN_PX:.0f} px wide: {len(small)}",
        "",
        "| preset | depth | smallest text px | width pt | smallest font pt |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {r['preset']} | {r['depth']} | {r['px']} | {r['width_pt']} | {r['font_pt']} |" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="", help="comma-separated; default every preset")
    parser.add_argument("--out", type=Path, required=True, help="stem of the .md and .csv written")
    args = parser.parse_args()
    rows = measure(args.presets.split(",") if args.presets else list(presets.PRESETS))
    args.out.with_suffix(".md").write_text(markdown(rows))
    with args.out.with_suffix(".csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
