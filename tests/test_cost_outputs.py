"""Costs in views, files, the cost command, annotated diagrams, the report and ONNX graphs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import bertgraph
from bertgraph.api import Architecture
from bertgraph.cli import main
from bertgraph.graph import cost, costbase, views
from bertgraph.graph import io as graph_io
from bertgraph.graph import schema as g
from bertgraph.graph.poly import Poly, total
from bertgraph.model import HEADS
from bertgraph.render import dot, mermaid
from tests.conftest import require
from tests.helpers import shuffled

# --- views sum exactly ------------------------------------------------------------------------------------


@pytest.mark.parametrize("head", list(HEADS))
def test_every_view_sums_the_costs_of_the_operator_graph(traced: Callable[..., Architecture], head: str) -> None:
    from bertgraph.graph import saved

    graph = saved.annotate_saved(traced("bert-tiny", head).graph)  # what training keeps sums like the rest
    totals = {**cost.model_totals(graph), g.SAVED_BYTES: saved.saved_activation_bytes(graph).bytes}
    assert totals[g.SAVED_BYTES]
    param_bytes = sum(int(d.get(g.PARAM_BYTES, 0)) for _, d in graph.nodes(data=True))
    assert param_bytes == 4 * bertgraph.graph.schema.total_params(graph)
    for depth in range(5):
        for fold in (True, False):
            shown = views.view(graph, depth, fold=fold)
            nodes = [d for _, d in shown.nodes(data=True) if d.get(g.KIND) not in (g.INPUT, g.OUTPUT)]
            for key in g.POLY_ATTRS:
                assert total(costbase.node_poly(d, key) for d in nodes) == totals[key], (depth, fold, key)
            assert sum(int(d.get(g.PARAM_BYTES, 0)) for d in nodes) == param_bytes


def test_a_folded_layer_stands_for_all_its_repeats(traced: Callable[..., Architecture]) -> None:
    graph = traced("bert-base-uncased").graph
    shown = views.view(graph, 2)
    folded = shown.nodes["encoder.layer.0-11"]
    one = views.view(graph, 2, fold=False).nodes["encoder.layer.3"]
    assert folded[g.REPEAT] == 12
    assert Poly.parse(folded[g.MATMUL_FLOPS]) == 12 * Poly.parse(one[g.MATMUL_FLOPS])
    assert folded[g.MATMUL_FLOPS] == "36864*batch*seq**2 + 169869312*batch*seq"


def test_a_copy_left_out_of_the_anatomy_view_hands_its_cost_on(traced: Callable[..., Architecture]) -> None:
    graph = traced("bert-tiny").graph
    copies = [n for n, d in graph.nodes(data=True) if d.get(g.OP) == "contiguous"]
    assert copies and all(graph.nodes[n][g.ACTIVATION_BYTES] != "0" for n in copies)
    shown = views.view(graph, 3, fold=False)
    assert not any(d.get(g.OP) == "contiguous" for _, d in shown.nodes(data=True))
    dense = shown.nodes["encoder.layer.0.attention.output.dense"]
    linear = graph.nodes["encoder.layer.0.attention.output.dense:linear"]
    copy = graph.nodes["encoder.layer.0.attention.self:contiguous"]
    assert Poly.parse(dense[g.ACTIVATION_BYTES]) == Poly.parse(linear[g.ACTIVATION_BYTES]) + Poly.parse(
        copy[g.ACTIVATION_BYTES]
    )


# --- files and determinism ----------------------------------------------------------------------------------


def test_costs_round_trip_through_graphml_and_json(traced: Callable[..., Architecture], tmp_path: Path) -> None:
    graph = traced("bert-tiny").graph
    graph_io.write_graphml(graph, tmp_path / "g.graphml")
    graph_io.write_json(graph, tmp_path / "g.json")
    for back in (graph_io.read_graphml(tmp_path / "g.graphml"), graph_io.read_json(tmp_path / "g.json")):
        assert cost.model_totals(back) == cost.model_totals(graph)
        node = back.nodes["encoder.layer.0.intermediate.dense:linear"]
        assert node[g.MATMUL_FLOPS] == "131072*batch*seq"  # 2 · 128 · 512 per token
        assert node[g.INPUTS] == [["batch", "seq", 128], [512, 128], [512]]


def test_a_view_with_costs_is_byte_identical_run_to_run() -> None:
    first = bertgraph.trace("bert-tiny", "masked-lm", cache=False)
    second = bertgraph.trace("bert-tiny", "masked-lm", cache=False)
    for depth in (2, 3):
        texts = {
            graph_io.graph_file_text(views.view(arch.graph, depth), fmt)
            for arch in (first, second)
            for fmt in ("json",)
        }
        texts |= {graph_io.graph_file_text(views.view(shuffled(first.graph, 7), depth), "json")}
        assert len(texts) == 1
        assert g.MATMUL_FLOPS in next(iter(texts))


# --- the cost command ------------------------------------------------------------------------------------------


def test_cost_prints_the_exact_counts_and_the_formula(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "bert-base-uncased", "--seq-len", "128", "512"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("matmul FLOPs"))
    assert re.split(r"\s{2,}", line) == [
        "matmul FLOPs",
        "22,348,431,360",
        "96,637,943,808",
        "batch·(36,864·seq² + 169,869,312·seq + 1,179,648)",
    ]
    assert "peak activations       3,555,328 B (3.39 MiB)  14,417,920 B (13.8 MiB)" in out
    assert "every op has a cost formula" in out
    assert "(0-11): 12 × BertLayer" in out


def test_the_readme_shows_what_the_cost_command_prints(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    command = "$ bertgraph cost bert-base-uncased --seq-len 128 512"
    excerpt = readme.split(command, 1)[1].split("```", 1)[0].strip("\n").splitlines()
    assert main(command.split()[2:]) == 0
    out = capsys.readouterr().out
    shown = [line for line in excerpt if line != "..."]
    assert len(shown) == 7  # the header, four FLOP lines, the peak and the training line
    for line in shown:
        assert line.removesuffix("…").rstrip() in out, line


def test_cost_as_json_and_markdown(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "cost.json"
    assert main(["cost", "bert-tiny", "--seq-len", "64", "--batch", "3", "--format", "json", "-o", str(target)]) == 0
    data = json.loads(target.read_text())
    matmul = data["total"]["matmul_flops"]
    assert data["sizes"] == [{"batch": 3, "seq": 64}]
    assert matmul["values"] == [Poly.parse(matmul["formula"]).evaluate({"batch": 3, "seq": 64})]
    assert data["rows"][0]["share"] == [1.0] and data["unsupported"] == {}
    assert data["training"]["total"] == 16 * data["training"]["trainable_parameters"]
    assert main(["cost", "bert-tiny", "--format", "markdown", "--dtype", "bfloat16", "--depth", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## Cost of bert-tiny · BertModel")
    assert "| parameters (bfloat16) |" in out and "master weights (float32)" in out


@pytest.mark.parametrize(
    ("argv", "message", "status"),
    [
        (["cost", "bert-tiny", "--seq-len", "128", "600"], "--seq-len 600 is above max_position_embeddings 512", 1),
        (["cost", "bert-tiny", "--seq-len", "0"], "argument --seq-len: must be a positive integer, got 0", 2),
        (["cost", "bert-tiny", "--dtype", "float8"], "argument --dtype: invalid choice: 'float8'", 2),
        (["render", "bert-tiny", "--annotate", "time", "-o", "x.svg"], "argument --annotate: invalid choice", 2),
        (["render", "bert-tiny", "--annotate", "flops", "-o", "x.html"], "not the interactive .html page", 1),
    ],
)
def test_bad_cost_input_is_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str, status: int
) -> None:
    assert main(argv) == status
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err and len(captured.err.strip().splitlines()) == 1


# --- annotated diagrams -----------------------------------------------------------------------------------------


def test_annotated_dot_colours_by_share_with_a_legend(traced: Callable[..., Architecture]) -> None:
    graph = traced("bert-base-uncased", "sequence-classification").graph
    plain = dot.generate_dot(graph, depth=3)
    heat = dot.generate_dot(graph, depth=3, annotate="flops")
    assert "share of FLOPs" not in plain
    assert "share of FLOPs at batch=1, seq=128" in heat
    lines = {line.strip().split(" [", 1)[0]: line for line in heat.splitlines()}
    intermediate = lines['"bert.encoder.layer.0-11.intermediate.dense"']
    assert "604 MFLOP each · 32.39% in all 12" in intermediate and 'fillcolor="#800026"' not in intermediate
    assert 'fillcolor="#e31a1c"' in intermediate  # 25% to 50%
    pooler = lines['"bert.pooler.activation"']
    assert 'fillcolor="#ffffcc"' in pooler  # below 0.1%
    for label in ("below 0.1%", "50% and more"):
        assert label in heat
    memory = dot.generate_dot(graph, depth=2, annotate="memory")
    assert "share of activation bytes written at batch=1, seq=128" in memory
    params = dot.generate_dot(graph, depth=2, annotate="params")
    assert "77.69% of parameters (all 12)" in params and "share of parameters" in params


def test_annotated_diagrams_are_written_in_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dot_binary: str
) -> None:
    for name in ("a.svg", "a.png", "a.pdf", "a.dot", "a.mmd"):
        target = tmp_path / name
        assert main(["render", "bert-tiny", "--annotate", "flops", "-o", str(target)]) == 0
        first = target.read_bytes()
        assert main(["render", "bert-tiny", "--annotate", "flops", "-o", str(target)]) == 0
        assert target.read_bytes() == first, name
    assert "share of FLOPs" in (tmp_path / "a.svg").read_text()
    text = (tmp_path / "a.mmd").read_text()
    assert "classDef h_0 fill:#ffffcc" in text and 'share of FLOPs at batch=1, seq=128"]' in text


@pytest.mark.browser
def test_annotated_mermaid_renders_in_a_browser(traced: Callable[..., Architecture]) -> None:
    from tests.mermaid_browser import browser_available, render_mermaid, svg_text

    reason = browser_available()
    require(reason is None, reason or "")
    arch = traced("bert-base-uncased", "sequence-classification")
    diagrams = {what: mermaid.generate_mermaid(arch.graph, depth=3, annotate=what).text for what in ("flops", "memory")}
    diagrams["dark"] = mermaid.generate_mermaid(arch.graph, depth=2, theme="dark", annotate="params").text
    results = render_mermaid(diagrams)
    assert {name: r.error for name, r in results.items() if not r.ok} == {}
    assert "32.39% in all 12" in svg_text(results["flops"].svg)


# --- the report ---------------------------------------------------------------------------------------------------


def test_report_plot_is_deterministic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        assert main(["report", "bert-tiny", "-o", str(tmp_path / folder / "r.md")]) == 0
    assert (tmp_path / "one" / "r-flops.png").read_bytes() == (tmp_path / "two" / "r-flops.png").read_bytes()
    text = (tmp_path / "one" / "r.md").read_text()
    assert "attention overtakes at seq = " in text and "![FLOPs against sequence length" in text


def test_report_without_matplotlib_says_so_in_one_line(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['matplotlib'] = None  # an environment without the plot extra\n"
        "from bertgraph.cli import main\n"
        f"sys.exit(main(['report', 'bert-tiny', '-o', {str(tmp_path / 'r.md')!r}]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "bertgraph: the FLOPs plot needs matplotlib: pip install 'bertgraph[plot]'" in result.stderr
    assert not (tmp_path / "r-flops.png").exists()
    assert "*The FLOPs plot needs matplotlib: pip install 'bertgraph\\[plot\\]'.*" in (tmp_path / "r.md").read_text()


# --- cost of computing cost -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_cost_pass_is_a_small_part_of_tracing() -> None:
    """Cold render = trace + cost + draw; the cost pass must stay under a tenth of the trace."""
    from bertgraph.model import resolve
    from bertgraph.tracing import trace

    spec = resolve("bert-base-uncased", "sequence-classification")
    start = time.perf_counter()
    graph = trace(spec)
    traced_in = time.perf_counter() - start
    start = time.perf_counter()
    cost.annotate(graph)
    costed_in = time.perf_counter() - start
    assert costed_in < 0.1 * traced_in, (costed_in, traced_in)


# --- ONNX files ----------------------------------------------------------------------------------------------------


@pytest.mark.onnx
def test_onnx_graphs_get_the_same_matmul_flops_as_the_traced_model(
    traced: Callable[..., Architecture], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bertgraph.model import resolve
    from bertgraph.onnx.export import export_onnx_spec

    path = tmp_path / "tiny.onnx"
    export_onnx_spec(resolve("bert-tiny", "sequence-classification"), path, verify=False)
    read = bertgraph.read_onnx(path)
    torch_side = cost.model_totals(traced("bert-tiny", "sequence-classification").graph)
    onnx_side = cost.model_totals(read.graph)
    # Shape inference with data propagation follows the computed Reshape targets of attention, so every
    # MatMul and Gemm has its shapes; a weight's Transpose before its MatMul still makes a linear layer.
    assert cost.uncounted_products(read.graph) == {}
    for key in (g.MATMUL_FLOPS, cost.LINEAR_FLOPS, cost.ATTENTION_FLOPS):
        assert onnx_side[key] == Poly.parse(str(torch_side[key]).replace("seq", "sequence")), key
    assert main(["cost", str(path), "--seq-len", "64", "100", "--batch", "3", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sizes"] == [{"batch": 3, "sequence": 64}, {"batch": 3, "sequence": 100}]
    expected = [torch_side[g.MATMUL_FLOPS].evaluate({"batch": 3, "seq": n}) for n in (64, 100)]
    assert report["total"]["matmul_flops"]["values"] == expected
    # Ops whose shapes stay unknown only move data; they are listed, not counted as zero in silence.
    assert set(report["unsupported"]) <= {"onnx::Reshape (shape unknown)", "onnx::Transpose (shape unknown)"}


@pytest.mark.onnx
def test_cost_of_an_onnx_file_with_unknown_product_shapes_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A MatMul after a Reshape to a shape given at run time: its FLOPs are unknowable, so no figures at all."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("MatMul", ["r", "w"], ["y"])],
        "reshaped",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", 4]),
            helper.make_tensor_value_info("s", TensorProto.INT64, [3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones((4, 4), dtype=np.float32), "w")],
    )
    path = tmp_path / "reshaped.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    target = tmp_path / "cost.txt"
    assert main(["cost", str(path), "-o", str(target)]) == 1
    captured = capsys.readouterr()
    error = captured.err.strip()
    assert "1 matrix product (onnx::MatMul) has shapes ONNX shape inference could not work out" in error
    assert "\n" not in error and captured.out == "" and not target.exists()


def test_python_api_gives_the_cost_object(traced: Callable[..., Architecture]) -> None:
    arch = traced("bert-base-uncased")
    report = arch.cost(seq_len=[128, 512])
    assert report["total"]["matmul_flops"]["values"] == [22_348_431_360, 96_637_943_808]
    assert arch.cost()["sizes"] == [{"batch": 1, "seq": 128}]
    assert "share of FLOPs" in arch.to_dot(2, annotate="flops") and "h_6" in arch.to_mermaid(2, annotate="flops")


def test_cost_from_the_graph_cache_imports_no_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["cost", "bert-tiny", "--seq-len", "64", "128", "--format", "json"]
    monkeypatch.setenv("BERTGRAPH_CACHE_DIR", str(tmp_path))
    capsys.readouterr()
    assert main(argv) == 0  # traces here, in this process, and fills the empty cache
    first = capsys.readouterr().out
    assert any(tmp_path.iterdir())
    code = (
        "import sys\n"
        "from bertgraph.cli import main\n"
        f"status = main({argv!r})\n"
        "print('torch' in sys.modules, file=sys.stderr)\n"
        "sys.exit(status)\n"
    )
    env = {**os.environ, "BERTGRAPH_CACHE_DIR": str(tmp_path)}
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert second.returncode == 0, second.stderr
    assert second.stderr.strip().endswith("False")  # the cached graph carries every cost
    assert json.loads(second.stdout) == json.loads(first)
