"""config.json import of architectures the importer was not first written for: each config carries the real
config.json fields of the model named in its id (values transcribed from the Hub; list-valued fields such as
rope_scaling factors left out), and the derived size must match the published one."""

from __future__ import annotations

import json

import pytest

from roofline.errors import CardError, RooflineError
from roofline.importers.config_json import card_from_config, card_from_config_file
from roofline.sizing.kv import kv_bytes, kv_bytes_per_token
from roofline.sizing.params import active_params, param_counts, total_params


def _import(tmp_path, config: dict):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return card_from_config_file(path)


FALCON_7B = {"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71, "num_hidden_layers": 32,
             "multi_query": True, "new_decoder_architecture": False, "parallel_attn": True, "bias": False,
             "alibi": False, "vocab_size": 65024, "torch_dtype": "bfloat16"}  # tiiuae/falcon-7b
FALCON_40B = {"model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128, "num_kv_heads": 8,
              "num_hidden_layers": 60, "new_decoder_architecture": True, "parallel_attn": True, "bias": False,
              "alibi": False, "vocab_size": 65024, "torch_dtype": "bfloat16"}  # tiiuae/falcon-40b
GEMMA2_9B = {"model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336, "num_hidden_layers": 42,
             "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "vocab_size": 256000,
             "sliding_window": 4096, "max_position_embeddings": 8192, "hidden_activation": "gelu_pytorch_tanh",
             "query_pre_attn_scalar": 256, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
             "rope_theta": 10000.0}  # google/gemma-2-9b
PHI4_MINI = {"model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
             "num_attention_heads": 24, "num_key_value_heads": 8, "vocab_size": 200064, "tie_word_embeddings": True,
             "max_position_embeddings": 131072, "original_max_position_embeddings": 4096, "sliding_window": 262144,
             "partial_rotary_factor": 0.75, "rope_theta": 10000.0}  # microsoft/Phi-4-mini-instruct
QWEN15_MOE = {"model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632, "moe_intermediate_size": 1408,
              "shared_expert_intermediate_size": 5632, "num_experts": 60, "num_experts_per_tok": 4,
              "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 151936,
              "max_position_embeddings": 8192, "decoder_sparse_step": 1, "use_sliding_window": False,
              "sliding_window": 32768, "tie_word_embeddings": False, "rope_theta": 1000000.0}  # Qwen/Qwen1.5-MoE-A2.7B
GPT2 = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024, "n_ctx": 1024,
        "vocab_size": 50257, "activation_function": "gelu_new"}  # openai-community/gpt2
EXAONE4_32B = {"model_type": "exaone4", "hidden_size": 5120, "intermediate_size": 27392, "num_hidden_layers": 64,
               "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 102400,
               "sliding_window": 4096, "sliding_window_pattern": "LLLG", "max_position_embeddings": 131072,
               "tie_word_embeddings": False, "rope_theta": 1000000.0}  # LGAI-EXAONE/EXAONE-4.0-32B
COMMAND_A = {"model_type": "cohere2", "hidden_size": 12288, "intermediate_size": 36864, "num_hidden_layers": 64,
             "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 256000,
             "sliding_window": 4096, "sliding_window_pattern": 4, "max_position_embeddings": 288000,
             "rope_theta": 50000, "logit_scale": 0.25}  # CohereLabs/c4ai-command-a-03-2025

