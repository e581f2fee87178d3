"""Mixture-of-experts parameters and FLOPs on hand-built graphs of one block, in-process.

Two blocks of 4 routed experts, 2 per token, in the two forms transformers writes: one module
of fused expert tensors (first dimension the expert) and a list of expert modules. A token
runs every parameter outside the routed experts and 2/4 of the routed ones; the dense count
runs all 4 where the grouped products count 2.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from bertgraph.graph import moe
from bertgraph.graph import schema as g
from bertgraph.graph.poly import Poly
from tests.graph_fixtures import op


def parameter(name: str, module: str, shape: list[int]) -> dict[str, Any]:
    numel = 1
    for size in shape:
        numel *= size
    return {"name": name, "module": module, "shape": shape, "numel": numel, "dtype": "float32", "trainable": True}


def fused(experts: int | None = 4, per_token: int | None = 2) -> nx.DiGraph:
    """Fused tensors gate_up [4, 16, 8] (512) and down [4, 8, 8] (256); a router [4, 8] (32), shared
    experts [4, 8] (32, named shared) and an embedding [10, 8] (80): 912 in all, 768 routed."""
    config = {k: v for k, v in {moe.EXPERTS: experts, moe.EXPERTS_PER_TOKEN: per_token}.items() if v is not None}
    graph = g.new_graph(**{g.G_CONFIG: {"hidden": 8, **config}})
    graph.graph[g.G_MODULES] = {
        "embed": {g.M_TYPE: "Embedding"},
        "layers.0.mlp.gate": {g.M_TYPE: "Linear"},
        "layers.0.mlp.experts": {g.M_TYPE: "MixtralExperts"},
        "layers.0.mlp.shared_experts": {g.M_TYPE: "MixtralExperts"},
    }
    graph.graph[g.G_PARAMETERS] = [
        parameter("embed.weight", "embed", [10, 8]),
        parameter("layers.0.mlp.gate.weight", "layers.0.mlp.gate", [4, 8]),
        parameter("layers.0.mlp.experts.gate_up_proj", "layers.0.mlp.experts", [4, 16, 8]),
        parameter("layers.0.mlp.experts.down_proj", "layers.0.mlp.experts", [4, 8, 8]),
        parameter("layers.0.mlp.shared_experts.weight", "layers.0.mlp.shared_experts", [4, 8]),
    ]
    return graph


def listed() -> nx.DiGraph:
    """Experts ``experts.0`` … ``experts.3`` of 64 parameters each and a router of 32: 288, 256 routed."""
    graph = g.new_graph(**{g.G_CONFIG: {moe.EXPERTS: 4, moe.EXPERTS_PER_TOKEN: 2}})
    graph.graph[g.G_MODULES] = {f"layers.0.mlp.experts.{i}.w1": {g.M_TYPE: "Linear"} for i in range(4)}
    graph.graph[g.G_PARAMETERS] = [
        parameter(f"layers.0.mlp.experts.{i}.w1.weight", f"layers.0.mlp.experts.{i}.w1", [8, 8]) for i in range(4)
    ] + [parameter("layers.0.mlp.gate.weight", "layers.0.mlp.gate", [4, 8])]
    return graph


def test_fused_experts() -> None:
    graph = fused()
    assert moe.expert_parameters(graph) == {
        "layers.0.mlp.experts.gate_up_proj": 512,
        "layers.0.mlp.experts.down_proj": 256,
    }
    assert moe.active_parameters(graph) == {
        "active": 912 - 768 + 768 * 2 // 4,
        "experts": 4,
        "experts_per_token": 2,
        "expert_parameters": 768,
    }
    assert moe.expert_modules(graph) == {"layers.0.mlp.experts"}
    assert moe.experts_line(graph) == "4 experts, 2 active per token"


def test_a_fused_tensor_is_an_experts_only_when_its_first_dimension_is_the_expert_count() -> None:
    graph = fused()
    graph.graph[g.G_PARAMETERS][3] = parameter("layers.0.mlp.experts.down_proj", "layers.0.mlp.experts", [8, 8])
    graph.graph[g.G_PARAMETERS].append(parameter("layers.0.mlp.experts.scale", "layers.0.mlp.experts", []))
    assert moe.expert_parameters(graph) == {"layers.0.mlp.experts.gate_up_proj": 512}
    del graph.graph[g.G_MODULES]
    assert moe.expert_parameters(graph) == {}


def test_listed_experts() -> None:
    graph = listed()
    assert moe.expert_parameters(graph) == {f"layers.0.mlp.experts.{i}.w1.weight": 64 for i in range(4)}
    assert moe.active_parameters(graph) == {
        "active": 160,
        "experts": 4,
        "experts_per_token": 2,
        "expert_parameters": 256,
    }
    assert moe.expert_modules(graph) == {"layers.0.mlp.experts"}
    top = listed()
    for row in top.graph[g.G_PARAMETERS][:4]:
        row["module"] = row["module"].removeprefix("layers.0.mlp.")
    assert moe.expert_modules(top) == {"experts"}
    assert moe.active_parameters(top) == moe.active_parameters(listed())
    other = listed()
    for row in other.graph[g.G_PARAMETERS][:4]:
        row["module"] = row["module"].replace("experts", "my_experts")
    assert moe.expert_parameters(other) == {}


def test_without_experts_there_is_nothing() -> None:
    for graph in (fused(None, None), fused(1, 1), fused(4, 0), fused(4, 5), fused(0, 2)):
        assert moe.active_parameters(graph) is None
        assert moe.experts_line(graph) == ""
        assert moe.all_experts_matmul_flops(graph, Poly.parse("seq")) is None
    assert moe.expert_parameters(fused(1, 1)) == {}
    assert moe.expert_parameters(fused(None, None)) == {}
    assert moe.expert_parameters(fused(2, 1)) == {}  # no tensor has 2 experts first
    assert moe.active_parameters(fused(4, 4))["active"] == 912  # type: ignore[index]


def with_products(graph: nx.DiGraph, grouped: str = "64*batch*seq") -> nx.DiGraph:
    graph.add_node("router", **op("layers.0.mlp.gate", "linear", 1, matmul_flops="100*batch*seq"))
    node = op("layers.0.mlp.experts", "_grouped_mm", 2, matmul_flops=grouped)
    graph.add_node("experts", **node)
    return graph


def test_the_dense_count_runs_every_expert() -> None:
    matmul = Poly.parse("164*batch*seq")
    # the grouped products count 2 of 4 experts: all 4 is twice as much, the router unchanged
    assert moe.all_experts_matmul_flops(with_products(fused()), matmul) == Poly.parse("228*batch*seq")
    fallback = with_products(fused())
    fallback.nodes["experts"][g.TARGET] = "transformers.grouped_mm_fallback"
    assert moe.all_experts_matmul_flops(fallback, matmul) == Poly.parse("228*batch*seq")
    assert moe.all_experts_matmul_flops(with_products(fused(4, 3)), matmul) is None  # 64 · 4 / 3 is not whole
    assert moe.all_experts_matmul_flops(with_products(fused(4, 3), "96*batch*seq"), Poly.parse("196*batch*seq")) == (
        Poly.parse("228*batch*seq")
    )
    assert moe.all_experts_matmul_flops(fused(), matmul) is None  # no grouped product
    assert moe.all_experts_matmul_flops(with_products(fused(), "0"), matmul) is None
    mixed = with_products(fused(4, 3), "96*batch*seq + 64*batch")  # one term divides, the other not
    assert moe.all_experts_matmul_flops(mixed, matmul) is None


def test_two_experts_one_per_token() -> None:
    """A shared expert listed first (32), a router [2, 8] (16), experts.0 and experts.1 of 64: 176 in
    all, 128 routed; a token runs 176 - 128 + 128 / 2 = 112, a whole number of parameters."""
    graph = g.new_graph(**{g.G_CONFIG: {moe.EXPERTS: 2, moe.EXPERTS_PER_TOKEN: 1}})
    graph.graph[g.G_PARAMETERS] = [
        parameter("layers.0.mlp.shared_expert.weight", "layers.0.mlp.shared_expert", [4, 8]),
        parameter("layers.0.mlp.gate.weight", "layers.0.mlp.gate", [2, 8]),
    ] + [parameter(f"layers.0.mlp.experts.{i}.weight", f"layers.0.mlp.experts.{i}", [8, 8]) for i in range(2)]
    found = moe.active_parameters(graph)
    assert found == {"active": 112, "experts": 2, "experts_per_token": 1, "expert_parameters": 128}
    assert isinstance(found["active"], int)
    assert moe.expert_modules(graph) == {"layers.0.mlp.experts"}
    assert moe.active_parameters(g.new_graph()) is None  # no config at all


def test_the_dense_count_stays_whole() -> None:
    # 4 grouped FLOPs per token for 2 of 4 experts: 8 for all 4 (4 / 4 experts is not a multiple of 2, 4 · 4 is)
    dense = moe.all_experts_matmul_flops(with_products(fused(), "4*batch*seq"), Poly.parse("104*batch*seq"))
    assert dense == Poly.parse("108*batch*seq")
