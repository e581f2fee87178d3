"""The optimiser's rewrite rules are onnxscript's defaults, one of them matched in linear time.

SlicesSplit's matcher lists the whole graph for every node it tries; bertgraph turns away
the nodes that cannot start a match (anything but a Slice whose input another Slice
reads) before that search. These tests hold the rule set to onnxscript's own defaults:
the same rewrites on graphs where the rule fires, where it cannot, and at its edge (a
Slice of an empty axis), and the same optimised graph for a real export.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxscript.rewriter
import pytest
from onnx import TensorProto, helper

from bertgraph.model import resolve
from bertgraph.onnx import export
from bertgraph.onnx import optimise as optimising

pytestmark = pytest.mark.onnx
DEFAULTS = onnxscript.rewriter._DEFAULT_REWRITE_RULES


def _slices(width: int, cuts: list[tuple[str, int, int]], extra: int = 0) -> onnx.ModelProto:
    """Slices of ``x`` (or of ``y`` = x + 0 ... for other sources) along the last axis, each an output.

    ``cuts``: (source, start, end). ``extra`` Relu nodes make the graph longer.
    """
    nodes = [helper.make_node("Identity", ["x"], ["y"])]
    inits = [helper.make_tensor("axes", TensorProto.INT64, [1], [-1])]
    outputs = []
    for index, (source, start, end) in enumerate(cuts):
        inits += [
            helper.make_tensor(f"s{index}", TensorProto.INT64, [1], [start]),
            helper.make_tensor(f"e{index}", TensorProto.INT64, [1], [end]),
        ]
        nodes.append(helper.make_node("Slice", [source, f"s{index}", f"e{index}", "axes"], [f"out{index}"]))
        outputs.append(helper.make_tensor_value_info(f"out{index}", TensorProto.FLOAT, None))
    chain = "x"
    for index in range(extra):
        nodes.append(helper.make_node("Relu", [chain], [f"r{index}"]))
        chain = f"r{index}"
    if extra:
        outputs.append(helper.make_tensor_value_info(chain, TensorProto.FLOAT, None))
    graph = helper.make_graph(
        nodes, "slices", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, width])], outputs, inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _rewritten(proto: onnx.ModelProto, rules: Any) -> onnx.ModelProto:
    model = ir.serde.deserialize_model(proto)
    onnxscript.rewriter.rewrite(model, rules)
    return ir.serde.serialize_model(model)


def _searches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Outputs of the nodes onnxscript's search for a two-node pattern (SlicesSplit's) is run for."""
    from onnxscript.rewriter.pattern import SimplePatternMatcher

    asked: list[str] = []
    real = SimplePatternMatcher.match

    def counted(self: Any, model: Any, graph: Any, node: ir.Node, **options: Any) -> Any:
        if len(self.pattern.output_nodes) == 2:
            asked.append(str(node.outputs[0].name))
        return real(self, model, graph, node, **options)

    monkeypatch.setattr(SimplePatternMatcher, "match", counted)
    return asked


def test_the_rules_are_onnxscripts_defaults_in_their_order() -> None:
    ours = optimising.rewrite_rules()
    assert [rule.name for rule in ours] == [rule.name for rule in DEFAULTS]
    changed = [i for i, (a, b) in enumerate(zip(ours, DEFAULTS)) if a is not b]
    assert [ours[i].name for i in changed] == [optimising.PAIRED_RULE] == ["SlicesSplit"]
    guarded = ours[changed[0]]
    assert isinstance(guarded._matcher, optimising.SharedInputFirst)
    assert guarded._matcher.search is DEFAULTS[changed[0]]._matcher  # the same search behind the check


def test_two_halves_of_one_input_still_become_a_split(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _searches(monkeypatch)
    # onnxscript's search takes the first pairing that fits the pattern, the node with itself
    # included, and stops there: it splits only when the second half comes first.
    proto = _slices(8, [("x", 4, 8), ("x", 0, 4)], extra=5)
    ours, theirs = _rewritten(proto, optimising.rewrite_rules()), _rewritten(proto, DEFAULTS)
    assert ours == theirs
    assert [node.op_type for node in ours.graph.node].count("Split") == 1
    assert "Slice" not in [node.op_type for node in ours.graph.node]
    assert asked[:2] == ["out0", "out1"]  # our rules ran first: both Slices of the pair were searched from


def test_slices_of_different_inputs_never_reach_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _searches(monkeypatch)
    proto = _slices(8, [("x", 0, 4), ("y", 4, 8)], extra=30)
    ours = _rewritten(proto, optimising.rewrite_rules())
    assert asked == []
    theirs = _rewritten(proto, DEFAULTS)
    assert len(asked) >= 32  # onnxscript's own rules search from every node
    assert ours == theirs
    assert [node.op_type for node in ours.graph.node].count("Slice") == 2  # nothing to split


def test_a_slice_of_an_empty_axis_goes_to_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one case a single Slice could pair with itself: it is left to onnxscript to decide."""
    asked = _searches(monkeypatch)
    proto = _slices(0, [("x", 0, 0)])
    ours = _rewritten(proto, optimising.rewrite_rules())
    assert asked == ["out0"]
    assert ours == _rewritten(proto, DEFAULTS)


def test_may_pair_turns_away_only_what_cannot_start_a_match() -> None:
    model = ir.serde.deserialize_model(_slices(8, [("x", 0, 4), ("x", 4, 8), ("y", 0, 2)], extra=1))
    verdicts = {node.op_type + ":" + node.outputs[0].name: optimising.may_pair(node) for node in model.graph}
    assert verdicts == {
        "Identity:y": False,
        "Slice:out0": True,
        "Slice:out1": True,
        "Slice:out2": False,  # the only Slice of y
        "Relu:r0": False,
    }


def test_a_real_export_optimises_to_the_same_graph_as_with_the_default_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = resolve("bert-tiny", "masked-lm", seq_len=16)
    meta = export._meta_model(spec, "float32")
    raw, _ = export._export(export.ExportableModel(meta, export.output_names(spec)), spec, None, "dynamo", print)
    assert raw is not None
    for value in raw.graph.initializers.values():
        value.const_value = None  # as optimise() hides them; the copies below need no values
    proto = ir.serde.serialize_model(raw)
    ours, theirs = ir.serde.deserialize_model(proto), ir.serde.deserialize_model(proto)
    optimising.optimise(ours)
    monkeypatch.setattr(optimising, "rewrite_rules", lambda: DEFAULTS)
    optimising.optimise(theirs)
    ours_bytes = ir.serde.serialize_model(ours).SerializeToString()
    assert ours_bytes == ir.serde.serialize_model(theirs).SerializeToString()
    assert len(ours.graph) < len(raw.graph)  # the optimiser did rewrite it
    assert np.array_equal(sorted(ours.graph.initializers), sorted(theirs.graph.initializers))
