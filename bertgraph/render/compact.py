"""The compact layout: a diagram narrow enough to read in a docs column (about 800 px).

Measured on every preset (benchmarks/readability.py), width went to things a reader does not
need beside the flow: inputs in columns of their own, attention-mask nodes in side columns
(BART has three), sibling embedding tables side by side. :func:`compact` rewrites the plain
records of a :class:`~bertgraph.render.records.Diagram` — so DOT and Mermaid stay alike — and
keeps every truth the drawing invariants check: no edge is invented that the data does not
carry (a mask's inputs go to what the mask fed), so an acyclic drawing stays acyclic.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import replace

from bertgraph.graph import kinds, roles
from bertgraph.render.records import Diagram, Edge, Node

_ATTENTION_ROLES = (roles.SELF_ATTENTION, roles.CROSS_ATTENTION)
_TABLE_FACTS = frozenset(kinds.POSITION_WORDS.values())

# "Embedding 30522 × 768" → "30522 × 768": the table's size, without the class a reader does not need.
_TABLE_SIZE = re.compile(r"(\d[\d,]* × \d[\d,]*)$")


def compact(diagram: Diagram, depth: int) -> Diagram:
    """``diagram`` with masks inside what they feed, sibling tables merged (depth ≤ 2), inputs with their readers."""
    _absorb_side_inputs(diagram)
    if depth <= 2:
        _merge_tables(diagram)
    _place_io(diagram)
    _lower_sources(diagram)
    return diagram


def _replace_node(diagram: Diagram, node: Node) -> None:
    diagram.nodes = [node if n.id == node.id else n for n in diagram.nodes]


def _remove_node(diagram: Diagram, node_id: str, rerouted: list[Edge], heir: str | None) -> None:
    """Drop ``node_id`` and its edges; add ``rerouted`` edges unless an edge already joins their ends.

    ``heir`` (the node that now says what ``node_id`` said) takes its place in rank hints, so
    the encoder's column stays left of the decoder's when its first node was a table.
    """
    diagram.nodes = [n for n in diagram.nodes if n.id != node_id]
    diagram.membership.pop(node_id, None)
    kept = [e for e in diagram.edges if node_id not in (e.source, e.target)]
    joined = {(e.source, e.target) for e in kept}
    for edge in rerouted:
        if (edge.source, edge.target) not in joined and edge.source != edge.target:
            kept.append(edge)
            joined.add((edge.source, edge.target))
    diagram.edges = kept

    def inherit(group: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys((heir or n) if n == node_id else n for n in group if n != node_id or heir))

    diagram.same_rank = [group for group in map(inherit, diagram.same_rank) if len(group) > 1]
    diagram.left_of = [(pair[0], pair[1]) for pair in map(inherit, diagram.left_of) if len(pair) == 2]


def _is_side_input(node: Node, readers: list[Node]) -> bool:
    """An attention mask, or a parameter-free computation only attention reads in several places (rotary cos/sin).

    Both feed every layer: as nodes they send long edges down a column of their own.
    """
    if node.shape == "io" or not readers or node.kind.startswith("attention") or node.role in _ATTENTION_ROLES:
        # Attention's own steps are not side inputs, even when several nodes read them: T5's first
        # cross-attention hands its masked position bias to the folded layers, DeBERTa's position
        # dropout feeds the query and key projections of positions (a step of that path).
        return False
    if node.kind == "mask" and node.shape == "op":
        return not any(r.shape == "io" for r in readers)  # an output is drawn, never given a mask line
    free = not any("params" in line for line in node.lines)
    return free and len(readers) > 1 and all(r.kind.startswith("attention") for r in readers)


def _absorb_side_inputs(diagram: Diagram) -> None:
    """Each side input (:func:`_is_side_input`) becomes a line of the nodes it fed; what it read feeds them."""
    changed = True
    while changed:
        changed = False
        by_id = {n.id: n for n in diagram.nodes}
        for node in diagram.nodes:
            targets = list(dict.fromkeys(e.target for e in diagram.edges if e.source == node.id))
            if _is_side_input(node, [by_id[t] for t in targets]):
                _absorb(diagram, node, targets)
                changed = True
                break


def _absorb(diagram: Diagram, side: Node, targets: list[str]) -> None:
    carried = {e.source: e.shape for e in diagram.edges if e.target == side.id}
    sources = list(carried)
    shape = side.lines[-1] if side.lines else ""
    line = f"with {side.title} {shape}".strip()
    by_id = {n.id: n for n in diagram.nodes}
    for target in targets:
        node = by_id[target]
        if line not in node.lines:
            tooltip = f"{node.tooltip}\nreads {side.title} ({side.tooltip})"
            _replace_node(diagram, replace(node, lines=(*node.lines, line), tooltip=tooltip))
    # Dotted, as mask edges are, when a mask was absorbed or the edge carried one: a rotary table's input is data.
    masked = {e.source for e in diagram.edges if e.target == side.id and e.style == "mask"}
    rerouted = [
        Edge(s, t, carried[s], "mask" if side.kind == "mask" or s in masked else "data", carried[s])
        for s in sources
        for t in targets
    ]
    _remove_node(diagram, side.id, rerouted, targets[0] if targets else None)


def _merge_tables(diagram: Diagram) -> None:
    """Embedding tables that only feed one sum of embeddings become lines of that sum.

    Side by side, BERT's three tables (each a box with its class and size) were the widest row
    of the drawing; one box listing them says the same in a third of the width.
    """
    feeds: dict[str, list[str]] = defaultdict(list)
    for edge in diagram.edges:
        feeds[edge.source].append(edge.target)
    by_id = {n.id: n for n in diagram.nodes}
    for total in [n for n in diagram.nodes if n.title == "sum of embeddings"]:
        tables = [
            by_id[e.source]
            for e in diagram.edges
            if e.target == total.id
            and by_id[e.source].kind == "embedding"
            and by_id[e.source].shape == "module"
            and feeds[e.source] == [total.id]
            and diagram.membership.get(e.source) == diagram.membership.get(total.id)
        ]
        if len(tables) < 2:
            continue
        # what a table says besides its size (absolute positions: where positions act) stays said
        facts = tuple(dict.fromkeys(line for table in tables for line in table.lines if line in _TABLE_FACTS))
        lines = tuple(_table_line(table) for table in tables) + facts + total.lines[-1:]
        tooltip = "\n".join([total.tooltip, *(t.tooltip for t in tables)])
        # A box, not an ellipse: an ellipse around several lines is twice as wide as their text.
        _replace_node(diagram, replace(total, lines=lines, tooltip=tooltip, shape="module"))
        for table in tables:
            rerouted = [replace(e, target=total.id) for e in diagram.edges if e.target == table.id]
            _remove_node(diagram, table.id, rerouted, total.id)


def _table_line(table: Node) -> str:
    """``word_embeddings 30522 × 768 · 23.4M params`` (or ``· tied to shared``) for one merged table."""
    size = _TABLE_SIZE.search(table.lines[0]) if table.lines else None
    parts = [table.title] + ([size.group(1)] if size else [])
    params = table.lines[1] if len(table.lines) > 2 else ""
    return " ".join(parts) + (f" · {params}" if params else "")


def _place_io(diagram: Diagram) -> None:
    """Inputs drawn in the innermost cluster holding every node of their stack that reads them; outputs at the bottom.

    In no cluster, Graphviz gives each input a column beside the backbone; inside its readers'
    cluster it sits just above them, in a column the drawing has anyway.
    """
    parents: dict[str | None, str | None] = {c.id: c.parent for c in diagram.clusters}
    outputs = []
    for node in diagram.nodes:
        if node.shape != "io":
            continue
        readers = [e.target for e in diagram.edges if e.source == node.id]
        if not readers:
            outputs.append(node.id)
            continue
        # An input a stack reads sits with that stack's readers: the encoder's (its attention mask, which
        # the decoder's cross-attention reads too; BART's input ids, which its classifier reads too).
        side = diagram.sides.get(node.id)
        own = [r for r in readers if diagram.sides.get(r) == side] if side else readers
        chains = [_chain(diagram.membership.get(r), parents) for r in own or readers]
        common = chains[0]
        for chain in chains[1:]:
            common = [c for c, other in zip(common, chain) if c == other]
        if side:
            # an encoder-decoder's input in its stack's frame, not deep in a layer: its way out to the other
            # stack does not start inside a block (BART's mask ran round the encoder), and a layer's first
            # row is not widened by it (BART's decoder mask beside the queries, keys and values)
            common = common[:2]
        if common and common[-1] is not None:
            diagram.membership[node.id] = common[-1]
            _above_first_block(diagram, node.id, chains, len(common), parents)
    if outputs:
        # The encoder's output first: the writers keep this order left to right on the last rank, and
        # with it the encoder's column left of the decoder's (render/dot.py).
        diagram.bottom = sorted(outputs, key=lambda n: diagram.sides.get(n) != "encoder")


def _above_first_block(
    diagram: Diagram, node: str, chains: list[list[str | None]], depth: int, parents: dict[str | None, str | None]
) -> None:
    """Rank input ``node`` above the box, inside the cluster it was put in, that holds its first reader.

    Graphviz ranks an input just above its first reader; when that reader is deep in a layer
    (an attention mask read by the first self-attention) the input sits beside the layer's box,
    and the column holding it is as tall as the box. Above the box it sits beside what runs
    before the layer — a norm, a dropout — where the column is narrow anyway.
    """
    boxes = [chain[depth] for chain in chains if len(chain) > depth]
    if not boxes:
        return
    first = next((n.id for n in diagram.nodes if boxes[0] in _chain(diagram.membership.get(n.id), parents)), None)
    if first is not None and first != node:
        diagram.below.append((node, first))


def _chain(cluster: str | None, parents: dict[str | None, str | None]) -> list[str | None]:
    """The clusters from the outermost down to ``cluster``."""
    chain: list[str | None] = []
    while cluster is not None:
        chain.append(cluster)
        cluster = parents.get(cluster)
    return chain[::-1]


def _lower_sources(diagram: Diagram) -> None:
    """A node nothing feeds (DeBERTa's relative-position table, position ids) ranked below the data entering its column.

    Graphviz puts such a node on the first rank, beside the embeddings, which widens the drawing
    by a column; ranked below its reader's data input — or, when its reader has none, below the
    data entering its block (:func:`_entering`) — it sits in its own column.
    """
    fed = {e.target for e in diagram.edges}
    io = {n.id for n in diagram.nodes if n.shape == "io"}
    parents: dict[str | None, str | None] = {c.id: c.parent for c in diagram.clusters}
    sources = [n.id for n in diagram.nodes if n.id not in fed and n.id not in io]
    # Fed by inputs alone (DeBERTa's padding mask shaped for its encoder): placed by its stack's input.
    for node in diagram.nodes:
        feeding = {e.source for e in diagram.edges if e.target == node.id}
        if node.id not in io and feeding and feeding <= io:
            diagram.below += [(above, node.id) for above in _entering(diagram, node.id, parents, fed)]
    for source in sources:
        readers = [e.target for e in diagram.edges if e.source == source]
        inputs = [e.source for e in diagram.edges if e.target in readers and e.source in fed and e.style == "data"]
        diagram.below += [(above, source) for above in inputs[:1] or _entering(diagram, source, parents, fed)]


def _entering(diagram: Diagram, node: str, parents: dict[str | None, str | None], fed: set[str]) -> list[str]:
    """The nodes ``node`` is ranked below: by the innermost cluster around it, up to its stack, that data enters.

    The stack is ``node``'s second-outermost cluster; what enters it from outside (a computed
    node, not an input) is what the stack's column starts from, so ``node`` goes under the first
    of those. Inside a block of a layer it goes under the block's own first row instead — every
    node the entering data feeds — so it is not beside the norm above the block: drawn beside it,
    it widens the block's box by its own width on every row (T5's relative position buckets).
    """
    chain = _chain(diagram.membership.get(node), parents)
    for depth in range(len(chain) - 1, 0, -1):

        def inside(other: str, cluster: str | None = chain[depth]) -> bool:
            return cluster in _chain(diagram.membership.get(other), parents)

        entering = [
            e
            for e in diagram.edges
            if e.style == "data" and e.source in fed and not inside(e.source) and inside(e.target)
        ]
        if entering and depth == 1:
            return [entering[0].source]
        if entering:
            return list(dict.fromkeys(e.target for e in entering))
    return []
