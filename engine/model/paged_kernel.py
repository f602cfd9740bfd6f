"""A Triton paged decode-attention kernel: one program per (sequence, KV head, partition of the context) walks only
that partition of the sequence's blocks with an online softmax, for the G = heads / kv_heads query heads sharing the
KV head; the partitions' results are merged after (flash-decoding).

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
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"  # Triton reads it once, at import, too


def usable(q: torch.Tensor, cache) -> bool:
    """Triton imports, the tensors are on CUDA (or the interpreter runs), and the cache holds the model dtype."""
    if triton is None or cache.int8:
        return False
    return q.is_cuda or INTERPRETED


# Partitions of a sequence's context run in parallel (flash-decoding): at batch 1 one program per KV head alone
# leaves most of a GPU idle and walks the context serially. Enough programs to fill a large GPU several times over
# (an H100 or H200 has 132 SMs), each taking at least MIN_PARTITION_BLOCKS blocks (so its partial result is worth
# keeping) and at most MAX_PARTITION_BLOCKS (a program walks its blocks serially: sized from the tables' width alone,
# partitions of 16 and 32 blocks at 16 and 32 sequences of 4 KV heads made those steps 16-22% slower than partitions
# of 8 on an H200; of 4 blocks against 8, 4 were faster up to 8 sequences; docs/calibration.md, "NVIDIA H200").
TARGET_PROGRAMS = 2048
MIN_PARTITION_BLOCKS = 4
MAX_PARTITION_BLOCKS = 8
# None: partitions sized as above. N: fixed partitions of N blocks, most of them past a short sequence's end and
# exiting at once; set before the engine captures its graphs (benchmarks/decode_partitions.py measures both).
PARTITION_BLOCKS: int | None = None


def partitions(sequences: int, kv_heads: int, max_blocks: int) -> tuple[int, int]:
    """(partitions per sequence and KV head, blocks per partition) for `max_blocks` table entries per sequence."""
    if PARTITION_BLOCKS:
        per_part = min(PARTITION_BLOCKS, max(max_blocks, 1))
        return -(-max_blocks // per_part), per_part
    want = max(1, -(-TARGET_PROGRAMS // max(sequences * kv_heads, 1)))
    parts = max(1, min(want, max_blocks // MIN_PARTITION_BLOCKS), -(-max_blocks // MAX_PARTITION_BLOCKS))
    return parts, -(-max_blocks // parts)


def paged_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, tables: torch.Tensor, kv_lens: torch.Tensor,
                 block_size: int, scale: float, window: int | None) -> torch.Tensor:
    """q [S, H, D]; k, v [num_blocks * block_size, K, D]; tables [S, W] long; kv_lens [S] long -> [S, H, D].
    Each (sequence, KV head, partition) program attends over its share of the blocks with an online softmax and
    writes its running max, denominator and weighted sum; the partitions are then merged (shapes depend on S and W
    only: capturable)."""
    s, h, d = q.shape
    kv = k.shape[1]
    group = h // kv
    parts, per_part = partitions(s, kv, tables.shape[1])
    m = torch.empty(s, h, parts, dtype=torch.float32, device=q.device)
    den = torch.empty_like(m)
    acc = torch.empty(s, h, parts, d, dtype=torch.float32, device=q.device)
    _decode_kernel[(s, kv, parts)](q, k, v, tables, kv_lens, m, den, acc, scale, window or NO_WINDOW,
                                   q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
                                   tables.stride(0), m.stride(0), m.stride(1), acc.stride(0), acc.stride(1),
                                   acc.stride(2), G=group, GP=max(triton.next_power_of_2(group), 2), D=d,
                                   DP=triton.next_power_of_2(d), BS=block_size, PB=per_part,
                                   INTERPRET=INTERPRETED)
    weight = torch.exp(m - m.amax(-1, keepdim=True))  # [S, H, P]; 0 for a partition with nothing visible
    out = (acc * weight[..., None]).sum(2) / (den * weight).sum(-1, keepdim=True)
    return out.to(q.dtype)


if triton is not None:
    @triton.jit
    def _attend_block(K, V, T, q, m, den, acc, b, s, kh, length, lo, scale, sk_t, sk_h, sv_t, sv_h, st_s, d, dm, t,
                      BS: tl.constexpr):
        """Fold block `b` of sequence `s` (its positions in [lo, length)) into the online softmax (m, den, acc)."""
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
        return m_new, den * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.sum(p[:, :, None] * vb[None, :, :], 1)

    @triton.jit
    def _decode_kernel(Q, K, V, T, L, M, DEN, ACC, scale, window, sq_s, sq_h, sk_t, sk_h, sv_t, sv_h, st_s, sm_s,
                       sm_h, sa_s, sa_h, sa_p, G: tl.constexpr, GP: tl.constexpr, D: tl.constexpr,
                       DP: tl.constexpr, BS: tl.constexpr, PB, INTERPRET: tl.constexpr):
        s, kh, part = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        g, d, t = tl.arange(0, GP), tl.arange(0, DP), tl.arange(0, BS)
        gm, dm = g < G, d < D
        heads = kh * G + g  # [GP] query heads of this KV head
        q = tl.load(Q + s * sq_s + heads[:, None] * sq_h + d[None, :], mask=gm[:, None] & dm[None, :], other=0.0)
        q = q.to(tl.float32)
        length = tl.load(L + s)
        lo = tl.maximum(length - window, 0)  # first visible position
        first = tl.maximum(part * PB, lo // BS)  # this partition's blocks that hold a visible position
        last = tl.minimum((part + 1) * PB, (length + BS - 1) // BS)
        m = tl.full([GP], -1e30, tl.float32)  # running max of scores (finite: an empty partition weighs exp(-1e30))
        den = tl.zeros([GP], tl.float32)  # running softmax denominator
        acc = tl.zeros([GP, DP], tl.float32)  # running weighted sum of values
        if INTERPRET:  # Triton's interpreter takes no loop bound loaded from memory; a while loop it does take
            b = first
            while b < last:
                m, den, acc = _attend_block(K, V, T, q, m, den, acc, b, s, kh, length, lo, scale, sk_t, sk_h, sv_t,
                                            sv_h, st_s, d, dm, t, BS)
                b += 1
        else:
            for b in range(first, last):
                m, den, acc = _attend_block(K, V, T, q, m, den, acc, b, s, kh, length, lo, scale, sk_t, sk_h, sv_t,
                                            sv_h, st_s, d, dm, t, BS)
        out = gm[:, None] & dm[None, :]
        tl.store(M + s * sm_s + heads * sm_h + part, m, mask=gm)
        tl.store(DEN + s * sm_s + heads * sm_h + part, den, mask=gm)
        tl.store(ACC + s * sa_s + heads[:, None] * sa_h + part * sa_p + d[None, :], acc, mask=out)
