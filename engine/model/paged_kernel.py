"""A Triton paged decode-attention kernel: one program per (sequence, KV head) walks only that sequence's blocks,
with an online softmax, for the G = heads / kv_heads query heads sharing the KV head.

Used on CUDA when Triton imports; with TRITON_INTERPRET=1 (Triton's interpreter) it also runs on CPU tensors, which
is how the CPU tests check it against the torch path. Without Triton the engine keeps its torch ops.
"""

from __future__ import annotations

import os

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the torch path serves
    triton = None

NO_WINDOW = 1 << 30  # a window longer than any context: every cached position is visible


def usable(q: torch.Tensor, cache) -> bool:
    """Triton imports, the tensors are on CUDA (or the interpreter runs), and the cache holds the model dtype."""
    if triton is None or cache.int8:
        return False
    return q.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def paged_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, tables: torch.Tensor, kv_lens: torch.Tensor,
                 block_size: int, scale: float, window: int | None) -> torch.Tensor:
    """q [S, H, D]; k, v [num_blocks * block_size, K, D]; tables [S, W] long; kv_lens [S] long -> [S, H, D]."""
    s, h, d = q.shape
    kv = k.shape[1]
    group = h // kv
    out = torch.empty(s, h, d, dtype=q.dtype, device=q.device)
    _decode_kernel[(s, kv)](q, k, v, tables, kv_lens, out, scale, window or NO_WINDOW,
                            q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
                            tables.stride(0), out.stride(0), out.stride(1),
                            G=group, GP=max(triton.next_power_of_2(group), 2), D=d, DP=triton.next_power_of_2(d),
                            BS=block_size)
    return out


if triton is not None:
    @triton.jit
    def _decode_kernel(Q, K, V, T, L, O, scale, window, sq_s, sq_h, sk_t, sk_h, sv_t, sv_h, st_s, so_s, so_h,
                       G: tl.constexpr, GP: tl.constexpr, D: tl.constexpr, DP: tl.constexpr, BS: tl.constexpr):
        s, kh = tl.program_id(0), tl.program_id(1)
        g, d, t = tl.arange(0, GP), tl.arange(0, DP), tl.arange(0, BS)
        gm, dm = g < G, d < D
        heads = kh * G + g  # [GP] query heads of this KV head
        q = tl.load(Q + s * sq_s + heads[:, None] * sq_h + d[None, :], mask=gm[:, None] & dm[None, :], other=0.0)
        q = q.to(tl.float32)
        length = tl.load(L + s)
        lo = tl.maximum(length - window, 0)  # first visible position
        m = tl.full([GP], float("-inf"), tl.float32)  # running max of scores
        den = tl.zeros([GP], tl.float32)  # running softmax denominator
        acc = tl.zeros([GP, DP], tl.float32)  # running weighted sum of values
        for b in range(lo // BS, tl.cdiv(length, BS)):  # every block holds at least one visible position
            block = tl.load(T + s * st_s + b)
            pos = b * BS + t
            seen = (pos < length) & (pos >= lo)
            rows = block * BS + t
            kmask = seen[:, None] & dm[None, :]
            kb = tl.load(K + rows[:, None] * sk_t + kh * sk_h + d[None, :], mask=kmask, other=0.0).to(tl.float32)
            vb = tl.load(V + rows[:, None] * sv_t + kh * sv_h + d[None, :], mask=kmask, other=0.0).to(tl.float32)
            scores = tl.sum(q[:, None, :] * kb[None, :, :], 2) * scale  # [GP, BS]
            scores = tl.where(seen[None, :], scores, float("-inf"))
            m_new = tl.maximum(m, tl.max(scores, 1))
            p = tl.exp(scores - m_new[:, None])
            alpha = tl.exp(m - m_new)
            den = den * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * vb[None, :, :], 1)
            m = m_new
        out = acc / den[:, None]
        tl.store(O + s * so_s + heads[:, None] * so_h + d[None, :], out.to(O.dtype.element_ty),
                 mask=gm[:, None] & dm[None, :])
