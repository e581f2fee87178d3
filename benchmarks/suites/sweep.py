"""Cost against depth: hidden 1024, 2 to 192 layers, every tool as its own process.

Each depth point is measured like the other suites: a warm-up round, then every command in
turn, ``--runs`` times (3 or more). torchview and torchinfo run on the meta device (their
best configuration) and torchview also with real weights, as a second line.
"""

from __future__ import annotations

from pathlib import Path

from harness import Context, Stored, Suite, Target, ratio
from measure import Series

SWEEP = {"hidden": 1024, "heads": 16, "intermediate": 4096}
LAYERS = (2, 12, 24, 48, 96, 192)
SMOKE_LAYERS = (2, 4)
RENDER = "bertgraph render"


def run(ctx: Context) -> dict[str, Series]:
    results: dict[str, Series] = {}
    for layers in SMOKE_LAYERS if ctx.smoke else LAYERS:
        size = ctx.size({"layers": layers, **SWEEP})
        commands = {
            RENDER: ctx.bertgraph("render", size, out="sweep.svg"),
            "bertgraph summary": ctx.bertgraph("summary", size),
            "torchview (meta device)": ctx.peer("torchview-meta", size),
            "torchinfo summary (meta device)": ctx.peer("torchinfo-meta", size),
            "torchview (real weights)": ctx.peer("torchview-real", size),
            "bare torch.export": ctx.peer("export-span", size),
        }
        for name, series in ctx.measure(commands).items():
            results[f"{name} @ {layers}"] = series
    return results


def targets(stored: dict[str, Stored]) -> list[Target]:
    deep, base = stored.get(f"{RENDER} @ 96"), stored.get(f"{RENDER} @ 12")
    if deep is None or base is None:
        return []
    return [
        Target(
            "render, cold, 96 layers ≤ 2.5 × 12 layers",
            f"{ratio(deep.seconds, base.seconds):.2f} × ({deep.seconds:.2f} s vs {base.seconds:.2f} s)",
            deep.seconds <= 2.5 * base.seconds,
        )
    ]


def plot(stored: dict[str, Stored], folder: Path) -> str:
    """Time and memory against layer count → ``scaling.png``; returns the file name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, NullFormatter

    tools: dict[str, list[tuple[int, float, float]]] = {}
    for key, item in stored.items():
        name, layers = key.rsplit(" @ ", 1)
        tools.setdefault(name, []).append((int(layers), item.seconds, item.peak_mb / 1024))
    shown = sorted({layers for points in tools.values() for layers, _, _ in points})
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    for name, points in sorted(tools.items()):
        points.sort()
        ours = name.startswith("bertgraph")
        style = {"linewidth": 2 if ours else 1, "label": name}
        layers = [p[0] for p in points]
        left.plot(layers, [p[1] for p in points], "-o" if ours else "--s", **style)
        right.plot(layers, [p[2] for p in points], "-o" if ours else "--s", **style)
    axes = (
        (left, "wall time (s, median)", 1, (1, 2, 3, 5, 10, 20, 50, 100, 200)),
        (right, "peak memory (GiB, median)", 2, (0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 50)),
    )
    for axis, label, column, ticks in axes:
        values = [point[column] for points in tools.values() for point in points]
        axis.set_xscale("log", base=2)
        axis.set_xticks(shown, [str(n) for n in shown])
        axis.set_yscale("log")
        axis.set_yticks([t for t in ticks if min(values) / 1.5 <= t <= max(values) * 1.5])
        axis.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        axis.yaxis.set_minor_formatter(NullFormatter())
        axis.set_xlabel("encoder layers (hidden 1024)")
        axis.set_ylabel(label)
        axis.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=8)
    figure.suptitle("Whole-process cost against depth (sequence-classification head)")
    figure.tight_layout()
    name = "scaling.png"
    figure.savefig(folder / name, dpi=120, metadata={"Software": None})
    plt.close(figure)
    return name


SUITE = Suite(
    name="sweep",
    title="Depth sweep (hidden 1024)",
    order=60,
    run=run,
    targets=targets,
    figure=plot,
    notes=("torchview with real weights allocates every weight; on the meta device it allocates none.",),
)
