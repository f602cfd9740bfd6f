"""The engine's model as a Hugging Face transformers model: same shapes, same weights, for parity tests and
side-by-side benchmarks.

    cfg = hf_config(card, "llama")                 # LlamaConfig / Qwen2Config / MixtralConfig from the card's fields
    sd = to_hf_state_dict(eng.model, "llama")      # the engine's weights under transformers' parameter names
    hf = load_into_hf(eng.model, eng.card)         # both at once: a LlamaForCausalLM holding the engine's weights

Families: "llama" (LlamaForCausalLM), "qwen2" (Qwen2ForCausalLM: q/k/v biases, none on o) and "mixtral"
(MixtralForCausalLM: every layer a top-k MoE). `family=None` picks one from the card. transformers is imported
inside the functions, so the engine imports without it.
"""

from __future__ import annotations

import torch
from roofline.engine.model.transformer import RMS_EPS, EngineError, Transformer

from roofline.cards.model import ModelCard

FAMILIES = ("llama", "qwen2", "mixtral")
_CLASSES = {"llama": ("LlamaConfig", "LlamaForCausalLM"), "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
            "mixtral": ("MixtralConfig", "MixtralForCausalLM")}


def guess_family(card: ModelCard) -> str:
    arch = card.architecture
    if arch.moe is not None:
        return "mixtral"
    return "qwen2" if arch.attention is not None and arch.attention.qkv_bias and not arch.attention.o_bias else "llama"


def _check(card: ModelCard, family: str) -> None:
    """Refuse cards the transformers class cannot express exactly (rather than export a different model)."""
    if family not in FAMILIES:
        raise EngineError(f"family {family!r}: use one of {', '.join(FAMILIES)}")
    arch, why = card.architecture, []
    att = arch.attention
    if att is None or arch.mla is not None or arch.mamba2 is not None:
        why.append("only plain GQA attention layers")
    if set(arch.pattern_letters()) != {"A"} or arch.layer_types:
        why.append("every layer full attention + FFN (no layer pattern)")
    if att is not None and (att.sliding_window is not None or att.qk_norm or att.sinks):
        why.append("no sliding window, QK-norm or attention sinks")
    if arch.norms_per_layer != 2:
        why.append("two norms per layer")
    if arch.rope is None or arch.rope.partial_rotary_factor != 1.0:
        why.append("full RoPE")
    if att is not None and family == "qwen2" and att.o_bias:
        why.append("no o_proj bias in qwen2")
    if att is not None and family != "qwen2" and att.qkv_bias != att.o_bias:
        why.append(f"{family}: q/k/v/o biases all on or all off")
    if family == "mixtral":
        m = arch.moe
        if m is None or m.first_dense_layers:
            why.append("mixtral: an MoE FFN in every layer")
        elif (m.num_shared_experts or m.latent_size or m.expert_bias or m.router_bias or not m.gated
              or (arch.ffn is not None and arch.ffn.activation != "silu")):
            why.append("mixtral: gated SiLU experts, no shared experts, biases or latent width")
    else:
        f = arch.ffn
        if arch.moe is not None or f is None:
            why.append(f"{family}: a dense FFN in every layer")
        elif not f.gated or f.activation not in ("silu", "gelu_tanh", "gelu"):
            why.append(f"{family}: a gated FFN (SwiGLU/GeGLU)")
        elif family == "qwen2" and f.bias:
            why.append("qwen2: no FFN bias")
    if why:
        raise EngineError(f"{card.name} cannot be exported as {family}: needs " + "; ".join(why))


def _rope_parameters(card: ModelCard) -> dict:
    rope = card.architecture.rope
    out: dict = {"rope_type": "default", "rope_theta": float(rope.theta)}
    for key, value in (rope.scaling or {}).items():
        if key in ("type", "rope_type"):
            out["rope_type"] = value
        elif key == "original_max_position":
            out["original_max_position_embeddings"] = int(value)
        else:
            out[key] = value
    return out


def hf_config(card: ModelCard, family: str | None = None):
    """A transformers config with the card's shapes; rms_norm_eps = the engine's RMS_EPS; no EOS/BOS so greedy
    generation runs the full length like the engine does."""
    import transformers

    family = family or guess_family(card)
    _check(card, family)
    arch, att = card.architecture, card.architecture.attention
    kw = {"vocab_size": arch.vocab_size, "hidden_size": arch.hidden_size, "num_hidden_layers": arch.num_layers,
          "num_attention_heads": att.num_heads, "num_key_value_heads": att.num_kv_heads, "head_dim": att.head_dim,
          "max_position_embeddings": arch.max_context, "rms_norm_eps": RMS_EPS,
          "rope_parameters": _rope_parameters(card), "tie_word_embeddings": arch.tie_embeddings,
          "bos_token_id": None, "eos_token_id": None, "pad_token_id": None}
    if family == "mixtral":
        m = arch.moe
        kw.update(intermediate_size=m.expert_intermediate_size, num_local_experts=m.num_experts,
                  num_experts_per_tok=m.experts_per_token, hidden_act="silu", sliding_window=None)
    else:
        f = arch.ffn
        kw.update(intermediate_size=f.intermediate_size,
                  hidden_act={"silu": "silu", "gelu_tanh": "gelu_pytorch_tanh", "gelu": "gelu"}[f.activation])
        if family == "llama":
            kw.update(attention_bias=att.qkv_bias, mlp_bias=f.bias)
        else:
            kw.update(use_sliding_window=False, sliding_window=None, max_window_layers=arch.num_layers,
                      layer_types=["full_attention"] * arch.num_layers)
    return getattr(transformers, _CLASSES[family][0])(**kw)


