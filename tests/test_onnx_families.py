"""ONNX export of every family bertgraph supports, with real torch.onnx, onnx.checker and onnxruntime.

Each ``model_type`` is exported through the command line from a tiny checkpoint made with
``save_pretrained``, the heads of each structure taken in turn by its model types (every type
once, every head of the structure at least once), then run in onnxruntime at sizes the export
never saw and compared with transformers' own forward of the checkpoint; the graph read back
from the file holds the family's parameter total. BERT itself is covered by ``test_onnx.py``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from bertgraph import cli
from bertgraph.api import read_onnx
from bertgraph.graph import schema as g
from bertgraph.graph import stats
from bertgraph.model import ModelSpec, resolve
from bertgraph.model.build import make_config, model_class_of
from bertgraph.model.families import family_of
from bertgraph.onnx import memory
from bertgraph.onnx.export import export_inputs, output_names
from bertgraph.onnx.verify import UNDEFINED_AT_PADDING, dim_names, input_dims, random_inputs
from bertgraph.tracing import skeleton
from tests.family_configs import TINY, shallow
from tests.matrix import covering

pytestmark = pytest.mark.onnx

SEQ = 16
TOLERANCE = 1e-4
# Sizes the export never saw (its example is batch 2 × 16; verification uses 19 and 45):
# batch, choices, sequence, decoder sequence.
NEW_SIZES = (
    {"batch": 2, "choices": 2, "sequence": 7, "decoder_sequence": 5},
    {"batch": 4, "choices": 3, "sequence": 23, "decoder_sequence": 13},
)


# MPNet computes its relative-position buckets with 32 buckets whatever the config says
# (transformers 5.24), so fewer buckets index past its bias table beyond 16 positions.
TINY_FIXES: dict[str, dict[str, Any]] = {"mpnet": {"relative_attention_num_buckets": 32}}


def _cases() -> list[Any]:
    """``(model_type, head)``: every model type once and every head of each structure at least once.

    A head's export differs by its class and outputs, which the family record gives alike to every
    family of a structure; so the model types of a structure take its heads in turn rather than
    every type every head (``BERTGRAPH_FULL_MATRIX=1``, ``make test-full``, exports every pair).
    BERT is left to ``test_onnx.py``, which exports each of its heads.
    """
    by_structure: dict[str, list[tuple[str, list[str]]]] = {}
    for model_type in TINY:
        family = family_of(model_type)
        if model_type != "bert" and family is not None:
            by_structure.setdefault(family.structure, []).append((model_type, list(family.heads)))
    pairs = [pair for rows in by_structure.values() for pair in covering(rows)]
    # each export made once, on one worker, whose tests then read it
    return [pytest.param((t, h), id=f"{t}-{h}", marks=pytest.mark.xdist_group(f"onnx-{t}-{h}")) for t, h in pairs]


def save_tiny(folder: Path, model_type: str, head: str, seed: int = 11, layers: int = 2) -> Path:
    """A tiny random checkpoint of ``head`` saved with ``save_pretrained`` (safetensors), ``layers`` deep."""
    folder.mkdir(parents=True, exist_ok=True)
    # two layers at most: torch.onnx's export time grows with every layer (see family_configs.shallow)
    config = shallow(model_type, {**TINY[model_type], **TINY_FIXES.get(model_type, {})}, layers)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    spec = resolve(str(folder), head, seq_len=SEQ)
    model_class = model_class_of(spec)
    torch.manual_seed(seed)  # not the exporter's seed 0: the checkpoint's weights must show
    model = model_class(make_config(spec, model_class)).eval()
    model.save_pretrained(folder, safe_serialization=True)
    return folder


# T5's exports cost the most (two sequence dimensions: 7–8 s each at two layers). Its base model keeps
# two, where the second layer reuses the first's position bias; a head on top of the stack exports one.
ONE_LAYER_HEADS = {"t5", "mt5"}


def export_layers(model_type: str, head: str) -> int:
    return 1 if model_type in ONE_LAYER_HEADS and head != "base" else 2


@dataclass
class Exported:
    model_type: str
    spec: ModelSpec
    folder: Path
    path: Path
    report: str


@pytest.fixture(scope="module", params=_cases())
def exported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, once: Any) -> Exported:
    model_type, head = request.param
    return once(("onnx-family", model_type, head), lambda: _export_family(model_type, head, tmp_path_factory))


def _export_family(model_type: str, head: str, tmp_path_factory: pytest.TempPathFactory) -> Exported:
    root = tmp_path_factory.mktemp(f"onnx-{model_type}-{head}")
    folder = save_tiny(root / "checkpoint", model_type, head, layers=export_layers(model_type, head))
    path = root / "model.onnx"
    code, report = _run_cli(["onnx", str(folder), "--head", head, "--seq-len", str(SEQ), "-o", str(path)])
    assert code == 0, report
    spec = resolve(str(folder), head, seq_len=SEQ)
    # The inputs the file takes: what the type's tokenizer gives (and the decoder's), as the export chose them.
    return Exported(model_type, replace(spec, inputs=export_inputs(spec)), folder, path, report)


def tokenizer_gives(model_type: str) -> list[str] | None:
    """``model_input_names`` of the tokenizer class transformers' auto table names for ``model_type``
    (None: it names none, as for ``llama`` in transformers 5.24)."""
    import transformers
    from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES

    name = TOKENIZER_MAPPING_NAMES.get(model_type)
    return None if name is None else list(getattr(transformers, name).model_input_names)


def _run_cli(argv: list[str]) -> tuple[int, str]:
    """``bertgraph ARGV`` in this process; its exit code and what it wrote to standard error."""
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, err.getvalue()


def _figures(model_type: str, head: str, report: str) -> str:
    """``model_type head: max diff D, export S s`` from the command's report."""
    diffs = [float(d) for d in re.findall(r" (\d\.\d+e[-+]\d+)", report.split("max |onnxruntime", 1)[-1])]
    export = re.search(r"export ([\d.]+) s", report)
    seconds = export[1] if export else "?"
    return f"figures {model_type} {head}: max diff {max(diffs, default=0.0):.1e}, export {seconds} s"


