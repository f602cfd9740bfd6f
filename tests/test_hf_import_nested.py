"""config.json families that keep their shapes in nested sections or under their own names (MPT, DBRX, ChatGLM,
StarCoder 1) and Ministral 3's text model: real config.json fields of the model named in each id, the derived size
against the published one, the KV cache against the attention each config states, and bad sections refused."""

from __future__ import annotations

import pytest

from roofline.errors import CardError, RooflineError
from roofline.importers.config_json import card_from_config
from roofline.sizing.kv import kv_bytes_per_token
from roofline.sizing.params import active_params, total_params

MPT_7B = {"model_type": "mpt", "d_model": 4096, "n_heads": 32, "n_layers": 32, "expansion_ratio": 4,
          "max_seq_len": 2048, "vocab_size": 50432, "no_bias": True, "learned_pos_emb": True,
          "attn_config": {"alibi": True, "attn_type": "multihead_attention", "clip_qkv": None, "qk_ln": False},
          "torch_dtype": "bfloat16"}  # mosaicml/mpt-7b
DBRX = {"model_type": "dbrx", "d_model": 6144, "n_heads": 48, "n_layers": 40, "max_seq_len": 32768,
        "vocab_size": 100352, "attn_config": {"kv_n_heads": 8, "clip_qkv": 8, "rope_theta": 500000},
        "ffn_config": {"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4, "ffn_act_fn": {"name": "silu"}},
        "tie_word_embeddings": False, "torch_dtype": "bfloat16"}  # databricks/dbrx-instruct
STARCODER = {"model_type": "gpt_bigcode", "n_embd": 6144, "n_head": 48, "n_layer": 40, "n_positions": 8192,
             "n_inner": 24576, "vocab_size": 49152, "multi_query": True, "activation_function": "gelu_pytorch_tanh",
             "torch_dtype": "float32"}  # bigcode/starcoder
CHATGLM3_6B = {"model_type": "chatglm", "hidden_size": 4096, "num_layers": 28, "num_attention_heads": 32,
               "multi_query_attention": True, "multi_query_group_num": 2, "kv_channels": 128, "ffn_hidden_size": 13696,
               "padded_vocab_size": 65024, "seq_length": 8192, "add_bias_linear": False, "add_qkv_bias": True,
               "rmsnorm": True, "original_rope": True, "tie_word_embeddings": False,
               "torch_dtype": "float16"}  # THUDM/chatglm3-6b
MINISTRAL3_8B = {"model_type": "ministral3", "vocab_size": 131072, "hidden_size": 4096, "intermediate_size": 14336,
                 "num_hidden_layers": 34, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                 "max_position_embeddings": 262144, "tie_word_embeddings": False,
                 "rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000000.0, "factor": 16.0,
                                     "original_max_position_embeddings": 16384,
                                     "llama_4_scaling_beta": 0.1}}  # Ministral3Config's defaults (the 8B)

# (id, config, published total, published active or None); each model's Hub page
PUBLISHED = [
    ("mpt-7b", MPT_7B, 6.7e9, None),
    ("mpt-30b", {**MPT_7B, "d_model": 7168, "n_heads": 64, "n_layers": 48, "max_seq_len": 8192}, 30e9, None),
    ("dbrx", DBRX, 132e9, 36e9),
    ("starcoder", STARCODER, 15.5e9, None),
    ("chatglm3-6b", CHATGLM3_6B, 6.24e9, None),
    ("glm-4-9b-chat", {**CHATGLM3_6B, "num_layers": 40, "padded_vocab_size": 151552, "seq_length": 131072,
                       "rope_ratio": 500}, 9.40e9, None),  # THUDM/glm-4-9b-chat (its -hf twin reads 9.40B too)
    ("ministral-3-8b", MINISTRAL3_8B, 8.4e9, None),  # "8.4B language model + 0.4B vision encoder"
]


@pytest.mark.parametrize("config,total,active", [p[1:] for p in PUBLISHED], ids=[p[0] for p in PUBLISHED])
def test_nested_and_renamed_families_derive_their_published_size(config, total, active):
    card = card_from_config(config)
    assert total_params(card) == pytest.approx(total, rel=0.02)
    if active:
        assert active_params(card) == pytest.approx(active, rel=0.02)


@pytest.mark.parametrize("config,kv_heads,head_dim", [(MPT_7B, 32, 128), (DBRX, 8, 128), (STARCODER, 1, 128),
                                                       (CHATGLM3_6B, 2, 128)],
                         ids=["mpt multi-head", "dbrx kv_n_heads", "starcoder multi-query", "chatglm groups"])
def test_kv_cache_follows_the_attention_each_config_states(config, kv_heads, head_dim):
    card = card_from_config(config)
    layers = card.architecture.num_layers
    assert kv_bytes_per_token(card, "bf16") == layers * 2 * kv_heads * head_dim * 2


def test_mpt_attention_kinds_and_alibi():
    assert card_from_config(MPT_7B).architecture.rope is None  # ALiBi has no weights and no rotary section
    gqa = {**MPT_7B, "attn_config": {"attn_type": "grouped_query_attention", "kv_n_heads": 8}}
    assert card_from_config(gqa).architecture.attention.num_kv_heads == 8
    mqa = {**MPT_7B, "attn_config": {"attn_type": "multiquery_attention"}}
    assert card_from_config(mqa).architecture.attention.num_kv_heads == 1


@pytest.mark.parametrize("config,needle", [
    ({**MPT_7B, "attn_config": "alibi"}, "'attn_config' must be an object"),
    ({**MPT_7B, "attn_config": {"attn_type": "sliding"}}, "'attn_type' must be multihead_attention"),
    ({**DBRX, "ffn_config": {"ffn_hidden_size": 10752, "moe_top_k": 4}}, "missing 'moe_num_experts'"),
    ({**CHATGLM3_6B, "multi_query_group_num": None}, "missing 'multi_query_group_num'"),
], ids=["section not an object", "unknown attention kind", "experts missing", "groups missing"])
def test_bad_nested_sections_are_refused_in_one_line(config, needle):
    with pytest.raises((CardError, RooflineError)) as err:
        card_from_config(config)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_a_mistral3_wrapper_reads_its_ministral3_text_model():
    wrapper = {"model_type": "mistral3", "architectures": ["Mistral3ForConditionalGeneration"],
               "text_config": MINISTRAL3_8B, "vision_config": {"model_type": "pixtral", "hidden_size": 1024}}
    card = card_from_config(wrapper)
    assert total_params(card) == total_params(card_from_config(MINISTRAL3_8B))
    assert kv_bytes_per_token(card, "bf16") == 34 * 2 * 8 * 128 * 2
