"""config.json families that keep their shapes in nested sections or under their own names: MPT and DBRX
(`attn_config`, `ffn_config`), ChatGLM (ChatGLM2/3, GLM-4 before transformers' `glm`) and StarCoder 1
(`gpt_bigcode`: GPT-2's names with multi-query attention)."""

from __future__ import annotations

from roofline.importers.hf_classic import _gpt2
from roofline.importers.hf_decoder import _decoder
from roofline.importers.hf_fields import _Fields
from roofline.importers.hf_parts import _attention, _ffn, _num_layers, _rope


def _with_sections(c: _Fields, *sections: str) -> _Fields:
    """`c` with the fields of its nested `sections` (MPT's and DBRX's attn_config / ffn_config) read as top-level
    ones; the nested names (kv_n_heads, moe_num_experts, ...) do not collide with the top-level ones."""
    flat = dict(c.data)
    for name in sections:
        section = c.raw(name)
        if section is None:
            continue
        if not isinstance(section, dict):
            raise c.error(name, f"must be an object, got {section!r}")
        flat.update(section)
    return _Fields(flat, c.source, c.prefix, c.defaults, c.aliases)


def _mpt_kv_heads(c: _Fields) -> int:
    """MPT's attn_type: multi-head (default), multi-query (one KV head) or grouped-query (`kv_n_heads`)."""
    kind, heads = c.str("attn_type", default="multihead_attention"), c.int("num_attention_heads")
    if kind == "multiquery_attention":
        return 1
    if kind == "grouped_query_attention":
        return c.int("kv_n_heads")
    if kind != "multihead_attention":
        raise c.error("attn_type", "must be multihead_attention, multiquery_attention or grouped_query_attention, "
                      f"got {kind!r}")
    return heads


def _mpt(c: _Fields, notes: list[str]) -> dict:
    """MPT: a fused Wqkv and a non-gated GELU MLP `expansion_ratio` x d_model wide, no biases unless `no_bias` is
    false, LayerNorms, tied embeddings; ALiBi (no weights) unless attn_config turns it off for learned positions."""
    c = _with_sections(c, "attn_config")
    n, hidden, bias = _num_layers(c), c.int("hidden_size"), not c.bool("no_bias", True)
    attention = {**_attention(c, qkv_bias=bias), "num_kv_heads": _mpt_kv_heads(c), "o_bias": bias}
    ffn = _ffn(c, gated=False, activation="gelu", bias=bias, width=c.int("expansion_ratio", default=4) * hidden)
    alibi = c.bool("alibi", True)
    if not alibi and c.bool("learned_pos_emb", True):
        notes.append("learned position embeddings (max_seq_len x d_model) not counted")
    return _decoder(c, mixers=["full"] * n, ffns=["dense"] * n, attention=attention, ffn=ffn,
                    rope=_rope(c, 10000.0) if c.bool("rope", False) else None, tie_default=True)


def _dbrx(c: _Fields, notes: list[str]) -> dict:
    """DBRX: every layer MoE, `moe_num_experts` gated experts `ffn_hidden_size` wide (w1, v1, w2), `moe_top_k` a
    token; GQA with `kv_n_heads`, a fused Wqkv without biases; LayerNorms without biases; an untied lm_head."""
    c = _with_sections(c, "attn_config", "ffn_config")
    n = _num_layers(c)
    attention = {**_attention(c, qkv_bias=False), "num_kv_heads": c.int("kv_n_heads", default=1)}
    act = c.raw("ffn_act_fn")
    moe = {"num_experts": c.int("moe_num_experts"), "experts_per_token": c.int("moe_top_k"),
           "expert_intermediate_size": c.int("ffn_hidden_size"), "num_shared_experts": 0,
           "shared_expert_intermediate_size": None, "gated": True, "expert_bias": False, "router_bias": False,
           "latent_size": None}
    if isinstance(act, dict) and act.get("name", "silu") != "silu":
        notes.append(f"experts use {act['name']} (counted as SwiGLU)")
    return _decoder(c, mixers=["full"] * n, ffns=["moe"] * n, attention=attention, ffn=None, moe=moe,
                    rope=_rope(c, 10000.0))


def _chatglm_kv_heads(c: _Fields) -> int:
    if c.bool("multi_query_attention", False):
        return c.int("multi_query_group_num")
    return c.int("num_attention_heads")


def _chatglm(c: _Fields, notes: list[str]) -> dict:
    """ChatGLM2/3 and GLM-4 in THUDM's own code (`chatglm`): GQA over `multi_query_group_num` KV heads of
    `kv_channels`, q/k/v bias (`add_qkv_bias`), other projections biased only with `add_bias_linear`, a SwiGLU MLP
    `ffn_hidden_size` wide, RMSNorm, RoPE on half of each head (no weights), an untied output layer."""
    n, bias = _num_layers(c), c.bool("add_bias_linear", False)
    attention = {**_attention(c, qkv_bias=c.bool("add_qkv_bias", False)), "num_kv_heads": _chatglm_kv_heads(c),
                 "o_bias": bias}
    ffn = _ffn(c, gated=True, activation="silu", bias=bias)
    return _decoder(c, mixers=["full"] * n, ffns=["dense"] * n, attention=attention, ffn=ffn,
                    rope=_rope(c, 10000.0 * c.float("rope_ratio", default=1.0)))


def _gpt_bigcode(c: _Fields, notes: list[str]) -> dict:
    """StarCoder 1 / SantaCoder (`gpt_bigcode`): GPT-2's biased blocks and learned positions with multi-query
    attention (one KV head, `multi_query`, default on)."""
    arch = _gpt2(c, notes)
    if c.bool("multi_query", True):
        arch["attention"]["num_kv_heads"] = 1
    return arch


# transformers' attribute_map (and THUDM's config names): each family's own names for the standard fields
MPT_NAMES = {"hidden_size": "d_model", "num_attention_heads": "n_heads", "num_hidden_layers": "n_layers",
             "max_position_embeddings": "max_seq_len"}
CHATGLM_NAMES = {"num_hidden_layers": "num_layers", "vocab_size": "padded_vocab_size",
                 "max_position_embeddings": "seq_length", "intermediate_size": "ffn_hidden_size",
                 "head_dim": "kv_channels"}
