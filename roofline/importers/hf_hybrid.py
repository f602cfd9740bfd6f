"""config.json families that mix attention with recurrent layers (Mamba-2, Gated DeltaNet): Nemotron-H, Qwen3-Next,
Jamba, Granite 4 hybrid, Falcon-H1."""

from __future__ import annotations

from roofline.importers.hf_decoder import _decoder
from roofline.importers.hf_fields import _Fields
from roofline.importers.hf_parts import (
    BAMBA_MAMBA_KEYS,
    _NEMOTRON_BLOCKS,
    _activation,
    _attention,
    _ffn,
    _mamba2,
    _moe,
    _nemotron_letters,
    _num_layers,
    _qwen3_moe_ffns,
    _rope,
)


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
    arch["deltanet"] = {"num_key_heads": c.int("linear_num_key_heads"),
                        "num_value_heads": c.int("linear_num_value_heads"),
                        "key_head_dim": c.int("linear_key_head_dim"), "value_head_dim": c.int("linear_value_head_dim"),
                        "conv_kernel": c.int("linear_conv_kernel_dim", default=4)}
    notes.append("linear-attention layers are Gated DeltaNet (constant state); the shared expert's 1-output gate is "
                 "not counted")
    return arch


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
