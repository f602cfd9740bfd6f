"""2026 multimodal-era config.json families (roofline/importers/hf_next_gen.py): Qwen3.5 dense and MoE, Qwen3-VL,
Qwen2.5-VL / Qwen2-VL and Gemma 4, each as its released multimodal config.json (the text model under `text_config`,
or flat for the older Qwen VL configs). Totals are the text model only; each is checked against transformers'
meta-device count of the same config (vision / audio towers left out) and the published size less the vision tower."""

from __future__ import annotations

import pytest

from roofline.errors import CardError, RooflineError
from roofline.importers.config_json import card_from_config
from roofline.sizing.kv import kv_bytes_per_token
from roofline.sizing.params import active_params, param_counts, total_params


def _types(n: int, every: int, other: str, full: str = "full_attention") -> list[str]:
    return [full if (i + 1) % every == 0 else other for i in range(n)]


QWEN3_5_ROPE = {"mrope_interleaved": True, "mrope_section": [11, 11, 10], "partial_rotary_factor": 0.25,
                "rope_theta": 10000000, "rope_type": "default"}
# Qwen/Qwen3.5-27B
QWEN3_5_27B = {"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"],
               "tie_word_embeddings": False,
               "vision_config": {"model_type": "qwen3_5", "depth": 27, "hidden_size": 1152, "out_hidden_size": 5120},
               "text_config": {
                   "model_type": "qwen3_5_text", "attention_bias": False, "attn_output_gate": True, "dtype": "bfloat16",
                   "full_attention_interval": 4, "head_dim": 256, "hidden_act": "silu", "hidden_size": 5120,
                   "intermediate_size": 17408, "layer_types": _types(64, 4, "linear_attention"),
                   "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
                   "linear_num_value_heads": 48, "linear_value_head_dim": 128, "max_position_embeddings": 262144,
                   "mlp_only_layers": [], "mtp_num_hidden_layers": 1, "num_attention_heads": 24,
                   "num_hidden_layers": 64, "num_key_value_heads": 4, "rms_norm_eps": 1e-6,
                   "rope_parameters": QWEN3_5_ROPE, "tie_word_embeddings": False, "vocab_size": 248320}}
# Qwen/Qwen3.5-35B-A3B
QWEN3_5_35B_A3B = {"model_type": "qwen3_5_moe", "architectures": ["Qwen3_5MoeForConditionalGeneration"],
                   "tie_word_embeddings": False,
                   "vision_config": {"model_type": "qwen3_5_moe", "out_hidden_size": 2048},
                   "text_config": {
                       "model_type": "qwen3_5_moe_text", "attention_bias": False, "attn_output_gate": True,
                       "full_attention_interval": 4, "head_dim": 256, "hidden_act": "silu", "hidden_size": 2048,
                       "layer_types": _types(40, 4, "linear_attention"), "linear_conv_kernel_dim": 4,
                       "linear_key_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
                       "linear_value_head_dim": 128, "max_position_embeddings": 262144, "moe_intermediate_size": 512,
                       "mtp_num_hidden_layers": 1, "num_attention_heads": 16, "num_experts": 256,
                       "num_experts_per_tok": 8, "num_hidden_layers": 40, "num_key_value_heads": 2,
                       "rope_parameters": QWEN3_5_ROPE, "shared_expert_intermediate_size": 512,
                       "tie_word_embeddings": False, "vocab_size": 248320, "dtype": "bfloat16"}}
QWEN3_VL_ROPE = {"rope_scaling": {"mrope_interleaved": True, "mrope_section": [24, 20, 20], "rope_type": "default"},
                 "rope_theta": 5000000}
# Qwen/Qwen3-VL-8B-Instruct
QWEN3_VL_8B = {"model_type": "qwen3_vl", "architectures": ["Qwen3VLForConditionalGeneration"],
               "tie_word_embeddings": False,
               "vision_config": {"model_type": "qwen3_vl", "depth": 27, "out_hidden_size": 4096},
               "text_config": {"model_type": "qwen3_vl_text", "attention_bias": False, "dtype": "bfloat16",
                               "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 12288,
                               "max_position_embeddings": 262144, "num_attention_heads": 32, "num_hidden_layers": 36,
                               "num_key_value_heads": 8, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
                               "vocab_size": 151936, **QWEN3_VL_ROPE}}