# (id, config, published total, published active or None); figures from each model's Hub page or paper
PUBLISHED = [
    ("pythia-6.9b", {"model_type": "gpt_neox", "hidden_size": 4096, "intermediate_size": 16384, "num_hidden_layers": 32,
                     "num_attention_heads": 32, "vocab_size": 50432, "max_position_embeddings": 2048,
                     "rotary_pct": 0.25, "rotary_emb_base": 10000, "hidden_act": "gelu", "use_parallel_residual": True,
                     "tie_word_embeddings": False}, 6_857_302_016, None),  # Pythia paper, Table 1
    ("gpt2", GPT2, 124_439_808, None),
    ("gpt-j-6b", {"model_type": "gptj", "n_embd": 4096, "n_layer": 28, "n_head": 16, "n_positions": 2048,
                  "rotary_dim": 64, "n_inner": None, "vocab_size": 50400, "activation_function": "gelu_new",
                  "tie_word_embeddings": False}, 6_053_381_344, None),  # EleutherAI/gpt-j-6b
    ("falcon-40b", FALCON_40B, 41.84e9 - 65024 * 8192, None),  # Hub 41.8B stores the tied lm_head twice
    ("bloom-7b1", {"model_type": "bloom", "hidden_size": 4096, "n_layer": 30, "n_head": 32, "vocab_size": 250880},
     7_069_016_064, None),
    ("opt-6.7b", {"model_type": "opt", "hidden_size": 4096, "ffn_dim": 16384, "num_hidden_layers": 32,
                  "num_attention_heads": 32, "vocab_size": 50272, "max_position_embeddings": 2048,
                  "word_embed_proj_dim": 4096, "enable_bias": True, "activation_function": "relu"}, 6.7e9, None),
    ("starcoder2-15b", {"model_type": "starcoder2", "hidden_size": 6144, "intermediate_size": 24576,
                        "num_hidden_layers": 40, "num_attention_heads": 48, "num_key_value_heads": 4,
                        "vocab_size": 49152, "max_position_embeddings": 16384, "sliding_window": 4096,
                        "use_bias": True, "hidden_act": "gelu_pytorch_tanh", "rope_theta": 100000,
                        "tie_word_embeddings": False}, 15.96e9, None),
    ("gemma-2-9b", GEMMA2_9B, 9.24e9, None),
    ("command-r-v01", {"model_type": "cohere", "hidden_size": 8192, "intermediate_size": 22528,
                       "num_hidden_layers": 40, "num_attention_heads": 64, "num_key_value_heads": 64,
                       "vocab_size": 256000, "max_position_embeddings": 8192, "rope_theta": 8000000.0,
                       "use_qk_norm": False, "logit_scale": 0.0625}, 35e9, None),
    ("command-a", COMMAND_A, 111e9, None),
    ("glm-4-9b-0414", {"model_type": "glm4", "hidden_size": 4096, "intermediate_size": 13696, "num_hidden_layers": 40,
                       "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 151552,
                       "attention_bias": True, "partial_rotary_factor": 0.5, "max_position_embeddings": 32768,
                       "tie_word_embeddings": False}, 9.4e9, None),
    ("seed-oss-36b", {"model_type": "seed_oss", "hidden_size": 5120, "intermediate_size": 27648,
                      "num_hidden_layers": 64, "num_attention_heads": 80, "num_key_value_heads": 8, "head_dim": 128,
                      "vocab_size": 155136, "attention_bias": True, "attention_out_bias": False,
                      "max_position_embeddings": 524288, "tie_word_embeddings": False}, 36.15e9, None),
    ("exaone-3.5-7.8b", {"model_type": "exaone", "hidden_size": 4096, "intermediate_size": 14336, "num_layers": 32,
                         "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 102400,
                         "max_position_embeddings": 32768, "activation_function": "silu",
                         "tie_word_embeddings": False}, 7.82e9, None),
    ("exaone-4.0-32b", EXAONE4_32B, 32.0e9, None),
    ("granite-3.1-8b", {"model_type": "granite", "hidden_size": 4096, "intermediate_size": 12800,
                        "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8,
                        "vocab_size": 49155, "max_position_embeddings": 131072, "tie_word_embeddings": True,
                        "embedding_multiplier": 12.0, "residual_multiplier": 0.22}, 8.17e9, None),
    ("smollm3-3b", {"model_type": "smollm3", "hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
                    "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 128256,
                    "max_position_embeddings": 65536, "no_rope_layers": [1, 1, 1, 0] * 9, "sliding_window": None,
                    "tie_word_embeddings": True}, 3.08e9, None),
    ("internlm2.5-7b", {"model_type": "internlm2", "hidden_size": 4096, "intermediate_size": 14336,
                        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                        "vocab_size": 92544, "max_position_embeddings": 32768, "bias": False,
                        "tie_word_embeddings": False}, 7.74e9, None),
    ("baichuan2-7b", {"model_type": "baichuan", "hidden_size": 4096, "intermediate_size": 11008,
                      "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 125696,
                      "model_max_length": 4096, "tie_word_embeddings": False}, 7.51e9, None),
    ("phi-3.5-moe", {"model_type": "phimoe", "hidden_size": 4096, "intermediate_size": 6400, "num_hidden_layers": 32,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 16,
                     "num_experts_per_tok": 2, "vocab_size": 32064, "max_position_embeddings": 131072,
                     "sliding_window": 131072, "attention_bias": True, "lm_head_bias": True,
                     "tie_word_embeddings": False}, 41.9e9, 6.6e9),
    ("olmoe-1b-7b", {"model_type": "olmoe", "hidden_size": 2048, "intermediate_size": 1024, "num_hidden_layers": 16,
                     "num_attention_heads": 16, "num_key_value_heads": 16, "num_experts": 64,
                     "num_experts_per_tok": 8, "vocab_size": 50304, "max_position_embeddings": 4096,
                     "tie_word_embeddings": False}, 6.9e9, 1.3e9),
    ("granite-3.0-1b-a400m", {"model_type": "granitemoe", "hidden_size": 1024, "intermediate_size": 512,
                              "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 8,
                              "num_local_experts": 32, "num_experts_per_tok": 8, "vocab_size": 49155,
                              "max_position_embeddings": 4096, "tie_word_embeddings": True}, 1.33e9, None),
    ("qwen1.5-moe-a2.7b", QWEN15_MOE, 14.3e9, 2.7e9),
    ("gemma-2b", {"model_type": "gemma", "hidden_size": 2048, "intermediate_size": 16384, "num_hidden_layers": 18,
                  "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256, "hidden_act": "gelu",
                  "vocab_size": 256000, "max_position_embeddings": 8192, "rope_theta": 10000.0}, 2.51e9, None),
    ("olmo-7b", {"model_type": "olmo", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                 "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 50304,
                 "max_position_embeddings": 2048, "tie_word_embeddings": False}, 6.89e9, None),
    ("glm-4-9b-chat-hf", {"model_type": "glm", "hidden_size": 4096, "intermediate_size": 13696,
                          "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128,
                          "attention_bias": True, "vocab_size": 151552, "max_position_embeddings": 131072,
                          "tie_word_embeddings": False}, 9.40e9, None),
    ("phi-2", {"model_type": "phi", "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 32,
               "num_attention_heads": 32, "num_key_value_heads": 32, "hidden_act": "gelu_new", "vocab_size": 51200,
               "partial_rotary_factor": 0.4, "max_position_embeddings": 2048, "tie_word_embeddings": False},
     2.78e9, None),
    ("minitron-8b", {"model_type": "nemotron", "hidden_size": 4096, "intermediate_size": 16384, "num_hidden_layers": 32,
                     "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128, "hidden_act": "relu2",
                     "vocab_size": 256000, "partial_rotary_factor": 0.5, "max_position_embeddings": 4096,
                     "tie_word_embeddings": False}, 8.27e9, None),
    ("deepseek-v2-lite", {"model_type": "deepseek_v2", "hidden_size": 2048, "intermediate_size": 10944,
                          "moe_intermediate_size": 1408, "num_hidden_layers": 27, "num_attention_heads": 16,
                          "num_key_value_heads": 16, "n_routed_experts": 64, "n_shared_experts": 2,
                          "num_experts_per_tok": 6, "first_k_dense_replace": 1, "moe_layer_freq": 1,
                          "kv_lora_rank": 512, "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                          "v_head_dim": 128, "vocab_size": 102400, "max_position_embeddings": 163840,
                          "topk_method": "greedy", "tie_word_embeddings": False}, 15.7e9, None),
]


