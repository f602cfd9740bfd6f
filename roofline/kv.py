"""KV-cache and recurrent-state sizes: the one formula the predictor, `fits`, the engine and tests share.

Attention layer, per token: 2 (K and V; 1 when keys double as values) x kv_heads x head_dim x bytes.
Sliding-window layers hold at most `window` tokens. MLA holds the latent: kv_lora_rank + qk_rope_head_dim.
Mamba-2 layers hold a constant state per sequence: conv (d_inner + 2*groups*state) x (kernel-1) + heads x head_dim x state,
in `mamba2.state_dtype` when the card sets it.
"""

from __future__ import annotations

import numpy as np

from .formats import kv_format
from .layers import Layer, resolve_layers
from .modelcard import Architecture, ModelCard


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


def kv_bytes_per_token(card: ModelCard | Architecture, kv_fmt: str = "bf16") -> float:
    """Marginal cache bytes per token at long context (sliding layers excluded once full; no Mamba state)."""
    arch = _arch(card)
    values = sum(layer_kv_values_per_token(arch, lay) for lay in resolve_layers(arch) if lay.window is None)
    return values * kv_format(kv_fmt).bytes_per_value


def kv_bytes(card: ModelCard | Architecture, context_tokens, kv_fmt: str = "bf16"):
    """Cache bytes of one sequence holding `context_tokens` (int or numpy array): KV (windows applied) + state."""
    arch = _arch(card)
    kv_values = 0
    for lay in resolve_layers(arch):
        held = context_tokens if lay.window is None else np.minimum(context_tokens, lay.window)
        kv_values += held * layer_kv_values_per_token(arch, lay)
    return kv_values * kv_format(kv_fmt).bytes_per_value + state_bytes(arch, kv_fmt)


def state_bytes_per_value(arch: Architecture, kv_fmt: str) -> float:
    """Recurrent state precision: the card's mamba2.state_dtype (e.g. fp32), else the KV format."""
    fmt = arch.mamba2.state_dtype if arch.mamba2 is not None and arch.mamba2.state_dtype else kv_fmt
    return kv_format(fmt).bytes_per_value


def state_bytes(card: ModelCard | Architecture, kv_fmt: str = "bf16") -> float:
    """Constant recurrent state of one sequence (all Mamba-2 layers), independent of context."""
    arch = _arch(card)
    values = sum(layer_state_values(arch, lay) for lay in resolve_layers(arch))
    return values * state_bytes_per_value(arch, kv_fmt) if values else 0.0
