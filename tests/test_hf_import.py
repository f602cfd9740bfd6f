"""config.json importer: real configs of known models derive their published sizes, KV bytes and layer layouts.

The configs under tests/data/configs/ carry the real shapes (each model's config.json). Published figures are the model pages' values
unless a comment names another source.
"""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from roofline.cards.model import ModelCard, expand_pattern
from roofline.cards.card_file import load_card
from roofline.errors import CardError, RooflineError
from roofline.importers import open_store
from roofline.importers.config_json import (
    SUPPORTED_MODEL_TYPES,
    card_from_config,
    card_from_config_file,
    compress_pattern,
)
from roofline.sizing.kv import kv_bytes, kv_bytes_per_token
from roofline.sizing.layers import resolve_layers
from roofline.sizing.params import active_params, param_counts, total_params

CONFIGS = Path(__file__).resolve().parent / "data" / "configs"
MODELS = Path(__file__).resolve().parent.parent / "models"


def config(stem: str) -> dict:
    return json.loads((CONFIGS / f"{stem}.json").read_text())


def imported(stem: str) -> ModelCard:
    return card_from_config(config(stem), source=f"{stem}.json")


def letters(card: ModelCard) -> str:
    return card.architecture.pattern_letters()


# --------------------------------------------------------------------------- parameter counts vs published figures

# (config, published total, published active or None, where the figure comes from)
PUBLISHED = [
    ("llama-3.1-8b", 8.03e9, None, "HF meta-llama/Llama-3.1-8B 'Model size 8.03B params'"),
    ("mixtral-8x7b-v0.1", 46.7e9, 12.9e9, "Mixtral of Experts paper: 46.7B total, 12.9B active"),
    ("qwen3-30b-a3b", 30.5e9, 3.3e9, "Qwen3-30B-A3B model card"),
    ("gpt-oss-20b", 21e9, None, "NVIDIA NeMo gpt-oss docs; active: see test_active_without_input_embedding"),
    ("deepseek-v3", 671e9, 37e9, "DeepSeek-V3 README, main model without MTP"),
    ("nemotron-3-nano-30b-a3b", 31.6e9, 3.6e9,
     "31.6B (model card); 3.6B 'including embeddings' (Nemotron 3 Nano tech report)"),
    # secondary sources
    ("mistral-7b-v0.1", 7.3e9, None, "mistral.ai announcement '7.3B parameter model'"),
    ("qwen2.5-7b", 7.61e9, None, "Qwen2.5-7B model card '7.61B' (non-embedding 6.53B)"),
    ("qwen3-32b", 32.8e9, None, "Qwen3-32B model card '32.8B'"),
    ("gemma-3-27b-it", 27.016e9, None, "Gemma 3 tech report Table 1: 1,416M embedding + 25,600M, text only"),
]


