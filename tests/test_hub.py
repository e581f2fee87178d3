"""Hub ids against a real Hub of the tests' own (tests/hub_server.py on 127.0.0.1), with the real
huggingface_hub: configs and safetensors headers fetched into the standard cache, never a weight,
never code; the next run offline; every failure one line, exit 1, nothing left in the cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import bertgraph
from bertgraph.cli import main
from bertgraph.model import hub as hub_module
from tests.family_configs import TINY
from tests.helpers import one_line_error
from tests.hub_server import HubServer, SilentServer, closed_port_url, folder_files
from tests.transformers_counts import transformers_total

pytestmark = pytest.mark.xdist_group("hub")  # the checkpoints below are written once, on one worker

BERT = "tests-org/tiny-bert"


@pytest.fixture
def hf_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Hugging Face home of the test's own, fetching allowed, no token; the folder not yet made."""
    home = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    for name in ("HF_HUB_CACHE", "HF_ASSETS_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN", "HF_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_DOWNLOAD_TIMEOUT", raising=False)
    monkeypatch.delenv("BERTGRAPH_HUB_TIMEOUT", raising=False)
    return home


@pytest.fixture
def hub(hf_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    """The server, as HF_ENDPOINT; after the test, no request may have read weights or asked for code."""
    server = HubServer()
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    yield server
    server.stop()
    assert server.violations() == []


def _save(folder: Path, model: Any, **options: Any) -> Path:
    model.save_pretrained(folder, **options)
    return folder


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, int]]:
    """Tiny models of each structure saved with save_pretrained: folder and the module's own total.

    BERT with a classification head in bfloat16, sharded; GPT-2 (its LM head tied); LLaMA (grouped
    key/value heads, untied); T5 with 4 encoder and 3 decoder layers.
    """
    import torch
    import transformers

    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("hub-checkpoints")
    models = {
        "bert": (
            transformers.BertForSequenceClassification(
                transformers.BertConfig(
                    hidden_size=32,
                    num_hidden_layers=2,
                    num_attention_heads=2,
                    intermediate_size=37,
                    vocab_size=99,
                    max_position_embeddings=64,
                    num_labels=3,
                )
            ).to(torch.bfloat16),
            {"max_shard_size": "40KB"},
        ),
        "gpt2": (
            transformers.GPT2LMHeadModel(
                transformers.GPT2Config(
                    n_layer=3, n_embd=32, n_head=4, vocab_size=100, n_positions=64, bos_token_id=0, eos_token_id=0
                )
            ),
            {},
        ),
        "llama": (
            transformers.LlamaForCausalLM(
                transformers.LlamaConfig(
                    hidden_size=32,
                    num_hidden_layers=3,
                    num_attention_heads=4,
                    num_key_value_heads=2,
                    intermediate_size=48,
                    vocab_size=100,
                    max_position_embeddings=64,
                    tie_word_embeddings=False,
                )
            ),
            {},
        ),
        "t5": (
            transformers.T5ForConditionalGeneration(
                transformers.T5Config(
                    d_model=32, d_ff=48, num_layers=4, num_decoder_layers=3, num_heads=4, d_kv=8, vocab_size=100
                )
            ),
            {},
        ),
    }
    return {
        name: (_save(root / name, model, **options), sum(p.numel() for p in model.parameters()))
        for name, (model, options) in models.items()
    }


def _publish(hub: HubServer, repo_id: str, folder: Path, ref: str = "main", **changes: bytes) -> str:
    """The folder's files (with ``changes``: name → new content) as a commit of ``repo_id``."""
    files = {**folder_files(folder), **changes}
    return hub.repo(repo_id).add({name: data for name, data in files.items() if data}, ref)


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main([*argv, "--format", "json"]) == 0, capsys.readouterr().err
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def _everything(home: Path) -> list[str]:
    return sorted(str(path.relative_to(home)) for path in home.rglob("*")) if home.exists() else []


# --- fetched once, then offline ------------------------------------------------------------------


