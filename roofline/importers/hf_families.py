"""One function per transformers model_type: a shared dense-decoder path plus what each family adds."""

from __future__ import annotations

from typing import Callable

from roofline.importers.hf_fields import _Fields
from roofline.importers.hf_parts import (
    _NEMOTRON_BLOCKS,
    BAMBA_MAMBA_KEYS,
    _activation,
    _alternating_sliding,
    _attention,
    _deepseek_ffns,
    _every_layer_sliding,
    _ffn,
    _gemma_sliding,
    _mamba2,
    _mla,
    _moe,
    _nemotron_letters,
    _num_layers,
    _qwen3_moe_ffns,
    _qwen_sliding,
    _rope,
    _sliding,
)
from roofline.importers.hf_classic import _bloom, _falcon, _gpt2, _gpt_neox, _opt, _starcoder2
from roofline.importers.hf_decoder import _decoder, _dense_family


def _llama(c: _Fields, notes: list[str]) -> dict:
    return _dense_family(c, default_theta=10000.0)


def _mistral(c: _Fields, notes: list[str]) -> dict:
    return _dense_family(c, sliding=_every_layer_sliding, default_theta=10000.0)


def _qwen2(c: _Fields, notes: list[str]) -> dict:
    return _dense_family(c, sliding=_qwen_sliding, qkv_bias=True, default_theta=10000.0)  # bias on q, k, v only


def _qwen3(c: _Fields, notes: list[str]) -> dict:
    return _dense_family(c, sliding=_qwen_sliding, qk_norm=True, default_theta=10000.0)


# Gemma3TextConfig defaults: the released gemma-3 configs leave these out of `text_config`.
GEMMA3_DEFAULTS = {"vocab_size": 262208, "max_position_embeddings": 131072, "rope_theta": 1_000_000.0,
                   "rope_local_base_freq": 10000.0, "sliding_window_pattern": 6, "head_dim": 256,
                   "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True}


def _gemma_local_theta(c: _Fields) -> float:
    params = c.raw("rope_parameters")
    if isinstance(params, dict) and isinstance(params.get("sliding_attention"), dict):
        return float(params["sliding_attention"].get("rope_theta", 10000.0))
    return c.float("rope_local_base_freq")


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


def _exaone4_sliding(c: _Fields, n: int) -> list[bool]:
    """EXAONE 4: `sliding_window_pattern` letters repeat over the layers, 'L' local and 'G' global ('LLLG')."""
    pattern = c.str("sliding_window_pattern", default=None)
    if not c.has("sliding_window") or not pattern:
        return [False] * n
    if set(pattern) - {"L", "G"}:
        raise c.error("sliding_window_pattern", f"must be letters L (local) and G (global), got {pattern!r}")
    return [pattern[i % len(pattern)] == "L" for i in range(n)]


def _exaone4(c: _Fields, notes: list[str]) -> dict:
    """EXAONE 4.0: QK-norm, norms after attention and MLP (two per layer), 3 local : 1 global layers."""
    return _dense_family(c, sliding=_exaone4_sliding, qk_norm=True, default_theta=1_000_000.0)


def _gemma3(c: _Fields, notes: list[str]) -> dict:
    """Gemma 3: 5 local : 1 global layers, QK-norm, four norms per layer, tied embeddings, GeGLU (tanh)."""
    arch = _dense_family(c, sliding=_gemma_sliding, qk_norm=True, default_theta=1_000_000.0, norms_per_layer=4,
                         tie_default=True)
    notes.append(f"sliding layers use rope theta {_gemma_local_theta(c):g} (the card's rope section is the global one)")
    return arch


def _moe_family(c: _Fields, *, sliding=None, qk_norm=False, default_theta=10000.0) -> dict:
    """Every layer MoE with experts `intermediate_size` wide (a shared expert where the config gives its width)."""
    n = _num_layers(c)
    flags, window = _sliding(c, n, sliding)
    return _decoder(c, mixers=["sliding" if s else "full" for s in flags], ffns=["moe"] * n,
                    attention=_attention(c, qk_norm=qk_norm, window=window), ffn=None,
                    moe=_moe(c, expert_size_keys=("intermediate_size",)), rope=_rope(c, default_theta))


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
    heads = c.int("num_attention_heads")
    attention = {"num_heads": heads, "num_kv_heads": c.int("num_key_value_heads", default=heads),
                 "head_dim": mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]}
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


