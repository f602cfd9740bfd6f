"""A model built from a roofline model card: the card's exact layer shapes, seeded random weights.

`forward(ids [T], meta, caches)` runs a flattened step; `logits(hidden [S, h])` the lm_head. Layers follow the
card's layer pattern (attention full/sliding, Mamba-2, dense or MoE FFN); MLA cards are refused.
"""

from __future__ import annotations

import math

import torch
from roofline.engine.core.mixers import ENGINE_MIXERS
from roofline.engine.model.attention import StepMeta
from roofline.engine.model.mamba import Mamba2
from roofline.engine.model.modules import MLP, Attention, Linear, MoE, RMSNorm, linear
from roofline.engine.model.rope import Rotary
from torch import nn

from roofline.cards.model import ModelCard
from roofline.sizing.layers import Layer, resolve_layers

RMS_EPS = 1e-5  # cards do not carry rms_norm_eps; HF parity tests build their configs with the same value




class EngineError(ValueError):
    """A card or option the engine cannot run; the CLI prints it as one line."""


class Block(nn.Module):
    """One decoder layer: optional mixer (attention / Mamba-2) and optional FFN (dense / MoE), pre-norm residual."""

    def __init__(self, card: ModelCard, layer: Layer, rotary: dict):
        super().__init__()
        arch, h = card.architecture, card.architecture.hidden_size
        self.kind = layer.mixer
        self.mixer = None
        if layer.is_attention:
            rope = None
            if arch.rope is not None:
                key = (layer.head_dim, arch.rope.theta)
                rotary.setdefault(key, Rotary(layer.head_dim, arch.rope.theta, arch.rope.scaling,
                                              arch.rope.partial_rotary_factor))
                rope = rotary[key]
            self.mixer = Attention(h, layer.num_heads, layer.num_kv_heads, layer.head_dim, arch.attention,
                                   layer.window, rope, RMS_EPS, layer.k_eq_v)
        elif layer.mixer == "mamba2":
            self.mixer = Mamba2(h, arch.mamba2, RMS_EPS)
        self.ffn = None
        if layer.ffn == "dense":
            f = arch.ffn
            self.ffn = MLP(h, f.intermediate_size, f.activation, f.gated, f.bias)
        elif layer.ffn == "moe":
            self.ffn = MoE(h, arch.moe, arch.moe_activation)
        sandwich = arch.norms_per_layer == 4
        self.norm_mixer = RMSNorm(h, RMS_EPS) if self.mixer is not None else None
        self.norm_ffn = RMSNorm(h, RMS_EPS) if self.ffn is not None else None
        self.post_mixer = RMSNorm(h, RMS_EPS) if sandwich and self.mixer is not None else None
        self.post_ffn = RMSNorm(h, RMS_EPS) if sandwich and self.ffn is not None else None

    def forward(self, x: torch.Tensor, meta: StepMeta, cache) -> torch.Tensor:
        if self.mixer is not None:
            y = self.mixer(self.norm_mixer(x), meta, cache)
            x = x + (self.post_mixer(y) if self.post_mixer is not None else y)
        if self.ffn is not None:
            y = self.ffn(self.norm_ffn(x))
            x = x + (self.post_ffn(y) if self.post_ffn is not None else y)
        return x


class Transformer(nn.Module):
    def __init__(self, card: ModelCard):
        super().__init__()
        arch = card.architecture
        if arch.mla is not None:
            raise EngineError(f"{card.name} uses MLA (multi-head latent attention), which the engine does not run yet; "
                              f"predict it with `roofline predict`, or run a GQA card")
        self.card, self.layers_spec = card, resolve_layers(arch)
        unsupported = sorted({lay.mixer for lay in self.layers_spec} - ENGINE_MIXERS)
        if unsupported:
            raise EngineError(f"{card.name} uses {', '.join(unsupported)} layers, which the engine does not run; "
                              f"predict it with `roofline predict`, or run a card with {', '.join(sorted(ENGINE_MIXERS))} layers")
        if arch.mamba2 is not None and not arch.mamba2.gated_norm:
            raise EngineError(f"{card.name} uses Mamba-2 without its gated RMSNorm, which the engine does not run; "
                              f"predict it with `roofline predict`")
        rotary: dict = {}
        self.embed = nn.Embedding(arch.vocab_size, arch.hidden_size)
        self.blocks = nn.ModuleList(Block(card, lay, rotary) for lay in self.layers_spec)
        self.norm = RMSNorm(arch.hidden_size, RMS_EPS)
        self.lm_head = None if arch.tie_embeddings else Linear(arch.hidden_size, arch.vocab_size, bias=False)

    def forward(self, ids: torch.Tensor, meta: StepMeta, caches: list) -> torch.Tensor:
        x = self.embed(ids)
        for block, cache in zip(self.blocks, caches):
            x = block(x, meta, cache)
        return x

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        h = self.norm(hidden)
        out = linear(h, self.embed.weight) if self.lm_head is None else self.lm_head(h)
        return out.to(torch.promote_types(h.dtype, torch.float32))


TILE = 1 << 20  # large tensors repeat one seeded random tile: same statistics, ~50x faster to build


def _fill_random(p: torch.Tensor, gen: torch.Generator, scale: float) -> None:
    """p <- seeded N(0, scale^2) values, written in place: a large tensor is filled tile by tile, so building a
    multi-GB expert bank allocates no second copy of it."""
    n = p.numel()
    if n <= 4 * TILE:
        p.copy_(torch.randn(p.shape, generator=gen).to(p.dtype) * scale)
        return
    tile = torch.randn(TILE + 7, generator=gen).to(p.dtype) * scale  # +7: rows do not repeat the tile's phase
    flat = p.view(-1)
    for start in range(0, n, tile.numel()):
        chunk = flat[start:start + tile.numel()]
        chunk.copy_(tile[:chunk.numel()])


@torch.no_grad()
def init_weights(model: nn.Module, seed: int) -> None:
    """Seeded random weights at a sane scale (std 1/sqrt(fan_in), biases 0.02); norms at 1; Mamba decay rates
    and time steps in the ranges Mamba-2 initialises them to."""
    gen = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        scale = 1.0 / math.sqrt(p.shape[-1]) if p.dim() >= 2 else 0.02
        _fill_random(p, gen, scale)
    for m in model.modules():
        if isinstance(m, RMSNorm):
            m.weight.fill_(1.0)
        elif isinstance(m, Mamba2):
            m.a_log.copy_(torch.log(torch.empty(m.a_log.shape).uniform_(1, 16, generator=gen)))
            dt = torch.exp(torch.empty(m.dt_bias.shape).uniform_(math.log(1e-3), math.log(1e-1), generator=gen))
            m.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
            m.d.fill_(1.0)
            m.norm_weight.fill_(1.0)