@pytest.mark.parametrize("config,total,active", [p[1:] for p in PUBLISHED], ids=[p[0] for p in PUBLISHED])
def test_unseen_architecture_derives_its_published_size(tmp_path, config, total, active):
    card = _import(tmp_path, config)
    assert total_params(card) == pytest.approx(total, rel=0.02)
    if active is not None:
        assert active_params(card) == pytest.approx(active, rel=0.02)


def test_falcon_7b_is_multi_query_with_one_parallel_norm(tmp_path):
    card = _import(tmp_path, FALCON_7B)
    arch = card.architecture
    assert (arch.attention.num_kv_heads, arch.attention.head_dim, arch.norms_per_layer) == (1, 64, 1)
    assert arch.ffn.intermediate_size == 4 * 4544 and not arch.ffn.gated and arch.tie_embeddings
    assert kv_bytes_per_token(card, "bf16") == 32 * 2 * 1 * 64 * 2
    assert total_params(card) + param_counts(card)["embedding"] == pytest.approx(7.22e9, rel=0.01)  # Hub: lm_head twice
    assert "max_position_embeddings=2048" in card.notes  # FalconConfig default; the 7B config leaves it out


def test_falcon_40b_new_decoder_architecture_reads_num_kv_heads(tmp_path):
    card = _import(tmp_path, FALCON_40B)
    assert card.architecture.norms_per_layer == 2  # ln_attn and ln_mlp
    assert kv_bytes_per_token(card, "bf16") == 60 * 2 * 8 * 64 * 2


