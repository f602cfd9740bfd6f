"""Parameter counts per component, derived from a card's shapes: the one place weights are counted.

`weight_bytes` (memory budget, predictor, engine allocator) and the published-count test all call these.
"""

from __future__ import annotations

import functools
from collections import Counter

from roofline.cards.formats import weight_format
from roofline.cards.model import Architecture, ModelCard, parse_weight_spec
from roofline.sizing.layers import Layer, norms_in_layer, resolve_layers


def qkv_widths(arch: Architecture, layer: Layer) -> tuple[int, int]:
    """(query, projection output) widths of the fused QKV projection: queries, keys and values (K = V layers
    project one of the two), and Qwen3-Next's output gate (a second q_out half of q_proj)."""
    q_out = layer.num_heads * layer.head_dim
    kv_out = layer.num_kv_heads * layer.head_dim * (1 if layer.k_eq_v else 2)
    return q_out, q_out * (2 if arch.attention.output_gate else 1) + kv_out


def qkv_params(arch: Architecture, layer: Layer) -> int:
    """The fused QKV projection, [hidden, out], with biases on queries, keys and values where the card has them."""
    q_out, out = qkv_widths(arch, layer)
    biased = out - (q_out if arch.attention.output_gate else 0)
    return arch.hidden_size * out + (biased if arch.attention.qkv_bias else 0)


def mla_q_params(arch: Architecture) -> int:
    """MLA's query path: Wq_a [hidden, q_lora] and Wq_b [q_lora, heads x (nope + rope)], or one Wq without LoRA."""
    m, h, heads = arch.mla, arch.hidden_size, arch.attention.num_heads
    qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim
    return (h * m.q_lora_rank + m.q_lora_rank * heads * qk_head) if m.q_lora_rank else h * heads * qk_head


def _attention_params(arch: Architecture, layer: Layer) -> int:
    att, h = arch.attention, arch.hidden_size
    q_out, _ = qkv_widths(arch, layer)
    n = qkv_params(arch, layer) + q_out * h  # QKV, Wo [q_out, hidden]
    n += h if att.o_bias else 0
    n += 2 * layer.head_dim if att.qk_norm else 0
    n += layer.num_heads if att.sinks else 0
    return n


def _mla_params(arch: Architecture) -> int:
    m, h, heads = arch.mla, arch.hidden_size, arch.attention.num_heads
    n = mla_q_params(arch) + (m.q_lora_rank or 0)  # the query path and its LoRA norm
    n += h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank  # Wkv_a (latent + shared rope key), kv norm
    n += m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)  # Wkv_b
    if m.indexer:  # DSA lightning indexer (V3.2): wq_b [q_lora, n x d], wk [hidden, d], k LayerNorm, weights_proj
        ix = m.indexer
        n += (m.q_lora_rank or h) * ix.num_heads * ix.head_dim + h * ix.head_dim + 2 * ix.head_dim + h * ix.num_heads
    return n + heads * m.v_head_dim * h  # Wo


def compressed_q_params(arch: Architecture, layer: Layer) -> int:
    """DeepSeek-V4's query path: wq_a [q_lora, hidden], wq_b [heads x head_dim, q_lora]."""
    c = arch.compressed
    return arch.hidden_size * c.q_lora_rank + c.q_lora_rank * layer.num_heads * layer.head_dim


