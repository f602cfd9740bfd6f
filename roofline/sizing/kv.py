"""KV-cache and recurrent-state sizes: the one formula the predictor, `fits`, the engine and tests share.

Attention layer, per token: 2 (K and V; 1 when keys double as values) x kv_heads x head_dim x bytes.
Sliding-window layers hold at most `window` tokens; chunked layers (Llama-4) at most one chunk. MLA holds the latent:
kv_lora_rank + qk_rope_head_dim, plus the DSA indexer's key (index head_dim) when the card has one (DeepSeek-V3.2).
Compressed layers (DeepSeek-V4) hold one entry of head_dim (+ the indexer's head_dim on CSA layers) per
`compress_ratio` tokens, plus the last `sliding_window` tokens uncompressed (head_dim each).
Recurrent layers hold a constant state per sequence, in their section's `state_dtype` when the card sets it:
Mamba-2 conv (d_inner + 2*groups*state) x (kernel-1) + heads x head_dim x state; Mamba-1 d_inner x (state + kernel-1);
Gated DeltaNet value_heads x key_head_dim x value_head_dim + conv (2 x key dims + value dims) x (kernel-1).

Per GPU under tensor parallelism (tp): GQA shards KV heads (one head each, replicated, when tp > kv_heads); the MLA
latent and the compressed single KV head are replicated on every GPU; recurrent mixers shard their heads/channels. Pipeline stages (pp) split the layers. Paged
allocation rounds each layer's tokens up to whole blocks of `block_tokens`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from roofline.cards.formats import kv_format
from roofline.cards.model import Architecture, ModelCard
from roofline.sizing.layers import Layer, resolve_layers


def _arch(card: ModelCard | Architecture) -> Architecture:
    return card.architecture if isinstance(card, ModelCard) else card


def layer_kv_values_per_token(arch: Architecture, layer: Layer) -> float:
    """Cached values one token adds to one layer (0 for recurrent and FFN-only layers); on compressed layers the
    average over a pooled group (an entry every compress_ratio tokens), so it may be fractional."""
    if layer.is_attention:
        return (1 if layer.k_eq_v else 2) * layer.num_kv_heads * layer.head_dim
    if layer.mixer == "mla":
        m = arch.mla
        return m.kv_lora_rank + m.qk_rope_head_dim + (m.indexer.head_dim if m.indexer else 0)
    if layer.mixer == "compressed":
        return compressed_entry_values(arch, layer) / layer.compress_ratio
    return 0


def compressed_entry_values(arch: Architecture, layer: Layer) -> int:
    """One pooled entry of a compressed layer: the shared K=V vector (head_dim), plus the indexer key on CSA."""
    return layer.head_dim + (arch.compressed.indexer.head_dim if layer.indexer else 0)


def compressed_layer_values(arch: Architecture, layer: Layer, context_tokens):
    """Cached values of one compressed layer holding `context_tokens`: floor(context / ratio) pooled entries (the
    unfinished group waits in the compressor) plus the uncompressed sliding window of head_dim per token."""
    entries = np.floor(np.asarray(context_tokens) / layer.compress_ratio)
    window = np.minimum(context_tokens, arch.compressed.sliding_window)
    return entries * compressed_entry_values(arch, layer) + window * layer.head_dim


def layer_state_values(arch: Architecture, layer: Layer) -> int:
    """Recurrent state values per sequence in one layer (conv + SSM / delta-rule state; 0 for attention)."""
    if layer.has_mamba2:
        m = arch.mamba2
        conv = (m.d_inner + 2 * m.n_groups * m.state_size) * (m.conv_kernel - 1)
        return conv + m.num_heads * m.head_dim * m.state_size
    if layer.mixer == "mamba1":
        m1 = arch.mamba1
        return m1.d_inner * (m1.state_size + m1.conv_kernel - 1)
    if layer.mixer == "deltanet":
        d = arch.deltanet
        return d.num_value_heads * d.key_head_dim * d.value_head_dim + d.conv_channels * (d.conv_kernel - 1)
    return 0


def shard_share(shards: int, tp: int) -> float:
    """Fraction of `shards` heads (KV heads, state heads) each of `tp` GPUs holds: ceil(shards / tp) of them, so
    heads replicate once tp exceeds their count."""
    return math.ceil(shards / tp) / shards


def tp_share(arch: Architecture, layer: Layer, tp: int) -> float:
    """Fraction of one layer's cache (or state) that each of `tp` tensor-parallel GPUs holds."""
    if tp == 1:
        return 1.0
    if layer.is_attention:
        return shard_share(layer.num_kv_heads, tp)
    if layer.mixer in ("mamba2", "mamba1", "deltanet"):
        return state_tp_share(arch, layer, tp)
    return 1.0  # MLA latent, compressed single KV head: every GPU holds all of it


def state_tp_share(arch: Architecture, layer: Layer, tp: int) -> float:
    """Fraction of one layer's recurrent state each GPU holds: Mamba-2 and DeltaNet shard heads, Mamba-1 channels."""
    if tp == 1:
        return 1.0
    if layer.has_mamba2:
        return shard_share(arch.mamba2.num_heads, tp)
    if layer.mixer == "deltanet":
        return shard_share(arch.deltanet.num_value_heads, tp)
    return 1.0 / tp


def kv_bytes_per_token(card: ModelCard | Architecture, kv_fmt: str = "bf16", tp: int = 1, pp: int = 1) -> float:
    """Marginal cache bytes per token at long context, per GPU (sliding layers excluded once full; no state)."""
    arch = _arch(card)
    values = sum(layer_kv_values_per_token(arch, lay) * tp_share(arch, lay, tp)
                 for lay in resolve_layers(arch) if lay.window is None)
    return values * kv_format(kv_fmt).bytes_per_value / pp


