"""Paged KV cache and attention over it.

The cache of one attention layer is a pool of blocks: k, v [num_blocks, block_size, kv_heads, head_dim] in the model
dtype, or int8 with one fp32 scale per (token, head). A step's tokens are flattened ([T, ...]); `StepMeta` says
where each sequence's new tokens sit, how many tokens each had cached, and which blocks hold them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    host_tables: torch.Tensor | None = None  # block_tables on the host (None: block_tables is)
    memo: dict = field(default_factory=dict)  # tensors every layer of a step shares, built by the first to need them
    # static decode (engine/model/graphs.py): one token per row, lengths on the device, no host lists
    static_kv_lens: torch.Tensor | None = None  # [S] long: tokens each row attends to, its new one included
    static_max_len: int = 0  # positions block_tables can address (max_blocks x block_size)

    @property
    def kv_lens(self) -> list[int]:
        return [c + n for c, n in zip(self.ctx_lens, self.q_lens)]


class PagedKV:
    """K/V blocks of one attention layer."""

    def __init__(self, num_blocks: int, block_size: int, kv_heads: int, head_dim: int, dtype: torch.dtype,
                 device, int8: bool = False, values: bool = True):
        shape = (num_blocks * block_size, kv_heads, head_dim)
        self.num_blocks, self.block_size = num_blocks, block_size
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

    def read_blocks(self, blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V of whole blocks [S, n] -> [S, n * block_size, kv_heads, head_dim], dequantised to the model dtype:
        one contiguous copy per block (index_select), 3-8x faster on the CPU than gathering token by token."""
        s, n = blocks.shape
        ids = blocks.reshape(-1)

        def take(t: torch.Tensor) -> torch.Tensor:
            rows = t.view(self.num_blocks, -1).index_select(0, ids)
            return rows.view(s, n * self.block_size, *t.shape[1:])

        if self.int8:
            k = (take(self.k).float() * take(self.k_scale)[..., None]).to(self.dtype)
            v = k if self.v is None else (take(self.v).float() * take(self.v_scale)[..., None]).to(self.dtype)
            return k, v
        k = take(self.k)
        return k, k if self.v is None else take(self.v)


def _quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per (token, head): scale = absmax / 127."""
    scale = x.float().abs().amax(dim=-1).clamp(min=1e-8) / 127.0
    return torch.round(x.float() / scale[..., None]).clamp(-127, 127).to(torch.int8), scale


def paged_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: PagedKV, meta: StepMeta, scale: float,
                    window: int | None) -> torch.Tensor:
    """q, k, v [T, H|K, D] of the step's new tokens (their K/V already written to `cache`) -> [T, H, D]. Causal; a
    sliding window lets a token see its `window` most recent positions (itself included). Sequences with one new
    token attend together; a chunk with nothing cached attends to its own K/V (causal, no cache read); any other
    chunk reads its cached blocks."""
    if meta.static_kv_lens is not None:
        return static_decode_attention(q, cache, meta.block_tables, meta.static_kv_lens, scale, window)
    singles = tuple(s for s, n in enumerate(meta.q_lens) if n == 1)
    if len(singles) == len(meta.q_lens):
        return _decode_attention(q, cache, _decode_index(meta, singles, window)[:2], scale)
    out = torch.empty_like(q)
    if singles:
        ids, valid, rows = _decode_index(meta, singles, window)
        out[rows] = _decode_attention(q[rows], cache, (ids, valid), scale)
    cached = []  # chunks that read cached blocks
    for s, (q0, n, ctx) in enumerate(zip(meta.q_starts, meta.q_lens, meta.ctx_lens)):
        if n == 1:
            continue
        if ctx == 0 and (window is None or n <= window):
            out[q0:q0 + n] = _sdpa(q[q0:q0 + n], k[q0:q0 + n], v[q0:q0 + n], None, scale)
        else:
            cached.append(s)
    if cached and (q.is_cuda or BATCH_CACHED_CHUNKS):
        rows, chunk_out = _cached_chunks(q, cache, meta, tuple(cached), scale, window)
        out[rows] = chunk_out
        return out
    for s in cached:
        q0, n, ctx = meta.q_starts[s], meta.q_lens[s], meta.ctx_lens[s]
        keys, values, kpos = _cached_span(cache, meta.block_tables[s], ctx + n, meta.block_size, window, n)
        qpos = torch.arange(ctx, ctx + n, device=q.device)[:, None]
        allowed = (kpos[None, :] <= qpos) & (kpos[None, :] >= 0)
        if window is not None:
            allowed &= qpos - kpos[None, :] < window
        out[q0:q0 + n] = _sdpa(q[q0:q0 + n], keys, values, allowed, scale)
    return out


# Chunks on top of a cache attend in one call on CUDA: chunk by chunk costs ~10 launches per chunk and layer, and the
# GQA mask sends each to the math kernel (docs/calibration.md, "NVIDIA H100, a second session"). On the CPU the
# per-chunk path reads no padding and stays; tests set this to run the batched path there too.
BATCH_CACHED_CHUNKS = False


def _cached_chunks(q: torch.Tensor, cache: PagedKV, meta: StepMeta, chunks: tuple[int, ...], scale: float,
                   window: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Every chunk in `chunks` (sequences whose new tokens read cached blocks) in one attention call: queries padded
    to the longest chunk [C, n_max], keys to the widest span of blocks [C, L]; each KV head's query heads stacked as
    its queries ([C, K, G * n_max, D], no K/V repeat). Returns the step rows [R] of the chunks' tokens and their
    outputs [R, H, D]."""
    ids, allowed, take = _chunk_index(meta, chunks, window)
    keys, values = cache.read_blocks(ids)  # [C, L, K, D]
    c, n_max = take.shape
    h, d = q.shape[1:]
    kv = keys.shape[2]
    group = h // kv
    qc = q[take.clamp(min=0)].view(c, n_max, kv, group, d).permute(0, 2, 3, 1, 4).reshape(c, kv, group * n_max, d)
    o = F.scaled_dot_product_attention(qc, keys.transpose(1, 2), values.transpose(1, 2), scale=scale,
                                       attn_mask=_group_bias(meta, (chunks, window, group, q.dtype), allowed, group))
    o = o.view(c, kv, group, n_max, d).permute(0, 3, 1, 2, 4).reshape(c * n_max, h, d)
    live = (take >= 0).reshape(-1)
    return take.reshape(-1)[live], o[live]


