"""Continuous batching: decode every running sequence, fill the rest of the token budget with prefill chunks,
admit waiting requests between steps, and preempt (free and recompute later) when blocks run out."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from roofline.engine.core.block_manager import BlockManager
from roofline.engine.core.sequence import Sequence, Status


@dataclass(slots=True)
class Scheduled:
    seq: Sequence
    num_tokens: int  # tokens of this sequence run in this step (1 for decode)

    @property
    def samples(self) -> bool:
        """This chunk reaches the end of the sequence: its last token's logits give the next token."""
        return self.seq.num_computed_tokens + self.num_tokens == len(self.seq)


class Scheduler:
    def __init__(self, blocks: BlockManager, max_num_seqs: int, max_step_tokens: int, state_slots: int = 0,
                 chunked_prefill: bool = True):
        self.blocks, self.max_num_seqs, self.max_step_tokens = blocks, max_num_seqs, max_step_tokens
        # False: a prompt is admitted only when all of it fits the step's token budget (or the step is empty)
        self.chunked_prefill = chunked_prefill
        self.waiting: deque[Sequence] = deque()
        self.running: deque[Sequence] = deque()
        self.free_slots = list(range(state_slots))
        self.uses_state = state_slots > 0
        self.num_preemptions = 0  # sequences preempted so far (each recomputes its context when readmitted)

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running

    def schedule(self) -> list[Scheduled]:
        """One step's work: running sequences first (decode or their next prefill chunk), then new ones."""
        out: list[Scheduled] = []
        budget, bs, running = self.max_step_tokens, self.blocks.block_size, Status.RUNNING
        for seq in list(self.running):
            if budget == 0:
                break
            if seq.status is not running:
                continue  # preempted earlier in this loop
            computed = seq.num_computed_tokens
            n = len(seq.token_ids) - computed
            if n > budget:
                n = budget
            if -(-(computed + n) // bs) > len(seq.block_table) and not self._make_room(seq, computed + n, out):
                continue
            out.append(Scheduled(seq, n))
            budget -= n
        while self.waiting and budget > 0 and self._admissible(self.waiting[0], budget, not out):
            seq = self.waiting.popleft()
            n = self.blocks.allocate(seq, self._chunk_budget(budget))  # prefix hits shrink the work
            seq.status = Status.RUNNING
            seq.state_slot = self.free_slots.pop() if self.uses_state else None
            self.running.append(seq)
            out.append(Scheduled(seq, n))
            budget -= n
        return out

    def _chunk_budget(self, budget: int) -> int:
        return budget if self.chunked_prefill else len(self.blocks.ref_count) * self.blocks.block_size

    def _admissible(self, seq: Sequence, budget: int, step_empty: bool) -> bool:
        """The head of the queue can start now: a sequence slot, a state slot, blocks for its first chunk, and
        (chunked prefill off) its whole prompt within the budget unless the step is otherwise empty."""
        if len(self.running) >= self.max_num_seqs or (self.uses_state and not self.free_slots):
            return False
        if not self.chunked_prefill and not step_empty and seq.num_uncomputed > budget:
            return False
        return self.blocks.can_allocate(seq, self._chunk_budget(budget))

    # --- pure-decode stretches, advanced in bulk (the serving simulator; the engine steps one at a time) --------

    def decode_horizon(self) -> int:
        """How many coming steps are certain to be pure decode: every running sequence runs one token, nobody is
        admitted (the queue's head stays blocked: its blocks only get scarcer) and nobody is preempted (the free
        blocks cover every sequence's growth). The last of them retires the first sequence to finish. 0 when the
        next step is anything else."""
        running = self.running
        if not running or len(running) > self.max_step_tokens:
            return 0
        if self.waiting and self._admissible(self.waiting[0], self.max_step_tokens - len(running), False):
            return 0
        k = None
        for s in running:
            n = len(s.token_ids)
            if n - s.num_computed_tokens != 1:
                return 0
            left = s.max_tokens - n + s.num_prompt_tokens  # tokens still to generate
            k = left if k is None or left < k else k
        if self._growth(k) <= self.blocks.num_free:
            return k
        lo, hi = 0, k  # the most steps whose block growth fits the free list (growth is monotone in steps)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._growth(mid) <= self.blocks.num_free:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _growth(self, steps: int) -> int:
        """Blocks the running sequences take over `steps` decode steps."""
        if self.blocks.extra is not None:
            new = self.blocks.new_blocks
            return sum(new(s, s.num_computed_tokens + steps) for s in self.running)
        bs, total = self.blocks.block_size, 0
        for s in self.running:
            more = -(-(s.num_computed_tokens + steps) // bs) - len(s.block_table)
            if more > 0:
                total += more
        return total

    def advance_decode(self, steps: int, token: int) -> list[Sequence]:
        """`steps` (<= decode_horizon()) pure-decode steps at once, `token` sampled each time: the state that as
        many rounds of schedule() and finish_step() leave, blocks taken in the same order. Returns the finished."""
        bs = self.blocks.block_size
        takes = []  # (step, position in the running queue, sequence, tokens held) for each block boundary crossed
        for i, s in enumerate(self.running):
            for b in range(len(s.block_table), self.blocks.blocks_needed(s.num_computed_tokens + steps)):
                held = b * bs + 1
                takes.append((held - s.num_computed_tokens, i, s, held))
        for _, _, s, held in sorted(takes, key=lambda t: (t[0], t[1])):
            self.blocks.grow(s, held)
        done, extra, publish = [], [token] * steps, self.blocks.publish
        for s in list(self.running):
            s.num_computed_tokens += steps
            s.token_ids += extra
            if s.num_computed_tokens // bs > s.num_published_blocks:
                publish(s)
            if len(s.token_ids) - s.num_prompt_tokens >= s.max_tokens:  # s.done, inlined
                self._retire(s)
                done.append(s)
        return done

    def _retire(self, seq: Sequence) -> None:
        seq.status = Status.FINISHED
        self.running.remove(seq)
        self.blocks.free_seq(seq)
        self._release_slot(seq)

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
        self.num_preemptions += 1
        self.waiting.appendleft(seq)

    def finish_step(self, work: list[Scheduled], sampled: dict[int, int]) -> list[Sequence]:
        """Record computed tokens and sampled ones; retire finished sequences. Returns those that finished."""
        done, bs, publish = [], self.blocks.block_size, self.blocks.publish
        for item in work:
            seq = item.seq
            seq.num_computed_tokens += item.num_tokens
            token = sampled.get(seq.seq_id)
            if token is not None:
                seq.token_ids.append(token)
            if seq.num_computed_tokens // bs > seq.num_published_blocks:
                publish(seq)
            if len(seq.token_ids) - seq.num_prompt_tokens >= seq.max_tokens:  # seq.done, inlined (the hot loop)
                self._retire(seq)
                done.append(seq)
        return done

    def _release_slot(self, seq: Sequence) -> None:
        if seq.state_slot is not None:
            self.free_slots.append(seq.state_slot)
            seq.state_slot = None
