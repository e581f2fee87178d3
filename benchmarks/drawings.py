"""Count wrong drawings: every preset (and two configs of no preset) × depth 0–4, laid out by the real ``dot``.

For each drawing, read off Graphviz's coordinates (``dot -Tjson``): does the drawn graph have a
cycle, how many edges run not strictly downward, does it fold the layers ``summary`` folds;
how many edges run through a frame's title, how many texts are below 4.5:1 contrast with what
lies under them (light and dark themes), how many residual edges start at a node that did not
make the tensor they carry; and for an encoder-decoder, is any of the decoder left of the
encoder, is an input in the frame of a stack that does not read it, does an edge run through a
stack's frame without an end in it. Traced graphs are kept as node-link JSON in ``--graphs``
so a rerun after a drawing change traces nothing.

    PYTHONPATH=. .venv/bin/python benchmarks/drawings.py --out benchmarks/drawings-after.md
    PYTHONPATH=/tmp/old .venv/bin/python benchmarks/drawings.py --out benchmarks/drawings-before.md

(``/tmp/old``: ``git archive main bertgraph | tar -x -C /tmp/old``, the code before the change;
the rules are this checkout's ``tests/layout.py`` either way.)
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
from tests.family_configs import UNEVEN
from tests.layout import (
    cycles,
    decoder_left,
    faint_texts,
    fold_mismatches,
    foreign_inputs,
    lay_out,
    residual_origins,
    through_other_stack,
    title_crossings,
    upward_edges,
)

DEPTHS = (0, 1, 2, 3, 4)
# Encoder-decoders of no preset, built from transformers' config classes (tests/family_configs.py).
CONFIGS = UNEVEN
RULES = ("title crossings", "faint texts", "residual origins", "decoder left", "foreign inputs", "through a stack")


def reference(name: str, folder: Path) -> str:
    """What to trace: a preset's name, or the folder of one of :data:`CONFIGS` written from its config class."""
    if name not in CONFIGS:
        return name
    import transformers

    kind, values = CONFIGS[name]
    target = folder / name
    getattr(transformers, kind)(**values).save_pretrained(target)
    return str(target)


def graph_of(name: str, head: str, folder: Path) -> nx.DiGraph:
    path = folder / f"{name}.{head}.json"
    if path.is_file():
        return graph_io.read_json(path)
    name = reference(name, folder)
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
                layout = lay_out(drawn)
                row["upward"] = len(upward_edges(layout))
                row["title crossings"] = len(title_crossings(layout))
                row["faint texts"] = len(faint_texts(layout)) + len(faint_texts(lay_out(drawn, "dark")))
                row["residual origins"] = len(residual_origins(graph, drawn, depth, layout))
                row["decoder left"] = len(decoder_left(graph, drawn, depth, layout))
                row["foreign inputs"] = len(foreign_inputs(graph, drawn, depth))
                row["through a stack"] = len(through_other_stack(graph, drawn, depth, layout))
            else:
                row["upward"] = None  # Graphviz would take minutes; the renderer refuses it too
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def broken(rows: list[dict[str, object]], rule: str) -> str:
    """``drawings breaking the rule of N laid out (M breaks)``."""
    laid = [r for r in rows if r.get(rule) is not None]
    return f"{sum(1 for r in laid if r[rule])} of {len(laid)} ({sum(int(r[rule]) for r in laid)})"  # type: ignore[call-overload]


def table(rows: list[dict[str, object]]) -> str:
    laid = [r for r in rows if r["upward"] is not None]
    middle = [r for r in rows if r["depth"] in (1, 2, 3)]
    lines = [
        f"drawings: {len(rows)} · with a cycle: {sum(1 for r in rows if r['cycle'])} · "
        f"with an upward edge: {sum(1 for r in laid if r['upward'])} of {len(laid)} laid out "
        f"({sum(int(r['upward']) for r in laid)} edges) · folding other than summary: "
        f"{sum(1 for r in rows if r['folds differ'])}",
        "",
        "Drawings that break each rule, of those laid out (breaks in brackets):",
        "",
        "| rule | depths 1–3 | depths 0–4 |",
        "|---|---|---|",
        *(f"| {rule} | {broken(middle, rule)} | {broken(rows, rule)} |" for rule in ("upward", *RULES)),
        "",
        "| preset | head | depth | edges | cycle | upward edges | folds ≠ summary | " + " | ".join(RULES) + " |",
        "|---|---|---|---|---|---|---|" + "---|" * len(RULES),
    ]
    for r in rows:
        upward = f"not laid out (> {MAX_EDGES} edges)" if r["upward"] is None else r["upward"]
        cycle = "yes" if r["cycle"] else "no"
        rules = " | ".join(str(r.get(rule, "")) for rule in RULES)
        lines.append(
            f"| {r['preset']} | {r['head']} | {r['depth']} | {r['edges']} | {cycle} | {upward} | {r['folds differ']} | "
            f"{rules} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", type=Path, default=Path("/tmp/bertgraph-drawings"), help="traced graphs kept here")
    parser.add_argument("--presets", default="", help="comma-separated; default every preset and config")
    parser.add_argument(
        "--heads",
        default="base,gpt2:sequence-classification,bart-base:sequence-classification",
        help="base for every model, and MODEL:HEAD pairs besides",
    )
    parser.add_argument("--out", type=Path, required=True, help="the Markdown table")
    args = parser.parse_args()
    args.graphs.mkdir(parents=True, exist_ok=True)
    names = args.presets.split(",") if args.presets else [*presets.PRESETS, *CONFIGS]
    rows = count(names, "base", args.graphs)
    for pair in args.heads.split(","):
        if ":" in pair and (not args.presets or pair.split(":")[0] in names):
            name, head = pair.split(":")
            rows += count([name], head, args.graphs)
    args.out.write_text(table(rows))


if __name__ == "__main__":
    main()
