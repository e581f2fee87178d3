"""The Python API: ``bertgraph.trace(...)`` returns an :class:`Architecture`.

An Architecture wraps the operator graph and offers every view of it; it never traces
again. In Jupyter it displays as the interactive page (its SVG diagram where HTML is not shown).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx

from bertgraph import cache
from bertgraph.graph import schema as g
from bertgraph.graph import stats, views
from bertgraph.model import ModelSpec, resolve

if TYPE_CHECKING:
    from bertgraph.graph.compare import Comparison

DEFAULT_DEPTH = 2


class Architecture:
    """A traced model: its annotated graph and the views, tables and diagrams of it.

    Examples:
        >>> arch = trace("bert-tiny", head="sequence-classification")  # doctest: +SKIP
        >>> arch.params()["total"]  # doctest: +SKIP
        4386178
    """

    def __init__(self, graph: nx.DiGraph) -> None:
        self.graph = graph

    # --- facts ----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return str(self.graph.graph.get(g.G_NAME, ""))

    @property
    def head(self) -> str:
        return str(self.graph.graph.get(g.G_HEAD, ""))

    @property
    def model_class(self) -> str:
        return str(self.graph.graph.get(g.G_MODEL_CLASS, ""))

    def __repr__(self) -> str:
        total = stats.parameter_stats(self.graph)["total"]
        return f"<Architecture {self.name} {self.model_class} ({total:,} parameters)>"

    # --- views and tables ---------------------------------------------------------------------
    def view(self, depth: int = DEFAULT_DEPTH, fold: bool = True) -> nx.DiGraph:
        """The graph at a level of detail (0 model … 3 anatomy, 4 operators), repeats folded."""
        return views.view(self.graph, depth, fold=fold)

    def params(self) -> dict[str, Any]:
        """Totals, groups and per-parameter rows (the ``params --format json`` object)."""
        return stats.parameter_stats(self.graph)

    def summary(self, depth: int | None = None, fold: bool = True) -> dict[str, Any]:
        """The folded module tree with output shapes, parameters and shares."""
        return stats.summary(self.graph, depth=depth, fold=fold)

    def cost(
        self,
        seq_len: int | Sequence[int] | None = None,
        batch: int | None = None,
        *,
        decoder_len: int | None = None,
        depth: int | None = None,
        fold: bool = True,
        dtype: str | None = None,
        generate: int | None = None,
        freeze: Sequence[str] = (),
        weights: str | None = None,
        scheme: str | None = None,
        group_size: int = 128,
        kv_dtype: str | None = None,
        gpu: str | None = None,
        gpu_overhead: float = 1.0,
    ) -> dict[str, Any]:
        """FLOPs, activation bytes and memory with their formulas (the ``cost --format json`` object).

        Evaluated at each sequence length of ``seq_len`` (default: the example's) and ``batch``;
        an encoder-decoder's decoder is ``decoder_len`` long (default: as long as the input).
        ``generate``: decode steps after each prefill; ``freeze``: parameter names, module paths or
        globs trained without gradients (``cost --freeze``). The ``deployment`` entry plans the weights
        as stored (``weights``, ``scheme``, ``group_size``: ``cost --weights``), the KV cache in
        ``kv_dtype`` and, on a ``gpu`` of the table (``"H100"``), fits, limits and bounds with
        ``gpu_overhead`` GiB kept for the CUDA context and the allocator.
        """
        from bertgraph.graph import costbase, costtable, memory
        from bertgraph.plan import deploy, gpus

        lengths = [seq_len] if seq_len is None or isinstance(seq_len, int) else list(seq_len)
        sizes = [costbase.sizes_for(self.graph, seq=length, batch=batch, decoder=decoder_len) for length in lengths]
        frozen = memory.freeze_patterns(self.graph, freeze)
        report = costtable.cost_report(
            self.graph, sizes, depth=depth, fold=fold, dtype=dtype, generate=generate, frozen=frozen
        )
        request = deploy.Request(
            weights=weights,
            scheme=scheme,
            group_size=group_size,
            kv_dtype=kv_dtype,
            dtype=dtype,
            gpu=gpus.gpu_named(gpu) if gpu else None,
            overhead_bytes=round(gpu_overhead * gpus.GIB),
        )
        return deploy.add_deployment(report, self.graph, sizes, request)

    def diff(self, other: Architecture) -> dict[str, Any]:
        """What turns this model into ``other`` (modules added, removed, changed)."""
        return stats.diff(self.graph, other.graph)

    # --- diagrams ---------------------------------------------------------------------------
    def to_dot(
        self,
        depth: int = DEFAULT_DEPTH,
        *,
        fold: bool = True,
        theme: str = "light",
        compare: Architecture | None = None,
        annotate: str | None = None,
        edge_labels: str = "changes",
    ) -> str:
        """Graphviz DOT source of the diagram (``compare`` draws a second variant beside it).

        ``annotate`` (``params``, ``flops``, ``memory``) puts that figure on every node, coloured by share.
        ``edge_labels``: ``shapes`` on every edge, only where the shape ``changes``, or ``none``.
        """
        from bertgraph.render import dot

        return dot.generate_dot(
            self.graph,
            depth=depth,
            fold=fold,
            theme=theme,
            compare=compare.graph if compare else None,
            annotate=annotate,
            edge_labels=edge_labels,
        )

    def to_mermaid(
        self,
        depth: int = DEFAULT_DEPTH,
        *,
        fold: bool = True,
        theme: str = "light",
        compare: Architecture | None = None,
        annotate: str | None = None,
        edge_labels: str = "changes",
    ) -> str:
        """Mermaid flowchart source; folds or goes shallower to stay within Mermaid's limits."""
        from bertgraph.render import mermaid

        return mermaid.generate_mermaid(
            self.graph,
            depth=depth,
            fold=fold,
            theme=theme,
            compare=compare.graph if compare else None,
            annotate=annotate,
            edge_labels=edge_labels,
        ).text

    def to_svg(self, depth: int = DEFAULT_DEPTH, **options: Any) -> str:
        """The SVG diagram; options as :meth:`to_dot` (``fold``, ``theme``, ``compare``, ``annotate``,
        ``edge_labels``)."""
        from bertgraph.render import render_image

        compare = options.pop("compare", None)
        graph = compare.graph if compare is not None else None
        return render_image(self.graph, "svg", depth=depth, compare=graph, **options).decode("utf-8")

    def save(self, path: str | Path, depth: int = DEFAULT_DEPTH, **options: Any) -> Path:
        """Write the diagram; the format follows the suffix (.svg .png .pdf .dot .mmd .md .html .graphml .json).

        Options as :meth:`to_dot` (``edge_labels`` too); graph files ignore the drawing's options.
        """
        from bertgraph.render import write_diagram

        compare = options.pop("compare", None)
        return write_diagram(
            self.graph, Path(path), depth=depth, compare=compare.graph if compare is not None else None, **options
        )

    def to_html(self, depth: int = DEFAULT_DEPTH, **options: Any) -> str:
        """The self-contained interactive page (every depth, pan, zoom, search, details)."""
        from bertgraph.render.html import generate_html

        compare = options.pop("compare", None)
        return generate_html(self.graph, depth, compare=compare.graph if compare is not None else None, **options)

    def _repr_html_(self) -> str:
        """In Jupyter: the interactive page, in an iframe so its script and styles stay its own."""
        from bertgraph.render.embed import iframe

        return iframe(self.to_html(), f"{self.name} · {self.model_class}")

    def _repr_svg_(self) -> str:
        return self.to_svg()

    def _repr_markdown_(self) -> str:
        return "```mermaid\n" + self.to_mermaid() + "```\n"


def load(spec: ModelSpec, *, use_cache: bool = True) -> Architecture:
    """The Architecture of a resolved spec, from the graph cache when possible."""
    use_cache = use_cache and cache.enabled()
    if use_cache:
        cached = cache.load(spec)
        if cached is not None:
            return Architecture(cached)
    graph = annotated_trace(spec)
    if use_cache:
        cache.store(spec, graph)
    return Architecture(graph)


def annotated_trace(spec: ModelSpec) -> nx.DiGraph:
    """One trace of ``spec`` with its costs and architecture facts: what every cache entry holds,
    whoever writes it (the command line, the API, the docs plugins)."""
    from bertgraph.graph import facts
    from bertgraph.graph.cost import annotate
    from bertgraph.tracing import trace as trace_spec

    return facts.annotate(annotate(trace_spec(spec)))


def trace(
    model: str = "bert-base-uncased",
    head: str = "base",
    *,
    seq_len: int | None = None,
    batch: int = 1,
    cache: bool = True,
    allow_pickle: bool = False,
    attention: str | None = None,
    dtype: str | None = None,
    revision: str | None = None,
    offline: bool | None = None,
    **overrides: int,
) -> Architecture:
    """Trace a model from its config and return its :class:`Architecture`.

    Parameters:
        model: a preset (``bert-base-uncased``, ``gpt2``, ``t5-small``, …), a directory with
            config.json, a config.json path, or a hub id (``org/name``, ``org/name@revision``):
            from the Hugging Face cache, or its config and safetensors headers fetched into it.
        head: ``base``, ``sequence-classification``, ``token-classification``,
            ``question-answering``, ``masked-lm``, ``multiple-choice``, ``next-sentence``,
            ``pretraining``, ``causal-lm`` or ``seq2seq-lm`` — those the model's family has.
        seq_len, batch: the example input size (shown symbolically in shapes).
        cache: use the on-disk graph cache.
        attention: ``eager`` or ``sdpa`` (default: transformers' choice, ``sdpa`` where the model has it).
        dtype: build the model in ``float16``, ``bfloat16`` or ``float32`` (default: its config's).
        revision: a hub id's branch, tag or commit; ``offline``: never fetch (as ``HF_HUB_OFFLINE=1``).
        overrides: ``layers``, ``hidden``, ``heads``, ``kv_heads``, ``intermediate``, ``vocab``,
            ``num_labels``.
    """
    spec = resolve(
        model,
        head,
        overrides=overrides,
        batch=batch,
        seq_len=seq_len,
        allow_pickle=allow_pickle,
        attention=attention,
        dtype=dtype,
        revision=revision,
        offline=offline,
    )
    return load(spec, use_cache=cache)


def compare(
    model_a: str,
    model_b: str,
    *,
    head_a: str = "base",
    head_b: str = "base",
    seq_len: int | None = None,
    batch: int = 1,
    cache: bool = True,
) -> Comparison:
    """Compare two models aligned by role: config, architecture, parameters per part, cost at
    ``batch`` × ``seq_len`` tokens and, when both are checkpoints, their tensors.

    ``comparison.contract()`` is the ``diff --format json`` object.
    """
    specs = [
        resolve(model, head, batch=batch, seq_len=seq_len) for model, head in ((model_a, head_a), (model_b, head_b))
    ]
    return compare_specs(specs[0], specs[1], seq_len or min(spec.seq_len for spec in specs), batch, use_cache=cache)


def compare_specs(a: ModelSpec, b: ModelSpec, seq_len: int, batch: int = 1, *, use_cache: bool = True) -> Comparison:
    """:func:`compare` of two resolved specs (each traced, or read from the graph cache, at its default example)."""
    from dataclasses import replace

    from bertgraph.graph.compare import Side
    from bertgraph.graph.compare import compare as compare_graphs
    from bertgraph.model.spec import DEFAULT_SEQ_LEN

    names = [spec.name + (f" ({spec.head})" if spec.head != "base" else "") for spec in (a, b)]
    if names[0] == names[1] and a.reference != b.reference:
        names = [spec.reference + (f" ({spec.head})" if spec.head != "base" else "") for spec in (a, b)]
    sides = []
    for spec, name in zip((a, b), names):
        # the graph of the size every other command traces, so the cache serves it: costs are polynomials
        example = replace(spec, batch=1, seq_len=min(DEFAULT_SEQ_LEN, spec.max_positions or DEFAULT_SEQ_LEN))
        sides.append(Side(name, load(example, use_cache=use_cache).graph, spec.config, spec.family.sizes))
    comparison = compare_graphs(sides[0], sides[1], seq=seq_len, batch=batch)
    if a.weights is not None and b.weights is not None:
        from bertgraph.model.tensor_diff import compare_checkpoints

        comparison.tensors = compare_checkpoints(a.weights, b.weights, (a.family.prefix, b.family.prefix))
    return comparison


def read_onnx(path: str | Path) -> Architecture:
    """The :class:`Architecture` of an ONNX file: the same graph schema, views and tables.

    Raises:
        OnnxError: a missing, unreadable or non-ONNX file (one line).
    """
    from bertgraph.graph import facts
    from bertgraph.graph.cost import annotate
    from bertgraph.onnx.read import read_onnx_graph

    return Architecture(facts.annotate(annotate(read_onnx_graph(path))))
