"""Docs builds: a Sphinx page with ten diagrams of one model next to one ``bertgraph render``; the HTML page.

The docs project is written into the work folder: one page with ten ``bertgraph`` directives
of bert-base (depths 0–4, two heads, SVG, the interactive page, both tables, a comparison).
A cold build (empty graph cache, empty build folder) should cost at most 1.5 × one cold
``bertgraph render`` of the model: each head is traced once, the Graphviz layouts run beside
the Python work, and the build's exit skips the collector's walk over torch's objects; a
rebuild with nothing changed draws nothing. The interactive page of bert-large, depth 4, every layer drawn, is
opened in headless Chromium; the time from navigation to the page being interactive is
what the page reports (``bertgraphReadyAt``).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from harness import BERT_BASE, BERTGRAPH, Command, Context, Stored, Suite, Target, ratio, size_args
from measure import Series, run_measured

RENDER = "bertgraph render, cold"
COLD = "sphinx-build, ten diagrams, cold"
WARM = "sphinx-build, nothing changed"
PAGE = "HTML page in Chromium, bert-large depth 4 unfolded"
LARGE = {"layers": 24, "hidden": 1024, "heads": 16, "intermediate": 4096}
TTI_SCRIPT = Path(__file__).resolve().parent.parent / "page_tti.py"

DIRECTIVES = [
    {"depth": 0},
    {"depth": 1},
    {"depth": 2},
    {"depth": 3},
    {"depth": 4},
    {"depth": 2, "head": "base"},
    {"depth": 2, "theme": "dark"},
    {"depth": 2, "format": "html"},
    {"format": "table"},
    {"depth": 1, "compare": "base"},
]


def write_project(folder: Path, size: dict[str, int]) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "conf.py").write_text('project = "bench"\nextensions = ["bertgraph.sphinx"]\n', encoding="utf-8")
    lines = ["Ten diagrams", "============", ""]
    for options in DIRECTIVES:
        lines.append(".. bertgraph:: bert-base-uncased")
        merged = {"head": "sequence-classification", **options}
        lines += [f"   :{key}: {value}" for key, value in {**merged, **size}.items()]
        lines.append("")
    (folder / "index.rst").write_text("\n".join(lines), encoding="utf-8")
    return folder


def run(ctx: Context) -> dict[str, Series]:
    size = ctx.size(BERT_BASE)
    source = write_project(ctx.work / "docs-src", size)
    cold_out, warm_out = ctx.work / "docs-cold", ctx.work / "docs-warm"
    sphinx = [sys.executable, "-m", "sphinx", "-q", "-b", "html", str(source)]
    commands = {
        RENDER: ctx.bertgraph("render", size, out="docs-ref.svg"),
        COLD: Command(["sh", "-c", f'rm -rf "{cold_out}" && exec "$0" "$@"', *sphinx, str(cold_out)], "cold"),
        WARM: Command([*sphinx, str(warm_out)], "warm"),
    }
    results = ctx.measure(commands)
    large = ctx.size(LARGE)
    page = ctx.work / "large.html"
    try:
        run_measured(
            [BERTGRAPH, "render", "bert-large-uncased", *size_args(large), "--depth", "4", "--unfold", "-o", str(page)]
        )
    except RuntimeError as error:  # a page bertgraph refuses to draw is reported, and the builds still count
        print(f"[bench] docs: no page to open: {str(error).splitlines()[-1]}", file=sys.stderr)
        return results
    results.update(ctx.measure({PAGE: Command([sys.executable, str(TTI_SCRIPT), str(page)])}))
    return results


def targets(stored: dict[str, Stored]) -> list[Target]:
    found = []
    if RENDER in stored and COLD in stored:
        render, cold = stored[RENDER], stored[COLD]
        found.append(
            Target(
                "Sphinx build of ten diagrams of one model ≤ 1.5 × one cold render",
                f"{ratio(cold.seconds, render.seconds):.2f} × ({cold.seconds:.2f} s vs {render.seconds:.2f} s)",
                cold.seconds <= 1.5 * render.seconds,
            )
        )
    if PAGE in stored and stored[PAGE].span is not None:
        ready = stored[PAGE].span
        found.append(Target("the bert-large page is interactive within 2 s", f"{ready:.2f} s", ready <= 2))
    return found


SUITE = Suite(
    name="docs",
    title="Docs builds and the interactive page",
    order=70,
    run=run,
    targets=targets,
    notes=(
        f"“{WARM}” is a rebuild of the same project; it draws nothing (the tests count the drawings).",
        f"“{PAGE}”: the span is the page's own time from navigation to interactive; the wall time adds Chromium's "
        "start and exit.",
    ),
)