def _nemotron_h(c: _Fields, notes: list[str]) -> dict:
    """Nemotron-H: one block per layer from the hybrid pattern (Mamba-2, MoE, attention, MLP); ReLU^2 MLPs."""
    letters = _nemotron_letters(c)
    mixers = [_NEMOTRON_BLOCKS[x][0] for x in letters]
    ffns = [_NEMOTRON_BLOCKS[x][1] for x in letters]
    act = _activation(c, default="relu2")
    gated = act not in ("relu2", "relu")
    notes.append("attention layers use no positional encoding (NoPE); router_bias = e_score_correction_bias")
    return _decoder(
        c, mixers=mixers, ffns=ffns,
        attention=_attention(c) if "full" in mixers else None,
        ffn=_ffn(c, gated=gated, activation=act) if "dense" in ffns else None,
        moe=_moe(c, expert_size_keys=("moe_intermediate_size", "intermediate_size"), gated=gated, router_bias=True)
        if "moe" in ffns else None,
        mamba2=_mamba2(c) if "mamba2" in mixers else None,
        rope=None,
    )


def _qwen3_next(c: _Fields, notes: list[str]) -> dict:
    """Qwen3-Next: Gated DeltaNet layers with gated full attention every `full_attention_interval` layers (or the
    `layer_types` list); MoE FFNs with a shared expert, dense on `mlp_only_layers`."""
    n = _num_layers(c)
    if c.has("layer_types"):
        mixers = ["full" if t == "full_attention" else "deltanet" for t in c.list("layer_types")]
    else:
        every = c.int("full_attention_interval", default=4)
        mixers = ["full" if (i + 1) % every == 0 else "deltanet" for i in range(n)]
    ffns = _qwen3_moe_ffns(c, n)
    arch = _decoder(c, mixers=mixers, ffns=ffns, attention={**_attention(c, qk_norm=True), "output_gate": True},
                    ffn=_ffn(c) if "dense" in ffns else None,
                    moe={**_moe(c, expert_size_keys=("moe_intermediate_size",)), "num_shared_experts": 1},
                    rope=_rope(c, 10000.0))
    arch["deltanet"] = {"num_key_heads": c.int("linear_num_key_heads"), "num_value_heads": c.int("linear_num_value_heads"),
                        "key_head_dim": c.int("linear_key_head_dim"), "value_head_dim": c.int("linear_value_head_dim"),
                        "conv_kernel": c.int("linear_conv_kernel_dim", default=4)}
    notes.append("linear-attention layers are Gated DeltaNet (constant state); the shared expert's 1-output gate is not counted")
    return arch


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


