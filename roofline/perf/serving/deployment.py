"""How replicas are put together: N replicas (each TP x PP GPUs) behind a router, and prefill/decode
disaggregation (P prefill replicas hand each request's KV cache to one of D decode replicas over a link)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from roofline.errors import RooflineError
from roofline.perf.serving.replica import Replica, ReplicaSetup
from roofline.perf.serving.workload import Request
from roofline.sizing.kv import kv_bytes

ROUTERS = ("round_robin", "least_tokens", "prefix")
# What one simulation may hold: each replica keeps its KV pool's block table (about 50 bytes a block), and the
# least_tokens and prefix routers look at every replica for each request
MAX_REPLICAS = 1024
MAX_POOL_BLOCKS = 20_000_000  # about 1 GB


@dataclass
class Fleet:
    setup: ReplicaSetup  # the serving replicas (the decode replicas under disaggregation)
    replicas: int = 1
    router: str = "round_robin"
    prefill_setup: ReplicaSetup | None = None  # disaggregation: the prefill replicas' setup
    prefill_replicas: int = 0
    transfer_bytes_per_s: float | None = None  # KV hand-off rate; None: the card's GPU link per direction

    def __post_init__(self):
        if self.replicas < 1:
            raise RooflineError(f"--replicas: must be >= 1, got {self.replicas}")
        if self.router not in ROUTERS:
            raise RooflineError(f"--router {self.router}: use one of {', '.join(ROUTERS)}")
        if self.prefill_setup is not None and self.prefill_replicas < 1:
            raise RooflineError("--disagg P:D needs P >= 1 prefill replicas")
        n = self.replicas + self.prefill_replicas
        if n > 1 and (n > MAX_REPLICAS or n * self.setup.num_blocks > MAX_POOL_BLOCKS):
            most = max(1, min(MAX_REPLICAS, MAX_POOL_BLOCKS // self.setup.num_blocks))
            option = "--disagg P:D" if self.prefill_setup is not None else "--replicas"
            raise RooflineError(f"{option}: {n:,} replicas of {self.setup.num_blocks:,} KV blocks each are more than "
                                f"one simulation holds; simulate at most {most:,} replicas, with the load scaled to "
                                "them")

    @property
    def gpus(self) -> int:
        wl = self.setup.wl
        pre = self.prefill_setup.wl.tp * self.prefill_setup.wl.pp * self.prefill_replicas if self.prefill_setup else 0
        return self.replicas * wl.tp * wl.pp + pre

    def transfer_s(self, prompt_tokens: int) -> float:
        """Seconds to move one request's KV cache (all layers) to a decode replica: each GPU of the prefill replica
        sends its shard (its KV heads under TP, its layers under PP) over its own link at the link's (or
        --network-gbps's) rate, as many in parallel as both replicas have GPUs."""
        s = self.setup
        rate = self.transfer_bytes_per_s or s.hw.interconnect.bandwidth_bytes_per_s_per_direction
        if not rate or rate <= 0:
            raise RooflineError(f"--disagg: {s.hw.name} has no GPU link in its card; give --network-gbps")
        pre = self.prefill_setup.wl if self.prefill_setup is not None else s.wl
        links = min(pre.tp * pre.pp, s.wl.tp * s.wl.pp)
        return float(kv_bytes(s.card, prompt_tokens, s.wl.kv_quant)) / (rate * links)


class Router:
    """Picks the replica for each arriving request."""

    def __init__(self, kind: str, replicas: list[Replica]):
        self.kind, self.replicas = kind, replicas
        self._cycle = itertools.cycle(range(len(replicas)))

    def pick(self, req: Request) -> Replica:
        if len(self.replicas) == 1:
            return self.replicas[0]
        if self.kind == "round_robin":
            return self.replicas[next(self._cycle)]
        if self.kind == "prefix" and req.prefix_id is not None:
            warm = [r for r in self.replicas if req.prefix_id in r.prefixes]
            if warm:  # the replica whose cache holds the prefix, least loaded of those
                return min(warm, key=lambda r: r.outstanding_tokens)
        choice = min(self.replicas, key=lambda r: r.outstanding_tokens)  # least outstanding tokens
        if req.prefix_id is not None:
            choice.prefixes.add(req.prefix_id)
        return choice