def _transformers_model(exported: Exported) -> torch.nn.Module:
    model_class = model_class_of(exported.spec)
    return model_class.from_pretrained(str(exported.folder)).eval()


def _session(path: Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


# --- the export ---------------------------------------------------------------------------------


def test_export_is_verified_for_every_output(exported: Exported) -> None:
    """The command's own check: onnx.checker, then every output at two sizes within the tolerance."""
    assert "full_check passed" in exported.report
    names = output_names(exported.spec)
    parity = [line for line in exported.report.splitlines() if "max |onnxruntime − PyTorch|" in line]
    assert len(parity) == 2
    for line in parity:
        found = dict(re.findall(r"(\w+) (\d\.\d+e[-+]\d+)", line.split("PyTorch|", 1)[1]))
        assert set(found) == set(names), line
        assert all(float(diff) <= TOLERANCE for diff in found.values()), line
    # non-strict: torch.onnx's first capture, twice as fast as the strict one it falls back to (which
    # BART took while the wrapper read its final_logits_bias off the model, not through itself)
    assert "torch.export (dynamo), non-strict capture" in exported.report
    print(_figures(exported.model_type, exported.spec.head, exported.report))  # shown with pytest -rP


def test_inputs_and_dynamic_axes_come_from_the_family(exported: Exported) -> None:
    """The file takes what the type's tokenizer gives, of what its head takes (no ``token_type_ids``
    for RoBERTa's, XLM-R's or CamemBERT's), and the decoder's inputs; dimensions from the family."""
    model = onnx.load(str(exported.path), load_external_data=False)
    spec = exported.spec
    takes = resolve(str(exported.folder), spec.head, seq_len=SEQ).input_names
    gives = tokenizer_gives(exported.model_type)
    wanted = [name for name in takes if gives is None or name in gives or name.startswith("decoder_")]
    assert [v.name for v in model.graph.input] == wanted == list(spec.input_names)
    for value in model.graph.input:
        dims = [d.dim_param for d in value.type.tensor_type.shape.dim]
        assert dims == list(input_dims(spec)[value.name]), value.name
    assert [v.name for v in model.graph.output] == list(output_names(spec))
    for value in model.graph.output:
        assert value.type.tensor_type.shape.dim[0].dim_param == "batch", value.name


def test_outputs_match_transformers_at_sizes_the_export_never_saw(exported: Exported) -> None:
    spec = exported.spec
    session = _session(exported.path)
    names = list(output_names(spec))
    reference = _transformers_model(exported)
    for index, sizes in enumerate(NEW_SIZES):
        shape = tuple(sizes[name] for name in dim_names(spec))
        feeds = random_inputs(spec, shape, padded_rows=index, seed=100 + index)
        actual = session.run(names, feeds)
        with torch.no_grad():
            expected = reference(**{k: torch.from_numpy(v) for k, v in feeds.items()}, return_dict=True)
        kept = feeds["attention_mask"].astype(bool)
        for name, ours in zip(names, actual):
            theirs = expected[name].numpy()
            assert ours.shape == theirs.shape, (name, shape)
            difference = np.abs(ours - theirs)
            if spec.family.name in UNDEFINED_AT_PADDING and difference.shape[:2] == kept.shape:
                difference = difference[kept]
            assert float(difference.max()) <= TOLERANCE, (name, shape)


def _tiny_tokenizer(model_type: str) -> Any:
    """A real tokenizer of the type's kind made from a few tokens, within the tiny vocabulary (no download)."""
    import transformers

    if model_type == "roberta":  # byte-level BPE, <pad> at RoBERTa's pad_token_id 1
        letters = {char: 5 + index for index, char in enumerate("Ġdehlorw")}
        return transformers.RobertaTokenizer(
            vocab={"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4, **letters}, merges=[]
        )
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"]  # WordPiece, as BERT's and ELECTRA's
    return transformers.BertTokenizer(vocab={word: index for index, word in enumerate(words)})


@pytest.mark.parametrize(
    ("model_type", "head"),
    [
        pytest.param("roberta", "base", marks=pytest.mark.xdist_group("onnx-roberta-base")),
        pytest.param(
            "electra", "token-classification", marks=pytest.mark.xdist_group("onnx-electra-token-classification")
        ),
    ],
)
def test_onnxruntime_runs_on_exactly_what_the_tokenizer_gives(
    model_type: str, head: str, tmp_path_factory: pytest.TempPathFactory, once: Any
) -> None:
    """``bertgraph onnx`` of a RoBERTa takes the ``input_ids`` and ``attention_mask`` its tokenizer gives and
    nothing more; ELECTRA's WordPiece tokenizer also gives ``token_type_ids``, which its file takes."""
    exported = once(("onnx-family", model_type, head), lambda: _export_family(model_type, head, tmp_path_factory))
    tokenizer = _tiny_tokenizer(model_type)
    encoded = dict(tokenizer(["hello world", "hello"], padding=True, return_tensors="np"))
    assert sorted(encoded) == sorted(tokenizer_gives(model_type) or ())
    assert ("token_type_ids" in encoded) == (model_type == "electra")
    names = list(output_names(exported.spec))
    actual = _session(exported.path).run(names, encoded)  # onnxruntime refuses a feed the file does not take
    with torch.no_grad():
        expected = _transformers_model(exported)(
            **{k: torch.from_numpy(v) for k, v in encoded.items()}, return_dict=True
        )
    kept = encoded["attention_mask"].astype(bool)
    for name, ours in zip(names, actual):
        difference = np.abs(ours - expected[name].numpy())
        assert float((difference[kept] if difference.shape[:2] == kept.shape else difference).max()) <= TOLERANCE, name


def test_graph_read_back_has_the_family_parameter_total(exported: Exported) -> None:
    spec = exported.spec
    arch = read_onnx(exported.path)
    model = _transformers_model(exported)
    unique = sum(p.numel() for p in model.parameters())  # tied and shared weights once
    assert arch.params()["total"] == stats.parameter_stats(skeleton(spec))["total"] == unique
    assert g.total_params(arch.graph) == unique
    info = arch.graph.graph
    family = spec.family
    assert info[g.G_FAMILY] == family.name and info[g.G_MODEL_TYPE] == exported.model_type
    assert info[g.G_STRUCTURE] == family.structure
    assert info[g.G_STACKS] == skeleton(spec).graph[g.G_STACKS] and info[g.G_STACKS]
    roles = {entry.get(g.M_ROLE) for entry in info[g.G_MODULES].values()}
    assert {"embeddings", "layer"} <= roles


def test_summary_and_params_of_the_file_give_the_total(exported: Exported, capsys: pytest.CaptureFixture[str]) -> None:
    total = stats.parameter_stats(skeleton(exported.spec))["total"]
    for command in ("summary", "params"):
        assert cli.main([command, str(exported.path)]) == 0
        out = capsys.readouterr().out
        assert f"{total:,}" in out, (command, out[-500:])


def test_cost_of_the_file_leaves_out_what_onnx_does_not_record(
    exported: Exported, capsys: pytest.CaptureFixture[str]
) -> None:
    """An ONNX file keeps no attention kinds: a causal model's masked FLOPs, KV cache and decode step,
    and training's saved activations, are left out with the reason, never counted as if bidirectional."""
    from bertgraph.graph.costtable import ONNX_ATTENTION_NOTE, ONNX_TRAINING_NOTE

    assert cli.main(["cost", str(exported.path), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert not {"attention_matmul_flops_masked", "kv_cache_bytes", "decode_flops_per_token"} & set(report["total"])
    assert report["notes"][:2] == [ONNX_ATTENTION_NOTE, ONNX_TRAINING_NOTE]
    assert report["memory"]["training_activation_bytes"] is None and "activations" not in report["training"]
    assert report["total"]["matmul_flops"]["values"][0] > 0
    code, err = _run_cli(["cost", str(exported.path), "--generate", "4"])
    assert code != 0 and "ONNX file does not record" in err and len(err.strip().splitlines()) == 1


# --- presets built without a checkpoint -------------------------------------------------------------


@pytest.mark.parametrize(
    ("preset", "head"),
    [
        pytest.param("gpt2", "causal-lm", id="gpt2"),
        pytest.param("t5-small", "seq2seq-lm", id="t5-small", marks=pytest.mark.slow),
    ],
)
def test_preset_exports_seeded_random_weights(preset: str, head: str, tmp_path: Path) -> None:
    """As for BERT: a preset (shrunk with size options) gets seeded random weights, verified."""
    path = tmp_path / "m.onnx"
    sizes = ["--layers", "1", "--hidden", "32", "--heads", "4", "--intermediate", "37", "--vocab", "99"]
    code, report = _run_cli(["onnx", preset, "--head", head, *sizes, "--seq-len", str(SEQ), "-o", str(path)])
    assert code == 0, report
    assert "random (seed 0)" in report and "full_check passed" in report
    meta = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
    assert meta["weights"] == "random (seed 0)" and meta["family"] == family_of(meta["model_type"]).name  # type: ignore[union-attr]


@pytest.mark.parametrize("preset", ["TinyLlama-1.1B", "t5-small", "roberta-base"])
def test_memory_estimate_follows_the_family_sizes(preset: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The estimate counts the family's own weights and refuses before any export work."""
    from bertgraph.model import build_model

    spec = resolve(preset)
    model = build_model(spec)
    weights = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    monkeypatch.setattr(memory, "available", lambda meminfo=None: memory.estimate(weights, verify=True) - 1)
    target = tmp_path / "m.onnx"
    code, err = _run_cli(["onnx", preset, "-o", str(target)])
    line = err.strip().splitlines()[-1]
    assert code == 1 and line.startswith(f"bertgraph: error: exporting {spec.name}"), line
    assert f"({memory._size(weights)} of weights)" in line and "internal error" not in err
    assert list(tmp_path.iterdir()) == []


# --- what the exporter cannot do, said in one line ----------------------------------------------------


@pytest.mark.slow
def test_t5_needs_eager_attention_and_the_exporter_failure_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With SDPA, torch.onnx's decomposition fails on T5 (the limitation EAGER_ATTENTION records);
    the failure is one line naming the cause, without the exporter's colour codes, and no file."""
    from bertgraph.errors import OnnxError
    from bertgraph.onnx import export

    folder = save_tiny(tmp_path / "checkpoint", "t5", "base", layers=1)  # the first layer's view fails
    monkeypatch.setattr(export, "EAGER_ATTENTION", {})
    target = tmp_path / "m.onnx"
    with pytest.raises(OnnxError) as raised:
        export.export_onnx_spec(resolve(str(folder), "base", seq_len=SEQ), target, exporter="dynamo")
    message = str(raised.value)
    assert "\n" not in message and "\x1b" not in message
    assert message.startswith("torch.export could not export T5Model: Cannot view a tensor"), message
    assert not target.exists()