def test_a_hub_id_is_fetched_as_config_and_headers_then_read_offline(
    hub: HubServer, hf_home: Path, checkpoints: dict[str, tuple[Path, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, total = checkpoints["bert"]
    commit = _publish(hub, BERT, folder)
    shards = sorted(json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"].values())
    shards = sorted(set(shards))
    assert len(shards) == 2
    summary = _json(["summary", BERT, "--head", "sequence-classification"], capsys)
    assert summary["total"] == total
    checkpoint = summary["checkpoint"]
    assert checkpoint["files"] == 2 and checkpoint["sharded"] is True and checkpoint["source"] == f"{BERT}@{commit}"
    assert list(checkpoint["dtypes"]) == ["BF16"] and checkpoint["bytes"] == 2 * total
    assert checkpoint["compared"]["matches"] is True and checkpoint["compared"]["graph"] == total
    # What was asked: the file list, the config, the index and one ranged read of each shard's header.
    assert hub.asked("GET")[0] == f"/api/models/{BERT}/revision/main"
    fetched = {path.rsplit("/", 1)[-1] for path in hub.asked()[1:]}
    assert fetched == {"config.json", "model.safetensors.index.json", *shards}
    assert sorted(p.rsplit("/", 1)[-1] for p in hub.asked("GET") if p.endswith(".safetensors")) == shards
    # The standard cache: refs/main names the commit whose snapshot holds config and index, no weights.
    repo = hf_home / "hub" / "models--tests-org--tiny-bert"
    assert (repo / "refs" / "main").read_text() == commit
    assert sorted(p.name for p in (repo / "snapshots" / commit).iterdir()) == [
        "config.json",
        "model.safetensors.index.json",
    ]
    assert (hf_home / "assets" / "bertgraph" / "models--tests-org--tiny-bert" / f"{commit}.json").is_file()
    # Warm: no request at all, the same answer; then the server gone and HF_HUB_OFFLINE=1.
    asked = len(hub.requests)
    assert _json(["summary", BERT, "--head", "sequence-classification"], capsys) == summary
    assert len(hub.requests) == asked
    hub.stop()
    os.environ["HF_HUB_OFFLINE"] = "1"
    assert _json(["summary", BERT, "--head", "sequence-classification"], capsys) == summary
    assert main(["summary", BERT, "--head", "sequence-classification"]) == 0
    assert "checkpoint bfloat16, 2 shards, " in capsys.readouterr().out
    arch = bertgraph.trace(BERT, "sequence-classification", revision=commit, offline=True)
    assert arch.summary()["checkpoint"] == checkpoint and arch.name == f"{BERT}@{commit}"


@pytest.mark.parametrize(
    ("name", "head"),
    [("bert", "sequence-classification"), ("gpt2", "causal-lm"), ("llama", "causal-lm"), ("t5", "seq2seq-lm")],
)
def test_totals_through_a_hub_id_are_the_modules_and_the_checkpoints(
    hub: HubServer,
    checkpoints: dict[str, tuple[Path, int]],
    capsys: pytest.CaptureFixture[str],
    name: str,
    head: str,
) -> None:
    folder, total = checkpoints[name]
    _publish(hub, f"tests-org/{name}", folder)
    params = _json(["params", f"tests-org/{name}", "--head", head], capsys)
    compared = params["checkpoint"]["compared"]
    assert params["total"] == total == compared["graph"] == compared["stored"] == params["checkpoint"]["elements"]
    assert compared["matches"] is True and compared["not_in_model"]["tensors"] == 0


@pytest.mark.parametrize("model_type", sorted(TINY))
def test_every_familys_config_through_a_hub_id_counts_what_transformers_builds(
    hub: HubServer, capsys: pytest.CaptureFixture[str], model_type: str
) -> None:
    """A repository holding a config alone (no weights): fetched, resolved by its family's record and
    counted from the module tree, its total is what transformers builds of the same config.json."""
    config = TINY[model_type]
    repo_id = f"tests-org/config-only-{model_type}"
    hub.repo(repo_id).add({"config.json": json.dumps(config).encode()})
    params = _json(["params", repo_id], capsys)
    assert params["total"] == transformers_total(config), model_type
    assert "checkpoint" not in params  # no safetensors file, no header asked for
    assert {path.rsplit("/", 1)[-1] for path in hub.asked()[1:]} == {"config.json"}


def test_a_head_the_checkpoint_lacks_and_tensors_the_model_lacks_are_said(
    hub: HubServer, checkpoints: dict[str, tuple[Path, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, total = checkpoints["bert"]
    _publish(hub, BERT, folder)
    params = _json(["params", BERT], capsys)  # the bare BertModel: the checkpoint also holds the classifier
    compared = params["checkpoint"]["compared"]
    assert compared["matches"] is False and compared["graph"] == params["total"]
    assert compared["not_in_model"] == {
        "tensors": 2,
        "elements": total - params["total"],
        "names": ["classifier.bias", "classifier.weight"],
    }
    assert main(["params", BERT]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line.startswith("checkpoint bfloat16, 2 shards, ") and f"{total:,} parameters, the graph" in line
    assert "2 stored tensors not in the model (99: classifier.bias, classifier.weight)" in line


def test_the_header_of_a_file_is_read_to_its_end_and_no_further(
    hub: HubServer, tmp_path: Path, checkpoints: dict[str, tuple[Path, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    """A header longer than the first 100 kB read (metadata of 150 kB) takes a second range, up to its end."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    folder, total = checkpoints["gpt2"]
    copy = tmp_path / "gpt2"
    shutil.copytree(folder, copy)
    with safe_open(folder / "model.safetensors", "pt") as handle:
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118
    save_file(tensors, copy / "model.safetensors", metadata={"format": "pt", "note": "x" * 150_000})
    _publish(hub, "tests-org/long-header", copy)
    assert _json(["params", "tests-org/long-header"], capsys)["checkpoint"]["compared"]["stored"] == total
    ranges = [r["range"] for r in hub.requests if r["path"].endswith(".safetensors")]
    header = hub.requests[-1]["header"]
    assert header > 150_000 and ranges == ["bytes=0-99999", f"bytes=8-{header + 7}"]


def test_revisions_by_flag_and_by_at(
    hub: HubServer, tmp_path: Path, checkpoints: dict[str, tuple[Path, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _ = checkpoints["gpt2"]
    config = json.loads((folder / "config.json").read_text())
    _publish(hub, "tests-org/gpt2", folder)
    wider = json.dumps({**config, "n_layer": 5}).encode()
    tagged = _publish(hub, "tests-org/gpt2", folder, ref="v2", **{"config.json": wider, "model.safetensors": b""})
    main_names = {row["name"] for row in _json(["params", "tests-org/gpt2"], capsys)["parameters"]}
    assert "h.2.ln_1.weight" in main_names and "h.3.ln_1.weight" not in main_names
    by_flag = _json(["params", "tests-org/gpt2", "--revision", "v2"], capsys)
    assert by_flag["model"] == "tests-org/gpt2@v2"
    assert "h.4.ln_1.weight" in {row["name"] for row in by_flag["parameters"]}
    assert "checkpoint" not in by_flag  # that commit has no safetensors file
    by_at = _json(["params", f"tests-org/gpt2@{tagged}"], capsys)
    assert by_at["total"] == by_flag["total"]
    line = one_line_error(["params", "tests-org/gpt2@v2", "--revision", "main"], capsys)
    assert "names revision v2 and --revision says main; give one of them" in line
    line = one_line_error(["params", "bert-tiny", "--revision", "v2"], capsys)
    assert "--revision v2 names a revision of a hub id; bert-tiny is a preset" in line


def test_a_token_opens_a_gated_model_from_the_environment_or_a_stored_login(
    hub: HubServer, hf_home: Path, checkpoints: dict[str, tuple[Path, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, total = checkpoints["llama"]
    _publish(hub, "tests-org/gated", folder)
    hub.repo("tests-org/gated").token = "hf_secret"
    os.environ["HF_TOKEN"] = "hf_secret"
    try:
        assert _json(["params", "tests-org/gated", "--head", "causal-lm"], capsys)["total"] == total
    finally:
        del os.environ["HF_TOKEN"]
    shutil.rmtree(hf_home)
    hf_home.mkdir()
    (hf_home / "token").write_text("hf_secret")  # what `hf auth login` stores
    assert _json(["params", "tests-org/gated", "--head", "causal-lm"], capsys)["total"] == total
    resolves = [r for r in hub.requests if "/resolve/" in r["path"]]
    assert resolves and all(r["authorization"] == "Bearer hf_secret" for r in resolves)


# --- quantized checkpoints --------------------------------------------------------------------


def _quantized(folder: Path, target: Path, method: str) -> int:
    """A copy of the LLaMA checkpoint with every linear layer's weight quantized the way ``method`` stores it
    (GPTQ: int32 packed weights, float16 scales, int32 zero points and group indices; FP8: float8 weights
    with a float32 block scale); returns how many weights were."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    shutil.copytree(folder, target)
    with safe_open(folder / "model.safetensors", "pt") as handle:
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118
    quantized = 0
    for name in [n for n in tensors if n.startswith("model.layers.") and n.endswith("_proj.weight")]:
        out, inputs = tensors[name].shape
        module = name.removesuffix(".weight")
        quantized += 1
        if method == "gptq":
            del tensors[name]
            tensors[f"{module}.qweight"] = torch.zeros(inputs // 8, out, dtype=torch.int32)
            tensors[f"{module}.qzeros"] = torch.zeros(inputs // 16, out // 8, dtype=torch.int32)
            tensors[f"{module}.scales"] = torch.ones(inputs // 16, out, dtype=torch.float16)
            tensors[f"{module}.g_idx"] = torch.arange(inputs, dtype=torch.int32) // 16
        else:
            tensors[name] = tensors[name].to(torch.float8_e4m3fn)
            tensors[f"{module}.weight_scale_inv"] = torch.ones(1, 1)
    save_file(tensors, target / "model.safetensors")
    config = json.loads((target / "config.json").read_text())
    settings = {"bits": 4, "group_size": 16} if method == "gptq" else {"weight_block_size": [128, 128]}
    config["quantization_config"] = {"quant_method": method, **settings}
    (target / "config.json").write_text(json.dumps(config))
    return quantized


@pytest.mark.parametrize("method", ["gptq", "fp8"])
def test_quantized_tensors_are_recognised_and_recorded_per_tensor(
    hub: HubServer,
    tmp_path: Path,
    checkpoints: dict[str, tuple[Path, int]],
    capsys: pytest.CaptureFixture[str],
    method: str,
) -> None:
    from bertgraph.model import resolve

    folder, total = checkpoints["llama"]
    weights = _quantized(folder, tmp_path / method, method)
    _publish(hub, f"tests-org/llama-{method}", tmp_path / method)
    params = _json(["params", f"tests-org/llama-{method}", "--head", "causal-lm"], capsys)
    found, compared = params["checkpoint"], params["checkpoint"]["compared"]
    assert found["quantization"] == method and compared["matches"] is True and params["total"] == total
    assert compared["quantized"]["tensors"] == weights == 21
    assert compared["stored"] + compared["quantized"]["elements"] == total
    expected = {
        "gptq": {"packed": ["I32"], "scales": ["F16"], "zeros": ["I32"], "g_idx": ["I32"]},
        "fp8": {"float8": ["F8_E4M3"], "scales": ["F32"]},
    }[method]
    assert {part: data["dtypes"] for part, data in found["parts"].items()} == expected
    assert all(data["tensors"] == weights for data in found["parts"].values())
    assert main(["params", f"tests-org/llama-{method}", "--head", "causal-lm"]) == 0
    words = {"gptq": "gptq (int32 packed weights, float16 scales, int32 zero points, int32 group indices)"}
    line = capsys.readouterr().out.splitlines()[1]
    assert line.startswith(f"checkpoint {words.get(method, 'fp8 (float8_e4m3fn low-precision float weights')}")
    assert f"{weights} weights stored quantized, as the graph" in line
    # Per tensor on the spec: dtype, shape, bytes as stored, and the part it is.
    spec = resolve(f"tests-org/llama-{method}", "causal-lm")
    assert spec.checkpoint is not None
    stored = {t.name: t for t in spec.checkpoint.tensors}
    first = "model.layers.0.self_attn.q_proj"
    if method == "gptq":
        assert (
            stored[f"{first}.qweight"][1:4] == ("I32", (4, 32), 4 * 4 * 32)
            and stored[f"{first}.qweight"].part == "packed"
        )
        assert stored[f"{first}.g_idx"].part == "g_idx" and stored[f"{first}.qzeros"].part == "zeros"
    else:
        assert (
            stored[f"{first}.weight"][1:4] == ("F8_E4M3", (32, 32), 32 * 32)
            and stored[f"{first}.weight"].part == "float8"
        )
    assert sum(t.bytes for t in spec.checkpoint.tensors) == found["bytes"]


# --- code is never fetched -------------------------------------------------------------------


def test_a_config_naming_its_own_code_is_drawn_with_transformers_classes_or_refused(
    hub: HubServer, hf_home: Path, checkpoints: dict[str, tuple[Path, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, total = checkpoints["llama"]
    config = json.loads((folder / "config.json").read_text())
    auto_map = {"AutoConfig": "configuration_custom.CustomConfig", "AutoModelForCausalLM": "modeling_custom.Custom"}
    code = {"modeling_custom.py": b"raise SystemExit('never run')\n", "configuration_custom.py": b"x = 1\n"}
    known = json.dumps({**config, "auto_map": auto_map}).encode()
    _publish(hub, "tests-org/custom", folder, **{"config.json": known, **code})
    params = _json(["params", "tests-org/custom", "--head", "causal-lm"], capsys)
    assert params["total"] == total
    assert params["remote_code"] == ["configuration_custom.CustomConfig", "modeling_custom.Custom"]
    assert main(["params", "tests-org/custom", "--head", "causal-lm"]) == 0
    assert "config's auto_map names code of its own (configuration_custom.CustomConfig" in capsys.readouterr().out
    unknown = json.dumps({**config, "auto_map": auto_map, "model_type": "custom-lm"}).encode()
    _publish(hub, "tests-org/custom-type", folder, **{"config.json": unknown, **code})
    before = _everything(hf_home)
    line = one_line_error(["params", "tests-org/custom-type"], capsys)
    assert "needs its own code (configuration_custom.CustomConfig, named by auto_map in its config), which " in line
    assert "never fetches or runs, and its model_type 'custom-lm' is not one transformers knows" in line
    assert _everything(hf_home) == before  # the refused model's config and headers taken back out
    assert not any(path.endswith(".py") for path in hub.asked())


# --- failures: one line, exit 1, nothing left behind ------------------------------------------


def _broken(hub: HubServer, checkpoints: dict[str, tuple[Path, int]], case: str) -> tuple[str, list[str]]:
    """A repository set up to fail as ``case`` does: the model to ask for and the words the line says."""
    bert, _ = checkpoints["bert"]
    gpt2, _ = checkpoints["gpt2"]
    if case == "gated":
        _publish(hub, "tests-org/gated", gpt2)
        hub.repo("tests-org/gated").token = "hf_other"
        return "tests-org/gated", ["tests-org/gated is gated: accept its licence on", "set HF_TOKEN"]
    if case == "no repository":
        return "tests-org/absent", ["no model tests-org/absent on http://127.0.0.1:", "set HF_TOKEN"]
    if case == "no revision":
        _publish(hub, "tests-org/gpt2", gpt2)
        return "tests-org/gpt2@v9", ["tests-org/gpt2 has no revision 'v9'; give a branch, tag or commit"]
    if case == "no config":
        _publish(hub, "tests-org/weights-only", gpt2, **{"config.json": b""})
        return "tests-org/weights-only", ["tests-org/weights-only has no config.json; bertgraph draws transformers"]
    if case == "a shard missing":
        first = sorted(p.name for p in bert.glob("model-0*.safetensors"))[0]
        _publish(hub, "tests-org/half", bert, **{first: b""})
        return "tests-org/half", [f"model.safetensors.index.json names {first}, which the repository does not hold"]
    if case == "a config too large":
        _publish(hub, "tests-org/huge", gpt2)
        hub.repo("tests-org/huge").sizes["config.json"] = 65 * 2**20
        return "tests-org/huge", ["tests-org/huge: config.json is 68,157,440 bytes, above the 64 MB bertgraph reads"]
    if case == "a listed file not there":
        _publish(hub, "tests-org/out-of-step", gpt2)
        hub.repo("tests-org/out-of-step").hidden.add("config.json")
        return "tests-org/out-of-step", ["tests-org/out-of-step lacks a file its file list names (", "run again"]
    if case == "a damaged header":
        data = bytearray((gpt2 / "model.safetensors").read_bytes())
        data[8:9] = b"["  # the header's JSON object made a list
        _publish(hub, "tests-org/damaged", gpt2, **{"model.safetensors": bytes(data)})
        return "tests-org/damaged", ["model.safetensors is not a valid safetensors file: the header is not JSON"]
    raise AssertionError(case)


CASES = [
    "gated",
    "no repository",
    "no revision",
    "no config",
    "a listed file not there",
    "a shard missing",
    "a config too large",
    "a damaged header",
]


@pytest.mark.parametrize("case", CASES)
def test_each_failure_is_one_line_and_leaves_the_cache_as_it_was(
    hub: HubServer,
    hf_home: Path,
    checkpoints: dict[str, tuple[Path, int]],
    capsys: pytest.CaptureFixture[str],
    case: str,
) -> None:
    model, words = _broken(hub, checkpoints, case)
    line = one_line_error(["params", model], capsys)
    for part in words:
        assert part in line, line
    assert not hf_home.exists(), _everything(hf_home)
    if case == "a config too large":
        assert not [path for path in hub.asked() if path.endswith("config.json")]


def test_a_failed_fetch_keeps_what_the_cache_held_before(
    hub: HubServer, hf_home: Path, checkpoints: dict[str, tuple[Path, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    """Another tool cached main's config alone; the fetch that would complete it moves main to a commit whose
    shard is missing and fails: main's ref, snapshot and files are as they were, and offline it still draws."""
    folder, _ = checkpoints["bert"]
    earlier = "e" * 40
    repo = hf_home / "hub" / "models--tests-org--tiny-bert"
    (repo / "snapshots" / earlier).mkdir(parents=True)
    (repo / "snapshots" / earlier / "config.json").write_bytes((folder / "config.json").read_bytes())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(earlier)
    before = {path: path.read_bytes() for path in hf_home.rglob("*") if path.is_file()}
    first = sorted(p.name for p in folder.glob("model-0*.safetensors"))[0]
    _publish(hub, BERT, folder, **{first: b""})
    line = one_line_error(["params", BERT, "--head", "sequence-classification"], capsys)
    assert f"names {first}, which the repository does not hold" in line
    assert {path: path.read_bytes() for path in hf_home.rglob("*") if path.is_file()} == before
    assert sorted(str(p.relative_to(hf_home)) for p in hf_home.rglob("*")) == [
        "hub",
        "hub/models--tests-org--tiny-bert",
        "hub/models--tests-org--tiny-bert/refs",
        "hub/models--tests-org--tiny-bert/refs/main",
        "hub/models--tests-org--tiny-bert/snapshots",
        f"hub/models--tests-org--tiny-bert/snapshots/{earlier}",
        f"hub/models--tests-org--tiny-bert/snapshots/{earlier}/config.json",
    ]
    os.environ["HF_HUB_OFFLINE"] = "1"
    params = _json(["params", BERT, "--head", "sequence-classification"], capsys)
    assert "checkpoint" not in params  # a config cached alone: drawn, with nothing said of weights


def test_headers_that_disagree_with_the_config_are_said_as_for_a_local_checkpoint(
    hub: HubServer, checkpoints: dict[str, tuple[Path, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _ = checkpoints["bert"]
    config = json.loads((folder / "config.json").read_text())
    _publish(hub, BERT, folder, **{"config.json": json.dumps({**config, "intermediate_size": 40}).encode()})
    line = one_line_error(["params", BERT, "--head", "sequence-classification"], capsys)
    assert f"bertgraph: error: {BERT}@" in line
    assert "tensor 'bert.encoder.layer.0.intermediate.dense.bias' has shape [37] but the config needs [40]" in line
    assert "use the config.json saved with these weights (and no size overrides)" in line


def test_offline_and_not_cached_asks_nothing(
    hub: HubServer, hf_home: Path, checkpoints: dict[str, tuple[Path, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    _publish(hub, BERT, checkpoints["bert"][0])
    line = one_line_error(["render", BERT, "--offline", "-o", str(hf_home.parent / "x.svg")], capsys)
    assert (
        f"{BERT} is not in the Hugging Face cache (" in line and "fetching is off (--offline or HF_HUB_OFFLINE)" in line
    )
    os.environ["HF_HUB_OFFLINE"] = "1"
    one_line_error(["params", BERT], capsys)
    assert hub.requests == [] and not hf_home.exists()


def test_no_network_is_one_line(
    hf_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", closed_port_url())
    line = one_line_error(["summary", BERT], capsys)
    assert "cannot reach http://127.0.0.1:" in line and f"to fetch {BERT}" in line and "HF_HUB_OFFLINE=1" in line
    assert not hf_home.exists()


def _timed_run(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    """The command line as a process of its own, which must end within 30 s by itself."""
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "bertgraph", *argv],
        env={**os.environ, **env, "PYTHONPATH": str(Path(__file__).parents[1])},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return time.monotonic() - start, done


@pytest.mark.slow
def test_a_server_that_never_answers_ends_the_run_in_one_line(hf_home: Path) -> None:
    silent = SilentServer()
    try:
        # each request waits HF_HUB_DOWNLOAD_TIMEOUT seconds (10 unless set), as huggingface_hub's own do
        seconds, done = _timed_run(["summary", BERT], {"HF_ENDPOINT": silent.url, "HF_HUB_DOWNLOAD_TIMEOUT": "2"})
    finally:
        silent.stop()
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"bertgraph: error: no answer from {silent.url} in time while fetching {BERT}" in done.stderr
    assert 2 <= seconds < 12 and not hf_home.exists()


@pytest.mark.slow
def test_a_server_that_stops_answering_midway_is_cut_off(
    hub: HubServer, hf_home: Path, checkpoints: dict[str, tuple[Path, int]]
) -> None:
    """The file list and config answered, the index's HEAD never: huggingface_hub would retry for minutes;
    the fetch ends at BERTGRAPH_HUB_TIMEOUT (25 s unless set), whatever each request's own timeout."""
    _publish(hub, BERT, checkpoints["bert"][0])
    hub.repo(BERT).stall.add("model.safetensors.index.json")
    seconds, done = _timed_run(["summary", BERT], {"HF_ENDPOINT": hub.url, "BERTGRAPH_HUB_TIMEOUT": "4"})
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert f"bertgraph: error: no answer from {hub.url} within 4 s while fetching {BERT}" in done.stderr
    assert 4 <= seconds < 14 and not hf_home.exists(), _everything(hf_home)


@pytest.mark.parametrize("value", ["0", "-3", "soon", "nan", "inf", "3601"])
def test_a_fetch_limit_that_is_no_number_of_seconds_is_one_line(
    hub: HubServer, value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BERTGRAPH_HUB_TIMEOUT", value)
    error = one_line_error(["summary", BERT], capsys)
    assert f"BERTGRAPH_HUB_TIMEOUT={value!r} is not a number of seconds" in error
    assert "unset it for 25 s" in error and not hub.requests


def test_the_whole_fetch_is_cut_off_at_25_s_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BERTGRAPH_HUB_TIMEOUT", raising=False)
    assert hub_module.fetch_seconds() == 25.0
    monkeypatch.setenv("BERTGRAPH_HUB_TIMEOUT", " 60 ")
    assert hub_module.fetch_seconds() == 60.0


# --- every command that names a model ---------------------------------------------------------


@pytest.mark.dot
def test_families_masks_diff_and_render_take_hub_ids(
    hub: HubServer, tmp_path: Path, checkpoints: dict[str, tuple[Path, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("bert", "t5"):
        _publish(hub, f"tests-org/{name}", checkpoints[name][0])
    table = tmp_path / "families.md"
    assert (
        main(["families", "tests-org/bert", "tests-org/t5", "-o", str(tmp_path / "f.svg"), "--table", str(table)]) == 0
    )
    assert "tests-org/bert" in table.read_text() and "tests-org/t5" in table.read_text()
    masks = tmp_path / "masks.json"
    assert main(["masks", "tests-org/t5", "-o", str(masks)]) == 0
    assert "tests-org/t5" in masks.read_text()
    diff = _json(["diff", "tests-org/bert", "--head", "base", "--head", "sequence-classification"], capsys)
    assert "classifier" in [row["module"] for row in diff["added"]] and diff["removed"] == []
    assert main(["render", "tests-org/bert", "--head", "sequence-classification", "-o", str(tmp_path / "b.svg")]) == 0
    assert "BertForSequenceClassification" in (tmp_path / "b.svg").read_text()
    assert main(["report", "tests-org/bert", "--head", "sequence-classification", "-o", str(tmp_path / "r.md")]) == 0
    assert "Checkpoint bfloat16, 2 shards, " in (tmp_path / "r.md").read_text()


def _offline_docs_env(hf_home: Path) -> dict[str, str]:
    return {"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).parents[1])}


@pytest.mark.dot
@pytest.mark.slow
def test_docs_builds_draw_a_cached_hub_id_offline(
    hub: HubServer,
    hf_home: Path,
    tmp_path: Path,
    checkpoints: dict[str, tuple[Path, int]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The Sphinx directive and the MkDocs fence name a hub id; the builds read it from the cache, offline."""
    _publish(hub, BERT, checkpoints["bert"][0])
    assert main(["params", BERT, "--head", "sequence-classification"]) == 0  # fetched once
    capsys.readouterr()
    hub.stop()
    sphinx = tmp_path / "sphinx"
    sphinx.mkdir()
    (sphinx / "conf.py").write_text('project = "hub"\nextensions = ["bertgraph.sphinx"]\n')
    (sphinx / "index.rst").write_text(
        f"Hub\n===\n\n.. bertgraph:: {BERT}\n   :head: sequence-classification\n   :format: summary\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-q", str(sphinx), str(tmp_path / "html")],
        env={**os.environ, **_offline_docs_env(hf_home)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0 and "WARNING" not in done.stderr, done.stderr
    assert "checkpoint bfloat16, 2 shards" in (tmp_path / "html" / "index.html").read_text()
    site = tmp_path / "mkdocs"
    (site / "docs").mkdir(parents=True)
    (site / "mkdocs.yml").write_text("site_name: hub\nplugins:\n  - bertgraph\n")
    (site / "docs" / "index.md").write_text(
        f"# Hub\n\n```bertgraph\nmodel: {BERT}\nhead: sequence-classification\nformat: summary\n```\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-q"],
        cwd=site,
        env={**os.environ, **_offline_docs_env(hf_home)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0 and "WARNING" not in done.stderr, done.stderr
    assert "checkpoint bfloat16, 2 shards" in (site / "site" / "index.html").read_text()


def test_hub_references_are_read_strictly() -> None:
    from bertgraph.errors import ModelReferenceError
    from bertgraph.model.hub import HubReference, hub_reference

    assert hub_reference("org/name@refs/pr/1") == HubReference("org/name", "refs/pr/1")
    assert hub_reference("org/name", "v1") == HubReference("org/name", "v1")
    for text in ("./org/name", "org/../name", "org--x/name", "org/name/extra", "plain"):
        assert hub_reference(text) is None, text
    with pytest.raises(ModelReferenceError, match="is not a branch, tag or commit name"):
        hub_reference("org/name@v1//x")


# --- the checkpoint held to the parameters (model/stored.py) ------------------------------------


def _stored(*tensors: tuple[str, str, tuple[int, ...]]) -> Any:
    from bertgraph.model.checkpoint import DTYPE_BITS
    from bertgraph.model.stored import Checkpoint, StoredTensor, part_of

    found = []
    for name, dtype, shape in tensors:
        size = 1
        for dim in shape:
            size *= dim
        found.append(
            StoredTensor(name, dtype, shape, size * DTYPE_BITS[dtype] // 8, "model.safetensors", part_of(name, dtype))
        )
    return Checkpoint("org/name@" + "0" * 40, ("model.safetensors",), False, tuple(sorted(found)))


def _rows(**numels: int) -> list[dict[str, Any]]:
    return [{"name": name.replace("__", "."), "numel": numel} for name, numel in numels.items()]


def test_a_tied_weight_stored_under_both_names_counts_once() -> None:
    """Older GPT-2 checkpoints store the LM head beside the embedding it is tied to."""
    from bertgraph.model.stored import compare

    stored = _stored(("transformer.wte.weight", "F32", (10, 4)), ("lm_head.weight", "F32", (10, 4)))
    found = compare(
        stored, _rows(transformer__wte__weight=40), {"lm_head.weight": "transformer.wte.weight"}, "transformer"
    )
    assert found["matches"] is True and found["stored"] == 40 == found["graph"]
    untied = compare(stored, _rows(transformer__wte__weight=40), {}, "transformer")
    assert untied["matches"] is False and untied["not_in_model"]["names"] == ["lm_head.weight"]


def test_a_bare_models_checkpoint_matches_a_head_models_names() -> None:
    """A base checkpoint names ``encoder.x``; the model with a head ``bert.encoder.x``: the head's own is missing."""
    from bertgraph.model.stored import compare

    stored = _stored(("encoder.w", "BF16", (4, 4)), ("pooler.b", "BF16", (4,)))
    rows = _rows(bert__encoder__w=16, bert__pooler__b=4, classifier__weight=8)
    found = compare(stored, rows, {}, "bert")
    assert (found["stored"], found["graph"], found["matches"]) == (20, 28, False)
    assert found["not_in_checkpoint"] == {"tensors": 1, "elements": 8, "names": ["classifier.weight"]}
    assert found["not_in_model"]["tensors"] == 0
