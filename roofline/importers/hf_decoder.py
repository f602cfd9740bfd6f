"""The dense-decoder architecture every config.json family builds on: vocab, hidden, layers, context, tying and
the per-layer pattern."""

from __future__ import annotations

from typing import Any

from roofline.cards.schema import MAX_CONTEXT
from roofline.importers.hf_fields import _MISSING, _Fields
from roofline.importers.hf_parts import _attention, _ffn, _moe, _num_layers, _rope, _sliding
from roofline.importers.hf_pattern import _pattern


def _decoder(c: _Fields, *, mixers: list[str], ffns: list[str], attention: dict | None, ffn: dict | None,
             moe: dict | None = None, mla: dict | None = None, mamba2: dict | None = None,
             rope: dict | None = None, tie_default: bool = False, norms_per_layer: int = 2,
             max_context_default: Any = _MISSING, mtp_layers: int = 0) -> dict:
    """The shared architecture: vocab, hidden, layers, context, tying, and the per-layer pattern."""
    pattern, custom, first_dense = _pattern(mixers, ffns, moe is not None)
    if moe is not None:
        moe = {**moe, "first_dense_layers": first_dense}
    if "dense" not in ffns:
        ffn = None  # MoE-only models: `intermediate_size` is the expert width or unused
    return {
        "vocab_size": c.int("vocab_size"),
        "hidden_size": c.int("hidden_size"),
        "num_layers": len(mixers),
        "attention": attention,
        "mla": mla,
        "ffn": ffn,
        "moe": moe,
        "mamba2": mamba2,
        "tie_embeddings": c.bool("tie_word_embeddings", tie_default),
        "max_context": _max_context(c, max_context_default),
        "rope": rope,
        "norms_per_layer": norms_per_layer,
        "layer_pattern": pattern,
        "layer_types": custom,
        "mtp_layers": mtp_layers,
    }


def _dense_family(c: _Fields, *, sliding=None, qkv_bias=None, qk_norm=False, default_theta=10000.0,
                  norms_per_layer=2, tie_default=False, max_context_default: Any = _MISSING) -> dict:
    n = _num_layers(c)
    flags, window = _sliding(c, n, sliding)
    return _decoder(
        c,
        mixers=["sliding" if s else "full" for s in flags],
        ffns=["dense"] * n,
        attention=_attention(c, qkv_bias=qkv_bias, qk_norm=qk_norm, window=window),
        ffn=_ffn(c),
        rope=_rope(c, default_theta),
        norms_per_layer=norms_per_layer,
        tie_default=tie_default,
        max_context_default=max_context_default,
    )


def _moe_family(c: _Fields, *, sliding=None, qk_norm=False, default_theta=10000.0) -> dict:
    """Every layer MoE with experts `intermediate_size` wide (a shared expert where the config gives its width)."""
    n = _num_layers(c)
    flags, window = _sliding(c, n, sliding)
    return _decoder(c, mixers=["sliding" if s else "full" for s in flags], ffns=["moe"] * n,
                    attention=_attention(c, qk_norm=qk_norm, window=window), ffn=None,
                    moe=_moe(c, expert_size_keys=("intermediate_size",)), rope=_rope(c, default_theta))


def _max_context(c: _Fields, default: Any) -> int | None:
    """`max_position_embeddings`; with YaRN rope scaling, the context it reaches when longer (original x factor), as
    vLLM derives max_model_len (vllm/config/model.py `_get_and_verify_max_len`: for yarn, the original length times
    the factor) and as Qwen2.5's model cards enable 128K (max_position_embeddings 32768, factor 4). A YaRN entry that
    names no original length keeps the stated one: DeepSeek-V2-Lite's 163840 already is 4096 x its factor 40."""
    n = c.int("max_position_embeddings", default=default)
    rs = c.raw("rope_scaling")
    if n is None or not isinstance(rs, dict) or rs.get("rope_type", rs.get("type")) != "yarn":
        return n
    factor, original = rs.get("factor"), rs.get("original_max_position_embeddings")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and 1 <= v <= MAX_CONTEXT
               for v in (factor, original)):
        return n
    return max(n, min(int(original * factor), MAX_CONTEXT))
