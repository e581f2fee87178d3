"""48 layers × hidden 4096 (≈ 9.8 B parameters): what needs no weights still works."""

from __future__ import annotations

from harness import Command, Context, Stored, Suite, Target

HUGE = {"layers": 48, "hidden": 4096, "heads": 32, "intermediate": 16384}


def commands(ctx: Context) -> dict[str, Command]:
    size = ctx.size(HUGE)
    return {
        "bertgraph summary": ctx.bertgraph("summary", size),
        "bertgraph render": ctx.bertgraph("render", size, out="huge.svg"),
        "torchinfo summary (meta device)": ctx.peer("torchinfo-meta", size),
        "torchview (meta device)": ctx.peer("torchview-meta", size),
    }


def targets(stored: dict[str, Stored]) -> list[Target]:
    rows = []
    for name in ("bertgraph summary", "bertgraph render"):
        item = stored[name]
        rows.append(
            Target(
                f"48 layers × hidden 4096 (9.8 B): {name.split()[1]} < 15 s and < 1.5 GB",
                f"{item.seconds:.2f} s, {item.peak_mb:.0f} MB",
                item.seconds < 15 and item.peak_mb < 1536,
            )
        )
    return rows


SUITE = Suite(
    name="huge",
    title="48 layers × hidden 4096 (≈ 9.8 B parameters)",
    order=70,
    commands=commands,
    targets=targets,
    notes=(
        "torchview with real weights is not run at this size: 9.8 B float32 weights are 39 GB, more than this "
        "machine's memory. On the meta device torchview and torchinfo need no weights, like bertgraph.",
    ),
)
