"""config.json dense decoder families of 2024-26 (hf_dense_2025): fields as each named model's released config.json
states them (or transformers' config defaults, which reproduce the model its docstring names), the derived total
against transformers' own model and the published size, one exact shape check per family, and what is refused."""

from __future__ import annotations

import pytest

from roofline.errors import CardError, RooflineError
from roofline.importers.config_json import card_from_config
from roofline.sizing.kv import kv_bytes_per_token
from roofline.sizing.params import active_params, param_counts, total_params

BF16 = {"torch_dtype": "bfloat16"}
OLMO3_7B = {"model_type": "olmo3", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 65536,
            "rope_theta": 500000, "rope_scaling": {"attention_factor": 1.2079441541679836, "beta_fast": 32,
                                                   "beta_slow": 1, "factor": 8.0, "rope_type": "yarn",
                                                   "original_max_position_embeddings": 8192},
            "sliding_window": 4096, "tie_word_embeddings": False, "vocab_size": 100278,
            "layer_types": ["sliding_attention"] * 3 + ["full_attention"], **BF16}  # allenai/Olmo-3-7B-Instruct
OLMO3_7B["layer_types"] = OLMO3_7B["layer_types"] * 8
ERNIE_03B = {"model_type": "ernie4_5", "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 18,
             "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 103424,
             "max_position_embeddings": 131072, "rope_theta": 500000, "tie_word_embeddings": True, "use_bias": False,
             "hidden_act": "silu", **BF16}  # baidu/ERNIE-4.5-0.3B-PT
HUNYUAN_7B = {"model_type": "hunyuan_v1_dense", "hidden_size": 4096, "intermediate_size": 14336,
              "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
              "vocab_size": 128256, "max_position_embeddings": 32768, "rope_theta": 10000.0,
              "rope_scaling": {"alpha": 50.0, "beta_fast": 32, "beta_slow": 1, "factor": 1.0, "mscale": 1.0,
                               "mscale_all_dim": 1.0, "type": "dynamic"},
              "tie_word_embeddings": True, "attention_bias": False, "mlp_bias": False, "use_qk_norm": True,
              **BF16}  # tencent/Hunyuan-7B-Instruct
APERTUS_8B = {"model_type": "apertus", "hidden_size": 4096, "intermediate_size": 21504, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 131072,
              "max_position_embeddings": 65536, "rope_theta": 12000000, "hidden_act": "xielu",
              "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "rope_type": "llama3",
                               "original_max_position_embeddings": 8192},
              "tie_word_embeddings": False, "qk_norm": True, **BF16}  # swiss-ai/Apertus-8B-Instruct-2509
AFM_45B = {"model_type": "arcee", "hidden_size": 2560, "intermediate_size": 18432, "num_hidden_layers": 36,
           "num_attention_heads": 20, "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 128004,
           "max_position_embeddings": 65536, "hidden_act": "relu2", "rope_theta": 10000.0,
           "rope_scaling": {"factor": 20.0, "original_max_position_embeddings": 4096, "rope_type": "yarn"},
           "tie_word_embeddings": False, **BF16}  # arcee-ai/AFM-4.5B
GRANITE_SWA = {"model_type": "granite_swa", "hidden_size": 2560, "intermediate_size": 8192, "num_hidden_layers": 24,
               "num_attention_heads": 20, "num_key_value_heads": 4, "vocab_size": 100352,
               "max_position_embeddings": 8192, "sliding_window": 128, "tie_word_embeddings": True,
               "rope_theta": 10000.0, "attention_multiplier": 0.0078125, **BF16}  # GraniteSWAConfig defaults
HELIUM_2B = {"model_type": "helium", "hidden_size": 2560, "intermediate_size": 7040, "num_hidden_layers": 24,
             "num_attention_heads": 20, "num_key_value_heads": 20, "head_dim": 128, "vocab_size": 48000,
             "max_position_embeddings": 4096, "rope_theta": 100000.0, "tie_word_embeddings": False,
             **BF16}  # kyutai/helium-1-preview-2b
