"""Quantized checkpoints written as each library writes them, held to the layouts bertgraph plans from the config.

Each writer below is the library's own allocation (the tensors its quantized linear layer registers or
its compressor returns, named as it saves them), written with the safetensors package into a folder
beside the ``quantization_config`` the library writes; the test then reads the file's header back and
requires every tensor bertgraph plans from that config alone — name, dtype, shape, bytes — to be in it,
and nothing else. The models are of the tests' own: a LLaMA with grouped key/value heads (a linear layer
with a bias too, where ``attention_bias`` asks for one) and a GPT-2 (``Conv1D`` layers, a tied head).
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

import bertgraph
from bertgraph.model.checkpoint import read_header
from bertgraph.model.stored import checkpoint_of
from bertgraph.plan import layouts, weights
from bertgraph.plan.layouts import PlanError

LLAMA: dict[str, Any] = {
    "model_type": "llama",
    "vocab_size": 96,
    "hidden_size": 64,
    "intermediate_size": 160,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "attention_bias": True,
    "max_position_embeddings": 128,
    "torch_dtype": "bfloat16",
}
GPT2: dict[str, Any] = {
    "model_type": "gpt2",
    "vocab_size": 96,
    "n_embd": 64,
    "n_layer": 2,
    "n_head": 4,
    "n_positions": 128,
    "torch_dtype": "float16",
}
GROUP = 32


def _meta_model(config: dict[str, Any]) -> Any:
    import torch
    import transformers

    fields = {k: v for k, v in config.items() if k not in ("model_type", "quantization_config", "torch_dtype")}
    with torch.device("meta"):
        if config["model_type"] == "gpt2":
            return transformers.GPT2LMHeadModel(transformers.GPT2Config(**fields))
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(**fields))


def _linear_sizes(module: Any) -> tuple[int, int]:
    """(in, out) of a Linear or a Conv1D (whose weight is [in, out])."""
    rows, columns = module.weight.shape
    return (int(rows), int(columns)) if type(module).__name__ == "Conv1D" else (int(columns), int(rows))


# --- each library's writer, from its source ---------------------------------------------------------


def _gptq(name: str, inputs: int, outputs: int, bias: bool, float_dtype: Any) -> dict[str, Any]:
    import torch  # AutoGPTQ qlinear_cuda.QuantLinear / GPTQModel GPTQQuantLinear buffers

    groups = math.ceil(inputs / GROUP)
    found = {
        f"{name}.qweight": torch.zeros(inputs // 32 * 4, outputs, dtype=torch.int32),
        f"{name}.qzeros": torch.zeros(groups, outputs // 32 * 4, dtype=torch.int32),
        f"{name}.scales": torch.zeros(groups, outputs, dtype=torch.float16),
        f"{name}.g_idx": torch.tensor([i // GROUP for i in range(inputs)], dtype=torch.int32),
    }
    return found | ({f"{name}.bias": torch.zeros(outputs, dtype=torch.float16)} if bias else {})


def _awq(name: str, inputs: int, outputs: int, bias: bool, float_dtype: Any) -> dict[str, Any]:
    import torch  # AutoAWQ WQLinear_GEMM / GPTQModel AWQuantLinear buffers

    found = {
        f"{name}.qweight": torch.zeros(inputs, outputs // 8, dtype=torch.int32),
        f"{name}.qzeros": torch.zeros(inputs // GROUP, outputs // 8, dtype=torch.int32),
        f"{name}.scales": torch.zeros(inputs // GROUP, outputs, dtype=torch.float16),
    }
    return found | ({f"{name}.bias": torch.zeros(outputs, dtype=torch.float16)} if bias else {})


def _bnb_4bit(nested: bool, offset: float) -> Callable[..., dict[str, Any]]:
    def write(name: str, inputs: int, outputs: int, bias: bool, float_dtype: Any) -> dict[str, Any]:
        import torch  # bitsandbytes quantize_4bit + QuantState.as_dict(packed=True), saved under "weight."

        n = inputs * outputs
        blocks = -(-n // 64)
        state: dict[str, Any] = {
            "quant_type": "nf4",
            "blocksize": 64,
            "dtype": str(float_dtype).removeprefix("torch."),
            "shape": [outputs, inputs],
        }
        found = {f"{name}.weight": torch.zeros((n + 1) // 2, 1, dtype=torch.uint8)}
        if nested:
            state |= {"nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": offset}
            found |= {
                f"{name}.weight.absmax": torch.zeros(blocks, dtype=torch.uint8),
                f"{name}.weight.nested_absmax": torch.zeros(-(-blocks // 256), dtype=torch.float32),
                f"{name}.weight.nested_quant_map": torch.zeros(256, dtype=torch.float32),
            }
        else:
            found[f"{name}.weight.absmax"] = torch.zeros(blocks, dtype=torch.float32)
        found[f"{name}.weight.quant_map"] = torch.zeros(16, dtype=torch.float32)
        packed = list(json.dumps(state).encode())
        found[f"{name}.weight.quant_state.bitsandbytes__nf4"] = torch.tensor(packed, dtype=torch.uint8)
        return found | ({f"{name}.bias": torch.zeros(outputs, dtype=float_dtype)} if bias else {})

    return write


def _bnb_8bit(name: str, inputs: int, outputs: int, bias: bool, float_dtype: Any) -> dict[str, Any]:
    import torch  # bitsandbytes Linear8bitLt._save_to_state_dict

    found = {
        f"{name}.weight": torch.zeros(outputs, inputs, dtype=torch.int8),
        f"{name}.SCB": torch.zeros(outputs, dtype=torch.float32),
        f"{name}.weight_format": torch.tensor(0, dtype=torch.uint8),
    }
    return found | ({f"{name}.bias": torch.zeros(outputs, dtype=float_dtype)} if bias else {})


def _fp8(name: str, inputs: int, outputs: int, bias: bool, float_dtype: Any) -> dict[str, Any]:
    import torch  # transformers FP8Linear, weight_block_size [128, 128]

    found = {
        f"{name}.weight": torch.zeros(outputs, inputs, dtype=torch.float8_e4m3fn),
        f"{name}.weight_scale_inv": torch.zeros(math.ceil(outputs / 128), math.ceil(inputs / 128)),
    }
    return found | ({f"{name}.bias": torch.zeros(outputs, dtype=float_dtype)} if bias else {})


def _ct_pack(name: str, inputs: int, outputs: int, bias: bool, float_dtype: Any) -> dict[str, Any]:
    import torch  # compressed-tensors PackedQuantizationCompressor.compress_weight, group scales, symmetric

    found = {
        f"{name}.weight_packed": torch.zeros(outputs, math.ceil(inputs / 8), dtype=torch.int32),
        f"{name}.weight_scale": torch.zeros(outputs, math.ceil(inputs / GROUP), dtype=float_dtype),
        f"{name}.weight_shape": torch.tensor([outputs, inputs]),
    }
    return found | ({f"{name}.bias": torch.zeros(outputs, dtype=float_dtype)} if bias else {})


def _ct_fp8(name: str, inputs: int, outputs: int, bias: bool, float_dtype: Any) -> dict[str, Any]:
    import torch  # compressed-tensors FloatQuantizationCompressor, channel scales, static input scale

    found = {
        f"{name}.weight": torch.zeros(outputs, inputs, dtype=torch.float8_e4m3fn),
        f"{name}.weight_scale": torch.zeros(outputs, 1, dtype=float_dtype),
        f"{name}.input_scale": torch.zeros(1, dtype=float_dtype),
    }
    return found | ({f"{name}.bias": torch.zeros(outputs, dtype=float_dtype)} if bias else {})


_CT_PACK = {
    "quant_method": "compressed-tensors",
    "format": "pack-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": GROUP},
            "input_activations": None,
        }
    },
    "ignore": ["lm_head"],
}
_CT_FP8 = {
    "quant_method": "compressed-tensors",
    "format": "float-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "channel"},
            "input_activations": {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "tensor"},
        }
    },
    "ignore": ["re:.*lm_head"],
}
# (quantization_config as the library writes it, the writer, which linear layers it converts)
LIBRARIES: dict[str, tuple[dict[str, Any], Callable[..., dict[str, Any]], str]] = {
    "gptq": (
        {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "desc_act": False, "sym": True},
        _gptq,
        "blocks",
    ),
    # optimum quantizes only the layers these lists end with, inside the blocks
    "gptq-attention": (
        {
            "quant_method": "gptq",
            "bits": 4,
            "group_size": GROUP,
            "modules_in_block_to_quantize": [
                ["self_attn.k_proj", "self_attn.v_proj", "self_attn.q_proj"],
                ["self_attn.o_proj"],
            ],
        },
        _gptq,
        "attention",
    ),
    "awq": (
        {"quant_method": "awq", "bits": 4, "group_size": GROUP, "version": "gemm", "zero_point": True},
        _awq,
        "all",
    ),
    "bnb-nf4": (
        {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
        _bnb_4bit(False, 0.0),
        "all",
    ),
    "bnb-nf4-double": (
        {
            "quant_method": "bitsandbytes",
            "load_in_4bit": True,
            "bnb_4bit_quant_type": "nf4",
            "bnb_4bit_use_double_quant": True,
        },
        _bnb_4bit(True, layouts.NESTED_OFFSET),
        "all",
    ),
    "bnb-int8": ({"quant_method": "bitsandbytes", "load_in_8bit": True}, _bnb_8bit, "all"),
    "fp8": ({"quant_method": "fp8", "weight_block_size": [128, 128], "activation_scheme": "dynamic"}, _fp8, "all"),
    "ct-w4a16": (_CT_PACK, _ct_pack, "all"),
    "ct-fp8": (_CT_FP8, _ct_fp8, "all"),
}


def write_checkpoint(folder: Path, config: dict[str, Any], library: str) -> Path:
    """``config`` with the library's quantization_config and a model.safetensors as the library stores it."""
    import torch
    from safetensors.torch import save_file

    quantization, writer, which = LIBRARIES[library]
    config = {**config, "quantization_config": quantization}
    model = _meta_model(config)
    float_dtype = getattr(torch, config["torch_dtype"])
    tied = {"lm_head"} if config["model_type"] == "gpt2" else set()
    blocks = "transformer.h." if config["model_type"] == "gpt2" else "model.layers."
    converted = {
        name: module
        for name, module in model.named_modules()
        if type(module).__name__ in ("Linear", "Conv1D")
        and name not in tied
        and (name.startswith(blocks) if which in ("blocks", "attention") else name != "lm_head")
        and (which != "attention" or ".self_attn." in name)
        and (type(module).__name__ == "Linear" or library.startswith(("gptq", "bnb")))
    }
    tensors: dict[str, Any] = {}
    for name, module in converted.items():
        inputs, outputs = _linear_sizes(module)
        tensors |= writer(name, inputs, outputs, module.bias is not None, float_dtype)
    for name, parameter in model.state_dict().items():
        if name.rsplit(".", 1)[0] in converted or (name.startswith("lm_head") and tied):
            continue
        tensors[name] = torch.zeros(parameter.shape, dtype=float_dtype)
    folder.mkdir(parents=True)
    save_file(tensors, folder / "model.safetensors")
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, nx.DiGraph]:
    """The two models traced once from their configs alone."""
    found = {}
    for name, config in (("llama", LLAMA), ("gpt2", GPT2)):
        folder = tmp_path_factory.mktemp(name)
        (folder / "config.json").write_text(json.dumps(config))
        found[name] = bertgraph.trace(str(folder), "causal-lm").graph
    return found


