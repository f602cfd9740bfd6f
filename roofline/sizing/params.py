"""Parameter counts per component, derived from a card's shapes: the one place weights are counted.

`weight_bytes` (memory budget, predictor, engine allocator) and the published-count test all call these.
"""

from __future__ import annotations

import functools
from collections import Counter

from roofline.cards.formats import weight_format
from roofline.cards.model import COMPONENTS, Architecture, ModelCard
from roofline.sizing.layers import Layer, resolve_layers


def _attention_params(arch: Architecture, layer: Layer) -> int:
    att, h = arch.attention, arch.hidden_size
    q_out = layer.num_heads * layer.head_dim
    kv_out = layer.num_kv_heads * layer.head_dim * (1 if layer.k_eq_v else 2)
    n = h * (q_out + kv_out) + q_out * h  # Wq, Wk(, Wv), Wo: [hidden, out] each
    n += (q_out + kv_out) if att.qkv_bias else 0
    n += h if att.o_bias else 0
    n += 2 * layer.head_dim if att.qk_norm else 0
    n += layer.num_heads if att.sinks else 0
    return n


def _mla_params(arch: Architecture) -> int:
    m, h, heads = arch.mla, arch.hidden_size, arch.attention.num_heads
    qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim
    if m.q_lora_rank:
        n = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * heads * qk_head  # Wq_a, q norm, Wq_b
    else:
        n = h * heads * qk_head
    n += h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank  # Wkv_a (latent + shared rope key), kv norm
    n += m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)  # Wkv_b
    return n + heads * m.v_head_dim * h  # Wo


def _mamba2_params(arch: Architecture) -> int:
    m, h = arch.mamba2, arch.hidden_size
    d_in, gs = m.d_inner, m.n_groups * m.state_size
    n = h * (2 * d_in + 2 * gs + m.num_heads)  # in_proj -> z, x, B, C, dt
    n += (d_in + 2 * gs) * (m.conv_kernel + 1)  # depthwise conv1d weight + bias
    n += 3 * m.num_heads + d_in  # A_log, D, dt_bias; gated RMSNorm
    return n + d_in * h  # out_proj


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
    elif layer.mixer == "mamba2":
        c["mamba"] += _mamba2_params(arch)
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
    mixers = (layer.mixer != "none") + (layer.ffn != "none")
    c["norms"] += h * (arch.norms_per_layer if mixers == 2 else 1)
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
    from roofline.errors import RooflineError  # local: params has no other error paths

    out: dict[str, str] = {}
    for part in (p.strip() for p in quant.split(",") if p.strip()):
        component, _, fmt = part.rpartition("=")
        component = component.strip() or "default"
        if component not in ("default", *COMPONENTS):
            raise RooflineError(f"--quant: unknown component '{component}' in {quant!r}; use default or one of "
                                f"{', '.join(COMPONENTS)}")
        out[component] = weight_format(fmt).name
    if not out:
        raise RooflineError("--quant: empty format; e.g. --quant q4_k_m or --quant experts=mxfp4,default=q8_0")
    return out


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
