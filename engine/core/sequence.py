"""One request as the scheduler sees it. Plain Python: no torch."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from enum import Enum

_ids = itertools.count()


class Status(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)  # identity semantics: two requests with equal tokens are still two requests
class Sequence:
    token_ids: list[int]  # prompt, then every generated token
    max_tokens: int  # tokens to generate
    temperature: float = 0.0  # 0 = greedy
    seed: int | None = None
    seq_id: int = field(default_factory=lambda: next(_ids))
    num_prompt_tokens: int = 0
    num_computed_tokens: int = 0  # tokens whose KV is in the cache (prefix hits included)
    block_table: list[int] = field(default_factory=list)
    extra_blocks: list[int] = field(default_factory=list)  # windowed layers' and recurrent-state blocks (extra)
    status: Status = Status.WAITING
    state_slot: int | None = None  # recurrent-state slot (Mamba-2 layers)
    preemptions: int = 0
    num_transferred_tokens: int = 0  # KV computed elsewhere and received whole (a prefill instance's prompt)
    block_hashes: list[int] = field(default_factory=list)  # chained hash of each full block, filled lazily
    num_published_blocks: int = 0  # full computed blocks already offered to the prefix cache

    def __post_init__(self):
        if not self.token_ids:
            raise ValueError("a request needs at least one prompt token")
        if self.max_tokens <= 0:
            raise ValueError("max_tokens must be > 0")
        self.num_prompt_tokens = self.num_prompt_tokens or len(self.token_ids)

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def num_uncomputed(self) -> int:
        """Tokens still to run through the model before the next token can be sampled."""
        return len(self.token_ids) - self.num_computed_tokens

    @property
    def output_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens:]

    @property
    def done(self) -> bool:
        return len(self.token_ids) - self.num_prompt_tokens >= self.max_tokens
