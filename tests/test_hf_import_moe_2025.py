"""config.json import of MoE families released 2025-26 (hf_moe_2025): each config carries the config.json fields of
the released model named in its comment; totals are checked against transformers' own model (meta-device counts)
and the published size, plus one exact shape check per family."""

from __future__ import annotations

import pytest

from roofline.errors import RooflineError
from roofline.importers.config_json import card_from_config
from roofline.sizing.params import active_params, param_counts, total_params

# deepseek-ai/DeepSeek-V4-Pro config.json (compress_ratios: one entry per layer plus a trailing 0 for the MTP module)
DEEPSEEK_V4 = {"attention_bias": False, "hc_mult": 4, "head_dim": 512, "hidden_act": "silu",
    "hidden_size": 7168, "index_head_dim": 128, "index_n_heads": 64, "index_topk": 1024,
    "max_position_embeddings": 1048576, "model_type": "deepseek_v4", "moe_intermediate_size": 3072,
    "n_routed_experts": 384, "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 128,
    "num_experts_per_tok": 6, "num_hidden_layers": 61, "num_hash_layers": 3, "num_key_value_heads": 1,
    "num_nextn_predict_layers": 1, "o_groups": 16, "o_lora_rank": 1024, "q_lora_rank": 1536,
    "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06, "rope_scaling": {"beta_fast": 32, "beta_slow": 1,
    "factor": 16, "original_max_position_embeddings": 65536, "type": "yarn"}, "rope_theta": 10000,
    "routed_scaling_factor": 2.5, "scoring_func": "sqrtsoftplus", "sliding_window": 128, "swiglu_limit": 10.0,
    "tie_word_embeddings": False, "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "vocab_size": 129280,
    "compress_rope_theta": 160000, "compress_ratios": [128, 128] + [4, 128] * 29 + [4, 0]}