def kv_bytes_per_token_in_window(card: ModelCard | Architecture, kv_fmt: str = "bf16") -> float:
    """Cache bytes per token while every sliding window still has room (the first `shortest window` tokens): what
    a sliding-window model's cache grows by per token at short context, where the long-context marginal is 0."""
    arch = _arch(card)
    values = sum(layer_kv_values_per_token(arch, lay) for lay in resolve_layers(arch) if lay.mixer != "compressed")
    # compressed (pooled) layers are left out of the sum: never report less than the long-context marginal
    return max(values * kv_format(kv_fmt).bytes_per_value, kv_bytes_per_token(arch, kv_fmt))


def shortest_window(card: ModelCard | Architecture) -> int | None:
    """The smallest sliding window of any layer, or None without windows."""
    windows = [lay.window for lay in resolve_layers(_arch(card)) if lay.window is not None]
    return min(windows) if windows else None


def kv_bytes(card: ModelCard | Architecture, context_tokens, kv_fmt: str = "bf16", block_tokens: int = 1,
             tp: int = 1, pp: int = 1, cap_windows: bool = True):
    """Cache bytes of one sequence holding `context_tokens` (int or numpy array), per GPU: KV with windows
    applied (cap_windows=False: an allocator that keeps every token of sliding layers, like the micro-engine)
    and paged blocks rounded up, plus the recurrent state."""
    arch = _arch(card)
    kv_values = 0.0
    for lay in resolve_layers(arch):
        if lay.mixer == "compressed":  # pooled entries + raw window; no paged rounding modelled
            kv_values = kv_values + compressed_layer_values(arch, lay, context_tokens) * tp_share(arch, lay, tp)
            continue
        held = context_tokens if lay.window is None or not cap_windows else np.minimum(context_tokens, lay.window)
        if block_tokens > 1:
            held = np.ceil(np.asarray(held) / block_tokens) * block_tokens
        kv_values = kv_values + held * layer_kv_values_per_token(arch, lay) * tp_share(arch, lay, tp)
    return (kv_values * kv_format(kv_fmt).bytes_per_value + state_bytes(arch, kv_fmt, tp)) / pp


def state_bytes_per_value(arch: Architecture, kv_fmt: str, layer: Layer | None = None) -> float:
    """Recurrent state precision: the `state_dtype` of the layer's recurrent section (e.g. mamba2 fp32), else the
    KV format. Without a layer: the first recurrent section that sets one."""
    sections = {"mamba2": arch.mamba2, "parallel": arch.mamba2, "mamba1": arch.mamba1, "deltanet": arch.deltanet}
    if layer is not None:
        candidates = [sections.get(layer.mixer)]
    else:
        candidates = [arch.mamba2, arch.mamba1, arch.deltanet]
    fmt = next((s.state_dtype for s in candidates if s is not None and s.state_dtype), kv_fmt)
    return kv_format(fmt).bytes_per_value


def state_bytes(card: ModelCard | Architecture, kv_fmt: str = "bf16", tp: int = 1) -> float:
    """Constant recurrent state of one sequence (all Mamba / DeltaNet layers), independent of context; per GPU."""
    arch = _arch(card)
    return float(sum(layer_state_values(arch, lay) * state_tp_share(arch, lay, tp) * state_bytes_per_value(arch, kv_fmt, lay)
                     for lay in resolve_layers(arch)))


@dataclass(frozen=True)
class BlockCosts:
    """A paged pool's block and what a sequence holds of it (vLLM v1's hybrid KV cache manager, in one pool).
    `unit_bytes`: one block, per GPU: block_tokens of the full-attention layers (of every attention layer when all
    are windowed; one recurrent state when none attends). `table_costs`: each block of the sequence's positions
    takes a block (False: every attention layer is windowed). `extra[n]`: blocks held beyond those at n position
    blocks: the windowed layers' (capped at their window, as vLLM frees blocks that leave it) and the recurrent
    state (a fixed per-sequence reservation); constant past the table's end."""

    unit_bytes: float
    table_costs: bool = True
    extra: tuple[int, ...] | None = None  # None: nothing beyond the table (plain full-attention models)

    def blocks(self, tokens: int, block_tokens: int) -> int:
        n = -(-tokens // block_tokens)
        more = self.extra[min(n, len(self.extra) - 1)] if self.extra else 0
        return (n if self.table_costs else 0) + more


def block_costs(card: ModelCard | Architecture, kv_fmt: str, block_tokens: int, tp: int = 1, pp: int = 1) -> BlockCosts:
    """The pool block and each sequence's blocks, from `kv_bytes` (windows capped, whole blocks, state added)."""
    arch = _arch(card)
    full = kv_bytes_per_token(arch, kv_fmt, tp, pp) * block_tokens
    unit = full or (kv_bytes(arch, block_tokens, kv_fmt, block_tokens, tp, pp) - state_bytes(arch, kv_fmt, tp) / pp) \
        or state_bytes(arch, kv_fmt, tp) / pp
    if unit <= 0:
        return BlockCosts(0.0)
    layers = resolve_layers(arch)
    reach = max([lay.window or 0 for lay in layers]
                + [arch.compressed.sliding_window if arch.compressed else 0])  # past it, `extra` stays constant
    n = np.arange(-(-min(reach or block_tokens, arch.max_context) // block_tokens) + 2)
    total = kv_bytes(arch, n * block_tokens, kv_fmt, block_tokens, tp, pp)
    extra = np.ceil(np.maximum(total - (n if full else 0) * unit, 0) / unit - 1e-9).astype(int)
    extra[0] = 0
    return BlockCosts(unit, bool(full), tuple(int(x) for x in extra) if extra.any() else None)
