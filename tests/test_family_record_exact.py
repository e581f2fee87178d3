"""The family records' rules checked in-process (``model/families/record.py`` and the lookups).

Module paths are transformers' own names for each family's modules, written out here; the role
each one plays is what the architecture says it does. Nothing is built or traced, so these tests
also serve the mutation run (docs/mutation.md).
"""

from __future__ import annotations

import random
from types import MappingProxyType

import pytest

from bertgraph.model.families import (
    BY_NAME,
    BY_TYPE,
    FAMILIES,
    MODEL_TYPES,
    all_hub_ids,
    all_presets,
    family_of,
)
from bertgraph.model.families.record import (
    CROSS_ATTENTION,
    EMBEDDINGS,
    FEED_FORWARD,
    HEAD,
    LAYER,
    MODEL,
    NORM,
    POOLER,
    POSITION,
    SELF_ATTENTION,
    STACK,
    frozen,
)


def _roles(family: str, expected: dict[str, str], backbone: str = "") -> None:
    """``roles_of`` gives every path its expected role, whatever order the paths come in."""
    paths = list(expected)
    random.Random(7).shuffle(paths)  # parents must be decided before children however they are listed
    assert BY_NAME[family].roles_of(paths, backbone) == expected


BERT_LAYER = {
    "encoder.layer.0": LAYER,
    "encoder.layer.11": LAYER,
    "encoder.layer.0.attention": SELF_ATTENTION,
    "encoder.layer.0.attention.self": SELF_ATTENTION,
    "encoder.layer.0.attention.self.query": SELF_ATTENTION,
    "encoder.layer.0.attention.output": SELF_ATTENTION,
    "encoder.layer.0.attention.output.dense": SELF_ATTENTION,
    "encoder.layer.0.attention.output.LayerNorm": NORM,
    "encoder.layer.0.intermediate": FEED_FORWARD,
    "encoder.layer.0.intermediate.dense": FEED_FORWARD,
    "encoder.layer.0.output": FEED_FORWARD,
    "encoder.layer.0.output.dense": FEED_FORWARD,
    "encoder.layer.0.output.LayerNorm": NORM,
}
BERT = {
    "": MODEL,
    "embeddings": EMBEDDINGS,
    "embeddings.word_embeddings": EMBEDDINGS,
    "embeddings.position_embeddings": POSITION,
    "embeddings.token_type_embeddings": EMBEDDINGS,
    "embeddings.LayerNorm": NORM,
    "embeddings.dropout": EMBEDDINGS,
    "encoder": STACK,
    "encoder.layer": STACK,
    **BERT_LAYER,
    "pooler": POOLER,
    "pooler.dense": POOLER,
    "pooler.activation": POOLER,
}


def test_bert_modules_have_the_roles_of_what_they_compute() -> None:
    _roles("bert", BERT)
    _roles("roberta", BERT)
    _roles("electra", {**BERT, "embeddings_project": EMBEDDINGS})
    _roles("mpnet", {**BERT, "encoder.relative_attention_bias": POSITION})


def test_a_heads_modules_sit_outside_the_backbone() -> None:
    _roles(
        "bert",
        {
            "": MODEL,
            "bert": MODEL,
            "bert.embeddings": EMBEDDINGS,
            "bert.embeddings.position_embeddings": POSITION,
            "bert.encoder.layer.0.attention": SELF_ATTENTION,
            "bert.encoder.layer.0.attention.output.LayerNorm": NORM,
            "bert.pooler": POOLER,
            "dropout": HEAD,
            "classifier": HEAD,
            "cls.predictions.transform.LayerNorm": HEAD,  # a norm of the head is the head's
            "bertish": HEAD,  # only a path below the backbone is in it
        },
        backbone="bert",
    )
    # A module directly under the root of a base model, that no rule names, has the model's role.
    _roles("gpt2", {"": MODEL, "drop": MODEL, "wte": EMBEDDINGS}, backbone="")
    # … also when the list leaves out the root itself.
    _roles("gpt2", {"drop": MODEL, "wte": EMBEDDINGS}, backbone="")