STABLELM2_16B = {"model_type": "stablelm", "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24,
                 "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 100352,
                 "max_position_embeddings": 4096, "partial_rotary_factor": 0.25, "rope_theta": 10000,
                 "use_qkv_bias": True, "qk_layernorm": False, "use_parallel_residual": False,
                 "tie_word_embeddings": False, **BF16}  # stabilityai/stablelm-2-1_6b
STABLELM2_12B = {**STABLELM2_16B, "hidden_size": 5120, "intermediate_size": 13824, "num_hidden_layers": 40,
                 "num_key_value_heads": 8, "use_qkv_bias": False, "qk_layernorm": True,
                 "use_parallel_residual": True}  # stabilityai/stablelm-2-12b
VAULTGEMMA_1B = {"model_type": "vaultgemma", "hidden_size": 1152, "intermediate_size": 6912, "num_hidden_layers": 26,
                 "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 256000,
                 "sliding_window": 512, "max_position_embeddings": 1024, "query_pre_attn_scalar": 256,
                 "hidden_activation": "gelu_pytorch_tanh", "final_logit_softcapping": 30.0,
                 "attn_logit_softcapping": 50.0, "tie_word_embeddings": True, **BF16}  # google/vaultgemma-1b
JAIS2_8B = {"model_type": "jais2", "hidden_size": 3328, "intermediate_size": 26624, "num_hidden_layers": 32,
            "num_attention_heads": 26, "num_key_value_heads": 26, "head_dim": 128, "vocab_size": 150272,
            "max_position_embeddings": 8192, "hidden_act": "relu2", "attention_bias": True, "mlp_bias": True,
            "tie_word_embeddings": False, **BF16}  # inceptionai/Jais-2-8B-Chat
CWM = {"model_type": "cwm", "hidden_size": 6144, "intermediate_size": 21504, "num_hidden_layers": 64,
       "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256,
       "max_position_embeddings": 131072, "sliding_window": 8192, "rope_theta": 1000000.0,
       "rope_scaling": {"factor": 16.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "rope_type": "llama3",
                        "original_max_position_embeddings": 8192},
       "tie_word_embeddings": False, **BF16}  # facebook/cwm (layer_types left to the 1 full : 3 sliding default)
NANOCHAT_D32 = {"model_type": "nanochat", "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 32,
                "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 65536,
                "max_position_embeddings": 2048, "hidden_act": "relu2", "final_logit_softcapping": 15.0,
                "tie_word_embeddings": False, **BF16}  # karpathy/nanochat-d32
YOUTU_2B = {"model_type": "youtu", "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 32,
            "num_attention_heads": 16, "num_key_value_heads": 16, "kv_lora_rank": 512, "q_lora_rank": 1536,
            "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "vocab_size": 128256,
            "max_position_embeddings": 131072, "rope_theta": 10000.0, "tie_word_embeddings": True,
            **BF16}  # tencent/Youtu-LLM-2B
IQUEST_40B = {"model_type": "iquestcoder", "hidden_size": 5120, "intermediate_size": 27648, "num_hidden_layers": 80,
              "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 76800,
              "max_position_embeddings": 131072, "rope_theta": 500000.0, "tie_word_embeddings": False,
              **BF16}  # IQuestLab/IQuest-Coder-V1-40B-Instruct
HY3 = {"model_type": "hy_v3", "hidden_size": 4096, "intermediate_size": 13312, "num_hidden_layers": 80,
       "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 120832,
       "max_position_embeddings": 131072, "num_experts": 192, "num_experts_per_tok": 8, "num_shared_experts": 1,
       "moe_intermediate_size": 1536, "mlp_layer_types": ["dense"] + ["sparse"] * 79,
       "rope_parameters": {"rope_theta": 11158840.0, "rope_type": "default"}, "tie_word_embeddings": False,
       **BF16}  # tencent/Hy3-preview
BAMBA_9B = {"model_type": "bamba", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8, "attn_layer_indices": [9, 18, 27],
            "mamba_n_heads": 128, "mamba_d_head": 64, "mamba_d_state": 128, "mamba_n_groups": 1, "mamba_d_conv": 4,
            "mamba_expand": 2, "mamba_chunk_size": 256, "mamba_conv_bias": True, "mamba_proj_bias": False,
            "vocab_size": 128256, "max_position_embeddings": 262144, "partial_rotary_factor": 0.5,
            "rope_theta": 10000.0, "tie_word_embeddings": False, **BF16}  # ibm-fms/Bamba-9.8b-2.2T-hf