# Qwen/Qwen3-VL-30B-A3B-Instruct
QWEN3_VL_30B_A3B = {"model_type": "qwen3_vl_moe", "architectures": ["Qwen3VLMoeForConditionalGeneration"],
                    "tie_word_embeddings": False,
                    "vision_config": {"model_type": "qwen3_vl_moe", "out_hidden_size": 2048},
                    "text_config": {"model_type": "qwen3_vl_moe_text", "attention_bias": False,
                                    "decoder_sparse_step": 1,
                                    "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048,
                                    "intermediate_size": 6144, "max_position_embeddings": 262144, "mlp_only_layers": [],
                                    "moe_intermediate_size": 768, "num_attention_heads": 32, "num_experts": 128,
                                    "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
                                    "tie_word_embeddings": False, "vocab_size": 151936, "dtype": "bfloat16",
                                    **QWEN3_VL_ROPE}}
# Qwen/Qwen2.5-VL-7B-Instruct: flat, as on the Hub
QWEN2_5_VL_7B = {"model_type": "qwen2_5_vl", "architectures": ["Qwen2_5_VLForConditionalGeneration"],
                 "hidden_act": "silu", "hidden_size": 3584, "intermediate_size": 18944,
                 "max_position_embeddings": 128000,
                 "max_window_layers": 28, "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
                 "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": False,
                 "torch_dtype": "bfloat16", "use_sliding_window": False, "vocab_size": 152064,
                 "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
                 "vision_config": {"depth": 32, "hidden_size": 1280, "out_hidden_size": 3584, "window_size": 112}}
# Qwen/Qwen2.5-VL-3B-Instruct: flat, tied embeddings
QWEN2_5_VL_3B = {**QWEN2_5_VL_7B, "hidden_size": 2048, "intermediate_size": 11008, "max_window_layers": 70,
                 "num_attention_heads": 16, "num_hidden_layers": 36, "num_key_value_heads": 2,
                 "tie_word_embeddings": True, "vocab_size": 151936}
# Qwen/Qwen2-VL-7B-Instruct: flat
QWEN2_VL_7B = {**QWEN2_5_VL_7B, "model_type": "qwen2_vl", "architectures": ["Qwen2VLForConditionalGeneration"],
               "max_position_embeddings": 32768, "vision_config": {"depth": 32, "embed_dim": 1280, "hidden_size": 1536}}
GEMMA4_ROPE = {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
               "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}}
GEMMA4_31B_TEXT = {"model_type": "gemma4_text", "attention_bias": False, "attention_k_eq_v": True,
                   "enable_moe_block": False, "final_logit_softcapping": 30.0, "global_head_dim": 512, "head_dim": 256,
                   "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 5376, "hidden_size_per_layer_input": 0,
                   "intermediate_size": 21504, "layer_types": _types(60, 6, "sliding_attention"),
                   "max_position_embeddings": 262144, "num_attention_heads": 32, "num_experts": None,
                   "num_global_key_value_heads": 4, "num_hidden_layers": 60, "num_key_value_heads": 16,
                   "num_kv_shared_layers": 0, "rms_norm_eps": 1e-6, "rope_parameters": GEMMA4_ROPE,
                   "sliding_window": 1024, "tie_word_embeddings": True, "top_k_experts": None,
                   "use_bidirectional_attention": "vision", "use_double_wide_mlp": False, "vocab_size": 262144,
                   "vocab_size_per_layer_input": 262144, "dtype": "bfloat16"}
# google/gemma-4-31B-it
GEMMA4_31B = {"model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"], "tie_word_embeddings": True,
              "text_config": GEMMA4_31B_TEXT, "vision_config": {"model_type": "gemma4_vision"}, "audio_config": None}
# google/gemma-4-26B-A4B-it
GEMMA4_26B_A4B = {**GEMMA4_31B, "text_config": {
    **GEMMA4_31B_TEXT, "hidden_size": 2816, "intermediate_size": 2112, "num_hidden_layers": 30,
    "num_attention_heads": 16, "num_key_value_heads": 8, "num_global_key_value_heads": 2, "enable_moe_block": True,
    "num_experts": 128, "top_k_experts": 8, "moe_intermediate_size": 704,
    "layer_types": _types(30, 6, "sliding_attention")}}