def test_gemma2_alternates_sliding_and_global_layers(tmp_path):
    card = _import(tmp_path, GEMMA2_9B)
    arch = card.architecture
    assert arch.layer_pattern == "(SA)*21" and arch.tie_embeddings and arch.norms_per_layer == 4
    assert kv_bytes_per_token(card, "bf16") == 21 * 2 * 8 * 256 * 2  # only the 21 global layers grow


def test_window_as_long_as_the_context_is_full_attention(tmp_path):
    card = _import(tmp_path, PHI4_MINI)
    assert card.architecture.layer_pattern is None and card.architecture.attention.sliding_window is None
    assert kv_bytes_per_token(card, "bf16") == 32 * 2 * 8 * 128 * 2
    short = card_from_config({**PHI4_MINI, "sliding_window": 2047})  # Phi-3-mini style: a real window still slides
    assert short.architecture.layer_pattern == "S*32" and kv_bytes(short, 8192) == kv_bytes(short, 2047)


def test_shared_expert_width_without_a_count_is_one_shared_expert(tmp_path):
    counts = param_counts(_import(tmp_path, QWEN15_MOE))
    assert counts["shared_experts"] == 24 * 3 * 2048 * 5632
    assert counts["attention"] == 24 * (4 * 2048 * 2048 + 3 * 2048)  # q/k/v biases, no o bias


def test_letter_and_interval_sliding_patterns(tmp_path):
    assert _import(tmp_path, EXAONE4_32B).architecture.layer_pattern == "(SSSA)*16"  # 'LLLG'
    assert _import(tmp_path, COMMAND_A).architecture.layer_pattern == "(SSSA)*16"  # sliding_window_pattern 4
    with pytest.raises(RooflineError, match="sliding_window_pattern"):
        card_from_config({**EXAONE4_32B, "sliding_window_pattern": "LLX"})


def test_gpt2_names_are_read_and_named_in_errors(tmp_path):
    card = _import(tmp_path, GPT2)
    arch = card.architecture
    assert (arch.hidden_size, arch.num_layers, arch.max_context, arch.rope) == (768, 12, 1024, None)
    assert arch.ffn.activation == "gelu_tanh" and arch.attention.qkv_bias and arch.attention.o_bias
    config = dict(GPT2)
    del config["n_layer"]
    with pytest.raises(CardError) as err:
        card_from_config(config)
    assert str(err.value) == "config.json: missing 'num_hidden_layers' (also read as n_layer)"


def test_opt_projected_embeddings_are_refused_in_one_line():
    config = {"model_type": "opt", "hidden_size": 1024, "ffn_dim": 4096, "num_hidden_layers": 24,
              "num_attention_heads": 16, "vocab_size": 50272, "max_position_embeddings": 2048,
              "word_embed_proj_dim": 512}  # facebook/opt-350m
    with pytest.raises(RooflineError) as err:
        card_from_config(config)
    assert "\n" not in str(err.value) and "'word_embed_proj_dim'" in str(err.value)


# state-space models with no attention (configs as saved by transformers; Mamba-Codestral's writes Infinity)
MAMBA_2_8B = {"model_type": "mamba", "hidden_size": 2560, "intermediate_size": 5120, "num_hidden_layers": 64,
              "state_size": 16, "conv_kernel": 4, "expand": 2, "time_step_rank": 160, "vocab_size": 50280,
              "use_bias": False, "use_conv_bias": True, "torch_dtype": "bfloat16"}  # state-spaces/mamba-2.8b-hf
FALCON_MAMBA_7B = {"model_type": "falcon_mamba", "hidden_size": 4096, "intermediate_size": 8192, "expand": 16,
                   "num_hidden_layers": 64, "state_size": 16, "conv_kernel": 4, "time_step_rank": 256,
                   "vocab_size": 65024, "tie_word_embeddings": False,
                   "torch_dtype": "bfloat16"}  # tiiuae/falcon-mamba-7b
CODESTRAL_MAMBA = """{"model_type": "mamba2", "hidden_size": 4096, "intermediate_size": 8192, "num_hidden_layers": 64,
  "num_heads": 128, "head_dim": 64, "n_groups": 8, "state_size": 128, "conv_kernel": 4, "expand": 2,
  "chunk_size": 256, "vocab_size": 32768, "tie_word_embeddings": false, "time_step_limit": [0.0, Infinity],
  "torch_dtype": "bfloat16"}"""  # mistralai/Mamba-Codestral-7B-v0.1, transformers conversion


