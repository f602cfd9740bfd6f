"""One function per transformers model_type: a shared dense-decoder path plus what each family adds."""

from __future__ import annotations

from typing import Callable

from roofline.importers import hf_dense_2025, hf_moe_2025, hf_next_gen
from roofline.importers.hf_fields import _Fields
from roofline.importers.hf_parts import (
    _activation,
    _alternating_sliding,
    _attention,
    _deepseek_ffns,
    _every_layer_sliding,
    _ffn,
    _gemma_local_theta,
    _gemma_sliding,
    _letter_sliding,
    _mla,
    _mla_attention,
    _moe,
    _num_layers,
    _qwen3_moe_ffns,
    _qwen_sliding,
    _rope,
    _sliding,
)
from roofline.importers.hf_classic import _bloom, _falcon, _gpt2, _gpt_neox, _nemotron, _opt, _phi, _starcoder2
from roofline.importers.hf_decoder import _decoder, _dense_family, _moe_family
from roofline.importers.hf_hybrid import _falcon_h1, _granite_moe_hybrid, _jamba, _nemotron_h, _qwen3_next
from roofline.importers.hf_nested import CHATGLM_NAMES, MPT_NAMES, _chatglm, _dbrx, _gpt_bigcode, _mpt
from roofline.importers.hf_ssm import _mamba, _mamba2_family


def _llama(c: _Fields, notes: list[str]) -> dict:
    return _dense_family(c, default_theta=10000.0)


def _mistral(c: _Fields, notes: list[str]) -> dict:
    return _dense_family(c, sliding=_every_layer_sliding, default_theta=10000.0)


def _qwen2(c: _Fields, notes: list[str]) -> dict:
    return _dense_family(c, sliding=_qwen_sliding, qkv_bias=True, default_theta=10000.0)  # bias on q, k, v only


def _qwen3(c: _Fields, notes: list[str]) -> dict:
    return _dense_family(c, sliding=_qwen_sliding, qk_norm=True, default_theta=10000.0)


# Gemma3TextConfig defaults: the released gemma-3 configs leave these out of `text_config` (gemma-3-4b-it states no
# head counts: transformers' 8 query and 4 KV heads)
GEMMA3_DEFAULTS = {"vocab_size": 262208, "max_position_embeddings": 131072, "rope_theta": 1_000_000.0,
                   "rope_local_base_freq": 10000.0, "sliding_window_pattern": 6, "head_dim": 256,
                   "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True,
                   "num_attention_heads": 8, "num_key_value_heads": 4}
# LlamaConfig defaults, read only for a wrapper's nested `text_config` (LLaVA-1.5 states five fields of its Llama 2
# 7B); a flat llama config must state its shapes
LLAMA_DEFAULTS = {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                  "num_attention_heads": 32, "max_position_embeddings": 2048, "rope_theta": 10000.0}


def _gemma(c: _Fields, notes: list[str]) -> dict:
    """Gemma 1: Llama shapes with GeGLU, head_dim 256 and tied embeddings (GemmaConfig's default)."""
    return _dense_family(c, default_theta=10000.0, tie_default=True)


def _glm(c: _Fields, notes: list[str]) -> dict:
    """GLM-4 in transformers' `glm` (glm-4-9b-chat-hf): Llama shapes with biased q/k/v (`attention_bias`), fused
    gate-up MLP, RoPE on half of each head (no weights)."""
    return _dense_family(c, qkv_bias=c.bool("attention_bias", True), default_theta=10000.0)


def _phi3(c: _Fields, notes: list[str]) -> dict:
    """Phi-3 / Phi-4: fused qkv and gate_up projections hold the same weights as separate ones; a non-null
    `sliding_window` applies to every layer as in Mistral."""
    return _dense_family(c, sliding=_every_layer_sliding, default_theta=10000.0)


def _olmo2(c: _Fields, notes: list[str]) -> dict:
    """OLMo 2: norms after attention and after the MLP (two per layer) and QK-norm. Its q/k norms span all heads
    (num_heads x head_dim weights, not head_dim), ~0.003% of a 13B model; the card's per-head qk_norm counts less."""
    notes.append("q_norm/k_norm span all heads; counted as per-head QK-norm")
    return _dense_family(c, qk_norm=True, default_theta=10000.0)