def test_deberta_reads_its_relative_positions_through_the_encoders_norm() -> None:
    _roles(
        "deberta",
        {
            "": MODEL,
            "embeddings": EMBEDDINGS,
            "embeddings.LayerNorm": NORM,
            "encoder": STACK,
            "encoder.rel_embeddings": POSITION,
            "encoder.LayerNorm": POSITION,
            "encoder.layer": STACK,
            "encoder.layer.0": LAYER,
            "encoder.layer.0.attention": SELF_ATTENTION,
            "encoder.layer.0.attention.self": SELF_ATTENTION,
            "encoder.layer.0.attention.self.pos_dropout": SELF_ATTENTION,
            "encoder.layer.0.attention.output": SELF_ATTENTION,
            "encoder.layer.0.attention.output.LayerNorm": NORM,
        },
    )


def test_distilbert_and_albert_roles() -> None:
    _roles(
        "distilbert",
        {
            "": MODEL,
            "embeddings": EMBEDDINGS,
            "embeddings.position_embeddings": POSITION,
            "embeddings.LayerNorm": NORM,
            "transformer": STACK,
            "transformer.layer": STACK,
            "transformer.layer.0": LAYER,
            "transformer.layer.0.attention": SELF_ATTENTION,
            "transformer.layer.0.attention.q_lin": SELF_ATTENTION,
            "transformer.layer.0.sa_layer_norm": NORM,
            "transformer.layer.0.ffn": FEED_FORWARD,
            "transformer.layer.0.ffn.lin1": FEED_FORWARD,
            "transformer.layer.0.output_layer_norm": NORM,
        },
    )
    group = "encoder.albert_layer_groups.0"
    _roles(
        "albert",
        {
            "": MODEL,
            "embeddings": EMBEDDINGS,
            "embeddings.position_embeddings": POSITION,
            "embeddings.LayerNorm": NORM,
            "encoder": STACK,
            "encoder.embedding_hidden_mapping_in": EMBEDDINGS,
            "encoder.albert_layer_groups": STACK,
            group: LAYER,
            f"{group}.albert_layers": LAYER,
            f"{group}.albert_layers.0": LAYER,
            f"{group}.albert_layers.0.attention": SELF_ATTENTION,
            f"{group}.albert_layers.0.attention.query": SELF_ATTENTION,
            f"{group}.albert_layers.0.attention.LayerNorm": NORM,
            f"{group}.albert_layers.0.ffn": FEED_FORWARD,
            f"{group}.albert_layers.0.ffn_output": FEED_FORWARD,
            f"{group}.albert_layers.0.activation": FEED_FORWARD,
            f"{group}.albert_layers.0.full_layer_layer_norm": NORM,
            "pooler": POOLER,
            "pooler_activation": POOLER,
        },
    )


def test_decoder_only_roles() -> None:
    _roles(
        "gpt2",
        {
            "": MODEL,
            "wte": EMBEDDINGS,
            "wpe": POSITION,
            "h": STACK,
            "h.0": LAYER,
            "h.0.ln_1": NORM,
            "h.0.attn": SELF_ATTENTION,
            "h.0.attn.c_attn": SELF_ATTENTION,
            "h.0.ln_2": NORM,
            "h.0.mlp": FEED_FORWARD,
            "h.0.mlp.c_fc": FEED_FORWARD,
            "ln_f": NORM,
        },
    )
    _roles(
        "llama",
        {
            "": MODEL,
            "embed_tokens": EMBEDDINGS,
            "rotary_emb": POSITION,
            "layers": STACK,
            "layers.0": LAYER,
            "layers.0.input_layernorm": NORM,
            "layers.0.self_attn": SELF_ATTENTION,
            "layers.0.self_attn.q_proj": SELF_ATTENTION,
            "layers.0.self_attn.k_norm": NORM,
            "layers.0.post_attention_layernorm": NORM,
            "layers.0.mlp": FEED_FORWARD,
            "layers.0.mlp.gate_proj": FEED_FORWARD,
            "norm": NORM,
        },
    )
    _roles(
        "modernbert",
        {
            "": MODEL,
            "embeddings": EMBEDDINGS,
            "embeddings.tok_embeddings": EMBEDDINGS,
            "embeddings.norm": NORM,
            "layers": STACK,
            "layers.0": LAYER,
            "layers.0.attn_norm": NORM,
            "layers.0.attn": SELF_ATTENTION,
            "layers.0.attn.Wqkv": SELF_ATTENTION,
            "layers.0.mlp_norm": NORM,
            "layers.0.mlp": FEED_FORWARD,
            "layers.0.mlp.Wi": FEED_FORWARD,
            "final_norm": NORM,
            "rotary_emb": POSITION,
        },
    )