# mistralai/Mistral-Small-4-119B-2603: a mistral3 wrapper (Pixtral vision tower) around its mistral4 text model
MISTRAL4_WRAPPER = {"model_type": "mistral3", "torch_dtype": "bfloat16",
    "text_config": {"model_type": "mistral4", "hidden_size": 4096, "intermediate_size": 12288,
    "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 131072,
    "max_position_embeddings": 1048576, "q_lora_rank": 1024, "kv_lora_rank": 256, "qk_nope_head_dim": 64,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "n_routed_experts": 128, "n_shared_experts": 1,
    "moe_intermediate_size": 2048, "num_experts_per_tok": 4, "first_k_dense_replace": 0, "n_group": 1,
    "topk_group": 1, "norm_topk_prob": True, "routed_scaling_factor": 1.0, "hidden_act": "silu",
    "rms_norm_eps": 1e-06, "tie_word_embeddings": False, "rope_parameters": {"rope_type": "yarn",
    "type": "yarn", "rope_theta": 10000.0, "factor": 128.0, "original_max_position_embeddings": 8192,
    "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1}},
    "vision_config": {"model_type": "pixtral", "hidden_size": 1024, "num_hidden_layers": 24,
    "num_attention_heads": 16, "intermediate_size": 4096, "image_size": 1540, "patch_size": 14,
    "head_dim": 64}}
# zai-org/GLM-5
GLM_MOE_DSA = {"model_type": "glm_moe_dsa", "hidden_size": 6144, "intermediate_size": 12288,
    "moe_intermediate_size": 2048, "num_hidden_layers": 78, "num_attention_heads": 64,
    "num_key_value_heads": 64, "n_shared_experts": 1, "n_routed_experts": 256, "num_experts_per_tok": 8,
    "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 2048, "qk_nope_head_dim": 192,
    "qk_rope_head_dim": 64, "v_head_dim": 256, "index_n_heads": 32, "index_head_dim": 128, "index_topk": 2048,
    "vocab_size": 154880, "max_position_embeddings": 202752, "num_nextn_predict_layers": 1,
    "rope_theta": 1000000, "routed_scaling_factor": 2.5, "n_group": 1, "topk_group": 1, "norm_topk_prob": True,
    "scoring_func": "sigmoid", "topk_method": "noaux_tc", "hidden_act": "silu", "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False, "attention_bias": False, "torch_dtype": "bfloat16"}
# zai-org/GLM-4.7-Flash
GLM4_MOE_LITE = {"model_type": "glm4_moe_lite", "hidden_size": 2048, "intermediate_size": 10240,
    "moe_intermediate_size": 1536, "num_hidden_layers": 47, "num_attention_heads": 20,
    "num_key_value_heads": 20, "n_shared_experts": 1, "n_routed_experts": 64, "num_experts_per_tok": 4,
    "first_k_dense_replace": 1, "kv_lora_rank": 512, "q_lora_rank": 768, "qk_nope_head_dim": 192,
    "qk_rope_head_dim": 64, "v_head_dim": 256, "vocab_size": 154880, "max_position_embeddings": 202752,
    "num_nextn_predict_layers": 1, "rope_theta": 1000000, "routed_scaling_factor": 1.8, "n_group": 1,
    "topk_group": 1, "norm_topk_prob": True, "topk_method": "noaux_tc", "hidden_act": "silu",
    "rms_norm_eps": 1e-05, "tie_word_embeddings": False, "attention_bias": False, "torch_dtype": "bfloat16"}
# MiniMaxAI/MiniMax-M2
MINIMAX_M2 = {"model_type": "minimax_m2", "hidden_size": 3072, "intermediate_size": 1536,
    "num_hidden_layers": 62, "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 200064, "max_position_embeddings": 196608, "num_local_experts": 256,
    "num_experts_per_tok": 8, "rotary_dim": 64, "rope_theta": 5000000, "use_qk_norm": True,
    "qk_norm_type": "per_layer", "scoring_func": "sigmoid", "use_routing_bias": True, "use_mtp": True,
    "num_mtp_modules": 3, "mtp_transformer_layers": 1, "hidden_act": "silu", "rms_norm_eps": 1e-06,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
# baidu/ERNIE-4.5-21B-A3B-PT
ERNIE4_5_MOE = {"model_type": "ernie4_5_moe", "hidden_size": 2560, "intermediate_size": 12288,
    "num_hidden_layers": 28, "num_attention_heads": 20, "num_key_value_heads": 4, "head_dim": 128,
    "vocab_size": 103424, "max_position_embeddings": 131072, "rope_theta": 500000, "moe_num_experts": 64,
    "moe_k": 6, "moe_num_shared_experts": 2, "moe_intermediate_size": 1536, "moe_layer_start_index": 1,
    "moe_layer_end_index": 27, "moe_layer_interval": 1, "use_bias": False, "tie_word_embeddings": True,
    "hidden_act": "silu", "rms_norm_eps": 1e-05, "torch_dtype": "bfloat16"}
# rednote-hilab/dots.llm1.inst
DOTS1 = {"model_type": "dots1", "hidden_size": 4096, "intermediate_size": 10944, "moe_intermediate_size": 1408,
    "num_hidden_layers": 62, "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128,
    "n_routed_experts": 128, "n_shared_experts": 2, "num_experts_per_tok": 6, "first_k_dense_replace": 1,
    "vocab_size": 152064, "max_position_embeddings": 32768, "rope_theta": 10000000, "sliding_window": None,
    "max_window_layers": 62, "norm_topk_prob": True, "routed_scaling_factor": 2.5, "scoring_func": "noaux_tc",
    "attention_bias": False, "tie_word_embeddings": False, "hidden_act": "silu", "rms_norm_eps": 1e-05,
    "torch_dtype": "bfloat16"}
# upstage/Solar-Open-100B
SOLAR_OPEN = {"model_type": "solar_open", "hidden_size": 4096, "num_hidden_layers": 48,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "moe_intermediate_size": 1280,
    "n_routed_experts": 128, "n_shared_experts": 1, "num_experts_per_tok": 8, "vocab_size": 196608,
    "max_position_embeddings": 131072, "rope_theta": 1000000, "attention_bias": False, "norm_topk_prob": True,
    "routed_scaling_factor": 1.0, "tie_word_embeddings": False, "hidden_act": "silu", "rms_norm_eps": 1e-05,
    "torch_dtype": "bfloat16"}
# tencent/Hunyuan-A13B-Instruct (moe_topk / num_shared_expert / moe_intermediate_size given per layer)
HUNYUAN_MOE = {"model_type": "hunyuan_v1_moe", "hidden_size": 4096, "intermediate_size": 3072,
    "moe_intermediate_size": [3072] * 32, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": 128, "attention_head_dim": 128, "num_experts": 64, "moe_topk": [8] * 32, "num_shared_expert": [1] * 32,
    "use_mixed_mlp_moe": True, "use_qk_norm": True, "use_cla": False, "cla_share_factor": 2, "attention_bias": False,
    "mlp_bias": False, "vocab_size": 128167, "max_position_embeddings": 32768, "rope_theta": 10000.0,
    "rope_scaling": {"alpha": 1000.0, "beta_fast": 32, "beta_slow": 1, "factor": 1.0, "mscale": 1.0,
    "mscale_all_dim": 1.0, "type": "dynamic"}, "hidden_act": "silu", "rms_norm_eps": 1e-05,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16"}
# Cohere2MoeConfig's documented defaults (CohereLabs/command-a-plus-05-2026 docstring) with 8 KV heads, one shared
# expert and two dense prefix layers: no released config.json was available to copy
COHERE2_MOE = {"model_type": "cohere2_moe", "vocab_size": 256000, "hidden_size": 8192, "intermediate_size": 22528,
    "logit_scale": 0.0625, "num_hidden_layers": 40, "num_attention_heads": 64, "num_key_value_heads": 8,
    "head_dim": 128, "hidden_act": "silu", "max_position_embeddings": 8192, "layer_norm_eps": 1e-05,
    "tie_word_embeddings": True, "rope_theta": 10000.0, "attention_bias": False, "sliding_window": 4096,
    "num_experts_per_tok": 2, "num_experts": 8, "num_shared_experts": 1, "shared_expert_combination_strategy":
    "average", "expert_selection_fn": "softmax", "first_k_dense_replace": 2, "prefix_dense_intermediate_size": 11264,
    "prefix_dense_sliding_window_pattern": 1, "sliding_window_pattern": 4, "torch_dtype": "bfloat16"}
# LGAI-EXAONE/K-EXAONE-236B-A23B
EXAONE_MOE = {"model_type": "exaone_moe", "vocab_size": 153600, "hidden_size": 6144, "intermediate_size": 18432,
    "moe_intermediate_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 64, "num_key_value_heads": 8,
    "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8, "num_shared_experts": 1,
    "first_k_dense_replace": 1, "norm_topk_prob": True, "routed_scaling_factor": 2.5, "n_group": 1, "topk_group": 1,
    "sliding_window": 128, "sliding_window_pattern": 4, "max_position_embeddings": 262144, "rms_norm_eps": 1e-05,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}, "num_nextn_predict_layers": 1,
    "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
# arcee-ai/Trinity-Mini
AFMOE = {"model_type": "afmoe", "vocab_size": 200192, "hidden_size": 2048, "intermediate_size": 6144,
    "moe_intermediate_size": 1024, "num_hidden_layers": 32, "num_dense_layers": 2, "num_attention_heads": 32,
    "num_key_value_heads": 4, "head_dim": 128, "hidden_act": "silu", "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-05, "tie_word_embeddings": False, "rope_theta": 10000, "num_experts": 128,
    "num_experts_per_tok": 8, "num_shared_experts": 1, "route_scale": 2.826, "score_func": "sigmoid",
    "route_norm": True, "global_attn_every_n_layers": 4, "sliding_window": 2048, "mup_enabled": True,
    "n_group": 1, "topk_group": 1, "torch_dtype": "bfloat16"}
# (config, transformers 5.24 meta-device count, published total, published active or None)
CASES = {
    "deepseek_v4": (DEEPSEEK_V4, 1_572_997_179_491, None, None),  # 1.6T published counts the 26B MTP module
    "mistral4": (MISTRAL4_WRAPPER, 118_972_826_624, 119e9, 6.5e9),  # 6B active + embedding and output
    "glm_moe_dsa": (GLM_MOE_DSA, 743_911_199_232, 744e9, 40e9),
    "glm4_moe_lite": (GLM4_MOE_LITE, 29_943_390_976, 30e9, 3.9e9),  # "30B-A3B"; active from the config
    "minimax_m2": (MINIMAX_M2, 228_689_748_992, 230e9, 11e9),  # "230B total, 10B active" (MTP not counted)
    "ernie4_5_moe": (ERNIE4_5_MOE, 21_825_437_888, None, 3.3e9),  # named "21B-A3B": 21.8B rounded down
    "dots1": (DOTS1, 142_774_373_888, 142e9, 14e9),
    "solar_open": (SOLAR_OPEN, 102_651_793_408, 102.6e9, 12e9),
    "hunyuan_v1_moe": (HUNYUAN_MOE, 80_393_183_232, 80e9, 13e9),
    "cohere2_moe": (COHERE2_MOE, 198_041_083_904, None, None),
    # +47 x 128: the e_score_correction_bias transformers keeps as a buffer (a checkpoint tensor) is counted
    "exaone_moe": (EXAONE_MOE, 236_571_150_336, 236e9, 23e9),
    "afmoe": (AFMOE, 26_123_974_400, 26e9, None),  # "26B, 3B active": 3.5B by the config's own shapes
}


@pytest.mark.parametrize("name", list(CASES))
def test_total_matches_transformers(name):
    config, meta_count, published, published_active = CASES[name]  # transformers 5.24 meta-device count
    card = card_from_config(config)
    assert total_params(card) == pytest.approx(meta_count, rel=1e-3)
    if published is not None:
        assert total_params(card) == pytest.approx(published, rel=0.01)
    if published_active is not None:
        assert active_params(card) == pytest.approx(published_active, rel=0.1)


def test_deepseek_v4_compressed_layers():
    """30 CSA (ratio 4, indexer) + 31 HCA (ratio 128) layers; attention weights from the checkpoint's tensor shapes."""
    card = card_from_config(DEEPSEEK_V4)
    arch = card.architecture
    letters = arch.pattern_letters()
    assert (letters.count("C"), letters.count("H")) == (30, 31)
    assert arch.layer_types["C"].compress_ratio == 4 and arch.layer_types["C"].indexer
    assert arch.layer_types["H"].compress_ratio == 128 and not arch.layer_types["H"].indexer
    h, heads, hd, ql, g, ol = 7168, 128, 512, 1536, 16, 1024
    common = h * ql + ql + ql * heads * hd + h * hd + hd + g * ol * (heads * hd // g) + h * g * ol + heads
    hca = common + 2 * h * hd + 128 * hd + hd
    csa = common + 2 * h * 2 * hd + 4 * 2 * hd + hd + ql * 64 * 128 + h * 64 + 2 * h * 256 + 4 * 256 + 128
    assert param_counts(card)["attention"] == 31 * hca + 30 * csa
    assert arch.mtp_layers == 1 and "hyper-connections" in card.notes


def test_deepseek_v4_sliding_only_layers_refused():
    config = {**DEEPSEEK_V4, "compress_ratios": [0] * 61}
    with pytest.raises(RooflineError, match="sliding-only"):
        card_from_config(config)


def test_mistral4_wrapper_counts_the_text_model_mla():
    card = card_from_config(MISTRAL4_WRAPPER)
    assert "vision encoder" in card.notes and card.architecture.moe.router_bias is False
    h, heads, ql, kl = 4096, 32, 1024, 256
    per_layer = h * ql + ql + ql * heads * 128 + h * (kl + 64) + kl + kl * heads * (64 + 128) + heads * 128 * h
    assert param_counts(card)["attention"] == 36 * per_layer


def test_glm5_indexer_and_dense_prefix():
    card = card_from_config(GLM_MOE_DSA)
    arch = card.architecture
    assert arch.moe.first_dense_layers == 3 and arch.mla.indexer.topk == 2048
    assert param_counts(card)["ffn"] == 3 * 3 * 6144 * 12288


def test_glm4_moe_lite_shared_expert():
    card = card_from_config(GLM4_MOE_LITE)
    assert card.architecture.moe.first_dense_layers == 1
    assert param_counts(card)["shared_experts"] == 46 * 3 * 2048 * 1536


def test_minimax_m2_attention():
    card = card_from_config(MINIMAX_M2)
    assert card.architecture.rope.partial_rotary_factor == 0.5
    assert param_counts(card)["attention"] == 62 * (3072 * (48 + 16) * 128 + 48 * 128 * 3072 + 2 * 128)


def test_ernie_router_bias_and_dense_first_layer():
    card = card_from_config(ERNIE4_5_MOE)
    counts = param_counts(card)
    assert counts["ffn"] == 3 * 2560 * 12288 and counts["lm_head"] == 0
    assert counts["router"] == 27 * (64 * 2560 + 64)
    assert counts["shared_experts"] == 27 * 3 * 2560 * 2 * 1536


def test_dots1_shared_experts():
    card = card_from_config(DOTS1)
    assert card.architecture.attention.qk_norm
    assert param_counts(card)["shared_experts"] == 61 * 3 * 4096 * 2 * 1408


def test_solar_open_attention():
    card = card_from_config(SOLAR_OPEN)
    assert param_counts(card)["attention"] == 48 * (4096 * 80 * 128 + 64 * 128 * 4096)


def test_hunyuan_moe_shared_mlp_and_ntk_alpha():
    card = card_from_config(HUNYUAN_MOE)
    arch, counts = card.architecture, param_counts(card)
    assert arch.moe.experts_per_token == 8 and arch.rope.scaling is None
    assert arch.rope.theta == pytest.approx(10000.0 * 1000.0 ** (128 / 126))
    assert counts["shared_experts"] == 32 * 3 * 4096 * 3072 and counts["lm_head"] == 0
    assert counts["attention"] == 32 * (4096 * 48 * 128 + 32 * 128 * 4096 + 2 * 128)


def test_hunyuan_moe_uneven_per_layer_topk_refused():
    with pytest.raises(RooflineError, match="moe_topk"):
        card_from_config({**HUNYUAN_MOE, "moe_topk": [8] * 31 + [4]})


def test_cohere2_moe_dense_prefix_and_shared_expert():
    card = card_from_config(COHERE2_MOE)
    counts = param_counts(card)
    assert card.architecture.pattern_letters().count("A") == 2 + 9
    assert counts["ffn"] == 2 * 3 * 8192 * 11264 and counts["lm_head"] == 0
    assert counts["shared_experts"] == 38 * 3 * 8192 * 22528 and counts["norms"] == 41 * 8192


def test_exaone_moe_attention_and_kv():
    card = card_from_config(EXAONE_MOE)
    counts = param_counts(card)
    assert card.architecture.attention.sliding_window == 128
    assert counts["attention"] == 48 * (6144 * 80 * 128 + 64 * 128 * 6144 + 2 * 128)
    assert counts["shared_experts"] == 47 * 3 * 6144 * 2048 and counts["ffn"] == 3 * 6144 * 18432


def test_afmoe_gated_attention_and_dense_layers():
    card = card_from_config(AFMOE)
    arch, counts = card.architecture, param_counts(card)
    assert arch.attention.output_gate and arch.moe.first_dense_layers == 2
    assert counts["attention"] == 32 * (2048 * (64 + 8) * 128 + 32 * 128 * 2048 + 2 * 128)
    assert counts["norms"] == 32 * 4 * 2048 + 2048 and counts["router"] == 30 * (128 * 2048 + 128)