def _gemma2(c: _Fields, notes: list[str]) -> dict:
    """Gemma 2: sliding and global layers alternate (layer 0 slides), four norms per layer, tied embeddings, GeGLU;
    the attention and final logit soft-caps are scalars."""
    return _dense_family(c, sliding=_alternating_sliding, default_theta=10000.0, norms_per_layer=4, tie_default=True)


def _cohere(c: _Fields, notes: list[str]) -> dict:
    """Command R / R+: attention and MLP in parallel off one LayerNorm (no bias), tied embeddings; Cohere 2
    (Command R7B, Command A) adds 3 sliding : 1 global layers (`sliding_window_pattern`) whose global layers skip
    RoPE. R+'s `use_qk_norm` LayerNorms are [heads, head_dim]; counted per head."""
    return _dense_family(c, sliding=_gemma_sliding if c.has("sliding_window_pattern") else None,
                         qk_norm=c.bool("use_qk_norm", False), norms_per_layer=1, tie_default=True)


def _glm4(c: _Fields, notes: list[str]) -> dict:
    """GLM-4-0414: q/k/v bias from `attention_bias` (o_proj has none), norms before and after attention and MLP
    (four per layer), partial rotary."""
    arch = _dense_family(c, norms_per_layer=4)
    arch["attention"]["o_bias"] = False
    return arch


def _seed_oss(c: _Fields, notes: list[str]) -> dict:
    """Seed-OSS: q/k/v bias from `attention_bias`, o_proj bias from `attention_out_bias`."""
    arch = _dense_family(c)
    arch["attention"]["o_bias"] = c.bool("attention_out_bias", False)
    return arch


def _exaone4(c: _Fields, notes: list[str]) -> dict:
    """EXAONE 4.0: QK-norm, norms after attention and MLP (two per layer), 3 local : 1 global layers."""
    return _dense_family(c, sliding=_letter_sliding, qk_norm=True, default_theta=1_000_000.0)


def _gemma3(c: _Fields, notes: list[str]) -> dict:
    """Gemma 3: 5 local : 1 global layers, QK-norm, four norms per layer, tied embeddings, GeGLU (tanh)."""
    arch = _dense_family(c, sliding=_gemma_sliding, qk_norm=True, default_theta=1_000_000.0, norms_per_layer=4,
                         tie_default=True)
    notes.append(f"sliding layers use rope theta {_gemma_local_theta(c):g} (the card's rope section is the global one)")
    return arch


def _mixtral(c: _Fields, notes: list[str]) -> dict:
    return _moe_family(c, sliding=_every_layer_sliding, default_theta=1_000_000.0)


def _phimoe(c: _Fields, notes: list[str]) -> dict:
    """Phi-3.5-MoE: Mixtral's shapes with biased q/k/v/o (`attention_bias`) and LayerNorms; the lm_head bias and the
    LayerNorm biases (vocab + 2 x hidden per layer, < 0.01%) are not counted."""
    notes.append("lm_head and LayerNorm biases not counted")
    return _moe_family(c, sliding=_every_layer_sliding)


def _olmoe(c: _Fields, notes: list[str]) -> dict:
    """OLMoE: 64 small experts on every layer and QK-norm spanning all heads (counted per head, as for OLMo 2)."""
    notes.append("q_norm/k_norm span all heads; counted as per-head QK-norm")
    return _moe_family(c, qk_norm=True)


def _granite_moe(c: _Fields, notes: list[str]) -> dict:
    """Granite 3 MoE (and -shared: a `shared_intermediate_size` MLP beside the experts); the muP multipliers are
    scalars, not weights."""
    return _moe_family(c)