def test_encoder_decoder_roles() -> None:
    _roles(
        "t5",
        {
            "": MODEL,
            "shared": EMBEDDINGS,
            "encoder": STACK,
            "encoder.embed_tokens": EMBEDDINGS,
            "encoder.block": STACK,
            "encoder.block.0": LAYER,
            "encoder.block.0.layer": LAYER,
            "encoder.block.0.layer.0": SELF_ATTENTION,
            "encoder.block.0.layer.0.SelfAttention": SELF_ATTENTION,
            "encoder.block.0.layer.0.SelfAttention.relative_attention_bias": POSITION,
            "encoder.block.0.layer.0.layer_norm": NORM,
            "encoder.block.0.layer.1": FEED_FORWARD,
            "encoder.block.0.layer.1.DenseReluDense": FEED_FORWARD,
            "encoder.block.0.layer.1.DenseReluDense.wi": FEED_FORWARD,
            "encoder.final_layer_norm": NORM,
            "encoder.dropout": STACK,
            "decoder": STACK,
            "decoder.block": STACK,
            "decoder.block.0": LAYER,
            "decoder.block.0.layer": LAYER,
            "decoder.block.0.layer.0": SELF_ATTENTION,
            "decoder.block.0.layer.1": CROSS_ATTENTION,
            "decoder.block.0.layer.1.EncDecAttention": CROSS_ATTENTION,
            "decoder.block.0.layer.1.EncDecAttention.q": CROSS_ATTENTION,
            "decoder.block.0.layer.2": FEED_FORWARD,
            "decoder.block.0.layer.2.layer_norm": NORM,
            "lm_head": HEAD,  # T5's LM head sits beside the stacks, named by a rule
        },
    )
    _roles(
        "bart",
        {
            "": MODEL,
            "shared": EMBEDDINGS,
            "encoder": STACK,
            "encoder.embed_tokens": EMBEDDINGS,
            "encoder.embed_positions": POSITION,
            "encoder.layernorm_embedding": NORM,
            "encoder.layers": STACK,
            "encoder.layers.0": LAYER,
            "encoder.layers.0.self_attn": SELF_ATTENTION,
            "encoder.layers.0.self_attn.k_proj": SELF_ATTENTION,
            "encoder.layers.0.self_attn_layer_norm": NORM,
            "encoder.layers.0.activation_fn": FEED_FORWARD,
            "encoder.layers.0.fc1": FEED_FORWARD,
            "encoder.layers.0.final_layer_norm": NORM,
            "decoder": STACK,
            "decoder.layers": STACK,
            "decoder.layers.0": LAYER,
            "decoder.layers.0.encoder_attn": CROSS_ATTENTION,
            "decoder.layers.0.encoder_attn.q_proj": CROSS_ATTENTION,
            "decoder.layers.0.encoder_attn_layer_norm": NORM,
        },
    )


def test_heads_name_their_transformers_class_and_backbone() -> None:
    assert BY_NAME["bert"].class_name("bert", "sequence-classification") == "BertForSequenceClassification"
    assert BY_NAME["roberta"].class_name("xlm-roberta", "masked-lm") == "XLMRobertaForMaskedLM"
    assert BY_NAME["gpt2"].class_name("gpt2", "causal-lm") == "GPT2LMHeadModel"
    assert BY_NAME["llama"].class_name("qwen3", "base") == "Qwen3Model"
    assert [BY_NAME["bert"].backbone(head) for head in ("base", "masked-lm")] == ["", "bert"]
    assert BY_NAME["llama"].backbone("question-answering") == "transformer"  # its own attribute
    assert BY_NAME["llama"].backbone("causal-lm") == "model"
    assert BY_NAME["t5"].backbone("seq2seq-lm") == ""  # the LM head's modules sit beside the stacks
    assert BY_NAME["t5"].backbone("sequence-classification") == "transformer"


