"""Two models compared, as a terminal table, Markdown and JSON (:mod:`bertgraph.graph.compare`'s data).

The JSON is the contract (:meth:`~bertgraph.graph.compare.Comparison.contract`). The tables say
the same in sections (:func:`sections`: config, architecture, parameters per part, cost at a size,
tensors), which the text, Markdown and the page (:mod:`bertgraph.render.diff_page`) each write.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bertgraph.graph.compare import Comparison
from bertgraph.render import figures, markdown, text
from bertgraph.render.escape import json_text, terminal_text
from bertgraph.render.escape import markdown_text as md

ABSENT = "—"
TENSOR_KINDS = ("changed", "reshaped", "added", "removed")


@dataclass(frozen=True)
class Section:
    """One table of the comparison: a title, what it lists (``lead``), plain-text cells (each writer
    escapes them) with numeric columns flagged in ``right``; ``empty`` says what no rows mean."""

    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    right: list[bool] = field(default_factory=list)
    lead: str = ""
    empty: str = ""
    notes: list[str] = field(default_factory=list)

    def said(self) -> str:
        """What the table lists, or what its having no rows means."""
        return self.lead if self.rows or not self.empty else self.empty

    def heading(self) -> str:
        return f"{self.title}: {self.said()}" if self.said() else self.title


def generate_json(comparison: Comparison) -> str:
    """The contract as JSON text (every character kept, as JSON can hold it)."""
    return json_text(json.dumps(comparison.contract(), indent=2, ensure_ascii=False)) + "\n"


def config_value(value: Any) -> str:
    """A config value as config.json writes it; a string bare, a field a config lacks as ``—``.

    >>> [config_value(v) for v in (30522, "gelu", None, 1e-05, True, [1, 2])]
    ['30522', 'gelu', '—', '1e-05', 'true', '[1, 2]']
    """
    if value is None:
        return ABSENT
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _count(value: int | None) -> str:
    return ABSENT if value is None else figures.count(value)


def _change(values: Sequence[int | None]) -> str:
    """What the second model has more (or less) of: a part one model lacks counts as 0 there."""
    delta = (values[1] or 0) - (values[0] or 0)
    return f"{delta:+,}" if delta else ""


def headline(comparison: Comparison) -> str:
    """``a vs b · 109,482,240 vs 124,645,632 parameters (+15,163,392)``."""
    a, b = comparison.totals
    change = f" ({b - a:+,})" if b != a else ", the same"
    return f"{comparison.models[0]} vs {comparison.models[1]} · {a:,} vs {b:,} parameters{change}"


def _per_token(value: float | None, unit: Any) -> str:
    """A figure with its unit and its exact value: ``175 MFLOP (174,925,068)``."""
    if value is None:
        return ABSENT
    exact = f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"
    return f"{unit(round(value))} ({exact})"


def sections(comparison: Comparison) -> list[Section]:
    """The comparison's tables, in the order every writer shows them."""
    a, b = comparison.models
    found = [
        Section(
            "config",
            ["field", a, b],
            [[row["field"], *map(config_value, row["values"])] for row in comparison.config],
            [False, False, False],
            lead="fields that differ",
            empty="no field differs",
        ),
        Section(
            "architecture",
            ["aspect", a, b],
            [[row["aspect"], *row["values"]] for row in comparison.architecture],
            [False, False, False],
            lead="what differs",
            empty="the same, every aspect read off the two graphs agrees",
        ),
    ]
    parts = [[row["part"], *map(_count, row["params"]), _change(row["params"])] for row in comparison.parts]
    parts.append(["total", *map(_count, comparison.totals), _change(comparison.totals)])
    found.append(Section("parameters per part", ["part", a, b, "change"], parts, [False, True, True, True]))
    cost = comparison.cost
    dtypes = " and ".join(dict.fromkeys(cost["dtypes"]))
    found.append(
        Section(
            f"cost of one forward pass at batch {cost['batch']} × {cost['seq']} tokens ({dtypes})",
            ["measure", a, b],
            [
                ["FLOPs per token", *(_per_token(v, figures.flops) for v in cost["flops_per_token"])],
                ["KV cache per token", *(_per_token(v, figures.size) for v in cost["kv_cache_bytes_per_token"])],
                ["peak activations", *(_per_token(v, figures.size) for v in cost["peak_activation_bytes"])],
            ],
            [False, True, True],
            notes=list(cost["notes"]),
        )
    )
    if comparison.tensors is not None:
        found.append(_tensor_section(comparison.tensors))
    return found


def _tensor_section(tensors: dict[str, Any]) -> Section:
    """One row per tensor that is not the same: what happened, its name, its shape and dtype."""
    rows = []
    for entry in tensors["changed"]:
        rows.append(
            ["changed", entry["tensor"], figures.shape(entry["shape"]), " → ".join(dict.fromkeys(entry["dtypes"]))]
        )
    for entry in tensors["reshaped"]:
        rows.append(["reshaped", entry["tensor"], " → ".join(figures.shape(s) for s in entry["shapes"]), ""])
    for kind in ("added", "removed"):
        rows += [[kind, e["tensor"], figures.shape(e["shape"]), e["dtype"]] for e in tensors[kind]]
    counts = ", ".join(f"{len(tensors[kind])} {kind}" for kind in TENSOR_KINDS)
    return Section(
        "tensors of the two checkpoints",
        ["", "tensor", "shape", "dtype"],
        rows,
        [False, False, False, False],
        lead=f"{counts}, {tensors['same']} the same",
    )


def generate_text(comparison: Comparison) -> Iterable[str]:
    """The comparison as terminal tables: config, architecture, parameters per part, cost, tensors."""
    yield terminal_text(headline(comparison))
    for section in sections(comparison):
        yield ""
        yield terminal_text(section.heading())
        if section.rows:
            yield from text.table([terminal_text(h) for h in section.headers], section.rows, section.right)
        for note in section.notes:
            yield terminal_text(f"note: {note}")


def _sentence(line: str) -> str:
    return md(line[0].upper() + line[1:]) + "."


# Column headers that are words of the table, not model names (the Markdown capitalises them).
_HEADER_WORDS = frozenset({"field", "aspect", "part", "change", "measure", "tensor", "shape", "dtype"})


def generate_markdown(comparison: Comparison) -> Iterable[str]:
    """The same tables as Markdown, under a heading naming both models."""
    yield f"## {md(comparison.models[0])} vs {md(comparison.models[1])}"
    yield ""
    yield md(headline(comparison)) + "."
    for section in sections(comparison):
        yield ""
        yield f"### {md(section.title[0].upper() + section.title[1:])}"
        if section.said():
            yield ""
            yield _sentence(section.said())
        if section.rows:
            yield ""
            headers = [md(h.capitalize() if h in _HEADER_WORDS else h) for h in section.headers]
            yield from markdown.table(headers, ([md(cell) for cell in row] for row in section.rows), section.right)
        for note in section.notes:
            yield ""
            yield _sentence(f"note: {note}")


def tables_text(comparison: Comparison, fmt: str) -> str:
    """The comparison in ``fmt``: ``text``, ``markdown`` or ``json``."""
    if fmt == "json":
        return generate_json(comparison)
    lines = generate_text(comparison) if fmt == "text" else generate_markdown(comparison)
    return "\n".join(lines) + "\n"