def _qwen2_moe(c: _Fields, notes: list[str]) -> dict:
    """Qwen1.5/Qwen2-MoE: Qwen2 attention (q/k/v bias), `moe_intermediate_size` experts plus one shared expert
    `shared_expert_intermediate_size` wide behind a [hidden, 1] sigmoid gate (not counted); dense on mlp_only_layers."""
    n = _num_layers(c)
    flags, window = _sliding(c, n, _qwen_sliding)
    ffns = _qwen3_moe_ffns(c, n)
    notes.append("the shared expert's 1-output gate is not counted")
    return _decoder(c, mixers=["sliding" if s else "full" for s in flags], ffns=ffns,
                    attention=_attention(c, qkv_bias=True, window=window), ffn=_ffn(c) if "dense" in ffns else None,
                    moe=_moe(c, expert_size_keys=("moe_intermediate_size",)), rope=_rope(c, 10000.0))


def _qwen3_moe(c: _Fields, notes: list[str]) -> dict:
    n = _num_layers(c)
    flags, window = _sliding(c, n, _qwen_sliding)
    ffns = _qwen3_moe_ffns(c, n)
    return _decoder(c, mixers=["sliding" if s else "full" for s in flags], ffns=ffns,
                    attention=_attention(c, qk_norm=True, window=window),
                    ffn=_ffn(c) if "dense" in ffns else None,
                    moe=_moe(c, expert_size_keys=("moe_intermediate_size",)), rope=_rope(c, 10000.0))


def _gpt_oss(c: _Fields, notes: list[str]) -> dict:
    """gpt-oss: biased attention with learned sinks; experts and router carry biases; clamped SwiGLU."""
    n = _num_layers(c)
    flags, window = _sliding(c, n, _alternating_sliding)
    if c.has("swiglu_limit"):
        notes.append(f"experts use SwiGLU clamped at {c.float('swiglu_limit'):g}")
    return _decoder(c, mixers=["sliding" if s else "full" for s in flags], ffns=["moe"] * n,
                    attention=_attention(c, sinks=True, window=window), ffn=None,
                    moe=_moe(c, expert_size_keys=("intermediate_size",), expert_bias=True, router_bias=True),
                    rope=_rope(c, 150000.0))


def _deepseek_v3(c: _Fields, notes: list[str]) -> dict:
    """DeepSeek-V3: MLA on every layer, first_k_dense_replace dense layers, routed + shared experts, MTP."""
    n = _num_layers(c)
    mla = _mla(c)
    attention = _mla_attention(c, mla)
    ffns = _deepseek_ffns(c, n)
    mtp = c.int("num_nextn_predict_layers", default=0)
    noaux = c.str("topk_method", default="greedy") == "noaux_tc"  # per-expert e_score_correction_bias
    notes.append(f"routing: {c.raw('scoring_func', 'softmax')} scores, {c.raw('topk_method', 'greedy')}, "
                 f"{c.raw('n_group', 1)} groups / top {c.raw('topk_group', 1)}"
                 + ("; router_bias = e_score_correction_bias" if noaux else ""))
    return _decoder(c, mixers=["mla"] * n, ffns=ffns, attention=attention,
                    ffn=_ffn(c) if "dense" in ffns else None,
                    moe=_moe(c, expert_size_keys=("moe_intermediate_size",), router_bias=noaux), mla=mla,
                    rope=_rope(c, 10000.0), mtp_layers=mtp)


def _glm4_moe(c: _Fields, notes: list[str]) -> dict:
    """GLM-4.5: GQA with q/k/v bias (no o bias) and optional QK-norm, partial rotary; DeepSeek-style dense prefix,
    routed + shared experts with a sigmoid router carrying e_score_correction_bias; MTP layers."""
    n = _num_layers(c)
    attention = {**_attention(c, qk_norm=c.bool("use_qk_norm", False)), "o_bias": False}
    ffns = _deepseek_ffns(c, n)
    notes.append("router_bias = e_score_correction_bias")
    return _decoder(c, mixers=["full"] * n, ffns=ffns, attention=attention,
                    ffn=_ffn(c) if "dense" in ffns else None,
                    moe=_moe(c, expert_size_keys=("moe_intermediate_size",), router_bias=True),
                    rope=_rope(c, 10000.0), mtp_layers=c.int("num_nextn_predict_layers", default=0))


