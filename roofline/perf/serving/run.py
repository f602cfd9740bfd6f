"""One call from options to a served run: the fleet, the workload, the simulation."""

from __future__ import annotations

import itertools
from pathlib import Path

from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.errors import RooflineError
from roofline.perf.efficiency import Efficiency, expected_efficiency
from roofline.perf.parallel import check_parallel
from roofline.perf.serving.deployment import Fleet
from roofline.perf.serving.policy import ServingPolicy
from roofline.perf.serving.replica import ReplicaSetup
from roofline.perf.serving.simulator import ClosedLoop, ServingResult, simulate
from roofline.perf.serving.workload import Lengths, closed_loop_requests, open_loop, read_trace
from roofline.perf.workload import Workload


def parse_disagg(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        p, d = (int(v) for v in text.split(":"))
    except ValueError:
        raise RooflineError(f"--disagg {text!r}: use P:D, e.g. 1:3 (prefill and decode replicas)") from None
    if p < 1 or d < 1:
        raise RooflineError(f"--disagg {text!r}: P and D must be >= 1")
    return p, d


def build_fleet(card: ModelCard, hw: HardwareCard, wl: Workload, policy: ServingPolicy, replicas: int = 1,
                router: str = "round_robin", disagg: tuple[int, int] | None = None,
                network_bytes_per_s: float | None = None, eff: Efficiency | None = None,
                num_blocks: int | None = None) -> Fleet:
    check_parallel(card, hw, wl.tp, wl.pp)
    eff = eff or expected_efficiency(hw)
    setup = ReplicaSetup.build(card, hw, wl, policy, eff, num_blocks)
    if disagg is None:
        return Fleet(setup, replicas, router)
    return Fleet(setup, disagg[1], router, prefill_setup=setup, prefill_replicas=disagg[0],
                 transfer_bytes_per_s=network_bytes_per_s)


def serve(fleet: Fleet, prompt: Lengths, output: Lengths, requests: int, concurrency: int | None = None,
          rate: float | None = None, trace: Path | None = None, burstiness: float = 1.0, seed: int = 0,
          slo_ttft_s: float | None = None, slo_itl_s: float | None = None) -> ServingResult:
    """Exactly one of concurrency (closed loop), rate (open loop) or trace."""
    if sum(x is not None for x in (concurrency, rate, trace)) != 1:
        raise RooflineError("give exactly one of --concurrency N, --rate R or --trace FILE")
    if requests < 1:
        raise RooflineError(f"--requests: must be >= 1, got {requests}")
    if concurrency is not None:
        if concurrency < 1:
            raise RooflineError(f"--concurrency: needs at least 1 client, got {concurrency}")
        closed = ClosedLoop(concurrency, closed_loop_requests(requests, prompt, output, seed))
        result = simulate(fleet, closed=closed, slo_ttft_s=slo_ttft_s, slo_itl_s=slo_itl_s, shared_prefixes=False)
        result.extra.update(mode="closed_loop", concurrency=concurrency)
    elif rate is not None:
        result = simulate(fleet, open_loop(rate, requests, prompt, output, seed, burstiness), slo_ttft_s=slo_ttft_s,
                          slo_itl_s=slo_itl_s, shared_prefixes=False)
        result.extra.update(mode="open_loop", rate_per_s=rate, burstiness=burstiness)
    else:
        result = simulate(fleet, itertools.islice(read_trace(trace), requests), slo_ttft_s=slo_ttft_s,
                          slo_itl_s=slo_itl_s)
        result.extra.update(mode="trace", trace=str(trace))
    return result