# (id, config, transformers 5.24 meta-device count of the text model (vision/audio parameters left out), its
# vision tower in that count, published size or None, derived active or None); the published sizes are the Hub
# pages' safetensors counts (text + vision), Gemma 4's the model card's (31B: 30.7B; 26B-A4B: 25.2B total, 3.8B
# active). Qwen3.5's "27B" / "35B" are the names' rounded sizes, compared with the text model alone (its ~0.45B
# vision tower left out: 0.461B / 0.447B in transformers' count).
CASES = [
    ("qwen3.5-27b", QWEN3_5_27B, 26_895_998_464, 0.0, 27e9, None),
    ("qwen3.5-35b-a3b", QWEN3_5_35B_A3B, 34_660_610_688, 0.0, 35e9, 3.455e9),
    ("qwen3-vl-8b", QWEN3_VL_8B, 8_190_735_360, 0.576e9, 8.77e9, None),
    ("qwen3-vl-30b-a3b", QWEN3_VL_30B_A3B, 30_532_122_624, 0.539e9, 31.1e9, 3.353e9),
    ("qwen2.5-vl-7b", QWEN2_5_VL_7B, 7_615_616_512, 0.677e9, 8.29e9, None),
    ("qwen2.5-vl-3b", QWEN2_5_VL_3B, 3_085_938_688, 0.669e9, 3.75e9, None),
    ("qwen2-vl-7b", QWEN2_VL_7B, 7_615_616_512, 0.665e9, 8.29e9, None),
    ("gemma-4-31b", GEMMA4_31B, 30_697_345_280, 0.0, 30.7e9, None),
    ("gemma-4-26b-a4b", GEMMA4_26B_A4B, 25_233_141_760, 0.0, 25.2e9, 3.8e9),
]