def _deepseek_v32(c: _Fields, notes: list[str]) -> dict:
    """DeepSeek-V3.2: V3's MLA + MoE shapes plus the DSA lightning indexer (index_n_heads x index_head_dim, top-k)."""
    arch = _deepseek_v3(c, notes)
    arch["mla"] = {**arch["mla"], "indexer": {"num_heads": c.int("index_n_heads"), "head_dim": c.int("index_head_dim"),
                                              "topk": c.int("index_topk")}}
    return arch


def _llama4_mixers(c: _Fields, n: int) -> list[str]:
    """Llama 4: `no_rope_layers` (1 = RoPE + chunked local attention, 0 = global NoPE); default every 4th is NoPE."""
    rope_flags = c.list("no_rope_layers")
    if rope_flags is None:
        every = c.int("no_rope_layer_interval", default=4)
        rope_flags = [int((i + 1) % every != 0) for i in range(n)]
    if len(rope_flags) != n:
        raise c.error("no_rope_layers", f"has {len(rope_flags)} entries but num_hidden_layers is {n}")
    chunked = c.has("attention_chunk_size")
    return ["chunked" if flag and chunked else "full" for flag in rope_flags]


def _llama4(c: _Fields, notes: list[str]) -> dict:
    """Llama 4 text model: MoE on `moe_layers` (default every `interleave_moe_layer_step`-th layer), each with a
    shared expert as wide as the routed ones; dense layers use `intermediate_size_mlp`; QK L2-norm has no weights."""
    n = _num_layers(c)
    step = c.int("interleave_moe_layer_step", default=1)
    moe_layers = set(c.list("moe_layers") or range(step - 1, n, step))
    ffns = ["moe" if i in moe_layers else "dense" for i in range(n)]
    mixers = _llama4_mixers(c, n)
    attention = {**_attention(c), "attention_chunk_size": c.int("attention_chunk_size", default=None)}
    dense = {"intermediate_size": c.int("intermediate_size_mlp"), "activation": _activation(c), "gated": True}
    moe = {**_moe(c, expert_size_keys=("intermediate_size",)), "num_shared_experts": 1,
           "shared_expert_intermediate_size": c.int("intermediate_size")}
    if c.bool("use_qk_norm", False):
        notes.append("QK L2-norm has no weights (not counted)")
    return _decoder(c, mixers=mixers, ffns=ffns, attention=attention, ffn=dense if "dense" in ffns else None,
                    moe=moe, rope=_rope(c, 500000.0))


