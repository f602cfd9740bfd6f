"""config.json families of 2026 multimodal-era releases: Qwen3.5 (dense and MoE hybrids of Gated DeltaNet and gated
attention), the Qwen3-VL, Qwen2.5-VL and Qwen2-VL text models, and Gemma 4's text model (dense and MoE). Each is
registered under its text model_type, so its multimodal wrapper imports through config_json._wrapped; Qwen2-VL and
Qwen2.5-VL also register the wrapper type, because their Hub configs are flat (text fields at the top level)."""

from __future__ import annotations

from roofline.importers.hf_decoder import _decoder
from roofline.importers.hf_fields import _Fields
from roofline.importers.hf_parts import (
    _attention,
    _ffn,
    _gemma_local_theta,
    _moe,
    _num_layers,
    _qwen3_moe_ffns,
    _qwen_sliding,
    _rope,
    _sliding,
)
from roofline.importers.hf_pattern import compress_pattern

_MROPE_KEYS = ("mrope_section", "mrope_interleaved")


def _mrope(c: _Fields, default_theta: float, notes: list[str]) -> dict:
    """RoPE of the Qwen VL text models: multimodal RoPE splits each head's rotary pairs into time / height / width
    sections (`mrope_section`); on text all three positions are the token index, so it is plain RoPE. The section
    keys (and a 'mrope' / 'default' type) are dropped from the card's scaling."""
    rope = _rope(c, default_theta)
    scaling = {k: v for k, v in (rope["scaling"] or {}).items() if k not in _MROPE_KEYS}
    if scaling.get("type") in ("mrope", "default"):
        scaling.pop("type")
    if len(scaling) != len(rope["scaling"] or {}):
        notes.append("multimodal RoPE (mrope sections) equals plain RoPE on text tokens")
    return {**rope, "scaling": scaling or None}


# ------------------------------------------------------------------------------------------------ Qwen3.5


def _qwen3_5_mixers(c: _Fields, n: int) -> list[str]:
    """`layer_types` ('linear_attention' = Gated DeltaNet, 'full_attention'), else full attention every
    `full_attention_interval`-th layer (3 DeltaNet : 1 attention by default)."""
    types = c.list("layer_types")
    if types is None:
        every = c.int("full_attention_interval", default=4)
        if every < 1:
            raise c.error("full_attention_interval", f"must be at least 1, got {every}")
        return ["full" if (i + 1) % every == 0 else "deltanet" for i in range(n)]
    if len(types) != n:
        raise c.error("layer_types", f"has {len(types)} entries but num_hidden_layers is {n}")
    bad = sorted({str(t) for t in types if t not in ("linear_attention", "full_attention")})
    if bad:
        raise c.error("layer_types", f"has {bad}; expected linear_attention and full_attention")
    return ["full" if t == "full_attention" else "deltanet" for t in types]


def _deltanet(c: _Fields) -> dict:
    return {"num_key_heads": c.int("linear_num_key_heads"), "num_value_heads": c.int("linear_num_value_heads"),
            "key_head_dim": c.int("linear_key_head_dim"), "value_head_dim": c.int("linear_value_head_dim"),
            "conv_kernel": c.int("linear_conv_kernel_dim", default=4)}


def _qwen3_5_hybrid(c: _Fields, notes: list[str], ffns: list[str], moe: dict | None) -> dict:
    """The Qwen3.5 body: Gated DeltaNet layers (in_proj_qkv [h, 2 nk dk + nv dv], in_proj_z [h, nv dv], in_proj_b
    and in_proj_a [h, nv], conv over the q/k/v channels, A_log and dt_bias [nv], gated RMSNorm [dv], out_proj) with
    gated full attention (q_proj emits queries and a same-size sigmoid gate; per-head QK-norm) every few layers."""
    mixers = _qwen3_5_mixers(c, len(ffns))
    attention = {**_attention(c, qk_norm=True), "output_gate": True}
    arch = _decoder(c, mixers=mixers, ffns=ffns, attention=attention, ffn=_ffn(c) if "dense" in ffns else None,
                    moe=moe, rope=_mrope(c, 10000.0, notes),
                    mtp_layers=c.int("mtp_num_hidden_layers", default=0))
    arch["deltanet"] = _deltanet(c)
    notes.append("linear-attention layers are Gated DeltaNet (constant state)")
    return arch


def _qwen3_5(c: _Fields, notes: list[str]) -> dict:
    """Qwen3.5 dense (Qwen3.5-27B): the hybrid body with a SwiGLU MLP `intermediate_size` wide on every layer."""
    return _qwen3_5_hybrid(c, notes, ["dense"] * _num_layers(c), None)


