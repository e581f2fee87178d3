"""A model's architecture in the words a reader knows, per stack, and where two models differ.

Everything is read off the graph: the families schematic's columns (a layer's steps in the
order its ops run, the attention pattern, shared layers, the norms around the layers), the
facts pass's heads and position kinds, the parameter table. A comparison lists only the
aspects whose words differ, so two models of one architecture (BERT and RoBERTa) have none.
"""

from __future__ import annotations

import difflib
import itertools
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from bertgraph.graph import roles
from bertgraph.graph import schema as g
from bertgraph.graph.facts.summary import architecture
from bertgraph.graph.schematic import Column, Step, columns, norms_inside

NONE = "none"
# The aspects a comparison names, in the order it lists them (a stack's with its kind in front
# where a model has two stacks: "decoder attention").
MODEL_ASPECTS = ("structure",)
STACK_ASPECTS = (
    "layers",
    "attention",
    "query heads",
    "kv heads",
    "positions",
    "norm",
    "norm placement",
    "q/k norm",
    "activation",
    "bias",
    "shared layers",
)
OUTER_ASPECTS = ("tied embeddings", "pooler", "token types")
SUBLAYERS = ("attention", "cross-attention", "feed-forward")


@dataclass(frozen=True)
class StackWords:
    """One stack: its path, kind, schematic column and every stack aspect in words."""

    path: str
    kind: str
    column: Column
    words: dict[str, str]


@dataclass(frozen=True)
class ModelWords:
    """A model's aspects in words: the whole model's and each stack's (encoder first), with its
    architecture kind (:func:`~bertgraph.graph.kinds.architecture_kind`, the schematic's caption)."""

    words: dict[str, str]
    stacks: list[StackWords] = field(default_factory=list)
    kind: dict[str, Any] = field(default_factory=dict)


def describe(graph: nx.DiGraph) -> ModelWords:
    """Every aspect of ``graph`` in words, read off the graph and its facts."""
    kind, cols = columns(graph)
    paths = sorted(roles.stack_kinds(graph).items(), key=lambda item: (item[1] != roles.ENCODER, item[0]))
    facts = {stack["path"]: stack for stack in architecture(graph)["stacks"]}
    stacks = []
    for (path, side), column in zip(paths, cols):
        found = facts.get(path, {})
        # a norm of queries or keys (Qwen3's q_norm, k_norm) is said inside its attention step, not a step
        on_heads = {kind for step in column.steps if step.role in SUBLAYERS for kind in norms_inside(step)}
        words = {
            "layers": str(column.layers),
            "attention": attention_words(column),
            "query heads": _numbers(found.get("q_heads")),
            "kv heads": _numbers(found.get("kv_heads")),
            "positions": ", ".join(found.get("position", [])) or NONE,
            "norm": ", ".join(sorted({step.text for step in column.steps if step.role == "norm"})) or NONE,
            "norm placement": placement_words(column),
            "q/k norm": ", ".join(sorted(on_heads)) or NONE,
            "activation": ", ".join(_activation(step) for step in column.steps if step.role == "feed-forward") or NONE,
            "bias": _biases(graph, path),
            "shared layers": f"one layer, run {column.layers} ×" if column.shared else NONE,
        }
        stacks.append(StackWords(path, side, column, words))
    words = {
        "structure": roles.structure(graph) or "backbone",
        "tied embeddings": _tied(graph),
        "pooler": "yes" if any(roles.role_of(graph, row["module"]) == roles.POOLER for row in _rows(graph)) else "no",
        "token types": "yes" if graph.has_node("token_type_ids") else "no",
    }
    return ModelWords(words, stacks, kind)


def attention_words(column: Column) -> str:
    """A stack's self-attention as a reader says it: ``causal``; ``bidirectional, 2 × sliding-window(128),
    repeating``; ``layers 1–21: causal, layers 22–28: causal-sliding-window(4096)``."""
    if not column.pattern:
        return NONE
    if len(column.pattern) == 1:
        return column.pattern[0]
    if column.runs:
        return ", ".join(f"layer{'s' * (a != b)} {a}{f'–{b}' * (a != b)}: {label}" for a, b, label in column.runs)
    counted = [(label, len(list(run))) for label, run in itertools.groupby(column.pattern)]
    return ", ".join(label if n == 1 else f"{n} × {label}" for label, n in counted) + ", repeating"


