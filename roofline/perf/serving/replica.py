"""One engine instance (a TP x PP group of GPUs) in the simulation: the engine's Scheduler and BlockManager over a
KV pool sized by the memory budget, a clock, and the step timer."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.engine.core.block_manager import BlockManager
from roofline.engine.core.scheduler import Scheduler
from roofline.engine.core.sequence import Sequence
from roofline.errors import RooflineError
from roofline.perf.efficiency import Efficiency
from roofline.perf.serving.metrics import Collector
from roofline.perf.serving.policy import ServingPolicy
from roofline.perf.serving.steptime import StepTimer
from roofline.perf.serving.workload import Request
from roofline.perf.workload import Workload
from roofline.sizing.kv import BlockCosts, block_costs
from roofline.sizing.memory import Deployment, memory_budget, preallocated_bytes

WAITING_CAP = 4096  # sequences a replica's scheduler holds waiting; later arrivals queue as bare requests whose
# prompt token ids are made as they join it (a waiting Sequence with its ids takes ~3.5 KB, a bare request ~0.5)
MORE_MEMORY = "; use more --gpus or a smaller --quant"  # serve's advice when the weights leave no KV room
UNBOUNDED_BLOCKS = 1 << 20  # a model with no per-token KV (pure Mamba-2): blocks only count positions; also the
# most a pool ever gets (16M tokens at vLLM's 16-token blocks, 30x an H200's pool for an 8B model)


def kv_pool_blocks(card: ModelCard, hw: HardwareCard, wl: Workload, policy: ServingPolicy) -> int:
    """Blocks of `policy.sim_block_tokens` the KV pool holds on each GPU of a replica. preallocate / on_demand:
    what `memory_budget` leaves of `preallocated_bytes` (gpu_memory_utilization of what the device reports) after
    weights, activations at the step's token budget and the runtime; free_fraction: gpu_memory_utilization of what
    they leave of all it reports. per_slot: each slot's context, if it fits."""
    slots = policy.effective_max_seqs
    dep = Deployment(wl.tp, wl.pp, policy.sim_block_tokens, policy.max_num_batched_tokens)
    if policy.memory_policy == "per_slot":
        ctx = min(policy.slot_tokens or card.architecture.max_context,
                  card.architecture.max_context)  # a default beyond the model's context is cut to it (Ollama)
        budget = memory_budget(card, hw, wl.quant, wl.kv_quant, ctx, slots, dep)
        if not bool(budget.fits):
            raise RooflineError(f"{card.name} on {hw.name}: {slots} slots of {ctx:,} tokens need "
                                f"{float(budget.total_bytes) / 1e9:,.1f} GB of {hw.memory.capacity_bytes / 1e9:,.1f} GB; "
                                f"use fewer slots, a shorter context or a smaller --quant")
        return min(slots * -(-ctx // policy.sim_block_tokens), UNBOUNDED_BLOCKS)
    budget = memory_budget(card, hw, wl.quant, wl.kv_quant, policy.sim_block_tokens, slots, dep)
    costs = pool_costs(card, wl, policy)
    per_block = costs.unit_bytes
    util = policy.gpu_memory_utilization if policy.memory_policy == "preallocate" else 1.0
    room = preallocated_bytes(hw, util) - float(budget.fixed_bytes - budget.reserved_bytes)
    if policy.memory_policy == "free_fraction":  # the pool takes its share of what the rest leaves
        room = policy.gpu_memory_utilization * room
    if room <= 0:
        raise RooflineError(f"{card.name} does not fit {hw.name} x{wl.tp * wl.pp}: weights "
                            f"{budget.weights_bytes / 1e9:,.1f} GB per GPU + activations and runtime exceed "
                            f"{util:.0%} of {hw.memory.usable_bytes / 1e9:,.1f} GB "
                            f"({_share_source(policy)}){MORE_MEMORY}")
    if per_block <= 0:
        return UNBOUNDED_BLOCKS
    blocks = int(room // per_block)
    if blocks < 1:
        raise RooflineError(f"{card.name} on {hw.name}: no room for a KV block after the weights")
    # blocks beyond what every slot holds at the model's whole context are never used (a tiny model on a big card
    # would otherwise build a free list of hundreds of millions)
    useful = slots * costs.blocks(card.architecture.max_context, policy.sim_block_tokens)
    return min(blocks, useful, UNBOUNDED_BLOCKS)


def pool_costs(card: ModelCard, wl: Workload, policy: ServingPolicy) -> BlockCosts:
    """What a sequence holds of the pool (per_slot runtimes: positions only, each slot's context reserved)."""
    if policy.memory_policy == "per_slot":
        return BlockCosts(1.0)
    return block_costs(card, wl.kv_quant, policy.sim_block_tokens, wl.tp, wl.pp)


def _share_source(policy: ServingPolicy) -> str:
    """Where the share of memory a serving replica takes comes from, for the refusal that cites it."""
    if policy.name == "generic":
        return "no --runtime: all the memory the device reports"
    return f"{policy.name}'s share of the GPU"


@dataclass
class ReplicaSetup:
    """What replicas of one kind share: the cards, the policy, the pool size and the step timer."""

    card: ModelCard
    hw: HardwareCard
    wl: Workload
    policy: ServingPolicy
    eff: Efficiency
    num_blocks: int
    timer: StepTimer
    costs: BlockCosts = BlockCosts(1.0)

    @classmethod
    def build(cls, card, hw, wl, policy, eff, num_blocks: int | None = None) -> "ReplicaSetup":
        policy = policy.for_model(card.architecture.max_context)
        blocks = num_blocks or kv_pool_blocks(card, hw, wl, policy)
        max_ctx = card.architecture.max_context
        timer = StepTimer(card, hw, wl, eff, policy.max_num_batched_tokens, policy.effective_max_seqs, max_ctx)
        return cls(card, hw, wl, policy, eff, blocks, timer, pool_costs(card, wl, policy))

    @property
    def max_request_tokens(self) -> int:
        """The longest request (prompt + output) one sequence can hold."""
        p = self.policy
        c, bs = self.costs, p.sim_block_tokens
        pool = self.num_blocks * bs
        if c.extra is not None:  # the most positions whose blocks, with what stays beside them, fit the pool
            if c.table_costs:
                pool = max(self.num_blocks - c.extra[-1], 0) * bs
            elif self.num_blocks >= c.extra[-1]:
                pool = self.card.architecture.max_context
            else:
                pool = next((i for i, e in enumerate(c.extra) if e > self.num_blocks), 1) * bs - bs
        if p.memory_policy == "per_slot":
            pool = p.slot_tokens or pool
        return min(pool, self.card.architecture.max_context)


class Replica:
    def __init__(self, setup: ReplicaSetup, metrics: Collector, fast_forward: bool = True,
                 shared_prefixes: bool = True):
        p = setup.policy
        self.setup, self.metrics, self.fast_forward = setup, metrics, fast_forward
        # recurrent state is not per block; and prompts that share no tokens never hit the cache, so a stream
        # without shared prefixes skips the hashing (the same blocks are taken in the same order either way)
        caching = p.prefix_caching and not setup.card.architecture.mamba2 and shared_prefixes
        slots = p.effective_max_seqs if setup.card.architecture.mamba2 else 0
        self.blocks = BlockManager(setup.num_blocks, p.sim_block_tokens, caching, setup.costs.extra,
                                   setup.costs.table_costs)
        self.scheduler = Scheduler(self.blocks, p.effective_max_seqs, p.max_num_batched_tokens, slots,
                                   p.chunked_prefill)
        self.now = 0.0
        self.outstanding_tokens = 0  # prompt + output tokens of requests here and not finished (the router's load)
        self.backlog: deque = deque()  # (make a Sequence, arrival s) beyond WAITING_CAP, first come first served
        self.prefixes: set[str] = set()  # prefix ids served here (the prefix-aware router's memory)

    @property
    def idle(self) -> bool:
        return self.scheduler.idle and not self.backlog

    @property
    def queued(self) -> int:
        return len(self.scheduler.waiting) + len(self.backlog)

    def admit(self, make: Callable[[], Sequence], tokens: int, t: float) -> None:
        """A request of `tokens` (prompt + output) reaches this replica at time t (its scheduler sees it at the next
        step boundary); `make` builds its Sequence when it joins the scheduler's waiting queue."""
        if self.idle:
            self.now = max(self.now, t)
        self.outstanding_tokens += tokens
        self.backlog.append((make, t))
        self._refill()
        # the queue as the request joins it (a burst faster than a step shows in the series, and so as overload)
        self.metrics.sample(t, len(self.scheduler.running), self.queued, self.kv_use(), id(self))

    def _refill(self) -> None:
        """Move requests from the backlog into the scheduler's waiting queue, up to WAITING_CAP."""
        while self.backlog and len(self.scheduler.waiting) < WAITING_CAP:
            make, t = self.backlog.popleft()
            seq = make()
            seq.replica_arrival_s = t
            self.scheduler.add(seq)

    def kv_use(self) -> float:
        return 1.0 - self.blocks.num_free / len(self.blocks.ref_count)

    def step(self, until: float) -> list[Sequence]:
        """Run the next step (or a stretch of pure-decode steps ending no later than the first step boundary at
        or after `until`, the next arrival); returns the sequences that finished, their times recorded."""
        sched = self.scheduler
        self._refill()
        horizon = sched.decode_horizon() if self.fast_forward else 0
        if horizon >= 2:
            return self._decode_run(horizon, until if not sched.waiting else math.inf)
        work = sched.schedule()
        if not work:
            head = sched.waiting[0] if sched.waiting else None
            raise RooflineError(f"a request of {len(head) + head.max_tokens if head else 0:,} tokens cannot be "
                                f"scheduled: the KV pool holds {len(self.blocks.ref_count) * self.blocks.block_size:,} "
                                f"tokens; use a shorter --prompt/--output or more memory")
        start = self.now
        decode_ctx, pre_n, pre_c, samplers = [], [], [], []
        for w in work:
            s, n = w.seq, w.num_tokens
            computed = s.num_computed_tokens
            if s.start_s is None:
                s.start_s = start
            if n == 1:
                decode_ctx.append(computed)
            else:
                pre_n.append(n)
                pre_c.append(computed)
            if computed + n == len(s.token_ids):  # Scheduled.samples: the chunk reaches the end
                samplers.append(s)
        dt = self.setup.timer.step_seconds(decode_ctx, pre_n, pre_c, len(samplers))
        self.now = end = start + dt
        gaps = []
        for s in samplers:
            if s.first_s is None:
                s.first_s = end
            else:
                gaps.append(end - s.last_emit_s)
            s.last_emit_s = end
        if gaps:
            self.metrics.itl.add(gaps)
        self.metrics.steps += 1
        done = sched.finish_step(work, dict.fromkeys([s.seq_id for s in samplers], 0))
        self.metrics.sample(end, len(sched.running), self.queued, self.kv_use(), id(self))
        return self._finish(done)

    def _decode_run(self, horizon: int, until: float) -> list[Sequence]:
        running = list(self.scheduler.running)
        contexts = np.array([s.num_computed_tokens for s in running], dtype=float)
        durations = self.setup.timer.decode_run_seconds(contexts, horizon)
        ends = self.now + np.cumsum(durations)
        starts = ends - durations
        steps = max(1, min(horizon, int(np.searchsorted(starts, until, side="left"))))
        ends, durations = ends[:steps], durations[:steps]
        first, gaps = float(ends[0]), []
        for s in running:  # each one's first gap: since its own last token
            if s.first_s is None:  # a prompt whose last chunk is one token, run as a decode in the first step
                s.first_s = first
            else:
                gaps.append(first - s.last_emit_s)
        self.metrics.itl.add(gaps)
        if steps > 1:
            self.metrics.itl.add(durations[1:].tolist(), len(running))
        done = self.scheduler.advance_decode(steps, 0)
        self.now = float(ends[-1])
        for s in running:
            s.last_emit_s = self.now
        self.metrics.steps += steps
        self.metrics.sample(self.now, len(self.scheduler.running), self.queued, self.kv_use(), id(self))
        return self._finish(done)

    def _finish(self, done: list[Sequence]) -> list[Sequence]:
        for s in done:
            s.finish_s = self.now
            self.outstanding_tokens -= s.num_prompt_tokens + s.max_tokens
        self._refill()
        return done


class TokenSpace:
    """Token ids for simulated prompts: a shared prefix gets the same ids in every request that names it, the
    rest ids no other request uses (so the prefix cache hits exactly where prompts really share tokens). With
    `shared_prefixes` False nothing hashes the ids: they are all 0 (a list built in one C call)."""

    def __init__(self, shared_prefixes: bool = True):
        self._next = 1
        self._prefix: dict[str, int] = {}
        self.shared_prefixes = shared_prefixes

    def prompt(self, req: Request) -> list[int]:
        if not self.shared_prefixes:
            return [0] * req.prompt_tokens
        shared = []
        if req.prefix_id is not None and req.prefix_tokens:
            base = self._prefix.setdefault(req.prefix_id, -(len(self._prefix) + 1) << 32)
            shared = list(range(base, base + req.prefix_tokens))
        n = req.prompt_tokens - len(shared)
        own = list(range(self._next, self._next + n))
        self._next += n
        return shared + own


def new_sequence(req: Request, tokens: list[int], arrival_s: float) -> Sequence:
    seq = Sequence(tokens, req.output_tokens)
    seq.req, seq.arrival_s, seq.first_s, seq.last_emit_s, seq.start_s = req, arrival_s, None, arrival_s, None
    return seq
