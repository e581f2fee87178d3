"""The example gallery in ``outputs/``: diagrams, Mermaid, tables and a report of one model.

``bertgraph gallery`` regenerates every file; outputs are byte-for-byte deterministic,
so a stale gallery shows up as a diff.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

from bertgraph.api import Architecture, compare_specs, load
from bertgraph.errors import BertgraphError
from bertgraph.files import check_writable, expand_user, path_kind, write_atomic
from bertgraph.graph import costbase, costtable
from bertgraph.graph import schema as g
from bertgraph.graph.masks import example_for
from bertgraph.model import resolve
from bertgraph.render import diff, diff_figure, families, masks, mermaid, plot, report, text, write_diagram
from bertgraph.render.graphviz_run import require_dot

DEPTHS = (1, 2, 3)
COST_LENGTHS = (128, 512)
# Other families at depth 2, so the README shows a decoder, an encoder-decoder and a modern encoder too.
FAMILY_FIGURES = ("gpt2", "t5-small", "modernbert-base")
# Comparisons (``bertgraph diff A B``): BERT against its descendants, GPT-2 against a LLaMA.
DIFFS = {
    "bert-roberta": ("bert-base-uncased", "roberta-base"),
    "bert-distilbert": ("bert-base-uncased", "distilbert-base-uncased"),
    "bert-modernbert": ("bert-base-uncased", "modernbert-base"),
    "gpt2-tinyllama": ("gpt2", "TinyLlama-1.1B"),
}
# The README's restyled figure: a style sheet that turns the depth-2 diagram grey for print, by role.
PRINT_CSS = """\
/* Greys for print, one shade per role (bertgraph render ... --css bert-print.css -o bert-print.svg). */
.node path, .node ellipse, .legend { stroke: #000000; }
.role-embedding path, .role-embedding ellipse, .legend.role-embedding { fill: #e0e0e0; }
.kind-bidirectional path, .legend.kind-bidirectional { fill: #a0a0a0; }
.role-normalisation path, .legend.role-normalisation { fill: #ffffff; }
.role-pooling path, .role-pooling ellipse, .legend.role-pooling { fill: #c8c8c8; }
.role-head path, .legend.role-head { fill: #707070; }
.node text { fill: #000000; }
.role-head text { fill: #ffffff; }
.cluster path { fill: none; stroke: #9e9e9e; }
.edge path { stroke: #000000; }
.edge polygon { fill: #000000; stroke: #000000; }
"""


def _mermaid_page(arch: Architecture, warn: Callable[[str], None] | None) -> str:
    lines = [f"# {arch.name} · {arch.model_class} as Mermaid", ""]
    lines.append("Each block below renders on GitHub; copy one into your own Markdown.")
    for depth in DEPTHS:
        result = mermaid.generate_mermaid(arch.graph, depth=depth)
        for note in result.notes:
            if warn:
                warn(note)
        lines += ["", f"## Depth {result.depth}", "", mermaid.fenced(result.text).rstrip("\n")]
    return "\n".join(lines) + "\n"


def gallery_files(head: str, plots: bool) -> list[str]:
    """The names of the files the gallery writes, in order (``plots``: matplotlib is installed)."""
    names = [f"bert-depth{depth}{suffix}" for depth in DEPTHS for suffix in (".svg", ".png")]
    names += ["bert-dark.svg", "bert-print.css", "bert-print.svg", "bert-depth2.tex", "bert-depth2.drawio"]
    if head != "base":
        names += ["bert-compare.svg", "bert-compare.png"]
    names += ["bert.html", "bert-flops.svg", "bert-mermaid.md", "summary.txt", "params.txt", "cost.txt"]
    names += ["families.svg", "families.md", "masks.svg"]
    names += [f"{model}-depth2.svg" for model in FAMILY_FIGURES]
    names += [f"diff-{name}{suffix}" for name in DIFFS for suffix in (".svg", ".md")]
    if plots:
        names.append(report.plot_path(Path("report.md")).name)
    return [*names, "report.md"]


def build_gallery(
    folder: Path,
    model: str = "bert-base-uncased",
    head: str = "sequence-classification",
    use_cache: bool = True,
    warn: Callable[[str], None] | None = None,
    revision: str | None = None,
    offline: bool | None = None,
) -> list[Path]:
    """Write the gallery into ``folder`` and return the files written, in order.

    ``revision`` and ``offline`` apply to ``model`` when it is a hub id.

    Every file is checked by the output rules (:mod:`bertgraph.files`) before any work.
    """
    folder = expand_user(folder)
    found = path_kind(folder)
    if found.kind not in ("directory", "missing"):
        raise BertgraphError(f"cannot write the gallery into {folder}: it is {found.description}; give a folder")
    # a bad model: refused before any folder
    spec = resolve(model, head, revision=revision, offline=offline)
    base_spec = resolve(model, "base", revision=revision, offline=offline)
    made = [f for f in (folder, *folder.parents) if path_kind(f).kind == "missing"]  # what mkdir will create
    if found.kind == "missing":
        try:
            folder.mkdir(parents=True)
        except OSError as error:
            raise BertgraphError(f"cannot create the gallery folder {folder}: {error.strerror or error}") from error
    try:
        for name in gallery_files(head, plots=plot.available()):
            check_writable(folder / name)
        require_dot(folder / "bert-depth1.svg")
        arch = load(spec, use_cache=use_cache)
        base = load(base_spec, use_cache=use_cache) if head != "base" else arch
    except BaseException:
        for created in made:  # innermost first; only empty folders this call made
            with suppress(OSError):
                created.rmdir()
        raise
    written: list[Path] = []
    for depth in DEPTHS:
        for suffix in (".svg", ".png"):
            path = folder / f"bert-depth{depth}{suffix}"
            written.append(write_diagram(arch.graph, path, depth=depth, warn=warn))
    written.append(write_diagram(arch.graph, folder / "bert-dark.svg", depth=2, theme="dark", warn=warn))
    written.append(write_atomic(folder / "bert-print.css", PRINT_CSS))
    written.append(write_diagram(arch.graph, folder / "bert-print.svg", depth=2, css=PRINT_CSS, warn=warn))
    for suffix in (".tex", ".drawio"):  # for a paper and for a slide: edited in TikZ or draw.io
        written.append(write_diagram(arch.graph, folder / f"bert-depth2{suffix}", depth=2, warn=warn))
    if head != "base":
        for suffix in (".svg", ".png"):
            written.append(
                write_diagram(base.graph, folder / f"bert-compare{suffix}", depth=2, compare=arch.graph, warn=warn)
            )
    written.append(write_diagram(arch.graph, folder / "bert.html", depth=2, theme="auto", warn=warn))
    written.append(write_diagram(arch.graph, folder / "bert-flops.svg", depth=3, annotate="flops", warn=warn))
    written.append(write_atomic(folder / "bert-mermaid.md", _mermaid_page(arch, warn)))
    written.append(write_atomic(folder / "summary.txt", "\n".join(text.generate_summary(arch.summary())) + "\n"))
    written.append(write_atomic(folder / "params.txt", "\n".join(text.generate_params(base.params())) + "\n"))
    sizes = [costbase.sizes_for(base.graph, seq=length) for length in COST_LENGTHS]
    written.append(
        write_atomic(
            folder / "cost.txt", "\n".join(text.generate_cost(costtable.cost_report(base.graph, sizes))) + "\n"
        )
    )
    family_graphs = [load(resolve(name, "base"), use_cache=use_cache).graph for name in families.DEFAULT_MODELS]
    schematic_graphs = [*family_graphs, load(resolve("modernbert-base", "base"), use_cache=use_cache).graph]
    written += families.write_families(schematic_graphs, folder / "families.svg", "svg", warn=warn, view="schematic")
    written += families.write_families(family_graphs, folder / "families.md", "markdown", warn=warn, view="schematic")
    example = example_for(schematic_graphs)
    model_masks = masks.masks_of(((str(graph.graph[g.G_NAME]), graph) for graph in schematic_graphs), example)
    written.append(write_atomic(folder / "masks.svg", masks.figure(model_masks, "svg")))
    for model in FAMILY_FIGURES:
        graph = load(resolve(model, "base"), use_cache=use_cache).graph
        written.append(write_diagram(graph, folder / f"{model}-depth2.svg", depth=2, warn=warn))
    for name, (first, second) in DIFFS.items():
        comparison = compare_specs(resolve(first), resolve(second), COST_LENGTHS[0], use_cache=use_cache)
        written.append(write_atomic(folder / f"diff-{name}.svg", diff_figure.figure(comparison, "svg")))
        written.append(write_atomic(folder / f"diff-{name}.md", diff.tables_text(comparison, "markdown")))
    report_path = folder / "report.md"
    plot_name = None
    if plot.available():
        written.append(plot.write_flops_plot(arch.graph, report.plot_path(report_path)))
        plot_name = report.plot_path(report_path).name
    report_text = report.generate_report(
        arch.graph,
        base=base.graph if head != "base" else None,
        depth=2,
        svg_name="bert-depth2.svg",
        warn=warn,
        plot_name=plot_name,
        plot_note=None if plot_name else plot.INSTALL_HINT,
    )
    written.append(write_atomic(report_path, report_text))
    assert [path.name for path in written] == gallery_files(head, plots=plot_name is not None)
    return written