@pytest.mark.parametrize("config,total", [(MAMBA_2_8B, 2.77e9), (FALCON_MAMBA_7B, 7.27e9), (CODESTRAL_MAMBA, 7.29e9)],
                         ids=["mamba-2.8b", "falcon-mamba-7b", "mamba-codestral-7b"])
def test_state_space_models_import_with_a_constant_state(tmp_path, config, total):
    path = tmp_path / "config.json"
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    card = card_from_config_file(path)
    assert total_params(card) == pytest.approx(total, rel=0.01)
    assert kv_bytes(card, 100_000, "bf16") == kv_bytes(card, 1_000, "bf16") > 0  # the state, not a growing cache


def test_a_non_finite_number_in_a_field_roofline_reads_is_refused_by_name(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(CODESTRAL_MAMBA.replace('"state_size": 128', '"state_size": Infinity'))
    with pytest.raises(CardError, match="'state_size' must be an integer"):
        card_from_config_file(path)


def test_a_multimodal_wrapper_reads_its_text_model(tmp_path):
    """LLaVA-1.5 nests a Llama 2 7B `text_config` of five fields; transformers' LlamaConfig defaults fill the rest."""
    llava = {"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"], "vocab_size": 32064,
             "text_config": {"model_type": "llama", "max_position_embeddings": 4096, "vocab_size": 32064,
                             "rms_norm_eps": 1e-05, "torch_dtype": "float16"},
             "vision_config": {"model_type": "clip_vision_model", "hidden_size": 1024}}  # llava-hf/llava-1.5-7b-hf
    card = _import(tmp_path, llava)
    assert total_params(card) == pytest.approx(6.74e9, rel=0.01) and card.architecture.max_context == 4096
    assert "llava wrapper" in card.notes and "vision encoder" in card.notes
    flat = dict(llava["text_config"])  # a flat llama config must still state its shapes
    with pytest.raises(CardError, match="missing 'num_hidden_layers'"):
        _import(tmp_path, flat)


def test_family_defaults_transformers_fills_in(tmp_path):
    """gemma-3-4b-it states no head counts (Gemma3TextConfig: 8 and 4); Jamba-v0.1 states its context as n_ctx."""
    gemma = {"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "hidden_size": 2560,
                                                     "intermediate_size": 10240, "num_hidden_layers": 34,
                                                     "sliding_window": 1024, "rope_scaling": {"factor": 8.0,
                                                                                              "rope_type": "linear"}},
             "vision_config": {"model_type": "siglip_vision_model"}, "torch_dtype": "bfloat16"}
    card = _import(tmp_path, gemma)
    assert total_params(card) == pytest.approx(3.88e9, rel=0.01)
    assert card.architecture.attention.num_heads == 8 and card.architecture.attention.num_kv_heads == 4
    jamba = {"model_type": "jamba", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 8, "num_experts": 16, "num_experts_per_tok": 2,
             "attn_layer_period": 8, "attn_layer_offset": 4, "expert_layer_period": 2, "expert_layer_offset": 1,
             "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": 256, "n_ctx": 262144,
             "vocab_size": 65536, "tie_word_embeddings": False}  # ai21labs/Jamba-v0.1
    card = _import(tmp_path, jamba)
    assert card.architecture.max_context == 262144 and total_params(card) == pytest.approx(51.6e9, rel=0.01)


def test_mlx_quantization_sets_the_weight_format(tmp_path):
    base = {"model_type": "qwen2", "hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
            "num_attention_heads": 12, "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768,
            "tie_word_embeddings": True, "torch_dtype": "bfloat16"}  # Qwen/Qwen2.5-1.5B-Instruct
    card = _import(tmp_path, {**base, "quantization": {"group_size": 64, "bits": 4}})
    assert card.weights["default"] == "mlx_q4"
    card = _import(tmp_path, {**base, "quantization": {"group_size": 128, "bits": 4},
                              "quantization_config": {"group_size": 128, "bits": 4}})
    assert card.weights["default"] == "bf16"
    assert "MLX quantization of 4 bits in groups of 128 not modelled" in card.notes


def test_an_encoder_decoder_is_refused_saying_so():
    with pytest.raises(RooflineError, match=r"unsupported model_type 't5' \(an encoder-decoder model"):
        card_from_config({"model_type": "t5", "d_model": 1024})