# (id, config, transformers 5.24 meta-device count of the CausalLM built from that config, published total or None)
SIZES = [
    ("olmo3-7b", OLMO3_7B, 7_298_011_136, 7.3e9),
    ("ernie-4.5-0.3b", ERNIE_03B, 360_748_032, 0.36e9),
    ("hunyuan-7b", HUNYUAN_7B, 7_504_932_864, None),
    ("apertus-8b", APERTUS_8B, 8_053_338_176, 8.05e9),
    ("afm-4.5b", AFM_45B, 4_619_184_640, None),  # named for 4.5B; 4.62B counted
    ("granite-swa", GRANITE_SWA, 2_144_463_840, None),
    ("helium-preview-2b", HELIUM_2B, 2_172_643_840, None),
    ("stablelm-2-1.6b", STABLELM2_16B, 1_644_515_328, 1.64e9),
    ("stablelm-2-12b", STABLELM2_12B, 12_143_185_920, 12.1e9),
    ("vaultgemma-1b", VAULTGEMMA_1B, 992_734_848, 1.0e9),
    ("jais-2-8b", JAIS2_8B, 8_090_401_280, None),
    ("cwm", CWM, 32_581_097_472, None),
    ("nanochat-d32", NANOCHAT_D32, 1_879_048_192, 1.88e9),
    ("youtu-llm-2b", YOUTU_2B, 1_961_560_064, 1.96e9),
    ("iquest-coder-40b", IQUEST_40B, 39_794_283_520, None),
    ("hy3", HY3, 295_033_528_320, 295e9),
    ("bamba-9.8b", BAMBA_9B, 9_780_235_392, 9.78e9),
]


@pytest.mark.parametrize("config,transformers_total,published", [s[1:] for s in SIZES], ids=[s[0] for s in SIZES])
def test_derived_total_matches_transformers_and_the_published_size(config, transformers_total, published):
    total = total_params(card_from_config(config))
    assert total == pytest.approx(transformers_total, rel=1e-4)  # transformers 5.24 meta-device count
    if published:
        assert total == pytest.approx(published, rel=0.01)


def _counts(config: dict) -> dict[str, int]:
    return param_counts(card_from_config(config))


def test_olmo3_slides_three_layers_in_four():
    arch = card_from_config(OLMO3_7B).architecture
    assert arch.layer_pattern == "(SSSA)*8" and arch.attention.sliding_window == 4096
    assert kv_bytes_per_token(arch) == 8 * 2 * 32 * 128 * 2  # only the 8 full layers grow with context


def test_ernie_use_bias_off_and_tied_embeddings():
    counts = _counts(ERNIE_03B)
    assert counts["attention"] == 18 * (1024 * (2048 + 2 * 256) + 2048 * 1024)
    assert counts["lm_head"] == 0
    biased = _counts({**ERNIE_03B, "use_bias": True})
    assert biased["attention"] - counts["attention"] == 18 * (2048 + 2 * 256 + 1024)
    assert biased["ffn"] - counts["ffn"] == 18 * (2 * 3072 + 1024)


def test_hunyuan_ntk_alpha_rope_is_a_stretched_theta():
    card = card_from_config(HUNYUAN_7B)
    rope = card.architecture.rope
    assert rope.scaling is None and rope.theta == pytest.approx(10000.0 * 50.0 ** (128 / 126))
    assert param_counts(card)["attention"] == 32 * (4096 * (4096 + 2 * 1024) + 4096 * 4096 + 2 * 128)


def test_apertus_ungated_mlp_with_xielu():
    card = card_from_config(APERTUS_8B)
    assert param_counts(card)["ffn"] == 32 * 2 * 4096 * 21504
    assert card.architecture.ffn.activation == "relu2" and "xIELU" in card.notes


def test_arcee_ungated_relu2_and_gqa_cache():
    card = card_from_config(AFM_45B)
    assert param_counts(card)["ffn"] == 36 * 2 * 2560 * 18432
    assert kv_bytes_per_token(card) == 36 * 2 * 4 * 128 * 2