def _header(file: Path) -> dict[str, tuple[str, tuple[int, ...], int]]:
    return {name: (e.dtype, tuple(e.shape), e.end - e.begin) for name, e in read_header(file).items()}


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_the_layout_planned_from_the_config_is_the_checkpoint_the_library_writes(
    library: str, graphs: dict[str, nx.DiGraph], tmp_path: Path
) -> None:
    folder = write_checkpoint(tmp_path / library, LLAMA, library)
    stored = _header(folder / "model.safetensors")
    planned, kept, _ = weights.planned_tensors(graphs["llama"], LIBRARIES[library][0], "bfloat16")
    assert {t.name: (t.dtype, t.shape, t.bytes) for t in planned} == stored
    # The sum per part is the one the checkpoint's own summary gives (the graph keeps that one).
    summary = checkpoint_of({"model.safetensors": read_header(folder / "model.safetensors")}, "x", False).summary()
    parts = {part: data["bytes"] for part, data in summary.get("parts", {}).items()}
    planned_parts = weights._summed(planned)
    assert {p: b for p, b in planned_parts.items() if p != "weight"} == parts
    assert sum(planned_parts.values()) == summary["bytes"]
    assert kept == ["lm_head"] if library != "gptq-attention" else len(kept) == 1 + 3 * LLAMA["num_hidden_layers"]


