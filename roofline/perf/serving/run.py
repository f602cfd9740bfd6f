"""One call from options to a served run: the fleet, the workload, the simulation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.cards.units import ascii_int
from roofline.errors import RooflineError
from roofline.perf.efficiency import Efficiency, expected_efficiency
from roofline.perf.parallel import check_parallel
from roofline.perf.serving.deployment import Fleet
from roofline.perf.serving.policy import ServingPolicy
from roofline.perf.serving.replica import ReplicaSetup
from roofline.perf.serving.simulator import ClosedLoop, ServingResult, simulate
from roofline.perf.serving.workload import Lengths, Request, closed_loop_requests, open_loop, read_trace
from roofline.perf.workload import Workload

REQUESTS_PER_CLIENT = 4  # a closed-loop sweep level serves this many requests per client (the first are warm-up)
# Bounds that keep one simulation to minutes: benchmarks/serve_speed.py simulates about 5,000 requests a second
# (2 cores), so a million takes three to four minutes. A closed loop of more clients than this only lengthens the
# queue: a replica runs at most its runtime's max_num_seqs (vLLM's default 256) at once
MAX_REQUESTS = 1_000_000
DEFAULT_REQUESTS = 1_000  # a generated load's length when none is asked for (a trace plays every row)
MAX_CLIENTS = 100_000


def parse_disagg(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    if not text.strip():
        raise RooflineError("--disagg: empty; give P:D (e.g. 1:3 prefill and decode replicas) or drop --disagg")
    try:
        p, d = (ascii_int(v) for v in text.split(":"))
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


def serve(fleet: Fleet, prompt: Lengths, output: Lengths, requests: int | None, concurrency: int | None = None,
          rate: float | None = None, trace: Path | None = None, burstiness: float = 1.0, seed: int = 0,
          slo_ttft_s: float | None = None, slo_itl_s: float | None = None,
          advance: Callable[[], None] | None = None) -> ServingResult:
    """Exactly one of concurrency (closed loop), rate (open loop) or trace; `requests` None: DEFAULT_REQUESTS, or a
    trace's every row (up to MAX_REQUESTS); `advance()` is called as each request completes."""
    if sum(x is not None for x in (concurrency, rate, trace)) != 1:
        raise RooflineError("give exactly one of --concurrency N, --rate R or --trace FILE")
    requests = requests if requests is not None else MAX_REQUESTS if trace is not None else DEFAULT_REQUESTS
    check_size(requests, concurrency)
    if concurrency is not None:
        closed = ClosedLoop(concurrency, closed_loop_requests(requests, prompt, output, seed))
        result = simulate(fleet, closed=closed, slo_ttft_s=slo_ttft_s, slo_itl_s=slo_itl_s, shared_prefixes=False,
                          advance=advance)
        result.extra.update(mode="closed_loop", concurrency=concurrency)
    elif rate is not None:
        result = simulate(fleet, open_loop(rate, requests, prompt, output, seed, burstiness), slo_ttft_s=slo_ttft_s,
                          slo_itl_s=slo_itl_s, shared_prefixes=False, advance=advance)
        result.extra.update(mode="open_loop", rate_per_s=rate, burstiness=burstiness)
    else:
        cut: dict = {}
        result = simulate(fleet, _capped(read_trace(trace), requests, cut), slo_ttft_s=slo_ttft_s,
                          slo_itl_s=slo_itl_s, advance=advance)
        result.extra.update(mode="trace", trace=str(trace), **cut)
    return result


def _capped(reqs: Iterator[Request], n: int, cut: dict) -> Iterator[Request]:
    """The first `n` requests; `cut['trace_cut_at']` = n when the trace has more."""
    for i, req in enumerate(reqs):
        if i == n:
            cut["trace_cut_at"] = n
            return
        yield req


def check_size(requests: int, concurrency: int | None = None) -> None:
    """One line and exit 2 for a request count or a closed loop beyond what one simulation can serve in minutes."""
    if concurrency is not None and not 1 <= concurrency <= MAX_CLIENTS:
        raise RooflineError(f"--concurrency {concurrency:,}: give 1 to {MAX_CLIENTS:,} clients (a replica runs at most "
                            "its runtime's max_num_seqs at once; more clients only queue)")
    if not 1 <= requests <= MAX_REQUESTS:
        raise RooflineError(f"--requests {requests:,}: give 1 to {MAX_REQUESTS:,} requests (about 5,000 are simulated "
                            f"a second); for more traffic, simulate a shorter window at the same rate")


def check_requests_per_client(requests_per_client: int, clients: int) -> None:
    """One line and exit 2 when `clients` (one sweep level, or all its levels together) sending `requests_per_client`
    each would simulate more than MAX_REQUESTS."""
    if clients > MAX_REQUESTS:
        raise RooflineError(f"--concurrency: the levels add up to {clients:,} clients, over the {MAX_REQUESTS:,} "
                            "requests one sweep simulates; sweep fewer or smaller levels")
    if not 1 <= requests_per_client <= MAX_REQUESTS // clients:
        raise RooflineError(f"--requests-per-client {requests_per_client:,}: give 1 to {MAX_REQUESTS // clients:,} at "
                            f"{clients:,} clients (at most {MAX_REQUESTS:,} simulated requests a sweep)")


def closed_loop_row(fleet: Fleet, clients: int, prompt: Lengths, output: Lengths,
                    requests_per_client: int = REQUESTS_PER_CLIENT, seed: int = 0,
                    advance: Callable[[], None] | None = None) -> dict:
    """One `sweep --concurrency` level: N clients each sending its next request when the last completes (as
    `vllm bench serve --max-concurrency N` runs), summarised as the sweep's row."""
    check_size(1, clients)
    check_requests_per_client(requests_per_client, clients)
    r = serve(fleet, prompt, output, requests_per_client * clients, concurrency=clients, seed=seed, advance=advance)
    s = r.summary()
    tpot = s["tpot_s"]["mean"]
    return {"concurrency": clients, "output_tok_s": s["output_tok_s"],
            "output_tok_s_per_request": 1 / tpot if tpot > 0 else float("nan"),
            "requests_per_s": s["requests_per_s"], "ttft_p50_s": s["ttft_s"]["p50"], "ttft_p90_s": s["ttft_s"]["p90"],
            "itl_p50_s": s["itl_s"]["p50"], "itl_p90_s": s["itl_s"]["p90"], "tpot_mean_s": tpot,
            "e2e_mean_s": s["e2e_s"]["mean"], "queue_wait_mean_s": s["queue_wait_s"]["mean"],
            "peak_running": max((n for _, n, _, _ in r.metrics.series), default=0), "preemptions": s["preemptions"],
            "requests": s["requests"]}