def _group_bias(meta: StepMeta, key: tuple, allowed: torch.Tensor, group: int) -> torch.Tensor:
    """`allowed` [C, n_max, L] as an additive bias [C, 1, G * n_max, L] (0 or -inf) in the queries' dtype, once per
    step, window and group size (a boolean mask would be converted by every layer's call)."""
    if key not in meta.memo:
        c, n_max, width = allowed.shape
        stacked = allowed[:, None, None].expand(c, 1, group, n_max, width).reshape(c, 1, group * n_max, width)
        bias = torch.zeros(stacked.shape, dtype=key[-1], device=allowed.device)
        meta.memo[key] = bias.masked_fill_(~stacked, float("-inf"))
    return meta.memo[key]


def _chunk_index(meta: StepMeta, chunks: tuple[int, ...], window: int | None):
    """Built on the host and copied once per step and window (a host-to-device copy per layer would wait for the
    device each time): block ids [C, W] of each chunk's visible span (0-padded), the mask [C, n_max, W * block_size]
    of the keys each query may see (causal, within the window, before the sequence's end), and each query's row in
    the step [C, n_max] (-1: padding)."""
    key = ("chunks", chunks, window)
    if key not in meta.memo:
        bs = meta.block_size
        n = torch.tensor([meta.q_lens[s] for s in chunks])
        ctx = torch.tensor([meta.ctx_lens[s] for s in chunks])
        length = ctx + n
        first = torch.zeros_like(ctx) if window is None else (ctx + 1 - window).clamp(min=0)  # first query's view
        b0, b1 = first // bs, (length + bs - 1) // bs
        blk = b0[:, None] + torch.arange(int((b1 - b0).max()))[None, :]  # [C, W]
        tables = (meta.block_tables if meta.host_tables is None else meta.host_tables)[list(chunks)].cpu()
        ids = torch.where(blk < b1[:, None], torch.gather(tables, 1, blk.clamp(max=tables.shape[1] - 1)), 0)
        kpos = (blk[:, :, None] * bs + torch.arange(bs)).flatten(1)[:, None, :]  # [C, 1, W * bs]
        j = torch.arange(int(n.max()))[None, :]  # [1, n_max]
        qpos = (ctx[:, None] + j)[:, :, None]  # [C, n_max, 1]
        allowed = (kpos <= qpos) & (kpos < length[:, None, None])  # padding blocks sit at or past the end
        if window is not None:
            allowed &= qpos - kpos < window
        starts = torch.tensor([meta.q_starts[s] for s in chunks])
        take = torch.where(j < n[:, None], starts[:, None] + j, -1)
        device = meta.block_tables.device
        meta.memo[key] = ids.to(device), allowed.to(device), take.to(device)
    return meta.memo[key]