def test_the_last_parameter_is_left_unquantized_as_transformers_leaves_it(tmp_path: Path) -> None:
    """A classifier's score layer is the model's last parameter: transformers' default skips keep it in float."""
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    graph = bertgraph.trace(str(tmp_path), "sequence-classification").graph
    config, _, _ = LIBRARIES["awq"]
    planned, kept, _ = weights.planned_tensors(graph, config, "bfloat16")
    assert kept == ["score"]
    assert {t.name: (t.dtype, t.shape) for t in planned}["score.weight"] == ("BF16", (2, LLAMA["hidden_size"]))


@pytest.mark.parametrize("library", ["gptq", "bnb-nf4", "bnb-int8"])
def test_conv1d_layers_and_a_tied_head_as_gptq_and_bitsandbytes_store_them(
    library: str, graphs: dict[str, nx.DiGraph], tmp_path: Path
) -> None:
    """GPT-2's Conv1D weights are [in, out]; its head is the embedding (tied): stored once, never quantized."""
    folder = write_checkpoint(tmp_path / library, GPT2, library)
    planned, _, _ = weights.planned_tensors(graphs["gpt2"], LIBRARIES[library][0], "float16")
    assert {t.name: (t.dtype, t.shape, t.bytes) for t in planned} == _header(folder / "model.safetensors")
    assert not any(t.name.startswith("lm_head") for t in planned)