def test_inputs_follow_the_family_and_its_config() -> None:
    bert, t5 = BY_NAME["bert"], BY_NAME["t5"]
    assert bert.input_names("base", {"type_vocab_size": 2}) == ("input_ids", "attention_mask", "token_type_ids")
    assert bert.input_names("base", {"type_vocab_size": 1}) == ("input_ids", "attention_mask", "token_type_ids")
    for config in ({"type_vocab_size": 0}, {"type_vocab_size": None}, {}):
        assert bert.input_names("base", config) == ("input_ids", "attention_mask")
    assert BY_NAME["gpt2"].input_names("base", {"type_vocab_size": 2}) == ("input_ids", "attention_mask")
    assert t5.input_names("base", {}) == ("input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask")
    assert t5.input_names("sequence-classification", {}) == ("input_ids", "attention_mask")
    assert bert.input_dims("multiple-choice", {"type_vocab_size": 2}) == {
        "input_ids": ("batch", "choices", "seq"),
        "attention_mask": ("batch", "choices", "seq"),
        "token_type_ids": ("batch", "choices", "seq"),
    }
    assert bert.input_dims("base", {}) == {"input_ids": ("batch", "seq"), "attention_mask": ("batch", "seq")}
    assert t5.input_dims("base", {})["decoder_input_ids"] == ("batch", "tgt")


def test_sizes_and_the_positions_a_model_can_use() -> None:
    roberta, bert, t5 = BY_NAME["roberta"], BY_NAME["bert"], BY_NAME["t5"]
    config = {"num_hidden_layers": 12, "max_position_embeddings": 514, "pad_token_id": 1}
    assert roberta.size(config, "layers") == 12
    assert roberta.size(config, "decoder_layers") is None  # no such size in the family
    assert roberta.size({}, "layers") is None
    assert roberta.stack_layers(roberta.stacks[0], config) == 12
    assert t5.stack_layers(t5.stacks[1], {"num_layers": 6, "num_decoder_layers": 4}) == 4
    # Positions count from pad_token_id + 1: roberta-base uses 512 of its 514.
    assert (roberta.position_offset(config), roberta.usable_positions(config)) == (2, 512)
    assert roberta.position_offset({"pad_token_id": 5}) == 6
    assert roberta.position_offset({}) == 2  # transformers' default padding index, 1
    assert roberta.position_offset({"pad_token_id": None}) == 1  # no padding index: 0
    assert (bert.position_offset(config), bert.usable_positions(config)) == (0, 514)
    assert t5.usable_positions({"num_layers": 6}) is None  # relative positions: no table bounds it


def test_the_lookups_cover_every_family() -> None:
    assert family_of("xlm-roberta") is BY_NAME["roberta"] and family_of("mt5") is BY_NAME["t5"]
    assert family_of("no-such-type") is None
    assert tuple(BY_TYPE) == MODEL_TYPES and set(BY_TYPE) == {t for f in FAMILIES for t in f.variants}
    assert [family.name for family in FAMILIES][:3] == ["bert", "roberta", "distilbert"]
    presets = all_presets()
    assert sum(len(family.presets) for family in FAMILIES) == len(presets)
    assert presets["bert-base-uncased"]["hidden_size"] == 768 and presets["t5-small"]["d_model"] == 512
    presets["bert-base-uncased"]["hidden_size"] = 1  # a copy: the record is unchanged
    assert BY_NAME["bert"].presets["bert-base-uncased"]["hidden_size"] == 768
    hubs = all_hub_ids()
    assert hubs["google-bert/bert-base-uncased"] == "bert-base-uncased"
    assert all(name in presets for name in hubs.values())
    assert sum(len(family.hub_ids) for family in FAMILIES) == len(hubs)


def test_a_frozen_mapping_cannot_be_changed_and_does_not_follow_its_source() -> None:
    source = {"a": 1}
    view = frozen(source)
    assert isinstance(view, MappingProxyType) and dict(view) == {"a": 1}
    source["a"] = 2
    assert view["a"] == 1
    with pytest.raises(TypeError):
        view["a"] = 3  # type: ignore[index]