def placement_words(column: Column) -> str:
    """Where the layer normalises: ``pre-norm`` (inside each residual branch, before its sublayer),
    ``post-norm`` (on the main path, after a residual add), both inside a branch (``sandwich``), and the
    norms around the layers (``norm after the embeddings``, ``final norm``). Norms of queries and keys
    (Qwen3's q_norm and k_norm) are their attention step's details, not steps: they do not count."""
    places = set()
    for index, step in enumerate(column.steps):
        if step.role != "norm":
            continue
        branch = [(start, end) for start, end in column.skips if start < index < end]
        if not branch:
            places.add("post")
            continue
        start, end = branch[0]
        sublayers = [n for n in range(start + 1, end) if column.steps[n].role in SUBLAYERS]
        places.add("pre" if sublayers and index < sublayers[0] else "inner")
    words = {
        frozenset(): "no norm in the layer",
        frozenset({"pre"}): "pre-norm",
        frozenset({"post"}): "post-norm",
        frozenset({"pre", "inner"}): "sandwich (pre- and post-norm)",
    }.get(frozenset(places), ", ".join(f"{place}-norm" for place in sorted(places)))
    outer = ["norm after the embeddings"] * column.embedding_norm + ["final norm"] * column.final_norm
    return ", ".join([words, *outer])


def _activation(step: Step) -> str:
    """``FFN GELU · 768→3072→768`` → ``GELU``."""
    return step.text.split(" · ", 1)[0].removeprefix("FFN ").strip()


def _numbers(values: list[int] | None) -> str:
    return "/".join(str(n) for n in values) if values else "unknown"


def _rows(graph: nx.DiGraph) -> list[dict[str, str]]:
    return [{"name": str(row["name"]), "module": str(row["module"])} for row in g.parameter_rows(graph)]


BIAS_OWNERS = {roles.SELF_ATTENTION: "attention", roles.CROSS_ATTENTION: "attention", roles.FEED_FORWARD: "FFN"}


def _biases(graph: nx.DiGraph, stack: str) -> str:
    """Which parts of the stack's layers add a bias: ``attention, FFN, norms`` or ``none``."""
    found = set()
    for row in _rows(graph):
        if row["module"].startswith(stack + ".") and row["name"].endswith(".bias"):
            role = roles.role_of(graph, row["module"])
            found.add("norms" if role == roles.NORM else BIAS_OWNERS.get(role, "other layers"))
    order = ("attention", "FFN", "norms", "other layers")
    return ", ".join(part for part in order if part in found) or NONE


def _tied(graph: nx.DiGraph) -> str:
    """``tied``: the head's output projection is the input embedding; ``untied``: it has its own;
    ``no output embedding``: no head projects onto the vocabulary."""
    for alias, owner in dict(graph.graph.get(g.G_TIED, {})).items():
        if roles.role_of(graph, str(alias).rsplit(".", 1)[0]) == roles.HEAD and roles.role_of(
            graph, str(owner).rsplit(".", 1)[0]
        ) in (roles.EMBEDDINGS, roles.POSITION):
            return "tied"
    vocab = graph.graph.get(g.G_CONFIG, {}).get("vocab")
    for row in g.parameter_rows(graph):
        shape = list(row.get("shape", []))
        if roles.role_of(graph, str(row["module"])) == roles.HEAD and len(shape) == 2 and shape[0] == vocab:
            return "untied"
    return "no output embedding"


# --- two models --------------------------------------------------------------------------------


def pair_stacks(a: list[str], b: list[str]) -> list[tuple[int | None, int | None]]:
    """Stack kinds of two models paired: encoder with encoder, decoder with decoder; a model of one
    stack with a model of one stack whatever their kinds (BERT's encoder with GPT-2's decoder).

    >>> pair_stacks(["encoder"], ["decoder"]), pair_stacks(["encoder"], ["encoder", "decoder"])
    ([(0, 0)], [(0, 0), (None, 1)])
    """
    if len(a) == 1 and len(b) == 1:
        return [(0, 0)]
    pairs: list[tuple[int | None, int | None]] = []
    for kind in dict.fromkeys([*a, *b]):
        pairs.append((a.index(kind) if kind in a else None, b.index(kind) if kind in b else None))
    return pairs


