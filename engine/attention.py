"""Paged KV cache and attention over it.

The cache of one attention layer is a pool of blocks: k, v [num_blocks, block_size, kv_heads, head_dim] in the model
dtype, or int8 with one fp32 scale per (token, head). A step's tokens are flattened ([T, ...]); `StepMeta` says
where each sequence's new tokens sit, how many tokens each had cached, and which blocks hold them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class StepMeta:
    positions: torch.Tensor  # [T] long: position of each new token in its sequence
    slots: torch.Tensor  # [T] long: flat cache slot each new token's K/V is written to
    block_tables: torch.Tensor  # [S, max_blocks] long (padded with 0)
    q_starts: list[int]  # per sequence: first row of its tokens in the flattened step
    q_lens: list[int]  # per sequence: new tokens this step
    ctx_lens: list[int]  # per sequence: tokens already cached before this step
    block_size: int
    state_slots: list[int | None]  # per sequence: recurrent-state slot (Mamba-2)

    @property
    def all_decode(self) -> bool:
        return all(n == 1 for n in self.q_lens)

    @property
    def kv_lens(self) -> list[int]:
        return [c + n for c, n in zip(self.ctx_lens, self.q_lens)]


class PagedKV:
    """K/V blocks of one attention layer."""

    def __init__(self, num_blocks: int, block_size: int, kv_heads: int, head_dim: int, dtype: torch.dtype,
                 device, int8: bool = False, values: bool = True):
        shape = (num_blocks * block_size, kv_heads, head_dim)
        store = torch.int8 if int8 else dtype
        self.k = torch.zeros(shape, dtype=store, device=device)
        self.v = torch.zeros(shape, dtype=store, device=device) if values else None  # None: keys double as values
        self.k_scale = torch.zeros(shape[:2], dtype=torch.float32, device=device) if int8 else None
        self.v_scale = torch.zeros(shape[:2], dtype=torch.float32, device=device) if int8 and values else None
        self.dtype, self.int8 = dtype, int8

    def bytes(self) -> int:
        tensors = [t for t in (self.k, self.v, self.k_scale, self.v_scale) if t is not None]
        return sum(t.numel() * t.element_size() for t in tensors)

    def write(self, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        if self.int8:
            self.k[slots], self.k_scale[slots] = _quantize(k)
            if self.v is not None:
                self.v[slots], self.v_scale[slots] = _quantize(v)
        else:
            self.k[slots] = k.to(self.dtype)
            if self.v is not None:
                self.v[slots] = v.to(self.dtype)

    def read(self, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V at `slots` (any shape), dequantised to the model dtype: [..., kv_heads, head_dim]."""
        if self.int8:
            k = (self.k[slots].float() * self.k_scale[slots][..., None]).to(self.dtype)
            v = k if self.v is None else (self.v[slots].float() * self.v_scale[slots][..., None]).to(self.dtype)
            return k, v
        k = self.k[slots]
        return k, k if self.v is None else self.v[slots]


def _quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per (token, head): scale = absmax / 127."""
    scale = x.float().abs().amax(dim=-1).clamp(min=1e-8) / 127.0
    return torch.round(x.float() / scale[..., None]).clamp(-127, 127).to(torch.int8), scale


def token_slots(meta: StepMeta, seq: int, start: int, stop: int) -> torch.Tensor:
    """Flat cache slots of positions [start, stop) of sequence `seq`."""
    pos = torch.arange(start, stop, device=meta.block_tables.device)
    return meta.block_tables[seq, pos // meta.block_size] * meta.block_size + pos % meta.block_size


def paged_attention(q: torch.Tensor, cache: PagedKV, meta: StepMeta, scale: float, window: int | None) -> torch.Tensor:
    """q [T, H, D] of the step's new tokens (their K/V already written) -> [T, H, D]. Causal; a sliding window lets
    a token see its `window` most recent positions (itself included)."""
    if meta.all_decode:
        return _decode_attention(q, cache, meta, scale, window)
    out = torch.empty_like(q)
    for s, (q0, n, ctx) in enumerate(zip(meta.q_starts, meta.q_lens, meta.ctx_lens)):
        first = 0 if window is None else max(0, ctx + 1 - window)
        k, v = cache.read(token_slots(meta, s, first, ctx + n))  # [L, K, D]
        qpos = torch.arange(ctx, ctx + n, device=q.device)[:, None]
        kpos = torch.arange(first, ctx + n, device=q.device)[None, :]
        allowed = kpos <= qpos
        if window is not None:
            allowed &= qpos - kpos < window
        out[q0:q0 + n] = _sdpa(q[q0:q0 + n], k, v, allowed, scale)
    return out


def _decode_attention(q: torch.Tensor, cache: PagedKV, meta: StepMeta, scale: float, window: int | None):
    """One new token per sequence: gather every sequence's span at once, padded, and attend in one call."""
    lens = torch.tensor(meta.kv_lens, device=q.device)
    firsts = lens.new_zeros(lens.shape) if window is None else (lens - window).clamp(min=0)
    span = int((lens - firsts).max())
    pos = firsts[:, None] + torch.arange(span, device=q.device)[None, :]  # [S, L]
    valid = pos < lens[:, None]
    pos = torch.where(valid, pos, torch.zeros_like(pos))
    slots = torch.gather(meta.block_tables, 1, pos // meta.block_size) * meta.block_size + pos % meta.block_size
    k, v = cache.read(slots)  # [S, L, K, D]
    out = F.scaled_dot_product_attention(q[:, :, None, :], k.transpose(1, 2), v.transpose(1, 2),
                                         attn_mask=valid[:, None, None, :], scale=scale,
                                         enable_gqa=q.shape[1] != k.shape[2])
    return out[:, :, 0, :]


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor, scale: float) -> torch.Tensor:
    """q [n, H, D], k/v [L, K, D], allowed [n, L] -> [n, H, D]. Called with a batch dim of 1: on 3-D inputs
    PyTorch's CPU backend falls back to the unfused math kernel (~10x slower at 1024 tokens in bf16)."""
    out = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
                                         attn_mask=allowed, scale=scale, enable_gqa=q.shape[1] != k.shape[1])
    return out[0].transpose(0, 1)
