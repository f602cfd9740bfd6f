"""Paged-KV block manager: free list, reference counts, prefix reuse by block hash. Plain Python: no torch.

A sequence's KV lives in `block_table` (block ids into the engine's preallocated pool). A block that is full and
computed is published under a hash of (previous block's hash, its tokens); a later sequence whose prompt starts
with the same tokens reuses it (ref count + 1) and skips computing it.
"""

from __future__ import annotations

from collections import deque

from roofline.engine.core.sequence import Sequence


NULL_BLOCK = -1  # a position whose blocks are all held elsewhere (BlockManager.table_costs False)


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = True,
                 extra: tuple[int, ...] | None = None, table_costs: bool = True):
        if num_blocks <= 0 or block_size <= 0:
            raise ValueError("num_blocks and block_size must be > 0")
        self.block_size = block_size
        # extra[n]: blocks a sequence of n position blocks holds beyond its table (windowed layers, capped; the
        # recurrent state), constant past the end; table_costs False: positions take no block (all layers windowed)
        self.extra, self.table_costs = extra, table_costs
        self.prefix_caching = prefix_caching and table_costs
        self.ref_count = [0] * num_blocks
        self.free: deque[int] = deque(range(num_blocks))
        self.hash_of: dict[int, int] = {}  # block id -> published hash
        self.block_of: dict[int, int] = {}  # published hash -> block id (may sit in the free list, reusable)

    @property
    def num_free(self) -> int:
        return len(self.free)

    def blocks_needed(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def _extra(self, n: int) -> int:
        extra = self.extra
        return extra[n if n < len(extra) else -1] if extra else 0

    def cost(self, num_tokens: int) -> int:
        """Pool blocks one sequence of `num_tokens` holds."""
        n = -(-num_tokens // self.block_size)
        return (n if self.table_costs else 0) + self._extra(n)

    def new_blocks(self, seq: Sequence, num_tokens: int) -> int:
        """Free blocks `grow(seq, num_tokens)` takes."""
        n = -(-num_tokens // self.block_size)
        more = n - len(seq.block_table)
        if more <= 0:
            return 0
        if self.extra is None:
            return more
        return (more if self.table_costs else 0) + max(self._extra(n) - len(seq.extra_blocks), 0)

    def _chain(self, seq: Sequence, num_blocks: int) -> list[int]:
        """Hash of each of the sequence's first `num_blocks` full blocks, each chained to the one before. Tokens
        are only ever appended, so a full block's hash never changes: computed once, kept on the sequence."""
        hashes, bs = seq.block_hashes, self.block_size
        h = hashes[-1] if hashes else 0
        for i in range(len(hashes), num_blocks):
            h = hash((h, tuple(seq.token_ids[i * bs:(i + 1) * bs])))
            hashes.append(h)
        return hashes[:num_blocks]

    def _take(self, block: int | None = None) -> int:
        if block is None:
            block = self.free.popleft()
            self._unpublish(block)
        elif self.ref_count[block] == 0:
            self.free.remove(block)
        self.ref_count[block] += 1
        return block

    def _unpublish(self, block: int) -> None:
        h = self.hash_of.pop(block, None)
        if h is not None and self.block_of.get(h) == block:
            del self.block_of[h]

    def cached_prefix(self, seq: Sequence) -> list[int]:
        """Published blocks that hold a prefix of the sequence (never all of it: one token must run for logits)."""
        if not self.prefix_caching:
            return []
        hits = []
        for h in self._chain(seq, (len(seq) - 1) // self.block_size):
            if h not in self.block_of:
                break
            hits.append(self.block_of[h])
        return hits

    def _held(self, seq: Sequence, hits: list[int]) -> int:
        """Tokens whose KV a newly admitted sequence already has: prefix hits, or KV transferred to it whole."""
        return max(len(hits) * self.block_size, seq.num_transferred_tokens)

    def _first_chunk(self, seq: Sequence, hits: list[int], budget: int) -> int:
        return min(len(seq) - self._held(seq, hits), budget)

    def can_allocate(self, seq: Sequence, budget: int) -> bool:
        """Room for a new sequence's prefix hits plus blocks for its first chunk of at most `budget` tokens."""
        hits = self.cached_prefix(seq)
        reused_free = sum(1 for b in hits if self.ref_count[b] == 0)
        held = self._held(seq, hits) + self._first_chunk(seq, hits, budget)
        return self.cost(held) - len(hits) + reused_free <= self.num_free

    def allocate(self, seq: Sequence, budget: int) -> int:
        """Give a waiting sequence its prefix hits (sets num_computed_tokens) and blocks for its first chunk;
        returns that chunk's size in tokens."""
        assert not seq.block_table, "sequence already holds blocks"
        hits = self.cached_prefix(seq)
        seq.block_table = [self._take(b) for b in hits]
        seq.num_computed_tokens = self._held(seq, hits)
        chunk = self._first_chunk(seq, hits, budget)
        self.grow(seq, seq.num_computed_tokens + chunk)
        return chunk

    def can_grow(self, seq: Sequence, num_tokens: int) -> bool:
        return self.new_blocks(seq, num_tokens) <= self.num_free

    def grow(self, seq: Sequence, num_tokens: int) -> None:
        """Blocks for the sequence's first `num_tokens` tokens (each as `_take()` gives it, inlined: the hot path)."""
        table = seq.block_table
        n = -(-num_tokens // self.block_size)
        more = n - len(table)
        free, ref, published = self.free, self.ref_count, self.hash_of
        if self.extra is not None and more > 0:
            held = seq.extra_blocks
            for _ in range(self._extra(n) - len(held)):
                block = free.popleft()
                if published:
                    self._unpublish(block)
                ref[block] += 1
                held.append(block)
            if not self.table_costs:  # positions only: the windowed layers' blocks are all in extra_blocks
                table.extend([NULL_BLOCK] * more)
                return
        for _ in range(more):
            block = free.popleft()
            if published:
                self._unpublish(block)
            ref[block] += 1
            table.append(block)

    def publish(self, seq: Sequence) -> None:
        """After a step: publish every full, computed block so later prompts can reuse it."""
        full = seq.num_computed_tokens // self.block_size
        if not self.prefix_caching:
            seq.num_published_blocks = full  # nothing to offer; the count only spares later calls
            return
        if full <= seq.num_published_blocks:
            return
        hashes = self._chain(seq, full)
        for i in range(seq.num_published_blocks, full):
            block, h = seq.block_table[i], hashes[i]
            if block not in self.hash_of and h not in self.block_of:
                self.hash_of[block], self.block_of[h] = h, block
        seq.num_published_blocks = full

    def free_seq(self, seq: Sequence) -> None:
        """Drop the sequence's references; blocks at zero return to the free list (keeping their hash)."""
        ref, free = self.ref_count, self.free
        for block in reversed(seq.extra_blocks + seq.block_table if seq.extra_blocks else seq.block_table):
            if block == NULL_BLOCK:
                continue
            ref[block] -= 1
            if ref[block] <= 0:
                assert ref[block] == 0, f"double free of block {block}"
                free.append(block)
        seq.block_table = []
        seq.extra_blocks = []
        seq.num_computed_tokens = 0
        seq.num_published_blocks = 0
        seq.num_transferred_tokens = 0  # a recompute after preemption runs the whole sequence here

    def fork(self, parent: Sequence, child: Sequence) -> None:
        """Share the parent's full blocks with a child (e.g. parallel sampling); the partial last block is copied
        by the caller into a fresh block, so shared blocks are never written again."""
        full = parent.num_computed_tokens // self.block_size
        child.block_table = [self._take(b) for b in parent.block_table[:full]]
        child.num_computed_tokens = full * self.block_size