def stack_title(kinds: tuple[str | None, str | None], single: bool) -> str:
    """What a pair of stacks is called in aspects and parts: its kind, or nothing when each model
    has one stack (BERT's encoder and GPT-2's decoder are both "layers")."""
    return "" if single else next(kind for kind in kinds if kind)


def differences(a: ModelWords, b: ModelWords) -> list[dict[str, object]]:
    """The aspects whose words differ, in :data:`STACK_ASPECTS` order per stack pair:
    ``[{"aspect": "norm", "values": ["LayerNorm", "RMSNorm"]}, …]``."""
    found: list[dict[str, object]] = []

    def add(aspect: str, left: str, right: str) -> None:
        if left != right:
            found.append({"aspect": aspect, "values": [left, right]})

    for aspect in MODEL_ASPECTS:
        add(aspect, a.words[aspect], b.words[aspect])
    pairs = pair_stacks([s.kind for s in a.stacks], [s.kind for s in b.stacks])
    single = len(a.stacks) == 1 and len(b.stacks) == 1
    for left, right in pairs:
        x = a.stacks[left] if left is not None else None
        y = b.stacks[right] if right is not None else None
        prefix = stack_title((x.kind if x else None, y.kind if y else None), single)
        name = (prefix + " " if prefix else "") + "{}"
        if x is None or y is None:
            add(name.format("layers"), x.words["layers"] if x else NONE, y.words["layers"] if y else NONE)
            continue
        for aspect in STACK_ASPECTS:
            add(name.format(aspect), x.words[aspect], y.words[aspect])
    for aspect in OUTER_ASPECTS:
        add(aspect, a.words[aspect], b.words[aspect])
    return found


# --- the figure's marks ------------------------------------------------------------------------


def _step_key(step: Step, words: dict[str, str]) -> tuple[str, ...]:
    """What a step says, for comparing it with the other model's step at the same place (attention's
    with what acts inside it: a q/k norm, rotary or relative positions)."""
    if step.role == "attention":
        return (step.role, words["attention"], words["query heads"], words["kv heads"], *step.details)
    if step.role == "cross-attention":
        return (step.role, words["query heads"], words["kv heads"], *step.details)
    return (step.role, step.text)


def step_marks(
    a: StackWords | None, b: StackWords | None, embeddings_differ: bool = False
) -> tuple[set[str], set[str]]:
    """The parts of two paired columns that differ, as the schematic names its nodes: ``s3`` (step 3),
    ``emb`` (embeddings), ``fn`` (final norm), ``layer`` (the "N ×" frame).

    The steps are paired in order by role (a longest common run, so BERT's norm after the add and
    GPT-2's before the attention are each unmatched); a step without a partner, or whose partner says
    something else (another activation, kind of attention or heads), is marked on its side. The
    embeddings are marked when their positions or norm differ, or ``embeddings_differ`` (their parameters).
    """
    if a is None or b is None:
        lone = a or b
        marks = {"emb", "layer", "fn"} | {f"s{n}" for n in range(len(lone.column.steps))} if lone else set()
        return (marks, set()) if a is not None else (set(), marks)
    left, right = a.column, b.column
    marked_a: set[str] = set()
    marked_b: set[str] = set()
    matcher = difflib.SequenceMatcher(a=[s.role for s in left.steps], b=[s.role for s in right.steps], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            marked_a |= {f"s{n}" for n in range(i1, i2)}
            marked_b |= {f"s{n}" for n in range(j1, j2)}
            continue
        for i, j in zip(range(i1, i2), range(j1, j2)):
            if _step_key(left.steps[i], a.words) != _step_key(right.steps[j], b.words):
                marked_a.add(f"s{i}")
                marked_b.add(f"s{j}")
    if embeddings_differ or (a.words["positions"], left.embedding_norm) != (b.words["positions"], right.embedding_norm):
        marked_a.add("emb")
        marked_b.add("emb")
    if left.final_norm != right.final_norm:
        (marked_a if left.final_norm else marked_b).add("fn")
    if (a.words["layers"], a.words["shared layers"], a.words["attention"]) != (
        b.words["layers"],
        b.words["shared layers"],
        b.words["attention"],
    ):
        marked_a.add("layer")
        marked_b.add("layer")
    return marked_a, marked_b
