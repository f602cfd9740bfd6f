"""KV-cache and recurrent-state sizes: the one formula the predictor, `fits`, the engine and tests share.

Attention layer, per token: 2 (K and V; 1 when keys double as values) x kv_heads x head_dim x bytes.
Sliding-window layers hold at most `window` tokens. MLA holds the latent: kv_lora_rank + qk_rope_head_dim.
Mamba-2 layers hold a constant state per sequence: conv (d_inner + 2*groups*state) x (kernel-1) + heads x head_dim x state,
in `mamba2.state_dtype` when the card sets it.

Per GPU under tensor parallelism (tp): GQA shards KV heads (one head each, replicated, when tp > kv_heads); the MLA
latent is replicated on every GPU; Mamba-2 shards its heads. Pipeline stages (pp) split the layers. Paged
allocation rounds each layer's tokens up to whole blocks of `block_tokens`.
"""

from __future__ import annotations

import math

import numpy as np

from roofline.cards.formats import kv_format
from roofline.cards.model import Architecture, ModelCard
from roofline.sizing.layers import Layer, resolve_layers


def _arch(card: ModelCard | Architecture) -> Architecture:
    return card.architecture if isinstance(card, ModelCard) else card


def layer_kv_values_per_token(arch: Architecture, layer: Layer) -> int:
    """Cached values one token adds to one layer (0 for Mamba and FFN-only layers)."""
    if layer.is_attention:
        return (1 if layer.k_eq_v else 2) * layer.num_kv_heads * layer.head_dim
    if layer.mixer == "mla":
        return arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim
    return 0


def layer_state_values(arch: Architecture, layer: Layer) -> int:
    """Recurrent state values per sequence in one layer (Mamba-2 conv + SSM state; 0 otherwise)."""
    if layer.mixer != "mamba2":
        return 0
    m = arch.mamba2
    conv = (m.d_inner + 2 * m.n_groups * m.state_size) * (m.conv_kernel - 1)
    return conv + m.num_heads * m.head_dim * m.state_size


def tp_share(arch: Architecture, layer: Layer, tp: int) -> float:
    """Fraction of one layer's cache (or state) that each of `tp` tensor-parallel GPUs holds."""
    if tp == 1:
        return 1.0
    if layer.is_attention:
        return math.ceil(layer.num_kv_heads / tp) / layer.num_kv_heads
    if layer.mixer == "mamba2":
        return math.ceil(arch.mamba2.num_heads / tp) / arch.mamba2.num_heads
    return 1.0  # MLA latent: every GPU holds all of it


def kv_bytes_per_token(card: ModelCard | Architecture, kv_fmt: str = "bf16", tp: int = 1, pp: int = 1) -> float:
    """Marginal cache bytes per token at long context, per GPU (sliding layers excluded once full; no state)."""
    arch = _arch(card)
    values = sum(layer_kv_values_per_token(arch, lay) * tp_share(arch, lay, tp)
                 for lay in resolve_layers(arch) if lay.window is None)
    return values * kv_format(kv_fmt).bytes_per_value / pp


def kv_bytes(card: ModelCard | Architecture, context_tokens, kv_fmt: str = "bf16", block_tokens: int = 1,
             tp: int = 1, pp: int = 1, cap_windows: bool = True):
    """Cache bytes of one sequence holding `context_tokens` (int or numpy array), per GPU: KV with windows
    applied (cap_windows=False: an allocator that keeps every token of sliding layers, like the micro-engine)
    and paged blocks rounded up, plus the recurrent state."""
    arch = _arch(card)
    kv_values = 0.0
    for lay in resolve_layers(arch):
        held = context_tokens if lay.window is None or not cap_windows else np.minimum(context_tokens, lay.window)
        if block_tokens > 1:
            held = np.ceil(np.asarray(held) / block_tokens) * block_tokens
        kv_values = kv_values + held * layer_kv_values_per_token(arch, lay) * tp_share(arch, lay, tp)
    return (kv_values * kv_format(kv_fmt).bytes_per_value + state_bytes(arch, kv_fmt, tp)) / pp


def state_bytes_per_value(arch: Architecture, kv_fmt: str) -> float:
    """Recurrent state precision: the card's mamba2.state_dtype (e.g. fp32), else the KV format."""
    fmt = arch.mamba2.state_dtype if arch.mamba2 is not None and arch.mamba2.state_dtype else kv_fmt
    return kv_format(fmt).bytes_per_value


def state_bytes(card: ModelCard | Architecture, kv_fmt: str = "bf16", tp: int = 1) -> float:
    """Constant recurrent state of one sequence (all Mamba-2 layers), independent of context; per GPU."""
    arch = _arch(card)
    values = sum(layer_state_values(arch, lay) * tp_share(arch, lay, tp) for lay in resolve_layers(arch))
    return values * state_bytes_per_value(arch, kv_fmt) if values else 0.0