def _cached_span(cache: PagedKV, table: torch.Tensor, length: int, block_size: int, window: int | None, n: int):
    """K, V [L, K, D] of the whole blocks holding the positions a chunk of `n` tokens ending at `length` can see,
    and each row's position [L] (-1 past `length`)."""
    first = 0 if window is None else max(0, length - n + 1 - window)
    b0, b1 = first // block_size, -(-length // block_size)
    keys, values = cache.read_blocks(table[None, b0:b1])
    pos = torch.arange(b0 * block_size, b1 * block_size, device=table.device)
    return keys[0], values[0], torch.where(pos < length, pos, -1)


def _decode_index(meta: StepMeta, rows: tuple[int, ...], window: int | None):
    """Block ids [S, n] and the valid-position mask [S, n * block_size] of sequences `rows`, each one new token,
    padded to the longest span, and their rows in the step [S]: a decode row is a one-token chunk, so these are
    `_chunk_index`'s, one query each (built on the host and copied once per step and window)."""
    key = ("decode", rows, window)
    if key not in meta.memo:
        ids, allowed, take = _chunk_index(meta, rows, window)
        meta.memo[key] = ids, allowed[:, 0], take[:, 0]
    return meta.memo[key]


def _decode_attention(q: torch.Tensor, cache: PagedKV, index: tuple[torch.Tensor, torch.Tensor],
                      scale: float) -> torch.Tensor:
    """One new token per sequence, q [S, H, D]: read every sequence's blocks at once (`index` from _decode_index)
    and attend in one call, each KV head's group of query heads as its queries ([S, K, H/K, D]: no K/V repeat)."""
    ids, valid = index
    k, v = cache.read_blocks(ids)  # [S, n * bs, K, D]
    s, h, d = q.shape
    kv = k.shape[2]
    out = F.scaled_dot_product_attention(q.view(s, kv, h // kv, d), k.transpose(1, 2), v.transpose(1, 2),
                                         attn_mask=valid[:, None, None, :], scale=scale)
    return out.reshape(s, h, d)


def static_decode_attention(q: torch.Tensor, cache: PagedKV, tables: torch.Tensor, kv_lens: torch.Tensor,
                            scale: float, window: int | None) -> torch.Tensor:
    """One new token per row, q [S, H, D]; tables [S, W] and kv_lens [S] on the device -> [S, H, D], with shapes that
    depend only on S and W (CUDA-graph capturable). On CUDA with Triton, the paged kernel reads only each row's own
    blocks; otherwise every row reads all W blocks and masks positions outside [kv_len - window, kv_len)."""
    from roofline.engine.model import paged_kernel

    if paged_kernel.usable(q, cache):
        return paged_kernel.paged_decode(q, cache.k, cache.v if cache.v is not None else cache.k, tables, kv_lens,
                                         cache.block_size, scale, window)
    s, h, d = q.shape
    k, v = cache.read_blocks(tables)  # [S, W * bs, K, D]
    kv = k.shape[2]
    pos = torch.arange(k.shape[1], device=q.device)[None, :]  # [1, W * bs]
    valid = pos < kv_lens[:, None]
    if window is not None:
        valid &= pos >= kv_lens[:, None] - window
    out = F.scaled_dot_product_attention(q.view(s, kv, h // kv, d), k.transpose(1, 2), v.transpose(1, 2),
                                         attn_mask=valid[:, None, None, :], scale=scale)
    return out.reshape(s, h, d)


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor | None,
          scale: float) -> torch.Tensor:
    """q [n, H, D], k/v [L, K, D], allowed [n, L] (None: causal, L = n) -> [n, H, D]. Called with a batch dim of 1:
    on 3-D inputs PyTorch's CPU backend falls back to the unfused math kernel (~10x slower at 1024 tokens in bf16)."""
    out = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
                                         attn_mask=allowed, is_causal=allowed is None, scale=scale,
                                         enable_gqa=q.shape[1] != k.shape[1])
    return out[0].transpose(0, 1)