_FAMILIES: dict[str, tuple[str, Callable[[_Fields, list[str]], dict]]] = {
    "llama": ("llama", _llama),
    "mistral": ("mistral", _mistral),
    "mixtral": ("mistral", _mixtral),
    "qwen2": ("qwen", _qwen2),
    "qwen3": ("qwen", _qwen3),
    "qwen3_moe": ("qwen", _qwen3_moe),
    "gemma3": ("gemma", _gemma3),
    "gemma3_text": ("gemma", _gemma3),
    "gpt_oss": ("gpt-oss", _gpt_oss),
    "deepseek_v3": ("deepseek", _deepseek_v3),
    "kimi_k2": ("kimi", _deepseek_v3),  # Kimi K2 ships DeepseekV3ForCausalLM under its own model_type
    "glm4_moe": ("glm", _glm4_moe),
    "phi3": ("phi", _phi3),
    "olmo2": ("olmo", _olmo2),
    "nemotron_h": ("nemotron", _nemotron_h),
    "qwen3_next": ("qwen", _qwen3_next),
    "deepseek_v32": ("deepseek", _deepseek_v32),
    "llama4": ("llama", _llama4),
    "llama4_text": ("llama", _llama4),
    "jamba": ("jamba", _jamba),
    "granitemoehybrid": ("granite", _granite_moe_hybrid),
    "falcon_h1": ("falcon", _falcon_h1),
    "deepseek_v2": ("deepseek", _deepseek_v3),  # V3's MLA + MoE fields; greedy or group-limited routing
    "qwen2_moe": ("qwen", _qwen2_moe),
    "phimoe": ("phi", _phimoe),
    "olmoe": ("olmo", _olmoe),
    "granite": ("granite", _llama),  # Llama shapes; the muP multipliers are scalars
    "granitemoe": ("granite", _granite_moe),
    "granitemoeshared": ("granite", _granite_moe),
    "smollm3": ("smollm", _llama),  # Llama shapes; every 4th layer skips RoPE (no_rope_layers), no weights
    "gemma2": ("gemma", _gemma2),
    "cohere": ("cohere", _cohere),
    "cohere2": ("cohere", _cohere),
    "glm4": ("glm", _glm4),
    "seed_oss": ("seed", _seed_oss),
    "exaone": ("exaone", _llama),  # EXAONE 3.x: Llama shapes under GPT-2 style names (num_layers)
    "exaone4": ("exaone", _exaone4),
    "falcon": ("falcon", _falcon),
    "gpt_neox": ("gpt-neox", _gpt_neox),
    "gpt2": ("gpt2", _gpt2),
    "gptj": ("gpt-j", _gpt2),
    "starcoder2": ("starcoder", _starcoder2),
    "bloom": ("bloom", _bloom),
    "opt": ("opt", _opt),
    "internlm2": ("internlm", _llama),  # Llama shapes with fused wqkv / gate-up (the same weights)
    "internlm3": ("internlm", _llama),
    "baichuan": ("baichuan", _llama),  # Llama shapes with fused W_pack; the 13B's ALiBi has no weights
    "gemma": ("gemma", _gemma),
    "olmo": ("olmo", _llama),  # OLMo 1: Llama shapes; its LayerNorms carry no weights
    "glm": ("glm", _glm),
    "phi": ("phi", _phi),
    "nemotron": ("nemotron", _nemotron),
    "ministral3": ("mistral", _mistral),  # Ministral 3's text model: Mistral shapes (its attention scaling is a scalar)
    "gpt_bigcode": ("starcoder", _gpt_bigcode),
    "mpt": ("mpt", _mpt),
    "dbrx": ("dbrx", _dbrx),
    "chatglm": ("glm", _chatglm),
    "mamba": ("mamba", _mamba),
    "falcon_mamba": ("falcon", _mamba),
    "mamba2": ("mamba", _mamba2_family),
    **hf_dense_2025.FAMILIES, **hf_moe_2025.FAMILIES, **hf_next_gen.FAMILIES,
}
SUPPORTED_MODEL_TYPES = tuple(_FAMILIES)
# Config defaults (transformers' *Config class) for fields the released configs leave out.
_FAMILY_DEFAULTS = {"gemma3": GEMMA3_DEFAULTS, "gemma3_text": GEMMA3_DEFAULTS,
                    "falcon": {"max_position_embeddings": 2048}, "bloom": {"max_position_embeddings": 2048},
                    "gpt_neox": {"attention_bias": True}, "jamba": {"max_position_embeddings": 262144},
                    **hf_dense_2025.DEFAULTS, **hf_moe_2025.DEFAULTS, **hf_next_gen.DEFAULTS}
# ... and those of a text model nested in a multimodal wrapper's `text_config`
_NESTED_DEFAULTS = {"llama": LLAMA_DEFAULTS}
# transformers' attribute_map: a family's own config names for the standard fields
_GPT2_NAMES = {"hidden_size": "n_embd", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head",
               "max_position_embeddings": "n_positions"}
_FAMILY_ALIASES = {
    "gpt2": _GPT2_NAMES, "gptj": _GPT2_NAMES, "gpt_bigcode": _GPT2_NAMES, "mpt": MPT_NAMES, "dbrx": MPT_NAMES,
    "chatglm": CHATGLM_NAMES,
    "falcon": {"num_hidden_layers": "n_layer", "num_attention_heads": "n_head"},
    "bloom": {"num_hidden_layers": "n_layer", "num_attention_heads": "n_head", "max_position_embeddings": "seq_length"},
    "gpt_neox": {"rope_theta": "rotary_emb_base", "partial_rotary_factor": "rotary_pct"},
    "exaone": {"num_hidden_layers": "num_layers"},
    "baichuan": {"max_position_embeddings": "model_max_length"},
    "jamba": {"max_position_embeddings": "n_ctx"},  # Jamba-v0.1's config states its context as n_ctx
    **hf_dense_2025.ALIASES, **hf_moe_2025.ALIASES, **hf_next_gen.ALIASES,
}