def compressed_o_params(arch: Architecture, layer: Layer) -> int:
    """DeepSeek-V4's grouped output: wo_a [o_groups x o_lora, heads x head_dim / o_groups], wo_b [h, o_groups x o_lora]."""
    c, heads, hd = arch.compressed, layer.num_heads, layer.head_dim
    return c.o_groups * c.o_lora_rank * (heads * hd // c.o_groups) + arch.hidden_size * c.o_groups * c.o_lora_rank


def _compressed_params(arch: Architecture, layer: Layer) -> int:
    """DeepSeek-V4 attention (tensor shapes of the DeepSeek-V4-Pro checkpoint, [out, in]):
    wq_a [q_lora, h], q_norm, wq_b [heads x head_dim, q_lora]; wkv [head_dim, h] (one K=V head), kv_norm;
    grouped output wo_a [o_groups x o_lora, heads x head_dim / o_groups], wo_b [h, o_groups x o_lora]; attn_sink [heads];
    compressor wkv + wgate [w, h] with w = head_dim (HCA) or 2 x head_dim (CSA: overlapping groups), ape [ratio, w],
    norm [head_dim]; CSA indexer: wq_b [n x d, q_lora], weights_proj [n, h], its own compressor (w = 2d) and norm [d]."""
    c, h, heads, hd = arch.compressed, arch.hidden_size, layer.num_heads, layer.head_dim
    n = compressed_q_params(arch, layer) + c.q_lora_rank  # wq_a, wq_b and q_norm
    n += h * hd + hd
    n += compressed_o_params(arch, layer) + heads
    width = hd * (2 if layer.indexer else 1)
    n += 2 * h * width + layer.compress_ratio * width + hd
    if layer.indexer:
        ix = c.indexer
        n += c.q_lora_rank * ix.num_heads * ix.head_dim + h * ix.num_heads
        n += 2 * h * 2 * ix.head_dim + layer.compress_ratio * 2 * ix.head_dim + ix.head_dim
    return n


def _deltanet_params(arch: Architecture) -> int:
    """Gated DeltaNet (Qwen3-Next): in_proj_qkvz [h, 2 nk dk + 2 nv dv], in_proj_ba [h, 2 nv] (beta, decay gate),
    depthwise conv [conv channels, kernel] (no bias), A_log + dt_bias [nv], gated RMSNorm [dv], out_proj [nv dv, h]."""
    d, h = arch.deltanet, arch.hidden_size
    kd, vd = d.num_key_heads * d.key_head_dim, d.num_value_heads * d.value_head_dim
    n = h * (2 * kd + 2 * vd) + h * 2 * d.num_value_heads
    n += d.conv_channels * d.conv_kernel + 2 * d.num_value_heads + d.value_head_dim
    return n + vd * h


def _mamba1_params(arch: Architecture) -> int:
    """Mamba-1 (Jamba): in_proj [h, 2 d_inner], conv1d [d_inner, kernel] + bias, x_proj [d_inner, dt_rank + 2N],
    dt_proj [dt_rank, d_inner] + bias, A_log [d_inner, N], D [d_inner], out_proj [d_inner, h] (+ dt/B/C norms)."""
    m, h = arch.mamba1, arch.hidden_size
    n = h * 2 * m.d_inner + m.d_inner * (m.conv_kernel + 1)
    n += m.d_inner * (m.dt_rank + 2 * m.state_size) + m.dt_rank * m.d_inner + m.d_inner
    n += m.d_inner * m.state_size + m.d_inner + m.d_inner * h
    return n + ((m.dt_rank + 2 * m.state_size) if m.inner_norms else 0)


def _mamba2_params(arch: Architecture) -> int:
    m, h = arch.mamba2, arch.hidden_size
    d_in, gs = m.d_inner, m.n_groups * m.state_size
    n = h * (2 * d_in + 2 * gs + m.num_heads)  # in_proj -> z, x, B, C, dt
    n += (d_in + 2 * gs) * (m.conv_kernel + 1)  # depthwise conv1d weight + bias
    n += 3 * m.num_heads + (d_in if m.gated_norm else 0)  # A_log, D, dt_bias; gated RMSNorm
    return n + d_in * h  # out_proj


def mlp_activation_width(inner: int, gated: bool) -> int:
    """Values per token an MLP writes between its matmuls: gate and up outputs and their product (gated), or the up
    output and its activation."""
    return inner * (3 if gated else 2)


def mlp_params(hidden: int, inner: int, gated: bool, bias: bool = False) -> int:
    """One MLP: up (and gate) [hidden, inner] and down [inner, hidden], with optional biases."""
    mats = 3 if gated else 2
    n = mats * hidden * inner
    return n + ((mats - 1) * inner + hidden if bias else 0)


def _layer_params(arch: Architecture, layer: Layer) -> Counter:
    c: Counter = Counter()
    h = arch.hidden_size
    if layer.is_attention:
        c["attention"] += _attention_params(arch, layer)
    elif layer.mixer == "mla":
        c["attention"] += _mla_params(arch)
    elif layer.mixer == "compressed":
        c["attention"] += _compressed_params(arch, layer)
    if layer.has_mamba2:
        c["mamba"] += _mamba2_params(arch)
    elif layer.mixer == "mamba1":  # recurrent mixers share the 'mamba' component (one weight format)
        c["mamba"] += _mamba1_params(arch)
    elif layer.mixer == "deltanet":
        c["mamba"] += _deltanet_params(arch)
    if layer.ffn == "dense":
        f = arch.ffn
        c["ffn"] += mlp_params(h, f.intermediate_size, f.gated, f.bias)
    elif layer.ffn == "moe":
        e = arch.moe
        width = e.latent_size or h
        c["router"] += h * e.num_experts + (e.num_experts if e.router_bias else 0)
        c["experts"] += e.num_experts * mlp_params(width, e.expert_intermediate_size, e.gated, e.expert_bias)
        if e.latent_size:
            c["experts_shared_io"] += 2 * h * e.latent_size  # hidden->latent and latent->hidden, used by every token
        if e.num_shared_experts:
            inner = e.shared_expert_intermediate_size or e.num_shared_experts * e.expert_intermediate_size
            c["shared_experts"] += mlp_params(h, inner, e.gated)
    c["norms"] += h * norms_in_layer(arch, layer)
    return c


def param_counts(card: ModelCard | Architecture) -> dict[str, int]:
    """Total parameters per component of the main forward pass (MTP modules excluded; see `mtp_params`)."""
    arch = card.architecture if isinstance(card, ModelCard) else card
    c: Counter = Counter()
    for layer in resolve_layers(arch):
        c.update(_layer_params(arch, layer))
    c["embedding"] = arch.vocab_size * arch.hidden_size
    c["lm_head"] = 0 if arch.tie_embeddings else arch.vocab_size * arch.hidden_size
    c["norms"] += arch.hidden_size  # final norm
    return _fold(c)


def active_param_counts(card: ModelCard | Architecture) -> dict[str, float]:
    """Parameters active per token: routed experts scaled by experts_per_token / num_experts. The input embedding
    is counted whole, as most published 'active' figures do (gpt-oss's do not: `params.active_excludes_embedding`);
    what a decode step *reads* of it (one row per token) is the operator graph's business (roofline/ops.py)."""
    arch = card.architecture if isinstance(card, ModelCard) else card
    counts: dict[str, float] = dict(param_counts(arch))
    if arch.moe is not None:
        counts["experts"] = counts["experts"] * arch.moe.experts_per_token / arch.moe.num_experts
    return counts


def published_active_basis(card: ModelCard) -> float:
    """Derived active parameters counted the way the card's published active figure counts them."""
    active, counts = active_params(card), param_counts(card)
    if card.params.active_excludes_embedding:
        active -= counts["embedding"]
    if card.params.active_excludes_lm_head:
        active -= counts["lm_head"]
    return active


def _fold(c: Counter) -> dict[str, int]:
    """Latent-MoE projections are charged to 'experts' for formats but kept active: fold them into shared."""
    out = {k: int(v) for k, v in c.items() if k != "experts_shared_io"}
    if c.get("experts_shared_io"):
        out["shared_experts"] = out.get("shared_experts", 0) + int(c["experts_shared_io"])
    return out


def mtp_params(card: ModelCard) -> int:
    """Multi-token-prediction modules: each one decoder layer (same type as the last) + 2*hidden^2 projection."""
    arch = card.architecture
    if not arch.mtp_layers:
        return 0
    last = resolve_layers(arch)[-1]
    per = sum(_layer_params(arch, last).values()) + 2 * arch.hidden_size**2 + 3 * arch.hidden_size
    return arch.mtp_layers * per


def total_params(card: ModelCard) -> int:
    return sum(param_counts(card).values())


def active_params(card: ModelCard) -> float:
    return sum(active_param_counts(card).values())


@functools.lru_cache(maxsize=256)
def parse_quant(quant: str) -> dict[str, str]:
    """'q4_k_m' -> {'default': 'q4_k_m'}; 'experts=mxfp4,default=q8_0' -> per-component formats (canonical names)."""
    return parse_weight_spec(quant)


def check_quant_components(card: ModelCard, quant: str | None) -> None:
    """Refuse a per-component format for a component the model does not have (experts= on a dense model)."""
    if quant is None:
        return
    present = {c for c, n in param_counts(card).items() if n}
    for component in parse_quant(quant):
        if component != "default" and component not in present:
            from roofline.errors import RooflineError

            raise RooflineError(f"--quant: {card.name} has no {component} (it has {', '.join(sorted(present))})")


def component_format(card: ModelCard, component: str, quant: str | None = None) -> str:
    """Weight format of one component. A user `quant` (one format, or 'component=format,...') replaces the card's
    formats: the named component's, else 'default'. Unnamed router and norms stay 16-bit; unnamed embeddings and
    lm_head stay 16-bit under quantized checkpoint formats (FP8, AWQ, NVFP4 keep them) but follow GGUF formats."""
    native = card.weights.get(component, card.weights["default"])
    if quant is None:
        return native
    spec = parse_quant(quant)
    if component in spec:
        return spec[component]
    if "default" not in spec:
        return native
    if component in ("router", "norms"):
        return "bf16"
    fmt = weight_format(spec["default"])
    if component in ("embedding", "lm_head") and fmt.bits_per_value < 16 and not fmt.quantizes_embeddings:
        return native if weight_format(native).bits_per_value >= 16 else "bf16"
    return spec["default"]


def _stored(card: ModelCard, component: str, quant: str | None) -> int | None:
    """The imported file's exact bytes for a component that keeps its native format under `quant`, else None."""
    stored = card.stored_weight_bytes
    if not stored or component not in stored:
        return None
    native = card.weights.get(component, card.weights["default"])
    return stored[component] if component_format(card, component, quant) == native else None


def bytes_per_param(card: ModelCard, component: str, quant: str | None = None) -> float:
    """Stored bytes per parameter of one component: the imported file's exact bytes over the derived parameter
    count where the card has them (a Q4_K_M file's attention is Q4_K with a Q6_K attn_v), else the format's bits."""
    stored = _stored(card, component, quant)
    if stored is not None:
        n = param_counts(card).get(component, 0)
        if n:
            return stored / n
    return weight_format(component_format(card, component, quant)).bytes_per_value


def weight_bytes(card: ModelCard, quant: str | None = None) -> dict[str, float]:
    """Resident bytes per component at each component's format (tied embeddings stored once); an imported
    file's exact bytes for components left at their native format."""
    out = {}
    for c, n in param_counts(card).items():
        stored = _stored(card, c, quant)
        out[c] = stored if stored is not None else n * weight_format(component_format(card, c, quant)).bytes_per_value
    return out
