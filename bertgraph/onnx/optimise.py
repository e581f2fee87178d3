"""Optimising an exported ONNX graph without touching its weights.

:func:`optimise` runs onnxscript's constant folding and default rewrite rules twice, as
``torch.onnx.export(optimize=True)`` does, with every initializer's value hidden: the
optimiser cannot fold a weight into a new constant (losing its name), drop an all-zero
bias or merge two weights that happen to be equal, so the graph is the same for random
and trained weights. :func:`name_parameters` then gives the initializers the names
``named_parameters()`` gives, and :func:`check_parameters_kept` proves every parameter
survived under its name and shape.
"""

from __future__ import annotations

import copy
import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from bertgraph.errors import OnnxError

if TYPE_CHECKING:
    import onnx_ir as ir
    import torch

# Loggers that report the exporter's internal fallbacks; the outcome is reported instead.
_NOISY_LOGGERS = ("torch.onnx", "onnxscript", "onnx_ir")


@contextmanager
def quiet_exporter() -> Iterator[None]:
    """Silence the exporter's own warnings and logs; bertgraph reports the outcome."""
    loggers = [logging.getLogger(name) for name in _NOISY_LOGGERS]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for logger in loggers:
            logger.setLevel(logging.CRITICAL)
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)


def optimise(model: ir.Model) -> None:
    """Constant folding and the default rewrites, twice, with initializer values hidden."""
    import onnx_ir as ir
    import onnxscript.optimizer
    import onnxscript.rewriter
    from onnx_ir.passes import common

    hidden = {name: value.const_value for name, value in model.graph.initializers.items()}
    for value in model.graph.initializers.values():
        value.const_value = None
    rules = rewrite_rules()
    try:
        with quiet_exporter():
            for _ in range(2):
                onnxscript.optimizer.fold_constants(model, onnx_shape_inference=True)
                onnxscript.rewriter.rewrite(model, rules)
            ir.passes.Sequential(
                common.RemoveUnusedNodesPass(),
                common.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
                common.CommonSubexpressionEliminationPass(),
                common.RemoveUnusedNodesPass(),
            )(model)
    finally:
        for name, tensor in hidden.items():
            if name in model.graph.initializers:
                model.graph.initializers[name].const_value = tensor


# --- the default rules, one of them matched in linear time -------------------------------------

# onnxscript matches a pattern with two output nodes by listing every node of the graph by
# op type for each node it tries — before it looks at the node — and then every pairing:
# quadratic in the graph. SlicesSplit (two Slices of one input that halve its last axis
# become one Split) is the one default rule like that; on bert-base the two rewrite rounds
# took 1.4 s, 0.5 s with the search below, and it rewrites nothing in any family. Its first
# node is a Slice, and both Slices read the same value as input 0, so only a Slice whose
# input another Slice reads can start a match; every other node is turned away before the
# search. (A Slice could pair with itself only when that input's last axis is empty; such
# a Slice still goes to the search.)
PAIRED_RULE = "SlicesSplit"


def rewrite_rules() -> tuple[Any, ...]:
    """onnxscript's default rewrite rules in their order, :data:`PAIRED_RULE` with a pre-check."""
    import onnxscript.rewriter

    rules = []
    for rule in onnxscript.rewriter._DEFAULT_REWRITE_RULES:  # what rewrite(model) applies
        if getattr(rule, "name", None) == PAIRED_RULE and hasattr(rule, "_matcher"):
            rule = copy.copy(rule)
            rule._matcher = SharedInputFirst(rule._matcher)  # type: ignore[assignment]  # only match() is called
        rules.append(rule)
    return tuple(rules)


class SharedInputFirst:
    """A matcher for :data:`PAIRED_RULE` that tries its search only where a match can start."""

    def __init__(self, search: Any) -> None:
        self.search = search

    def match(self, model: ir.Model, graph_or_function: Any, node: ir.Node, **options: Any) -> Any:
        if not may_pair(node):
            from onnxscript.rewriter.pattern import MatchResult

            return MatchResult().fail("no other Slice reads this Slice's input")
        return self.search.match(model, graph_or_function, node, **options)


def may_pair(node: ir.Node) -> bool:
    """Whether a Slice node could be the first of two Slices reading one input (see :data:`PAIRED_RULE`)."""
    if node.op_type != "Slice":
        return False  # the pattern's first node is a Slice
    if node.domain not in ("", "ai.onnx") or not node.inputs:
        return True  # not the standard Slice: left to the search
    data = node.inputs[0]
    if data is None:
        return False
    readers = {use.node for use in data.uses() if use.idx == 0 and use.node.op_type == "Slice"}
    if len(readers) >= 2:
        return True
    shape = data.shape
    return shape is not None and len(shape) > 0 and shape[-1] == 0


# --- names -----------------------------------------------------------------------------------


def name_parameters(model: ir.Model, torch_model: torch.nn.Module) -> None:
    """Initializers under the names ``named_parameters()`` gives, in its order.

    torch.export names a tied parameter after one of its aliases (the masked-LM
    decoder weight rather than the word embeddings it is tied to); the file should
    use the name PyTorch reports, which is also the one tables and checkpoints use.
    """
    first: dict[int, str] = {}
    canonical = {
        name: first.setdefault(id(p), name) for name, p in torch_model.named_parameters(remove_duplicate=False)
    }
    initializers = model.graph.initializers
    for alias, name in canonical.items():
        if alias != name and alias in initializers and name not in initializers:
            initializers[alias].name = name
    position = {name: index for index, name in enumerate(first.values())}
    values = list(initializers.values())
    ranked = sorted(range(len(values)), key=lambda i: (position.get(str(values[i].name), len(position)), i))
    initializers.clear()
    for index in ranked:
        model.graph.register_initializer(values[index])


def check_parameters_kept(model: ir.Model, torch_model: torch.nn.Module) -> None:
    """Every parameter must be an initializer under its PyTorch name and shape."""
    initializers = model.graph.initializers
    for name, parameter in torch_model.named_parameters():
        value = initializers.get(name)
        shape = list(value.shape) if value is not None and value.shape is not None else None
        if shape != list(parameter.shape):
            raise OnnxError(
                f"the exported graph does not hold parameter {name} {list(parameter.shape)} as an initializer "
                f"(found {shape}); this is a bug in the export, please report it"
            )
