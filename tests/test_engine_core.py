"""The engine's torch-free core (block manager, sequences): runs without torch installed."""

from hypothesis import given, settings
from hypothesis import strategies as st
from roofline.engine.core.block_manager import BlockManager
from roofline.engine.core.sequence import Sequence

# --- block manager invariants (property test) ---------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["alloc", "grow", "free", "fork", "publish"]), st.integers(0, 7),
                          st.integers(1, 40)), max_size=60))
def test_block_manager_never_leaks_or_double_frees(ops):
    bm = BlockManager(num_blocks=24, block_size=4)
    live: list[Sequence] = []
    for op, pick, n in ops:
        seq = live[pick % len(live)] if live else None
        if op == "alloc":
            new = Sequence([pick % 3] * n, 1)
            if bm.can_allocate(new, n):
                chunk = bm.allocate(new, n)
                assert len(new.block_table) == bm.blocks_needed(new.num_computed_tokens + chunk)
                live.append(new)
        elif op == "grow" and seq and bm.can_grow(seq, len(seq.block_table) * 4 + n):
            bm.grow(seq, len(seq.block_table) * 4 + n)
            seq.token_ids += [1] * n
        elif op == "publish" and seq:
            seq.num_computed_tokens = min(len(seq), len(seq.block_table) * 4)
            bm.publish(seq)
        elif op == "fork" and seq:
            child = Sequence(list(seq.token_ids), 1)
            bm.fork(seq, child)
            live.append(child)
        elif op == "free" and seq:
            bm.free_seq(seq)
            live.remove(seq)
        refs = [0] * 24
        for s in live:
            for b in s.block_table:
                refs[b] += 1
        assert refs == bm.ref_count
        assert sorted(bm.free) == [b for b in range(24) if refs[b] == 0]
        assert len(set(bm.free)) == len(bm.free)