@pytest.mark.parametrize("stem,total,active,where", PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_derived_params_match_published(stem, total, active, where):
    card = imported(stem)
    assert total_params(card) == pytest.approx(total, rel=0.02), where
    assert card.params.total == total_params(card)
    assert "derived from" in card.params.source and "no published figure" in card.params.source
    if active is not None:
        assert active_params(card) == pytest.approx(active, rel=0.02), where
        assert card.params.active == pytest.approx(active_params(card))


@pytest.mark.parametrize("stem,published", [
    ("gpt-oss-20b", 3.61e9),  # OpenAI gpt-oss model card: active 3.61B counts the unembedding, not the embedding
    ("deepseek-v3", 36.6e9),  # DeepSeek-V3 README_WEIGHTS 'activation 36.6B'
    ("nemotron-3-nano-30b-a3b", 3.2e9),  # tech report: '3.2B are activated per forward pass'
])
def test_active_without_input_embedding(stem, published):
    """Some publishers leave the embedding lookup out of 'active'; roofline's active count includes it."""
    card = imported(stem)
    assert active_params(card) - param_counts(card)["embedding"] == pytest.approx(published, rel=0.02)


def test_tiny_config_counts_by_hand():
    card = imported("tiny-llama")
    h, inner, vocab, layers, kv_heads, head_dim = 64, 128, 1000, 2, 2, 16
    attn = h * h + 2 * h * kv_heads * head_dim + h * h  # q, k, v, o
    mlp = 3 * h * inner
    expected = vocab * h + layers * (attn + mlp + 2 * h) + h  # tied embedding, 2 norms per layer, final norm
    assert total_params(card) == expected == 138048
    assert card.weights == {"default": "fp32"}
    assert card.architecture.tie_embeddings
    assert kv_bytes_per_token(card) == layers * 2 * kv_heads * head_dim * 2
    assert card.name == "llama-0.138m"  # no _name_or_path: model_type + size


# --------------------------------------------------------------------------- KV cache


@pytest.mark.parametrize("stem,expected", [
    ("llama-3.1-8b", 32 * 2 * 8 * 128 * 2),  # 131072 B
    ("mixtral-8x7b-v0.1", 32 * 2 * 8 * 128 * 2),
    ("qwen3-30b-a3b", 48 * 2 * 4 * 128 * 2),
    ("deepseek-v3", 61 * (512 + 64) * 2),  # MLA latent + rope key: 70272 B
    ("gpt-oss-20b", 12 * 2 * 8 * 64 * 2),  # only the 12 full layers grow; sliding layers hold 128 tokens
    ("gemma-3-27b-it", 10 * 2 * 16 * 128 * 2),  # 10 global layers
    ("nemotron-3-nano-30b-a3b", 6 * 2 * 2 * 128 * 2),  # 6 attention layers; Mamba state is per sequence
    ("mistral-7b-v0.1", 0),  # every layer slides over 4096 tokens: nothing grows past the window
])
def test_kv_bytes_per_token(stem, expected):
    assert kv_bytes_per_token(imported(stem)) == expected


def test_windows_cap_the_cache():
    mistral = imported("mistral-7b-v0.1")
    assert kv_bytes(mistral, 100_000) == kv_bytes(mistral, 4096) == 4096 * 32 * 2 * 8 * 128 * 2
    oss = imported("gpt-oss-20b")
    assert kv_bytes(oss, 10_000) == (10_000 * 12 + 128 * 12) * 2 * 8 * 64 * 2


# --------------------------------------------------------------------------- layer patterns and family details


def test_gpt_oss_alternates_sliding_and_full():
    card = imported("gpt-oss-20b")
    arch = card.architecture
    assert arch.layer_pattern == "(SA)*12"
    assert letters(card) == "SA" * 12  # layer 0 slides
    assert arch.attention.sliding_window == 128
    assert (arch.attention.num_heads, arch.attention.num_kv_heads, arch.attention.head_dim) == (64, 8, 64)
    assert arch.attention.qkv_bias and arch.attention.o_bias and arch.attention.sinks
    moe = arch.moe
    assert (moe.num_experts, moe.experts_per_token, moe.expert_intermediate_size) == (32, 4, 2880)
    assert moe.expert_bias and moe.router_bias and arch.ffn is None
    assert card.weights == {"default": "bf16", "experts": "mxfp4"}
    assert arch.rope.theta == 150000
    assert arch.rope.scaling["type"] == "yarn" and arch.rope.scaling["factor"] == 32
    assert arch.rope.scaling["original_max_position"] == 4096


def test_gemma3_nested_text_config_5_local_1_global():
    card = imported("gemma-3-27b-it")
    arch = card.architecture
    assert arch.layer_pattern == "(SSSSSA)*10 SS"
    pattern = letters(card)
    assert len(pattern) == 62 and pattern.count("A") == 10
    assert [i for i, x in enumerate(pattern) if x == "A"] == list(range(5, 62, 6))
    assert arch.attention.sliding_window == 1024
    assert arch.attention.qk_norm and arch.norms_per_layer == 4
    assert (arch.hidden_size, arch.attention.head_dim, arch.ffn.intermediate_size) == (5376, 128, 21504)
    assert arch.ffn.activation == "gelu_tanh"
    # left out of the released text_config: Gemma3TextConfig defaults, and the card says so
    assert arch.vocab_size == 262208 and arch.tie_embeddings and arch.max_context == 131072
    assert arch.rope.theta == 1e6 and arch.rope.scaling == {"factor": 8.0, "type": "linear"}
    assert "vocab_size=262208" in card.notes and "rope theta 10000" in card.notes


def test_nemotron_hybrid_pattern():
    card = imported("nemotron-3-nano-30b-a3b")
    arch = card.architecture
    pattern = letters(card)
    assert (pattern.count("M"), pattern.count("E"), pattern.count("*")) == (23, 23, 6)
    assert [i for i, x in enumerate(pattern) if x == "*"] == [5, 12, 19, 26, 33, 42]
    assert arch.mamba2.model_dump() == {"state_size": 128, "num_heads": 64, "head_dim": 64, "n_groups": 8,
                                        "conv_kernel": 4, "expand": 2, "chunk_size": 128, "state_dtype": "fp32", "gated_norm": True}
    moe = arch.moe
    assert (moe.num_experts, moe.experts_per_token, moe.num_shared_experts) == (128, 6, 1)
    assert (moe.expert_intermediate_size, moe.shared_expert_intermediate_size) == (1856, 3712)
    assert not moe.gated and moe.latent_size is None
    assert arch.rope is None and arch.ffn is None  # NoPE; no '-' layers
    assert card.source.hf_repo == "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"


def test_nemotron_layers_block_type_list_and_latent_moe():
    cfg = config("nemotron-3-nano-30b-a3b")
    pattern = cfg.pop("hybrid_override_pattern")
    names = {"M": "mamba", "E": "moe", "*": "attention", "-": "mlp"}
    cfg["layers_block_type"] = [names[x] for x in pattern[:-2]] + ["mlp", "full_attention"]
    cfg["num_hidden_layers"] = len(pattern)
    cfg["moe_latent_size"] = 1024
    card = card_from_config(cfg)
    assert letters(card) == pattern[:-2] + "-*"
    assert card.architecture.ffn.intermediate_size == 1856 and not card.architecture.ffn.gated
    assert card.architecture.moe.latent_size == 1024


def test_deepseek_mla_dense_prefix_mtp_fp8():
    card = imported("deepseek-v3")
    arch = card.architecture
    assert arch.layer_pattern is None and set(letters(card)) == {"L"}
    assert arch.mla.model_dump(exclude_none=True) == {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
                                     "qk_rope_head_dim": 64, "v_head_dim": 128}
    assert arch.moe.first_dense_layers == 3 and arch.ffn.intermediate_size == 18432
    assert [lay.ffn for lay in resolve_layers(arch)[:4]] == ["dense", "dense", "dense", "moe"]
    assert (arch.moe.num_experts, arch.moe.experts_per_token, arch.moe.num_shared_experts) == (256, 8, 1)
    assert arch.moe.router_bias  # noaux_tc: e_score_correction_bias
    assert arch.mtp_layers == 1 and not card.params.includes_mtp
    assert card.weights == {"default": "fp8", "embedding": "bf16", "lm_head": "bf16"}
    assert arch.rope.scaling["type"] == "yarn" and arch.rope.scaling["factor"] == 40


def test_qwen_biases_norms_and_disabled_window():
    q2 = imported("qwen2.5-7b").architecture
    assert q2.attention.qkv_bias and not q2.attention.o_bias and not q2.attention.qk_norm
    assert q2.layer_pattern is None  # sliding_window 131072 is set but use_sliding_window is false
    q3 = imported("qwen3-32b").architecture
    assert q3.attention.qk_norm and not q3.attention.qkv_bias and q3.attention.head_dim == 128
    moe = imported("qwen3-30b-a3b").architecture
    assert moe.attention.qk_norm and moe.ffn is None
    assert (moe.moe.num_experts, moe.moe.experts_per_token, moe.moe.expert_intermediate_size) == (128, 8, 768)


def test_qwen_sliding_window_from_max_window_layers():
    cfg = config("qwen2.5-7b") | {"use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 20}
    arch = card_from_config(cfg).architecture
    assert arch.layer_pattern == "A*20 S*8" and arch.attention.sliding_window == 4096


def test_qwen3_moe_dense_layers():
    prefix = card_from_config(config("qwen3-30b-a3b") | {"mlp_only_layers": [0, 1]}).architecture
    assert prefix.moe.first_dense_layers == 2 and prefix.layer_pattern is None
    middle = card_from_config(config("qwen3-30b-a3b") | {"mlp_only_layers": [5]}).architecture
    assert [lay.ffn for lay in resolve_layers(middle)][4:7] == ["moe", "dense", "moe"]
    assert middle.layer_types["D"].ffn == "dense"
    step = card_from_config(config("qwen3-30b-a3b") | {"decoder_sparse_step": 2}).architecture
    assert [lay.ffn for lay in resolve_layers(step)][:4] == ["dense", "moe", "dense", "moe"]


def test_mistral_and_mixtral_windows():
    assert imported("mistral-7b-v0.1").architecture.layer_pattern == "S*32"
    mixtral = imported("mixtral-8x7b-v0.1").architecture
    assert mixtral.layer_pattern is None and mixtral.attention.sliding_window is None  # sliding_window: null
    assert mixtral.moe.expert_intermediate_size == 14336 and mixtral.ffn is None


def test_llama_rope_in_card_form():
    card = imported("llama-3.1-8b")
    assert card.name == "llama-3.1-8b"  # slug of _name_or_path
    assert card.source.hf_repo == "meta-llama/Llama-3.1-8B" and card.source.shapes_from == "llama-3.1-8b.json"
    assert card.architecture.rope.theta == 500000
    assert card.architecture.rope.scaling == {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                              "original_max_position": 8192, "type": "llama3"}


def test_new_style_rope_parameters():
    cfg = config("llama-3.1-8b")
    scaling = cfg.pop("rope_scaling")
    cfg["rope_parameters"] = {"rope_theta": cfg.pop("rope_theta"), **scaling}
    rope = card_from_config(cfg).architecture.rope
    assert rope.theta == 500000 and rope.scaling["type"] == "llama3" and rope.scaling["factor"] == 8.0
    plain = config("tiny-llama") | {"rope_parameters": {"rope_type": "default", "rope_theta": 123.0}}
    assert card_from_config(plain).architecture.rope.model_dump() == {
        "theta": 123.0, "scaling": None, "partial_rotary_factor": 1.0}


def test_gemma3_layer_types_list_and_flat_text_config():
    text = config("gemma-3-27b-it")["text_config"] | {"model_type": "gemma3_text", "num_hidden_layers": 4,
                                                      "layer_types": ["sliding_attention"] * 3 + ["full_attention"]}
    card = card_from_config(text)
    assert letters(card) == "SSSA" and card.family == "gemma"


def test_head_dim_defaults_to_hidden_over_heads():
    cfg = config("llama-3.1-8b")
    assert "head_dim" not in cfg
    assert card_from_config(cfg).architecture.attention.head_dim == 4096 // 32


def test_name_override_and_local_path():
    assert card_from_config(config("llama-3.1-8b"), name="My-Llama").name == "my-llama"
    local = card_from_config(config("tiny-llama") | {"_name_or_path": "/data5/Llama-3.3-70B-Instruct/"})
    assert local.name == "llama-3.3-70b-instruct" and local.source.hf_repo is None
    assert imported("deepseek-v3").name.startswith("deepseek-v3-671b-a37")


def test_compress_pattern_round_trips():
    for text in ["SA" * 12, "SSSSSA" * 10 + "SS", "A" * 20 + "S" * 8, "MEM*EME-" * 3 + "M", "**AB"]:
        assert expand_pattern(compress_pattern(text)) == text


# --------------------------------------------------------------------------- errors


def one_line(err: pytest.ExceptionInfo) -> str:
    msg = str(err.value)
    assert "\n" not in msg
    return msg


def test_unsupported_model_type():
    with pytest.raises(RooflineError) as err:
        card_from_config({"model_type": "bert", "hidden_size": 768})
    msg = one_line(err)
    assert msg.startswith("unsupported model_type 'bert' (an encoder-only model: roofline models decoder-only LLMs); "
                          "supported: llama, mistral")
    assert msg.endswith("write a card by hand, see README")
    assert all(t in msg for t in SUPPORTED_MODEL_TYPES)


@pytest.mark.parametrize("stem,field,shown", [
    ("llama-3.1-8b", "num_hidden_layers", "'num_hidden_layers'"),
    ("llama-3.1-8b", "model_type", "'model_type'"),
    ("deepseek-v3", "kv_lora_rank", "'kv_lora_rank'"),
    ("mixtral-8x7b-v0.1", "num_local_experts", "'num_local_experts' (also read as num_experts, n_routed_experts)"),
    ("nemotron-3-nano-30b-a3b", "ssm_state_size", "'ssm_state_size'"),
])
def test_missing_field_names_it(stem, field, shown):
    cfg = config(stem)
    del cfg[field]
    with pytest.raises(CardError) as err:
        card_from_config(cfg)
    assert one_line(err) == f"config.json: missing {shown}"


def test_missing_nested_field_names_its_path():
    cfg = copy.deepcopy(config("gemma-3-27b-it"))
    del cfg["text_config"]["hidden_size"]
    with pytest.raises(CardError) as err:
        card_from_config(cfg, source="gemma/config.json")
    assert one_line(err) == "gemma/config.json: missing 'text_config.hidden_size'"


@pytest.mark.parametrize("patch,words", [
    ({"num_hidden_layers": "32"}, ["'num_hidden_layers'", "integer"]),
    ({"tie_word_embeddings": "no"}, ["'tie_word_embeddings'", "true or false"]),
    ({"layer_types": ["full_attention"] * 3}, ["'layer_types'", "3 entries", "32"]),
    ({"hidden_size": 4000, "num_attention_heads": 48}, ["'hidden_size'", "head_dim"]),
    ({"num_key_value_heads": 0}, ["num_kv_heads"]),
])
def test_bad_values_are_one_line_errors(patch, words):
    with pytest.raises(RooflineError) as err:
        card_from_config(config("llama-3.1-8b") | patch)
    msg = one_line(err)
    assert all(w in msg for w in words), msg


def test_not_a_mapping():
    with pytest.raises(RooflineError, match="JSON object"):
        card_from_config(["model_type", "llama"])


# --------------------------------------------------------------------------- integration


def test_card_store_loads_config_json_paths(tmp_path):
    path = tmp_path / "config.json"
    path.write_text((CONFIGS / "qwen3-30b-a3b.json").read_text())
    card = open_store().model(str(path))
    assert card.name == "qwen3-30b-a3b" and card.source.shapes_from == str(path)
    assert card_from_config_file(path) == card


def test_package_never_imports_torch_or_transformers():
    code = ("import sys, json, roofline.importers.config_json as h; h.card_from_config(json.load(open(sys.argv[1])));"
            "assert not {'torch', 'transformers'} & set(sys.modules)")
    subprocess.run([sys.executable, "-c", code, str(CONFIGS / "gpt-oss-20b.json")], check=True)


# config -> the bundled card with the same shapes
BUNDLED = [("llama-3.1-8b", "llama-3.1-8b"), ("mistral-7b-v0.1", "mistral-7b"), ("mixtral-8x7b-v0.1", "mixtral-8x7b"),
           ("qwen2.5-7b", "qwen2.5-7b"), ("qwen3-32b", "qwen3-32b"), ("qwen3-30b-a3b", "qwen3-30b-a3b"),
           ("gemma-3-27b-it", "gemma-3-27b"), ("gpt-oss-20b", "gpt-oss-20b"), ("deepseek-v3", "deepseek-v3"),
           ("nemotron-3-nano-30b-a3b", "nemotron-3-nano"), ("kimi-k2-instruct", "kimi-k2"), ("glm-4.5", "glm-4.5"),
           ("glm-4.5-air", "glm-4.5-air"), ("qwen3-coder-480b-a35b-instruct", "qwen3-coder-480b-a35b"),
           ("mistral-small-24b-instruct-2501", "mistral-small-3-24b"), ("phi-4", "phi-4"), ("gemma-3-1b-it", "gemma-3-1b"),
           ("gemma-3-12b-it", "gemma-3-12b"), ("olmo-2-1124-13b", "olmo-2-13b"),
           # fixtures carry the config.json fields the bundled cards cite in source.shapes_from (same provenance and
           # the same [U] marks: Granite's attention positions, Jamba's and Llama 4's transcribed values)
           ("falcon-h1-34b-base", "falcon-h1-34b"), ("deepseek-v3.2-exp", "deepseek-v3.2"),
           ("llama-4-scout-17b-16e-instruct", "llama-4-scout"),
           ("llama-4-maverick-17b-128e-instruct", "llama-4-maverick"), ("ai21-jamba-1.5-mini", "jamba-1.5-mini"),
           ("granite-4.0-h-small", "granite-4.0-h-small")]


@pytest.mark.parametrize("stem,card_name", BUNDLED, ids=[b[0] for b in BUNDLED])
def test_import_agrees_with_bundled_card(stem, card_name):
    path = MODELS / f"{card_name}.yaml"
    ours, theirs = imported(stem), load_card(ModelCard, path)
    assert param_counts(ours) == param_counts(theirs)
    assert active_params(ours) == pytest.approx(active_params(theirs))
    assert kv_bytes_per_token(ours) == kv_bytes_per_token(theirs)
    assert kv_bytes(ours, 32768) == kv_bytes(theirs, 32768)  # windows and Mamba state too
    assert letters(ours) == letters(theirs)
    assert resolve_layers(ours.architecture) == resolve_layers(theirs.architecture)  # letters mean the same layers


def test_kimi_k2_reads_as_deepseek_v3_with_its_own_family():
    card = imported("kimi-k2-instruct")
    arch = card.architecture
    assert card.family == "kimi" and arch.mla is not None and arch.mtp_layers == 0
    assert letters(card) == "L" * 61
    assert (arch.moe.num_experts, arch.moe.first_dense_layers, arch.moe.router_bias) == (384, 1, True)
    assert card.weights == {"default": "fp8", "embedding": "bf16", "lm_head": "bf16"}
    assert kv_bytes_per_token(card, "bf16") == 61 * (512 + 64) * 2  # MLA latent + rope key


def test_glm4_moe_qkv_bias_without_o_bias_qk_norm_switch_and_mtp():
    full, air = imported("glm-4.5"), imported("glm-4.5-air")
    for card in (full, air):
        att = card.architecture.attention
        assert att.qkv_bias and not att.o_bias  # Glm4MoeAttention: o_proj has no bias
        assert card.architecture.rope.partial_rotary_factor == 0.5 and card.architecture.mtp_layers == 1
        assert card.architecture.moe.router_bias  # e_score_correction_bias
    assert full.architecture.attention.qk_norm and not air.architecture.attention.qk_norm  # use_qk_norm
    assert [m.architecture.moe.first_dense_layers for m in (full, air)] == [3, 1]
    # 96 query heads x 128 on a 5120 hidden, 8 KV heads: q, k, v biases add 12288 + 2 x 1024 per layer
    assert param_counts(full)["attention"] == 92 * (5120 * (12288 + 2048) + 12288 * 5120 + 12288 + 2048 + 2 * 128)


def test_phi3_and_olmo2_are_dense_full_attention():
    phi, olmo = imported("phi-4"), imported("olmo-2-1124-13b")
    assert phi.family == "phi" and letters(phi) == "A" * 40 and phi.architecture.attention.num_kv_heads == 10
    assert olmo.family == "olmo" and olmo.architecture.attention.qk_norm and olmo.architecture.norms_per_layer == 2
    assert any("span all heads" in part for part in olmo.notes.split("; "))
    windowed = copy.deepcopy(config("phi-4"))
    windowed["sliding_window"] = 2047  # Phi-3-medium style: a window on every layer
    assert letters(card_from_config(windowed)) == "S" * 40
