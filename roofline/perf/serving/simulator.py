"""The event loop: arrivals (open loop, closed loop or a trace) routed to replicas, each replica stepping its own
engine scheduler on its own clock; the replica furthest behind in time always moves next, so events happen in
time order."""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from roofline.engine.core.sequence import Sequence
from roofline.errors import RooflineError
from roofline.perf.serving.deployment import Fleet, Router
from roofline.perf.serving.metrics import Collector, SloMissed, check_slos
from roofline.perf.serving.replica import Replica, TokenSpace, new_sequence
from roofline.perf.serving.workload import Request


# a run is refused as thrashing past this many preemptions, and past this many per request served so far: vLLM
# preempts a sequence when its next block is not free and recomputes it later; a pool too small for the load
# preempts the same long sequences thousands of times each, which no measurement of a usable setup shows
MIN_THRASH_PREEMPTIONS = 10_000
THRASH_PREEMPTIONS_PER_REQUEST = 20


class Thrashing(RooflineError):
    """Preemptions beyond the thrash limits: the run would take time in proportion to them, not to its requests."""


@dataclass
class ClosedLoop:
    """N clients, each sending its next request the moment the previous one completes (as `vllm bench serve
    --max-concurrency N` and genai-perf's concurrency mode run); all start at t = 0."""

    clients: int
    requests: Iterable[Request]  # sizes; arrival times are set by the loop

    def __post_init__(self):
        if self.clients < 1:
            raise RooflineError(f"--concurrency: needs at least 1 client, got {self.clients}")


@dataclass
class ServingResult:
    metrics: Collector
    fleet: Fleet
    extra: dict = field(default_factory=dict)
    aborted: bool = False  # stopped early: more requests missed the SLO than the caller allowed

    def summary(self) -> dict:
        s = self.metrics.summary()
        gpus, p = self.fleet.gpus, self.fleet.setup.policy
        s.update(gpus=gpus, output_tok_s_per_gpu=s["output_tok_s"] / gpus, replicas=self.fleet.replicas,
                 kv_pool_tokens_per_replica=self.fleet.setup.num_blocks * p.sim_block_tokens,
                 runtime=p.name, scheduler={"max_num_batched_tokens": p.max_num_batched_tokens,
                                            "max_num_seqs": p.effective_max_seqs, "chunked_prefill": p.chunked_prefill,
                                            "block_size_tokens": p.block_size_tokens,
                                            "simulated_block_tokens": p.sim_block_tokens,
                                            "prefix_caching": p.prefix_caching, "memory_policy": p.memory_policy},
                 **self.extra)
        return s