def _qwen3_5_moe(c: _Fields, notes: list[str]) -> dict:
    """Qwen3.5 MoE (Qwen3.5-35B-A3B, -397B-A17B): the hybrid body with MoE on every layer: `num_experts` SwiGLU
    experts `moe_intermediate_size` wide, top `num_experts_per_tok`, plus one shared expert
    `shared_expert_intermediate_size` wide behind a [hidden, 1] sigmoid gate (not counted)."""
    moe = {**_moe(c, expert_size_keys=("moe_intermediate_size",)), "num_shared_experts": 1}
    notes.append("the shared expert's 1-output gate is not counted")
    return _qwen3_5_hybrid(c, notes, ["moe"] * _num_layers(c), moe)


# ------------------------------------------------------------------------------------------------ Qwen VL


def _qwen3_vl(c: _Fields, notes: list[str]) -> dict:
    """Qwen3-VL text model: Qwen3's dense shapes (GQA, per-head QK-norm, no biases, SwiGLU) with multimodal RoPE;
    untied unless the config ties (the 2B/4B do)."""
    n = _num_layers(c)
    return _decoder(c, mixers=["full"] * n, ffns=["dense"] * n, attention=_attention(c, qk_norm=True),
                    ffn=_ffn(c), rope=_mrope(c, 500000.0, notes))


def _qwen3_vl_moe(c: _Fields, notes: list[str]) -> dict:
    """Qwen3-VL-MoE text model (30B-A3B, 235B-A22B): Qwen3-MoE's shapes (QK-norm, `num_experts` experts
    `moe_intermediate_size` wide, no shared expert; dense on `mlp_only_layers` / off the `decoder_sparse_step` grid)
    with multimodal RoPE."""
    n = _num_layers(c)
    ffns = _qwen3_moe_ffns(c, n)
    return _decoder(c, mixers=["full"] * n, ffns=ffns, attention=_attention(c, qk_norm=True),
                    ffn=_ffn(c) if "dense" in ffns else None,
                    moe=_moe(c, expert_size_keys=("moe_intermediate_size",)), rope=_mrope(c, 500000.0, notes))


def _qwen2_vl(c: _Fields, notes: list[str]) -> dict:
    """Qwen2-VL / Qwen2.5-VL text model: Qwen2's shapes (q/k/v bias, SwiGLU, sliding window only with
    `use_sliding_window`) with multimodal RoPE."""
    n = _num_layers(c)
    flags, window = _sliding(c, n, _qwen_sliding)
    return _decoder(c, mixers=["sliding" if s else "full" for s in flags], ffns=["dense"] * n,
                    attention=_attention(c, qkv_bias=True, window=window), ffn=_ffn(c),
                    rope=_mrope(c, 1_000_000.0, notes))


def _qwen2_vl_wrapper(c: _Fields, notes: list[str]) -> dict:
    """A `qwen2_vl` / `qwen2_5_vl` config: the Hub's flat form (text fields at the top level beside
    `vision_config`) or transformers 5's nested `text_config` (config_json._NESTED_TEXT reads it, with the
    wrapper's top-level tying); either way the text model only."""
    notes.append("a Qwen VL config: its text model only; the vision encoder and projector are not counted")
    return _qwen2_vl(c, notes)


# ------------------------------------------------------------------------------------------------ Gemma 4


def _gemma4_refusals(c: _Fields) -> None:
    """Gemma 4 parts a card cannot express: per-layer embeddings (E2B/E4B: a [vocab, layers x width] table and a
    gate/projection per layer, half of E2B's weights) and KV shared across layers (its later layers own no K/V)."""
    ple = c.int("hidden_size_per_layer_input", default=0) or 0
    if ple:
        raise c.error("hidden_size_per_layer_input", f"is {ple}: Gemma 4 per-layer embeddings (E2B/E4B) are not "
                      "modelled; only configs with 0 (31B, 26B-A4B) import")
    shared = c.int("num_kv_shared_layers", default=0)
    if shared:
        raise c.error("num_kv_shared_layers", f"is {shared}: KV shared across layers is not modelled")


def _gemma4_full_layer(c: _Fields, sliding: list[bool]) -> dict:
    """Head shapes of the full-attention layers: `per_layer_config` overrides (transformers 5 saves), else
    `global_head_dim` (512) and, with `attention_k_eq_v`, `num_global_key_value_heads`."""
    k_eq_v = c.bool("attention_k_eq_v", False)
    head_dim, kv = c.int("head_dim"), c.int("num_key_value_heads")
    per_layer = c.raw("per_layer_config")
    if isinstance(per_layer, dict) and per_layer:
        overrides = {}
        for key, value in per_layer.items():
            if not (str(key).isdigit() and int(key) < len(sliding) and isinstance(value, dict)):
                raise c.error("per_layer_config", f"has entry {key!r}: {value!r}; expected layer index -> fields")
            if sliding[int(key)] or set(value) - {"head_dim", "num_key_value_heads"}:
                raise c.error("per_layer_config", f"overrides layer {key} with {value!r}; only full-attention "
                              "head_dim / num_key_value_heads overrides are modelled")
            overrides[int(key)] = (value.get("head_dim", head_dim), value.get("num_key_value_heads", kv))
        shapes = {overrides.get(i, (head_dim, kv)) for i, s in enumerate(sliding) if not s}
        if len(shapes) != 1:
            raise c.error("per_layer_config", f"gives full-attention layers different shapes {sorted(shapes)}")
        (head_dim, kv), = shapes
    elif per_layer is None or per_layer == {}:
        global_kv = c.int("num_global_key_value_heads", default=None) if k_eq_v else None
        head_dim, kv = c.int("global_head_dim", default=512), global_kv or kv
    else:
        raise c.error("per_layer_config", f"must be a mapping of layer index to fields, got {per_layer!r}")
    return {"mixer": "full", "num_kv_heads": kv, "head_dim": head_dim, "k_eq_v": k_eq_v}