@pytest.mark.parametrize("config,transformers_total,vision,published,active",
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_totals_match_transformers_and_published(config, transformers_total, vision, published, active):
    card = card_from_config(config)
    assert total_params(card) == pytest.approx(transformers_total, rel=1e-5)  # transformers 5.24 meta-device count
    assert total_params(card) + vision == pytest.approx(published, rel=0.01)
    if active is None:
        assert card.architecture.moe is None
    else:
        assert active_params(card) == pytest.approx(active, rel=0.01)


def test_qwen3_5_hybrid_shapes():
    dense, moe = card_from_config(QWEN3_5_27B), card_from_config(QWEN3_5_35B_A3B)
    # 16 of 64 layers are gated full attention: 4 KV heads x 256, K and V, bf16; DeltaNet layers hold a state
    assert kv_bytes_per_token(dense) == 16 * 2 * 4 * 256 * 2
    assert dense.architecture.attention.output_gate and dense.architecture.mtp_layers == 1
    assert dense.architecture.rope.scaling is None and dense.architecture.rope.partial_rotary_factor == 0.25
    assert kv_bytes_per_token(moe) == 10 * 2 * 2 * 256 * 2
    assert param_counts(moe)["experts"] == 40 * 256 * 3 * 2048 * 512
    assert param_counts(moe)["shared_experts"] == 40 * 3 * 2048 * 512
    assert "vision encoder" in dense.notes and "Gated DeltaNet" in dense.notes


def test_qwen_vl_shapes():
    vl8, vl30 = card_from_config(QWEN3_VL_8B), card_from_config(QWEN3_VL_30B_A3B)
    assert kv_bytes_per_token(vl8) == 36 * 2 * 8 * 128 * 2
    assert vl8.architecture.attention.qk_norm and vl8.architecture.rope.theta == 5e6
    assert vl8.architecture.rope.scaling is None  # mrope sections are plain RoPE on text
    assert param_counts(vl30)["experts"] == 48 * 128 * 3 * 2048 * 768
    q25 = card_from_config(QWEN2_5_VL_7B)
    # q/k/v biased: [3584 -> 28 x 128] + 2 x [3584 -> 4 x 128] + biases, o without
    assert param_counts(q25)["attention"] == 28 * (3584 * (3584 + 1024) + 3584 + 1024 + 3584 * 3584)
    assert kv_bytes_per_token(q25) == 28 * 2 * 4 * 128 * 2
    assert "vision encoder" in q25.notes and q25.architecture.rope.scaling is None


def test_qwen2_5_vl_nested_text_config_matches_flat():
    """transformers 5 saves qwen2_5_vl with a nested text_config and tie_word_embeddings only at the top level."""
    flat = {k: v for k, v in QWEN2_5_VL_3B.items() if k not in ("vision_config",)}
    text = {k: v for k, v in flat.items() if k not in ("model_type", "architectures", "tie_word_embeddings")}
    nested = {"model_type": "qwen2_5_vl", "tie_word_embeddings": True,
              "text_config": {**text, "model_type": "qwen2_5_vl_text"}}
    assert total_params(card_from_config(nested)) == total_params(card_from_config(QWEN2_5_VL_3B))
    assert card_from_config(nested).architecture.tie_embeddings


def test_gemma4_matches_the_bundled_card_shapes():
    card = card_from_config(GEMMA4_31B)
    arch = card.architecture
    assert arch.layer_pattern == "(SSSSSG)*10"
    assert arch.layer_types["G"].model_dump(exclude_defaults=True) == {"mixer": "full", "num_kv_heads": 4,
                                                                       "head_dim": 512, "k_eq_v": True}
    # full layers only (sliding ones are windowed): 10 x one K=V tensor of 4 heads x 512, bf16
    assert kv_bytes_per_token(card) == 10 * 1 * 4 * 512 * 2
    assert arch.tie_embeddings and arch.norms_per_layer == 4 and arch.rope.theta == 1e6


def test_gemma4_moe_and_per_layer_config_form():
    moe = card_from_config(GEMMA4_26B_A4B).architecture
    assert moe.moe.num_shared_experts == 1 and moe.moe.shared_expert_intermediate_size == 2112
    assert moe.norms_per_layer == 8 and moe.ffn.activation == "gelu_tanh"
    # transformers 5 saves the full layers' shapes as per_layer_config instead of global_* fields
    text = {k: v for k, v in GEMMA4_31B_TEXT.items() if k not in ("global_head_dim", "num_global_key_value_heads")}
    full = {f"{i:02d}": {"head_dim": 512, "num_key_value_heads": 4} for i in range(5, 60, 6)}
    saved = {**GEMMA4_31B, "text_config": {**text, "per_layer_config": full}}
    assert total_params(card_from_config(saved)) == total_params(card_from_config(GEMMA4_31B))


def test_refused_with_the_field_named():
    e2b = {**GEMMA4_31B_TEXT, "hidden_size_per_layer_input": 256, "num_kv_shared_layers": 20}
    with pytest.raises(CardError, match="hidden_size_per_layer_input"):
        card_from_config({"model_type": "gemma4", "text_config": e2b})
    with pytest.raises(CardError, match="num_kv_shared_layers"):
        card_from_config({**GEMMA4_31B_TEXT, "num_kv_shared_layers": 20})
    odd = {**GEMMA4_31B_TEXT, "per_layer_config": {"00": {"intermediate_size": 4}}}
    with pytest.raises(CardError, match="per_layer_config"):
        card_from_config(odd)
    bad = {**QWEN3_5_27B["text_config"], "layer_types": ["mamba"] * 64}
    with pytest.raises(CardError, match="layer_types"):
        card_from_config(bad)
    with pytest.raises(RooflineError, match="unsupported model_type 'gemma3n'"):
        card_from_config({"model_type": "gemma3n", "text_config": {"model_type": "gemma3n_text"}})


def test_a_wrappers_top_level_tying_and_dtype_reach_its_text_model():
    """transformers 5 re-saves a wrapper with `tie_word_embeddings` and `dtype` at the top level / as `dtype`."""
    text = {k: v for k, v in QWEN3_VL_8B["text_config"].items() if k not in ("tie_word_embeddings", "torch_dtype")}
    untied = card_from_config({**QWEN3_VL_8B, "text_config": {**text, "dtype": "float16"}})
    tied = card_from_config({**QWEN3_VL_8B, "text_config": text, "tie_word_embeddings": True})
    vocab, hidden = text["vocab_size"], text["hidden_size"]
    assert total_params(untied) - total_params(tied) == vocab * hidden
    assert "no torch_dtype" not in " ".join(untied.notes)