class Simulation:
    def __init__(self, fleet: Fleet, metrics: Collector, fast_forward: bool = True, shared_prefixes: bool = True,
                 advance: Callable[[], None] | None = None):
        self.fleet, self.metrics = fleet, metrics
        self.advance = advance or (lambda: None)  # called as each request completes (a progress bar)
        self.decode = [Replica(fleet.setup, metrics, fast_forward, shared_prefixes) for _ in range(fleet.replicas)]
        self.prefill = [Replica(fleet.prefill_setup, metrics, fast_forward, shared_prefixes)
                        for _ in range(fleet.prefill_replicas)] if fleet.prefill_setup is not None else []
        self.router = Router(fleet.router, self.decode)
        self.prefill_router = Router("least_tokens", self.prefill) if self.prefill else None
        self.replicas = self.prefill + self.decode
        self.transfers: dict[int, deque] = {}  # prefill replica -> (start s, end s) of the hand-offs on its links
        self.tokens = TokenSpace(shared_prefixes)
        self.events: list = []  # (time, order, kind, payload)
        self._order = itertools.count()
        self.limit = min(r.setup.max_request_tokens for r in self.replicas)
        self.context = fleet.setup.card.architecture.max_context
        self.count = 0

    def push(self, t: float, kind: str, payload) -> None:
        heapq.heappush(self.events, (t, next(self._order), kind, payload))

    def _check(self, req: Request) -> None:
        self.count += 1
        total = req.prompt_tokens + req.output_tokens
        where, fix = (req.where, "shorten or drop the row") if req.where else (f"request {self.count}", "")
        if req.prompt_tokens >= self.context or total > self.context:
            raise RooflineError(f"{where}: {req.prompt_tokens:,} prompt + {req.output_tokens:,} output tokens exceed "
                                f"{self.fleet.setup.card.name}'s context of {self.context:,} tokens; "
                                f"{fix or 'use a shorter --prompt/--output'}")
        policy = self.fleet.setup.policy
        if not policy.chunked_prefill and req.prompt_tokens > policy.max_num_batched_tokens:
            raise RooflineError(f"{where}: its {req.prompt_tokens:,}-token prompt is more than the "
                                f"{policy.max_num_batched_tokens:,} tokens {policy.name} runs in one step without "
                                f"chunked prefill, which it refuses; {fix or 'use shorter prompts'}")
        if total > self.limit:
            slots = self.fleet.setup.policy.memory_policy == "per_slot"
            held = "a slot's context" if slots else "the KV pool"
            more = f" or give --context {total} (a slot's tokens)" if slots else " or more memory"
            raise RooflineError(f"{where}: {total:,} tokens exceed what one sequence can hold here ({self.limit:,}, "
                                f"{held}); {fix or 'use shorter requests' + more}")

    def _check_thrash(self) -> None:
        """Refuse a run whose KV pool thrashes: sequences preempted over and over, each recomputing its context
        (the simulation's work then grows with every preemption, not with the requests)."""
        done = sum(r.scheduler.num_preemptions for r in self.replicas)
        if done > max(MIN_THRASH_PREEMPTIONS, THRASH_PREEMPTIONS_PER_REQUEST * self.count):
            setup = self.fleet.setup
            raise Thrashing(f"the KV pool thrashes: {done:,} preemptions for {self.count:,} requests so far, each "
                            f"recomputing its whole context ({setup.num_blocks * setup.policy.sim_block_tokens:,} "
                            "tokens of KV per replica); lower --rate or --concurrency, shorten --output or give it "
                            "more memory (--gpus)")

    def _arrive(self, req: Request, t: float) -> None:
        self._check(req)
        if self.prefill:  # disaggregated: the prompt runs on a prefill replica, which samples the first token
            self.prefill_router.pick(req).admit(lambda: self._prefill_sequence(req, t), req.prompt_tokens + 1, t)
        else:
            self.router.pick(req).admit(lambda: new_sequence(req, self.tokens.prompt(req), t),
                                        req.prompt_tokens + req.output_tokens, t)

    def _prefill_sequence(self, req: Request, t: float) -> Sequence:
        """The prompt's sequence on a prefill replica: it samples the first token, then hands off (`req` rides
        along)."""
        first = Request(req.arrival_s, req.prompt_tokens, 1, req.prefix_id, req.prefix_tokens)
        seq = new_sequence(first, self.tokens.prompt(req), t)
        seq.req = req
        return seq

    def _sample_links(self, link: int, t: float) -> None:
        """The hand-offs still to start on a prefill replica's links count as waiting requests in the fleet's series
        (a link too slow for the load backs up there, and the run reads overloaded)."""
        queued = self.transfers[link]
        while queued and queued[0][1] <= t:
            queued.popleft()
        in_flight = 1 if queued and queued[0][0] <= t else 0  # one at a time: only the first may have started
        self.metrics.sample(t, 0, len(queued) - in_flight, None, ("link", link))

    def _handoff(self, done: Sequence, t: float) -> None:
        """A prefill replica's request moves to a decode replica with its KV cache (the prompt's blocks)."""
        req = done.req
        seq = Sequence(list(done.token_ids), req.output_tokens, num_prompt_tokens=req.prompt_tokens)
        seq.num_transferred_tokens = req.prompt_tokens
        seq.req, seq.arrival_s, seq.first_s, seq.last_emit_s = req, done.arrival_s, done.first_s, done.first_s
        seq.start_s, seq.preemptions = done.start_s, done.preemptions
        self.router.pick(req).admit(lambda: seq, req.prompt_tokens + req.output_tokens, t)

    def _finished(self, seq: Sequence, prefill: Replica | None, on_done) -> None:
        """A request done on its replica: under disaggregation a prefill replica's hands its KV over that replica's
        link, one transfer after another (they share its bandwidth), else it completes."""
        if prefill is not None and seq.req.output_tokens > 1:
            queued = self.transfers.setdefault(id(prefill), deque())
            start = max(seq.finish_s, queued[-1][1] if queued else 0.0)
            queued.append((start, start + self.fleet.transfer_s(seq.req.prompt_tokens)))
            self.push(queued[-1][1], "handoff", (seq, id(prefill)))
            self._sample_links(id(prefill), seq.finish_s)
            return
        self.metrics.request_done(seq.arrival_s, seq.first_s, seq.finish_s, seq.start_s - seq.arrival_s,
                                  seq.req.prompt_tokens, seq.req.output_tokens, seq.preemptions)
        self.advance()
        on_done(seq.finish_s)

    def run(self, arrivals: Iterator[Request] | None, closed: ClosedLoop | None = None) -> None:
        if closed is not None:
            sizes = iter(closed.requests)

            def next_client(t: float) -> None:
                req = next(sizes, None)
                if req is not None:
                    self.push(t, "arrive", Request(t, req.prompt_tokens, req.output_tokens, req.prefix_id,
                                                   req.prefix_tokens))

            for _ in range(closed.clients):
                next_client(0.0)
            on_done = next_client
        else:
            def pull() -> None:
                req = next(arrivals, None)
                if req is not None:
                    self.push(req.arrival_s, "arrive", req)

            pull()
            on_done = lambda t: None  # noqa: E731 - open loop: arrivals do not depend on completions
        while True:
            t_event = self.events[0][0] if self.events else math.inf
            busy = [r for r in self.replicas if not r.idle]
            if not busy and not self.events:
                break
            r = min(busy, key=lambda x: x.now) if busy else None
            if r is None or t_event <= r.now:
                t, _, kind, payload = heapq.heappop(self.events)
                if kind == "arrive":
                    self._arrive(payload, t)
                    if closed is None:
                        pull()
                else:
                    seq, link = payload
                    self._handoff(seq, t)
                    self._sample_links(link, t)
                continue
            prefill = r if r in self.prefill else None
            for seq in r.step(t_event):
                self._finished(seq, prefill, on_done)
            if r.scheduler.num_preemptions > MIN_THRASH_PREEMPTIONS:
                self._check_thrash()


def simulate(fleet: Fleet, arrivals: Iterable[Request] | None = None, closed: ClosedLoop | None = None,
             slo_ttft_s: float | None = None, slo_itl_s: float | None = None,
             fast_forward: bool = True, shared_prefixes: bool = True, warmup_s: float = 0.0,
             abort_after_misses: int | None = None, advance: Callable[[], None] | None = None) -> ServingResult:
    """Serve an open-loop/trace request stream (`arrivals`, sorted by time) or a closed loop of clients.
    `shared_prefixes` False: the stream's prompts share no tokens (no request names a prefix), so the prefix
    cache is skipped; True is always right, False only faster."""
    check_slos(slo_ttft_s, slo_itl_s)
    metrics = Collector(slo_ttft_s, slo_itl_s, warmup_s, abort_after_misses)
    sim = Simulation(fleet, metrics, fast_forward, shared_prefixes, advance)
    try:
        sim.run(iter(arrivals) if arrivals is not None else None, closed)
    except SloMissed:
        return ServingResult(metrics, fleet, aborted=True)
    if not metrics.finished:
        raise RooflineError("no request was served: the workload is empty")
    return ServingResult(metrics, fleet)