def test_granite_swa_sinks_and_full_first_layers():
    card = card_from_config(GRANITE_SWA)
    assert card.architecture.layer_pattern == "(ASSS)*6" and card.architecture.attention.sinks
    assert param_counts(card)["attention"] == 24 * (2560 * (2560 + 2 * 512) + 2560 * 2560 + 20)
    nope = card_from_config({**GRANITE_SWA, "layer_rope_theta": [0.0 if i % 4 == 0 else 1e4 for i in range(24)]})
    assert "6 layers use no positional encoding" in nope.notes


def test_helium_biases_q_k_v_only():
    plain, biased = _counts(HELIUM_2B), _counts({**HELIUM_2B, "attention_bias": True})
    assert plain["attention"] == 24 * 4 * 2560 * 2560
    assert biased["attention"] - plain["attention"] == 24 * 3 * 2560


def test_stablelm_qkv_bias_and_parallel_residual_norms():
    assert _counts(STABLELM2_16B)["attention"] == 24 * (4 * 2048 * 2048 + 3 * 2048)
    card = card_from_config(STABLELM2_12B)
    assert param_counts(card)["norms"] == 40 * 5120 + 5120  # one LayerNorm a layer (parallel residual)
    assert kv_bytes_per_token(card) == 40 * 2 * 8 * 160 * 2  # head_dim 5120 / 32


def test_vaultgemma_alternates_sliding_layers_with_two_norms():
    card = card_from_config(VAULTGEMMA_1B)
    assert card.architecture.layer_pattern == "(SA)*13" and card.architecture.attention.sliding_window == 512
    assert param_counts(card)["norms"] == 26 * 2 * 1152 + 1152


def test_jais2_biased_ungated_mlp():
    assert _counts(JAIS2_8B)["ffn"] == 32 * (2 * 3328 * 26624 + 26624 + 3328)
    assert _counts({k: v for k, v in JAIS2_8B.items() if k != "mlp_bias"})["ffn"] == _counts(JAIS2_8B)["ffn"]


def test_cwm_full_first_of_every_four():
    card = card_from_config(CWM)
    assert card.architecture.layer_pattern == "(ASSS)*16"
    assert kv_bytes_per_token(card) == 16 * 2 * 8 * 128 * 2


def test_nanochat_weightless_norms():
    counts = _counts(NANOCHAT_D32)
    assert counts["norms"] == 2048  # the card's final norm only
    assert counts["ffn"] == 32 * 2 * 2048 * 8192


def test_youtu_caches_the_mla_latent():
    card = card_from_config(YOUTU_2B)
    assert kv_bytes_per_token(card) == 32 * (512 + 64) * 2
    with pytest.raises(CardError, match="attention_bias"):
        card_from_config({**YOUTU_2B, "attention_bias": True})


def test_iquestcoder_gqa_cache():
    assert kv_bytes_per_token(card_from_config(IQUEST_40B)) == 80 * 2 * 8 * 128 * 2


def test_hy3_experts_shared_expert_and_dense_first_layer():
    card = card_from_config(HY3)
    counts = param_counts(card)
    assert counts["experts"] == 79 * 192 * 3 * 4096 * 1536
    assert counts["shared_experts"] == 79 * 3 * 4096 * 1536 and counts["ffn"] == 3 * 4096 * 13312
    assert active_params(card) == pytest.approx(20_675_715_072, rel=1e-6)  # published: A21B
    with pytest.raises(CardError, match="mlp_layer_types"):
        card_from_config({**HY3, "mlp_layer_types": ["dense", "moe"] * 40})


def test_bamba_attention_on_listed_layers_only():
    card = card_from_config(BAMBA_9B)
    assert sum(1 for x in card.architecture.pattern_letters() if x == "A") == 3
    assert kv_bytes_per_token(card) == 3 * 2 * 8 * 128 * 2
    with pytest.raises(CardError, match="mamba_proj_bias"):
        card_from_config({**BAMBA_9B, "mamba_proj_bias": True})


def test_lfm2_short_convolution_hybrid_is_refused():
    with pytest.raises(RooflineError, match="unsupported model_type 'lfm2'"):
        card_from_config({"model_type": "lfm2", "hidden_size": 2048, "num_hidden_layers": 16, "vocab_size": 65536})