def _jamba(c: _Fields, notes: list[str]) -> dict:
    """Jamba: attention every `attn_layer_period` layers at `attn_layer_offset`, Mamba-1 elsewhere (with dt/B/C
    RMSNorms); MoE every `expert_layer_period` layers at `expert_layer_offset`, dense SwiGLU elsewhere. No RoPE."""
    n = _num_layers(c)
    attn_period, attn_offset = c.int("attn_layer_period", default=8), c.int("attn_layer_offset", default=4)
    moe_period, moe_offset = c.int("expert_layer_period", default=2), c.int("expert_layer_offset", default=1)
    mixers = ["full" if i % attn_period == attn_offset else "mamba1" for i in range(n)]
    ffns = ["moe" if i % moe_period == moe_offset else "dense" for i in range(n)]
    hidden = c.int("hidden_size")
    arch = _decoder(c, mixers=mixers, ffns=ffns, attention=_attention(c), ffn=_ffn(c),
                    moe=_moe(c, expert_size_keys=("intermediate_size",)) if "moe" in ffns else None, rope=None)
    arch["mamba1"] = {"d_inner": c.int("mamba_expand", default=2) * hidden, "state_size": c.int("mamba_d_state"),
                      "conv_kernel": c.int("mamba_d_conv", default=4),
                      "dt_rank": c.int("mamba_dt_rank", default=-(-hidden // 16)), "inner_norms": True}
    notes.append("attention layers use no positional encoding")
    return arch


_GRANITE_BLOCKS = {"mamba": "mamba2", "attention": "full"}


def _granite_moe_hybrid(c: _Fields, notes: list[str]) -> dict:
    """Granite-4.0-H: `layer_types` (mamba / attention) per layer, each followed by MoE experts (`intermediate_size`
    wide) plus a shared MLP (`shared_intermediate_size`); without experts (num_local_experts 0) the shared MLP is the
    layer's dense FFN. Attention uses NoPE unless position_embedding_type is 'rope'."""
    n = _num_layers(c)
    names = c.list("layer_types") or c.list("layers_block_type") or ["attention"] * n
    bad = sorted({b for b in names if b not in _GRANITE_BLOCKS})
    if bad or len(names) != n:
        raise c.error("layer_types", f"must list {n} entries of mamba / attention, got {len(names)} ({bad or 'ok'})")
    mixers = [_GRANITE_BLOCKS[b] for b in names]
    experts = c.int("num_local_experts", default=0)
    shared = c.int("shared_intermediate_size")
    moe = ffn = None
    if experts:
        moe = {**_moe(c, expert_size_keys=("intermediate_size",)), "num_shared_experts": 1,
               "shared_expert_intermediate_size": shared}
    else:
        ffn = {"intermediate_size": shared, "activation": _activation(c), "gated": True}
    rope = _rope(c, 10000.0) if c.str("position_embedding_type", default="nope") == "rope" else None
    return _decoder(c, mixers=mixers, ffns=["moe" if experts else "dense"] * n,
                    attention=_attention(c) if "full" in mixers else None, ffn=ffn, moe=moe,
                    mamba2=_mamba2(c, BAMBA_MAMBA_KEYS) if "mamba2" in mixers else None, rope=rope)


def _falcon_h1_mamba(c: _Fields) -> dict:
    """Falcon-H1's Mamba-2: width `mamba_d_ssm` (else mamba_expand x hidden), head_dim 'auto' = width / heads, and
    the gated RMSNorm only when `mamba_rms_norm`."""
    heads = c.int("mamba_n_heads")
    width = c.int("mamba_d_ssm", default=None) or c.int("mamba_expand", default=2) * c.int("hidden_size")
    raw_head = c.raw("mamba_d_head", "auto")
    head_dim = width // heads if raw_head == "auto" else c.int("mamba_d_head")
    if head_dim * heads != width:
        raise c.error("mamba_d_head", f"({head_dim}) x mamba_n_heads ({heads}) must equal mamba_d_ssm ({width})")
    return _mamba2(c, BAMBA_MAMBA_KEYS, head_dim=head_dim, gated_norm=c.bool("mamba_rms_norm", False))


def _falcon_h1(c: _Fields, notes: list[str]) -> dict:
    """Falcon-H1: every layer runs GQA attention and Mamba-2 side by side (outputs summed), then a SwiGLU MLP.
    The muP multipliers are scalars (and a non-persistent in_proj buffer): no weights."""
    n = _num_layers(c)
    if c.has("attn_layer_indices"):
        raise c.error("attn_layer_indices", "lists attention layers; only every-layer parallel Falcon-H1 is modelled")
    if c.bool("projectors_bias", False) or c.bool("mamba_proj_bias", False):
        raise c.error("projectors_bias", "(or mamba_proj_bias) is set; Falcon-H1 projection biases are not modelled")
    arch = _decoder(c, mixers=["parallel"] * n, ffns=["dense"] * n, attention=_attention(c), ffn=_ffn(c),
                    mamba2=_falcon_h1_mamba(c), rope=_rope(c, 1e11))
    notes.append("parallel hybrid: attention and Mamba-2 in every layer")
    return arch


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
}
SUPPORTED_MODEL_TYPES = tuple(_FAMILIES)
# Config defaults (transformers' *Config class) for fields the released configs leave out.
_FAMILY_DEFAULTS = {"gemma3": GEMMA3_DEFAULTS, "gemma3_text": GEMMA3_DEFAULTS,
                    "falcon": {"max_position_embeddings": 2048}, "bloom": {"max_position_embeddings": 2048},
                    "gpt_neox": {"attention_bias": True}}
# transformers' attribute_map: a family's own config names for the standard fields
_GPT2_NAMES = {"hidden_size": "n_embd", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head",
               "max_position_embeddings": "n_positions"}
_FAMILY_ALIASES = {
    "gpt2": _GPT2_NAMES, "gptj": _GPT2_NAMES,
    "falcon": {"num_hidden_layers": "n_layer", "num_attention_heads": "n_head"},
    "bloom": {"num_hidden_layers": "n_layer", "num_attention_heads": "n_head", "max_position_embeddings": "seq_length"},
    "gpt_neox": {"rope_theta": "rotary_emb_base", "partial_rotary_factor": "rotary_pct"},
    "exaone": {"num_hidden_layers": "num_layers"},
    "baichuan": {"max_position_embeddings": "model_max_length"},
}