def to_hf_state_dict(model: Transformer, family: str | None = None, expert_layout: str = "fused") -> dict:
    """The engine's weights under transformers' names (tensors are views of the engine's where possible).

    Fused QKV is split into q_proj/k_proj/v_proj, fused [gate; up] into gate_proj/up_proj. Mixtral experts:
    expert_layout "fused" (transformers >= 5: mlp.gate, mlp.experts.gate_up_proj [E, 2I, h] = [gate; up] and
    mlp.experts.down_proj [E, h, I], the engine's own layout) or "per_expert" (transformers 4.x:
    block_sparse_moe.gate, block_sparse_moe.experts.{j}.w1 (gate) / w3 (up) / w2 (down)).
    """
    family = family or guess_family(model.card)
    _check(model.card, family)
    sd: dict[str, torch.Tensor] = {"model.embed_tokens.weight": model.embed.weight.detach()}
    for i, block in enumerate(model.blocks):
        p, a = f"model.layers.{i}.", block.mixer
        q_end, k_end = a.heads * a.head_dim, (a.heads + a.kv_heads) * a.head_dim
        w = a.qkv.weight.detach()
        sd.update({p + "self_attn.q_proj.weight": w[:q_end], p + "self_attn.k_proj.weight": w[q_end:k_end],
                   p + "self_attn.v_proj.weight": w[k_end:], p + "self_attn.o_proj.weight": a.o.weight.detach()})
        if a.qkv.bias is not None or family == "qwen2":
            b = a.qkv.bias.detach() if a.qkv.bias is not None else torch.zeros(w.shape[0], dtype=w.dtype)
            sd.update({p + "self_attn.q_proj.bias": b[:q_end], p + "self_attn.k_proj.bias": b[q_end:k_end],
                       p + "self_attn.v_proj.bias": b[k_end:]})
        if a.o.bias is not None:
            sd[p + "self_attn.o_proj.bias"] = a.o.bias.detach()
        sd[p + "input_layernorm.weight"] = block.norm_mixer.weight.detach()
        sd[p + "post_attention_layernorm.weight"] = block.norm_ffn.weight.detach()
        ffn = block.ffn
        if family == "mixtral":
            w_up, w_down = ffn.w_up.detach(), ffn.w_down.detach()
            if expert_layout == "fused":
                sd.update({p + "mlp.gate.weight": ffn.router.weight.detach(),
                           p + "mlp.experts.gate_up_proj": w_up, p + "mlp.experts.down_proj": w_down})
            elif expert_layout == "per_expert":
                inner = w_down.shape[-1]
                sd[p + "block_sparse_moe.gate.weight"] = ffn.router.weight.detach()
                for j in range(w_up.shape[0]):
                    e = f"{p}block_sparse_moe.experts.{j}."
                    sd.update({e + "w1.weight": w_up[j, :inner], e + "w3.weight": w_up[j, inner:],
                               e + "w2.weight": w_down[j]})
            else:
                raise ValueError(f"expert_layout {expert_layout!r}: 'fused' or 'per_expert'")
        else:
            inner = ffn.down.weight.shape[1]
            up = ffn.up.weight.detach()
            sd.update({p + "mlp.gate_proj.weight": up[:inner], p + "mlp.up_proj.weight": up[inner:],
                       p + "mlp.down_proj.weight": ffn.down.weight.detach()})
            if ffn.up.bias is not None:
                sd.update({p + "mlp.gate_proj.bias": ffn.up.bias.detach()[:inner],
                           p + "mlp.up_proj.bias": ffn.up.bias.detach()[inner:],
                           p + "mlp.down_proj.bias": ffn.down.bias.detach()})
    sd["model.norm.weight"] = model.norm.weight.detach()
    sd["lm_head.weight"] = (model.embed.weight if model.lm_head is None else model.lm_head.weight).detach()
    return sd


def load_into_hf(model: Transformer, card: ModelCard | None = None, family: str | None = None,
                 attn_implementation: str = "sdpa", share: bool = False):
    """A transformers *ForCausalLM with the engine model's weights, in the engine's dtype, in eval mode.

    share=True makes the transformers parameters views of the engine's tensors (no second copy of the weights)."""
    import transformers

    card = card or model.card
    family = family or guess_family(card)
    config = hf_config(card, family)
    config._attn_implementation = attn_implementation
    dtype = model.embed.weight.dtype
    hf = getattr(transformers, _CLASSES[family][1])(config).to(dtype)
    names = set(hf.state_dict())
    layout = "per_expert" if any(".block_sparse_moe.experts." in k for k in names) else "fused"
    sd = to_hf_state_dict(model, family, layout)
    missing, extra = names - set(sd), set(sd) - names
    if extra or (missing - {"lm_head.weight"}):
        raise EngineError(f"transformers {transformers.__version__} {type(hf).__name__} names differ from the export: "
                          f"missing {sorted(missing)[:5]}, unexpected {sorted(extra)[:5]}")
    sd = {k: v for k, v in sd.items() if k in names}
    if share:
        hf.load_state_dict(sd, strict=True, assign=True)
        if config.tie_word_embeddings:
            hf.tie_weights()
    else:
        with torch.no_grad():
            hf.load_state_dict(sd, strict=True)
    return hf.eval()
