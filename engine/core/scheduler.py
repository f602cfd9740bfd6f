"""Continuous batching: decode every running sequence, fill the rest of the token budget with prefill chunks,
admit waiting requests between steps, and preempt (free and recompute later) when blocks run out."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from roofline.engine.core.block_manager import BlockManager
from roofline.engine.core.sequence import Sequence, Status


@dataclass
class Scheduled:
    seq: Sequence
    num_tokens: int  # tokens of this sequence run in this step (1 for decode)

    @property
    def samples(self) -> bool:
        """This chunk reaches the end of the sequence: its last token's logits give the next token."""
        return self.seq.num_computed_tokens + self.num_tokens == len(self.seq)


class Scheduler:
    def __init__(self, blocks: BlockManager, max_num_seqs: int, max_step_tokens: int, state_slots: int = 0):
        self.blocks, self.max_num_seqs, self.max_step_tokens = blocks, max_num_seqs, max_step_tokens
        self.waiting: deque[Sequence] = deque()
        self.running: deque[Sequence] = deque()
        self.free_slots = list(range(state_slots))
        self.uses_state = state_slots > 0

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running

    def schedule(self) -> list[Scheduled]:
        """One step's work: running sequences first (decode or their next prefill chunk), then new ones."""
        out: list[Scheduled] = []
        budget = self.max_step_tokens
        for seq in list(self.running):
            if budget == 0:
                break
            if seq.status is not Status.RUNNING:
                continue  # preempted earlier in this loop
            n = min(seq.num_uncomputed, budget)
            if not self._make_room(seq, seq.num_computed_tokens + n, out):
                continue
            out.append(Scheduled(seq, n))
            budget -= n
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if self.uses_state and not self.free_slots:
                break
            if not self.blocks.can_allocate(seq, budget):
                break
            self.waiting.popleft()
            n = self.blocks.allocate(seq, budget)  # prefix hits shrink the work
            seq.status = Status.RUNNING
            seq.state_slot = self.free_slots.pop() if self.uses_state else None
            self.running.append(seq)
            out.append(Scheduled(seq, n))
            budget -= n
        return out

    def _make_room(self, seq: Sequence, num_tokens: int, scheduled: list[Scheduled]) -> bool:
        """Blocks for `seq` to hold `num_tokens`, preempting the newest other running sequences if needed."""
        while not self.blocks.can_grow(seq, num_tokens):
            victims = [s for s in reversed(self.running) if s is not seq and s not in {x.seq for x in scheduled}]
            if not victims:
                self.preempt(seq)
                return False
            self.preempt(victims[0])
        self.blocks.grow(seq, num_tokens)
        return True

    def preempt(self, seq: Sequence) -> None:
        """Free the sequence's cache; it waits at the front and recomputes its tokens when readmitted."""
        self.running.remove(seq)
        self.blocks.free_seq(seq)
        self._release_slot(seq)
        seq.status = Status.WAITING
        seq.preemptions += 1
        self.waiting.appendleft(seq)

    def finish_step(self, work: list[Scheduled], sampled: dict[int, int]) -> list[Sequence]:
        """Record computed tokens and sampled ones; retire finished sequences. Returns those that finished."""
        done = []
        for item in work:
            seq = item.seq
            seq.num_computed_tokens += item.num_tokens
            if seq.seq_id in sampled:
                seq.token_ids.append(sampled[seq.seq_id])
            self.blocks.publish(seq)
            if seq.done:
                seq.status = Status.FINISHED
                self.running.remove(seq)
                self.blocks.free_seq(seq)
                self._release_slot(seq)
                done.append(seq)
        return done

    def _release_slot(self, seq: Sequence) -> None:
        if seq.state_slot is not None:
            self.free_slots.append(seq.state_slot)
            seq.state_slot = None