def _gemma4_sliding(c: _Fields, n: int) -> list[bool]:
    """Without `layer_types`: 5 sliding : 1 full."""
    return [(i + 1) % 6 != 0 for i in range(n)]


def _gemma4_moe(c: _Fields, notes: list[str]) -> dict:
    """26B-A4B's `enable_moe_block`: beside the dense GeGLU MLP (`intermediate_size`, every token: counted as one
    shared expert) run `num_experts` GeGLU experts `moe_intermediate_size` wide, top `top_k_experts`. The router's
    [experts] per-expert scale is counted as a router bias, its [hidden] input scale with the norms."""
    notes.append("the dense MLP beside the experts is the card's shared expert; router per_expert_scale = "
                 "router_bias, router input scale counted with the norms")
    return {"num_experts": c.int("num_experts"), "experts_per_token": c.int("top_k_experts"),
            "expert_intermediate_size": c.int("moe_intermediate_size"), "num_shared_experts": 1,
            "shared_expert_intermediate_size": c.int("intermediate_size"), "gated": True, "expert_bias": False,
            "router_bias": True, "latent_size": None}


def _gemma4(c: _Fields, notes: list[str]) -> dict:
    """Gemma 4 text model (31B, 26B-A4B): 5 sliding : 1 full layers; sliding layers GQA `head_dim` wide, full
    layers `global_head_dim` (512) wide with `num_global_key_value_heads` and keys doubling as values
    (`attention_k_eq_v`: no v_proj, one cache tensor); QK-norm (the v-norm has no weights), four norms per layer,
    GeGLU, tied embeddings; the MoE variant adds experts beside the MLP and four more [hidden] weights per layer
    (three norms, the router scale)."""
    _gemma4_refusals(c)
    n = _num_layers(c)
    flags, window = _sliding(c, n, _gemma4_sliding)
    flags = flags[:-1] + [False]  # transformers forces the last layer to full attention
    moe = _gemma4_moe(c, notes) if c.bool("enable_moe_block", False) else None
    ffns = ["moe" if moe else "dense"] * n
    attention = _attention(c, qk_norm=True, window=window)
    arch = _decoder(c, mixers=["sliding" if s else "full" for s in flags], ffns=ffns, attention=attention,
                    ffn=_ffn(c), moe=moe, rope=_rope(c, 1_000_000.0), tie_default=True,
                    norms_per_layer=8 if moe else 4)
    arch["ffn"] = _ffn(c)  # MoE layers too: the experts' activation is the MLP's GeGLU
    full = _gemma4_full_layer(c, flags)
    if (full["head_dim"], full["num_kv_heads"], full["k_eq_v"]) != (attention["head_dim"],
                                                                      attention["num_kv_heads"], False):
        arch["layer_types"] = {"G": full}
        arch["layer_pattern"] = compress_pattern("".join("S" if s else "G" for s in flags))
    notes.append(f"sliding layers use rope theta {_gemma_local_theta(c, 10000.0):g} (the card's rope section is the "
                 "full-attention layers')")
    return arch


# Gemma4TextConfig defaults for fields a config may leave out (hidden_size_per_layer_input: its 256 means per-layer
# embeddings, which the importer refuses by name)
GEMMA4_DEFAULTS = {"vocab_size": 262144, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
                   "max_position_embeddings": 131072, "tie_word_embeddings": True, "sliding_window": 512,
                   "hidden_size_per_layer_input": 256, "num_attention_heads": 8, "num_key_value_heads": 4}

FAMILIES: dict = {
    "qwen3_5_text": ("qwen", _qwen3_5),
    "qwen3_5_moe_text": ("qwen", _qwen3_5_moe),
    "qwen3_vl_text": ("qwen", _qwen3_vl),
    "qwen3_vl_moe_text": ("qwen", _qwen3_vl_moe),
    "qwen2_5_vl_text": ("qwen", _qwen2_vl),
    "qwen2_vl_text": ("qwen", _qwen2_vl),
    "qwen2_5_vl": ("qwen", _qwen2_vl_wrapper),  # flat Hub configs: text fields beside vision_config
    "qwen2_vl": ("qwen", _qwen2_vl_wrapper),
    "gemma4_text": ("gemma", _gemma4),
}
DEFAULTS: dict = {"gemma4_text": GEMMA4_DEFAULTS}
ALIASES: dict = {}
