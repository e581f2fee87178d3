"""The deployment's figure: memory stacked by part against the context length, with the GPU's line
(matplotlib, the ``plot`` extra; the same bytes every run, as :mod:`bertgraph.render.plot` makes them)."""

from __future__ import annotations

import io
from typing import Any

from bertgraph.render import figures
from bertgraph.render.plot import _STYLE, vertical_marker

# One colour per part, in the order they stack: weights at the bottom, the overhead on top.
COLOURS = ("#0969da", "#bf8700", "#cf222e", "#8c959f")
GIB = 2**30


def generate_memory_png(curve: dict[str, Any], title: str) -> bytes:
    """The figure of :func:`bertgraph.plan.deploy.memory_curve`'s data as PNG bytes.

    Raises:
        ImportError: matplotlib is not installed.
    """
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    lengths = curve["lengths"]
    with matplotlib.rc_context(_STYLE):  # type: ignore[arg-type]
        figure = Figure(figsize=(7.0, 4.2), dpi=100)
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        parts = curve["parts"]
        axes.stackplot(
            lengths,
            *[[value / GIB for value in values] for values in parts.values()],
            labels=list(parts),
            colors=COLOURS[: len(parts)],
            alpha=0.85,
        )
        gpu = curve["gpu"]
        if gpu is not None:
            axes.axhline(gpu["memory_bytes"] / GIB, color="#1f2328", linewidth=1.2)
            axes.annotate(
                f"{gpu['name']}: {figures.size(gpu['memory_bytes'])}",
                (lengths[0], gpu["memory_bytes"] / GIB),
                xytext=(2, 3),
                textcoords="offset points",
                fontsize=8,
            )
        if curve["max_seq_len"] is not None:
            vertical_marker(axes, curve["max_seq_len"], f"longest that fits: {curve['max_seq_len']:,}", strong=True)
        if curve["positions"]:
            vertical_marker(axes, curve["positions"], f"max positions {curve['positions']:,}", top=True)
        if gpu is not None:  # past the GPU the stack only grows: show it up to half as much again
            axes.set_ylim(0, 1.5 * gpu["memory_bytes"] / GIB)
        axes.set_xscale("log", base=2)
        axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
        axes.set_xlabel(f"context length ({curve['name']}), batch {curve['batch']}")
        axes.set_ylabel("memory (GiB)")
        axes.grid(True, which="major", color="#d0d7de", linewidth=0.6)
        axes.set_title(title, loc="left")
        axes.legend(loc="upper left", frameon=False, fontsize=8)
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()
