"""Count structurally wrong drawings: every preset × depth 0–4, laid out by the real ``dot``.

For each drawing: does the drawn graph have a cycle, how many edges does Graphviz lay out
not strictly downward (``dot -Tjson`` coordinates), and does the drawing fold the layers
``summary`` folds. Traced graphs are kept as node-link JSON in ``--graphs`` so a rerun
after a drawing change traces nothing.

    PYTHONPATH=. .venv/bin/python benchmarks/drawings.py --out benchmarks/drawings-after.md
    PYTHONPATH=/tmp/old .venv/bin/python benchmarks/drawings.py --out benchmarks/drawings-before.md

(``/tmp/old``: ``git archive d4a3e53 bertgraph | tar -x -C /tmp/old``, the code before the change.)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

# After PYTHONPATH: the counts of an older bertgraph come from PYTHONPATH=OLD_CHECKOUT.
sys.path.append(str(Path(__file__).resolve().parent.parent))

import networkx as nx

from bertgraph.graph import io as graph_io
from bertgraph.model import presets
from bertgraph.render import diagram as diagrams
from bertgraph.render.graphviz_run import MAX_EDGES
from tests.layout import cycles, fold_mismatches, lay_out, upward_edges

DEPTHS = (0, 1, 2, 3, 4)


def graph_of(name: str, head: str, folder: Path) -> nx.DiGraph:
    path = folder / f"{name}.{head}.json"
    if path.is_file():
        return graph_io.read_json(path)
    # Each model traced in a process of its own, so one trace's memory is gone before the next.
    code = (
        "import sys, bertgraph; from bertgraph.graph import io; "
        "io.write_json(bertgraph.trace(sys.argv[1], sys.argv[2], cache=False).graph, sys.argv[3])"
    )
    subprocess.run([sys.executable, "-c", code, name, head, str(path)], check=True)
    return graph_io.read_json(path)


def count(names: list[str], head: str, folder: Path) -> list[dict[str, object]]:
    rows = []
    for name in names:
        graph = graph_of(name, head, folder)
        for depth in DEPTHS:
            drawn = diagrams.build_diagram(graph, depth)
            row: dict[str, object] = {"preset": name, "head": head, "depth": depth, "edges": len(drawn.edges)}
            row["cycle"] = bool(cycles(drawn))
            row["folds differ"] = len(fold_mismatches(graph, drawn, depth))
            if len(drawn.edges) <= MAX_EDGES:
                row["upward"] = len(upward_edges(lay_out(drawn)))
            else:
                row["upward"] = None  # Graphviz would take minutes; the renderer refuses it too
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict[str, object]]) -> str:
    laid = [r for r in rows if r["upward"] is not None]
    lines = [
        f"drawings: {len(rows)} · with a cycle: {sum(1 for r in rows if r['cycle'])} · "
        f"with an upward edge: {sum(1 for r in laid if r['upward'])} of {len(laid)} laid out "
        f"({sum(int(r['upward']) for r in laid)} edges) · folding other than summary: "
        f"{sum(1 for r in rows if r['folds differ'])}",
        "",
        "| preset | head | depth | edges | cycle | upward edges | folds ≠ summary |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        upward = f"not laid out (> {MAX_EDGES} edges)" if r["upward"] is None else r["upward"]
        cycle = "yes" if r["cycle"] else "no"
        lines.append(
            f"| {r['preset']} | {r['head']} | {r['depth']} | {r['edges']} | {cycle} | {upward} | {r['folds differ']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", type=Path, default=Path("/tmp/bertgraph-drawings"), help="traced graphs kept here")
    parser.add_argument("--head", default="base")
    parser.add_argument("--presets", default="", help="comma-separated; default every preset")
    parser.add_argument("--out", type=Path, required=True, help="the Markdown table")
    args = parser.parse_args()
    args.graphs.mkdir(parents=True, exist_ok=True)
    names = args.presets.split(",") if args.presets else list(presets.PRESETS)
    args.out.write_text(table(count(names, args.head, args.graphs)))


if __name__ == "__main__":
    main()