def test_the_nested_offset_is_the_one_figure_not_in_the_config(graphs: dict[str, nx.DiGraph], tmp_path: Path) -> None:
    """Double quant prints a float in its JSON: another offset changes those bytes alone, by its digits."""
    config, _, _ = LIBRARIES["bnb-nf4-double"]
    LIBRARIES["other-offset"] = (config, _bnb_4bit(True, 0.125), "all")
    try:
        folder = write_checkpoint(tmp_path / "offset", LLAMA, "other-offset")
    finally:
        del LIBRARIES["other-offset"]
    stored = _header(folder / "model.safetensors")
    planned = {
        t.name: (t.dtype, t.shape, t.bytes) for t in weights.planned_tensors(graphs["llama"], config, "bfloat16")[0]
    }
    differ = {name for name in stored if stored[name] != planned[name]}
    assert differ and all(name.endswith("quant_state.bitsandbytes__nf4") for name in differ)
    shorter = len(repr(layouts.NESTED_OFFSET)) - len(repr(0.125))
    assert all(planned[name][2] - stored[name][2] == shorter for name in differ)


def test_a_checkpoint_and_its_config_alone_plan_the_same_weights(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end: ``cost`` of the folder reads the headers; of its config.json alone, the layout; the same bytes."""
    from bertgraph.cli import main

    folder = write_checkpoint(tmp_path / "gptq", LLAMA, "gptq")
    alone = tmp_path / "config-only"
    alone.mkdir()
    shutil.copy(folder / "config.json", alone / "config.json")
    found = {}
    for where in (folder, alone):
        assert main(["cost", str(where), "--head", "causal-lm", "--format", "json", "--depth", "0"]) == 0
        report = json.loads(capsys.readouterr().out)
        found[where] = (report["deployment"]["weights"]["bytes"], report["assumptions"]["deployment"]["weights"])
    total = sum(size for _, _, size in _header(folder / "model.safetensors").values())
    assert found[folder][0] == found[alone][0] == total
    assert found[folder][1]["source"] == "the checkpoint's safetensors headers"
    assert found[alone][1]["source"] == "the config's quantization_config"
    assert found[folder][1]["parts"] == found[alone][1]["parts"]


def test_layouts_refuse_what_their_library_refuses() -> None:
    layer = layouts.Linear("x", 48, 64, False)
    with pytest.raises(PlanError, match="divisible by the group size"):
        layouts.awq(layer, 4, 32)
    with pytest.raises(PlanError, match="2, 3, 4 or 8 bits"):
        layouts.gptq(layer, 5, 32)
    with pytest.raises(PlanError, match="nf4 or fp4"):
        layouts.bnb_4bit(layer, "int4", False, "U8", "bfloat16")
    with pytest.raises(PlanError, match="quant_method 'hqq'"):
        weights.method_of({"quant_method": "hqq"})
