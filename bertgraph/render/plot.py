"""The report's plot: FLOPs of one forward pass against sequence length (matplotlib, optional).

Matrix products with a weight operand (the linear layers) grow linearly with the sequence;
those of two activations (attention's QKᵀ and AV) grow quadratically and overtake them at
some length, which the plot marks. matplotlib is the ``plot`` extra
(``pip install 'bertgraph[plot]'``); without it the report says so in one line.

The PNG is the same bytes every run: no pyplot state, the font matplotlib ships
(DejaVu Sans), and no ``Software`` metadata.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx

from bertgraph.graph import cost, costbase
from bertgraph.graph import schema as g
from bertgraph.render import figures

INSTALL_HINT = "the FLOPs plot needs matplotlib: pip install 'bertgraph[plot]'"
POINTS = 96
SHORTEST = 8
_STYLE: dict[str, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.hashsalt": "bertgraph",
}


def available() -> bool:
    """Whether matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def max_positions(graph: nx.DiGraph) -> int | None:
    value = graph.graph.get(g.G_CONFIG, {}).get("max_position")
    return int(value) if isinstance(value, int) and value > 0 else None


def plot_lengths(graph: nx.DiGraph) -> tuple[list[int], int | None]:
    """The sequence lengths plotted (geometric, to past the crossover) and the crossover length."""
    totals = cost.model_totals(graph)
    sizes = {**costbase.sizes_for(graph), "batch": 1}
    name = costbase.sequence_name(graph)
    crossing = cost.crossover(totals[cost.LINEAR_FLOPS], totals[cost.ATTENTION_FLOPS], sizes, name)
    longest = max(crossing * 4 if crossing else 0, max_positions(graph) or 512, SHORTEST * 4)
    ratio = (longest / SHORTEST) ** (1 / (POINTS - 1))
    lengths = sorted({round(SHORTEST * ratio**index) for index in range(POINTS)})
    return lengths, crossing


def vertical_marker(axes: Any, x: float, label: str, top: bool = False, strong: bool = False) -> None:
    """A vertical line at ``x`` with its label written along it, at the foot of the axes (or the top)."""
    colour, text = ("#1f2328", "#1f2328") if strong else ("#8c959f", "#57606a")
    axes.axvline(x, color=colour, linestyle="--" if strong else ":", linewidth=1)
    axes.annotate(
        label,
        (x, 0.98 if top else 0.02),
        xycoords=("data", "axes fraction"),
        rotation=90,
        ha="right",
        va="top" if top else "bottom",
        color=text,
        fontsize=8,
    )


def generate_flops_png(graph: nx.DiGraph) -> bytes:
    """The plot as PNG bytes.

    Raises:
        ImportError: matplotlib is not installed.
    """
    import io

    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    lengths, crossing = plot_lengths(graph)
    sizes = {**costbase.sizes_for(graph), "batch": 1}
    curves = cost.flops_curves(graph, lengths, sizes)
    name = costbase.sequence_name(graph)
    with matplotlib.rc_context(_STYLE):  # type: ignore[arg-type]
        figure = Figure(figsize=(7.0, 4.2), dpi=100)
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        axes.plot(lengths, curves[cost.LINEAR_FLOPS], color="#0969da", label="linear layers (a weight operand)")
        axes.plot(lengths, curves[cost.ATTENTION_FLOPS], color="#cf222e", label="attention (QKᵀ and AV)")
        axes.plot(lengths, curves[g.OTHER_FLOPS], color="#57606a", linestyle="--", label="other FLOPs")
        axes.set_xscale("log", base=2)
        axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
        axes.set_yscale("log")
        axes.set_xlabel(f"sequence length ({name})")
        axes.set_ylabel("FLOPs of one forward pass, batch 1")
        axes.grid(True, which="major", color="#d0d7de", linewidth=0.6)
        limit = max_positions(graph)
        if limit:
            vertical_marker(axes, limit, f"max positions {limit:,}")
        if crossing:
            at = {**sizes, name: crossing}
            value = costbase.evaluate(cost.model_totals(graph)[cost.ATTENTION_FLOPS], at)
            axes.plot([crossing], [value], marker="o", color="#1f2328", markersize=5)
            axes.annotate(
                f"attention overtakes at {crossing:,}\n({figures.flops(value)} each)",
                (crossing, value),
                xytext=(-8, 10),
                textcoords="offset points",
                ha="right",
                fontsize=8,
            )
        axes.set_title(f"{graph.graph.get(g.G_NAME, '')} · {graph.graph.get(g.G_MODEL_CLASS, '')}", loc="left")
        axes.legend(loc="upper left", frameon=False)
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def write_flops_plot(graph: nx.DiGraph, path: Path) -> Path:
    """Write the plot (atomically).

    Raises:
        ImportError: matplotlib is not installed.
    """
    from bertgraph.files import write_atomic

    return write_atomic(path, generate_flops_png(graph))
