"""What a docs author asked for: the options of a ``bertgraph`` directive or fence, checked.

Checking reads only the model's config (:func:`bertgraph.model.resolve`), so a misspelt
preset or option is reported at the line that has it, before anything is traced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from bertgraph.errors import BertgraphError
from bertgraph.model import ModelSpec, resolve
from bertgraph.model.families.record import HEAD_NAMES
from bertgraph.model.fields import LIMITS
from bertgraph.model.spec import check_length

FORMATS = ("svg", "mermaid", "html", "table", "summary")
TEXT_FORMATS = ("table", "summary")  # tables of one model, drawn as text
# diagram: one model's diagram; schematic: the families schematic of the models named; masks: their attention masks
FIGURES = ("diagram", "schematic", "masks")
THEMES = ("auto", "light", "dark")
EDGE_LABELS = ("shapes", "changes", "none")  # render/diagram.py's, kept here so checking imports no renderer
MAX_DEPTH = 4
SIZE_OPTIONS = ("layers", "hidden", "heads", "intermediate", "vocab", "num-labels")
OPTIONS = (
    "model",
    "head",
    "depth",
    "format",
    "compare",
    "theme",
    "edge-labels",
    "caption",
    "unfold",
    *SIZE_OPTIONS,
    "seq-len",
    "batch",
    "figure",
    "css",
)
# The formats a style sheet restyles (an SVG drawn into the page, and the interactive page's drawings).
STYLED_FORMATS = ("svg", "html")


class OptionError(BertgraphError):
    """An option of a directive or fence that bertgraph cannot use."""


def model_names(text: str) -> list[str]:
    """The models a figure names: separated by commas, or by spaces when there is no comma (so a
    path with a space in it is named in a list separated by commas)."""
    parts = text.split(",") if "," in text else text.split()
    return [name.strip() for name in parts if name.strip()]


def join_models(names: list[str]) -> str:
    """Models named as :func:`model_names` reads them back, spaces in a name included."""
    return ", ".join(names)


@dataclass(frozen=True)
class DiagramRequest:
    """One diagram, table or page as a docs author described it (plain, hashable data)."""

    model: str
    head: str = "base"
    depth: int = 2
    format: str = "svg"
    compare: str | None = None
    theme: str = "auto"
    edge_labels: str = "changes"
    unfold: bool = False
    sizes: tuple[tuple[str, int], ...] = field(default_factory=tuple)
    seq_len: int | None = None
    batch: int = 1
    figure: str = "diagram"
    css: str = ""  # the text of the author's style sheet (render/restyle.py), checked when read

    def names(self) -> list[str]:
        """The models drawn: a figure of several takes them as :func:`model_names` splits them."""
        if self.figure == "diagram":
            return [self.model]
        return model_names(self.model)

    def spec(self, head: str | None = None) -> ModelSpec:
        """The resolved model (no torch); ``head`` for the compared variant."""
        overrides = {name.replace("-", "_"): value for name, value in self.sizes}
        return resolve(self.model, head or self.head, overrides=overrides, batch=self.batch, seq_len=self.seq_len)

    def specs(self) -> list[ModelSpec]:
        """The model, and the compared variant when there is one (a figure: every model it names)."""
        if self.figure != "diagram":
            overrides = {name.replace("-", "_"): value for name, value in self.sizes}
            return [resolve(name, "base", overrides=overrides) for name in self.names()]
        return [self.spec()] + ([self.spec(self.compare)] if self.compare else [])

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["sizes"] = [list(pair) for pair in self.sizes]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DiagramRequest:
        values = dict(data)
        values["sizes"] = tuple((str(name), int(value)) for name, value in values.get("sizes", []))
        return cls(**values)

    def describe(self) -> str:
        """``bert-tiny · sequence-classification · depth 2 · svg`` (for logs)."""
        if self.figure != "diagram":
            return f"{self.figure} of {', '.join(self.names())} · {self.format}"
        parts = [self.model, self.head + (f" vs {self.compare}" if self.compare else ""), f"depth {self.depth}"]
        parts += [self.format] + (["unfolded"] if self.unfold else [])
        parts += [f"edge labels {self.edge_labels}"] if self.edge_labels != "changes" else []
        parts += [f"{name} {value}" for name, value in self.sizes]
        return " · ".join(parts)


def _whole(name: str, value: Any, minimum: int, maximum: int | None = None, why: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise OptionError(f"{name} must be a whole number, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise OptionError(f"{name} must be a whole number, got {value!r}") from None
    if number < minimum or (maximum is not None and number > maximum):
        limit = f"{minimum} to {maximum}" if maximum is not None else f"at least {minimum}"
        raise OptionError(f"{name} must be {limit}{f' ({why})' if why else ''}, got {number}")
    return number


def _choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    text = str(value).strip()
    if text not in choices:
        raise OptionError(f"{name} must be one of {', '.join(choices)}; got {text!r}")
    return text


def _flag(name: str, value: Any) -> bool:
    if value is None or value is True or value is False:
        return value is not False
    text = str(value).strip().lower()
    if text in ("", "true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise OptionError(f"{name} is true or false, got {value!r}")


def parse(options: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> DiagramRequest:
    """A checked request from option names and values (strings, numbers or flags).

    ``defaults`` are site-wide settings (``theme``, ``format``) that options override.

    Raises:
        OptionError: an unknown option or a value out of range (one line, naming it).
        BertgraphError: a model reference or head bertgraph cannot resolve.

    >>> parse({"model": "bert-tiny", "depth": "3", "format": "table"}).describe()
    'bert-tiny · base · depth 3 · table'
    >>> parse({"model": "bert-tiny", "depht": 3})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bertgraph.docs.request.OptionError: unknown option 'depht'; known: model, head, depth, ...
    """
    values = {**(defaults or {}), **{str(key).replace("_", "-"): value for key, value in options.items()}}
    unknown = [key for key in values if key not in OPTIONS]
    if unknown:
        raise OptionError(f"unknown option {unknown[0]!r}; known: {', '.join(OPTIONS)}")
    model = str(values.get("model") or "").strip()
    if not model:
        raise OptionError("give the model: a preset such as bert-base-uncased, a folder with config.json, or a hub id")
    head = _choice("head", values.get("head", "base"), HEAD_NAMES)
    compare = values.get("compare")
    figure = _choice("figure", values.get("figure", "diagram"), FIGURES)
    if figure != "diagram":
        _check_figure(figure, options, values)
        values["format"] = "svg"  # a site's default format is for diagrams
    request = DiagramRequest(
        model=model,
        head=head,
        depth=_whole("depth", values.get("depth", 2), 0, MAX_DEPTH),
        format=_choice("format", values.get("format", "svg"), FORMATS),
        compare=_choice("compare", compare, HEAD_NAMES) if compare not in (None, "") else None,
        theme=_choice("theme", values.get("theme", "auto"), THEMES),
        edge_labels=_choice("edge-labels", values.get("edge-labels", "changes"), EDGE_LABELS),
        unfold=_flag("unfold", values["unfold"]) if "unfold" in values else False,
        sizes=tuple((name, _whole(name, values[name], 1)) for name in SIZE_OPTIONS if values.get(name) is not None),
        seq_len=_seq_len(values["seq-len"], figure) if values.get("seq-len") is not None else None,
        batch=_whole("batch", values.get("batch", 1), 1),
        figure=figure,
        css=_style_sheet(values.get("css"), values.get("format", "svg")),
    )
    if request.compare and request.format in TEXT_FORMATS:
        # A table is one model's: a compared head would be traced and never shown.
        raise OptionError(
            f"format {request.format} shows one model; drop the compare option"
            " (two heads side by side are drawn as svg, mermaid or html)"
        )
    specs = request.specs()
    if request.figure == "masks" and request.seq_len is not None:
        for spec in specs:  # the example each model's masks are evaluated on fits its positions
            check_length(spec, request.seq_len, "seq-len")
    return request


def _seq_len(value: Any, figure: str) -> int:
    """The example's length: a diagram's is held to the model's positions when it resolves; the
    masks figure's to its own limit, checked here, so a page never waits on a grid too large."""
    if figure != "masks":
        return _whole("seq-len", value, 1)
    limit = LIMITS["mask"]
    return _whole("seq-len", value, 1, limit.maximum, limit.why)


def _style_sheet(path: Any, fmt: Any) -> str:
    """The checked text of the ``css`` option's file (a path the builder resolved from the page), or ""."""
    if path in (None, ""):
        return ""
    if str(fmt).strip() not in STYLED_FORMATS:
        raise OptionError(f"css restyles the svg and html formats, not {str(fmt).strip()}; drop css or the format")
    from bertgraph.render.restyle import read_style_sheet

    return read_style_sheet(str(path))


def _check_figure(figure: str, options: Mapping[str, Any], values: Mapping[str, Any]) -> None:
    """A schematic or masks figure is one SVG of its models' base graphs: no format but svg, no head."""
    given = {str(key).replace("_", "-") for key in options}
    if "format" in given and str(values["format"]).strip() != "svg":
        raise OptionError(f"figure {figure} is drawn as svg; drop format {str(values['format']).strip()!r}")
    for name in ("head", "compare", "depth", "unfold", "edge-labels", "seq-len", "batch"):
        if name in given and not (figure == "masks" and name == "seq-len"):  # the masks' example length
            raise OptionError(f"figure {figure} draws each model's base graph; drop the {name} option")
