"""The capacity search: for each hardware card, GPUs per replica (tensor parallel), weight and KV format, the highest
Poisson request rate whose requests meet the SLO (DistServe's goodput: at least `ATTAINMENT` of requests meet both
the TTFT and the TPOT objective) without the queue growing, the concurrency that rate keeps in the system, the
replicas a target rate needs, and the cost per million output tokens.

Each load point serves max(MIN_REQUESTS, MIN_ARRIVAL_S x rate) requests; the first WARMUP_SHARE of the arrival
span fills the batch and the KV pool and is not counted. A point fails when more than (1 - ATTAINMENT) of the
counted requests miss the SLO (the run stops as soon as that is certain) or when the queue grows over the counted
span by more than OVERLOAD_SHARE of its arrivals (the rate is above what the replica serves: TTFT diverges with a
longer run). The rate is bracketed by stepping from an estimate of the replica's saturation rate
(`saturation_rate`: within a few percent of the answer where the batch's throughput binds, so most searches take
three points), then bisected until the bracket is within RATE_TOLERANCE."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np

from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.cards.runtime import RuntimeChoice
from roofline.cards.store import names_of
from roofline.errors import RooflineError
from roofline.perf.efficiency import check_runtime_supports, expected_efficiency
from roofline.perf.serving.deployment import Fleet
from roofline.perf.serving.metrics import check_slos
from roofline.perf.serving.policy import policy_for
from roofline.perf.serving.replica import MORE_MEMORY
from roofline.perf.serving.run import build_fleet
from roofline.perf.serving.simulator import ServingResult, Thrashing, simulate
from roofline.perf.serving.workload import MIN_RATE_PER_S, Lengths, open_loop
from roofline.perf.workload import make_workload

ATTAINMENT = 0.9  # DistServe's evaluation goal: 90% of requests within both SLOs
MIN_REQUESTS = 500  # requests per load point, at least
MIN_ARRIVAL_S = 60.0  # seconds of simulated arrivals per load point, at least
WARMUP_SHARE = 0.1  # share of the arrival span not counted (the batch and the pool filling from empty)
OVERLOAD_SHARE = 0.05  # queue growth over the counted span, as a share of its arrivals, that marks overload
RATE_TOLERANCE = 0.05  # bisection stops when the bracket's top is within 5% of its bottom
MAX_POINTS = 16  # load points per configuration, at most (bracketing + bisection)
# the first step away from the saturation estimate, as a factor (each further step squares it): twice
# RATE_TOLERANCE, so a bracket found in one step closes with one bisection
FIRST_STEP = 1 + 2 * RATE_TOLERANCE
MAX_STEP = 4.0  # the largest step (far from the estimate: the bisection that follows takes five points)
ESTIMATE_BATCHES = 24  # batch sizes the saturation estimate tries (geometric, 1 to the fullest batch)
TP_SIZES = (1, 2, 4, 8)
# a rate found where the KV pool binds (a preemption, or the pool's use at POOL_BINDS) is confirmed over CONFIRM_SPAN
# times the arrivals, on another seed, stepping down by FIRST_STEP up to MAX_CONFIRMS times: a pool that fills over
# minutes (long outputs) passes a one-minute point and fails in steady state (an RTX 4090 under vLLM, Llama-3.1-8B
# FP8: 12.1 requests/s met the SLO for 94.5% over 726 requests and for 15-69% over 1,000 on four seeds)
CONFIRM_SPAN = 4
POOL_BINDS = 0.9
MAX_CONFIRMS = 4


@dataclass
class Config:
    hw: HardwareCard
    tp: int
    quant: str
    kv_quant: str

    @property
    def label(self) -> str:
        return f"{self.hw.name} tp{self.tp} {self.quant}/kv {self.kv_quant}"


# what a runtime that loads them is searched with besides 16-bit (and the card's FP8/FP4): for llama.cpp and Ollama
# the 8-bit and the 4-bit k-quant its quantize tool lists as recommended (tools/quantize/README.md: Q4_K_M
# "recommended", Q8_0 "extremely low quality loss") and its q8_0 KV cache (--cache-type-k/v q8_0); for the serving
# runtimes the 4-bit weight-only checkpoints (AWQ/GPTQ, w4a16: vLLM docs 'Quantization', SGLang and TensorRT-LLM
# likewise); for MLX mlx-lm's 8- and 4-bit formats (mlx_lm.convert -q, 4 bits unless --q-bits says otherwise)
QUANTIZED_CANDIDATES = ("q8_0", "q4_k_m", "int4", "mlx_q8", "mlx_q4")
QUANTIZED_KV = ("q8_0",)


def candidates(card: ModelCard, hw: HardwareCard, runtime: RuntimeChoice | None = None,
               weights: str | None = None) -> list[Config]:
    """TP sizes the node allows (dividing the heads) x weight formats the card's math supports (`weights`: only that
    one, a checkpoint's own layout) x KV formats (those the runtime loads, when one is given)."""
    peaks = hw.peak_flops.as_dict()
    formats = [weights] if weights else \
        ["bf16"] + (["fp8"] if "fp8" in peaks else []) + (["nvfp4"] if "fp4" in peaks else [])
    kvs = ["bf16"] + (["fp8"] if "fp8" in peaks else [])
    if runtime is not None:
        prof = runtime.profile
        loads = prof.formats_at(runtime.version)
        formats = formats if weights else [w for w in formats + list(QUANTIZED_CANDIDATES) if w in loads]
        kvs = [prof.default_kv_format] + [k for k in [*kvs, *QUANTIZED_KV] if k in prof.kv_formats and k not in
                                          ("bf16", prof.default_kv_format)]  # bf16 or the default, not both
    heads = card.architecture.attention.num_heads if card.architecture.attention else 1
    linked = hw.interconnect.bandwidth_bytes_per_s_per_direction > 0
    tps = [t for t in TP_SIZES if t <= max(hw.interconnect.gpus_per_node, 1) and heads % t == 0 and (t == 1 or linked)]
    return [Config(hw, t, w, k) for t in tps for w in formats for k in kvs]


@dataclass
class Slo:
    ttft_s: float
    itl_s: float


def requests_at(rate: float, span: float = 1.0) -> int:
    return max(MIN_REQUESTS, math.ceil(MIN_ARRIVAL_S * rate)) * math.ceil(span)


def load_point(fleet: Fleet, rate: float, prompt: Lengths, output: Lengths, slo: Slo, seed: int = 0,
               span: float = 1.0) -> dict:
    """One open-loop (Poisson) load point of `span` times the usual arrivals: whether it meets the SLO, whether the
    queue grows, what it measured."""
    n = requests_at(rate, span)
    span_s = n / rate
    warmup_s = WARMUP_SHARE * span_s
    counted = n - int(WARMUP_SHARE * n)
    allowed = int((1 - ATTAINMENT) * counted)
    try:
        r = simulate(fleet, open_loop(rate, n, prompt, output, seed), slo_ttft_s=slo.ttft_s, slo_itl_s=slo.itl_s,
                     shared_prefixes=False, warmup_s=warmup_s, abort_after_misses=allowed)
    except Thrashing as err:  # a pool too small for this rate: it fails, a lower rate may not
        return {"rate_per_s": rate, "requests": n, "aborted": True, "meets": False, "overloaded": True,
                "why": str(err)}
    point = {"rate_per_s": rate, "requests": n, "aborted": r.aborted}
    if r.aborted:
        return {**point, "meets": False, "overloaded": None, "why": f"more than {allowed} of {counted} requests "
                                                                    f"missed the SLO"}
    grew = overloaded(r, rate, 0.0, span_s)
    attained = r.metrics.good / max(r.metrics.finished, 1)
    return {**point, "meets": attained >= ATTAINMENT and not grew, "overloaded": grew,
            "queue_growth": queue_growth(r, warmup_s, span_s), "attainment": attained, "result": r}


def overloaded(r: ServingResult, rate: float, start_s: float, end_s: float) -> bool:
    """Whether an open-loop run's queue grew by more than OVERLOAD_SHARE of its arrivals between the end of the
    warm-up share of its arrival span [start_s, end_s] (first to last arrival) and the last arrival."""
    warm_s = start_s + WARMUP_SHARE * (end_s - start_s)
    return queue_growth(r, warm_s, end_s) > OVERLOAD_SHARE * rate * (end_s - warm_s)


def queue_growth(r: ServingResult, start_s: float, end_s: float) -> float:
    """Requests waiting at `end_s` (the last arrival) minus those waiting at `start_s`, read off the time series."""
    series = sorted(r.metrics.series or [(0.0, 0, 0, 0.0)], key=lambda p: p[0])  # a multi-step run samples ahead
    t = np.array([p[0] for p in series])
    waiting = [p[2] for p in series]
    at = lambda x: float(waiting[max(int(np.searchsorted(t, x, side="right")) - 1, 0)])  # noqa: E731
    return at(end_s) - at(start_s)


def saturation_rate(fleet: Fleet, prompt: Lengths, output: Lengths, itl_s: float = math.inf) -> float:
    """The rate the replica sustains (requests/s), from its step timer: the best over batch sizes b (up to the
    fullest batch the pool and the scheduler allow) of b sequences decoding while each step also carries the
    prefill tokens that keep b in flight (b x prompt/output, within the step's token budget), leaving out batches
    whose step is slower than `itl_s` (but for the first). Prefill rides in the decode steps (chunked prefill), so a prompt costs what
    it adds to a step, not a step of its own. Queueing for a free slot is not counted (the search finds it)."""
    s, pol = fleet.setup, fleet.setup.policy
    per_request = s.costs.blocks(math.ceil(prompt.mean + output.mean), pol.sim_block_tokens)
    fullest = max(1, min(pol.effective_max_seqs, s.num_blocks // max(per_request, 1)))
    context = int(prompt.mean + output.mean / 2)
    best = 0.0
    for b in sorted({round(x) for x in np.geomspace(1, fullest, ESTIMATE_BATCHES)} | {fullest}):
        prefill = min(b * prompt.mean / output.mean, max(pol.max_num_batched_tokens - b, 0))  # tokens per step
        chunk = [math.ceil(prefill)] if prefill > 0 else []
        step_s = s.timer.step_seconds([context] * b, chunk, [0] * len(chunk), b + len(chunk))
        if step_s > itl_s and best > 0:
            break  # a bigger batch only steps slower
        best = max(best, min(b / output.mean, prefill / prompt.mean) / step_s)
    return fleet.replicas * max(best, MIN_RATE_PER_S)  # a start the search can step from (0 would stay 0)


def alone_misses(fleet: Fleet, prompt: Lengths, output: Lengths, slo: Slo) -> str | None:
    """Why one request alone (an idle replica) misses the SLO, or None: its prefill and its decode steps at batch 1,
    from the step timer (no load can do better)."""
    t, p, o = fleet.setup.timer, int(prompt.mean), int(output.mean)
    chunk = min(p, fleet.setup.policy.max_num_batched_tokens)
    ttft_s = t.step_seconds([], [chunk], [0], 1) * p / chunk
    tpot_s = t.step_seconds([p + o // 2], [], [], 1)
    if ttft_s > slo.ttft_s:
        return f"one request alone: TTFT {ttft_s:.3g} s > {slo.ttft_s} s"
    if tpot_s > slo.itl_s:
        return f"one request alone: time per output token {tpot_s * 1e3:.3g} ms > {slo.itl_s * 1e3:.3g} ms"
    return None


def pool_binds(point: dict) -> bool:
    """Whether a passing load point's KV pool bound: a preemption, or the pool's use at POOL_BINDS."""
    m = point["result"].metrics
    return m.preemptions > 0 or max((p[3] for p in m.series), default=0.0) >= POOL_BINDS


def confirm(probe: Callable[[float, float], dict], lo: float, best: dict) -> tuple[float, float | None, dict | None]:
    """(rate, the lowest failing, its load point): `lo` where its pool did not bind, else the first of lo, lo /
    FIRST_STEP, ... that passes a point CONFIRM_SPAN times as long (0 and None when none of MAX_CONFIRMS does)."""
    if not pool_binds(best):
        return lo, None, best
    failed = None
    for _ in range(MAX_CONFIRMS):
        p = probe(lo, CONFIRM_SPAN)
        if p["meets"]:
            return lo, failed, p
        failed, lo = lo, lo / FIRST_STEP
    return 0.0, failed, None


def highest_passing(probe: Callable[[float], dict], start: float) -> tuple[float, float | None, dict | None, float]:
    """(lo, hi, the load point at lo, the last rate tried): the highest rate `probe` finds meeting the SLO, lo, and
    the lowest found failing, hi, within RATE_TOLERANCE of each other. From `start` it steps up (it passes) or down
    (it fails) by FIRST_STEP, squaring the step each time up to MAX_STEP, until the outcome flips; then it bisects.
    lo is 0 and the point None when even start/256 fails; hi is None when no rate tried failed (MAX_POINTS)."""
    lo, hi, best, rate, step, tried, last = 0.0, None, None, start, FIRST_STEP, 0, start
    while tried < MAX_POINTS and rate >= start / 256:
        p, tried, last = probe(rate), tried + 1, rate
        if p["meets"]:
            lo, best = rate, p
            if hi is not None:
                break
            rate = rate * step
        else:
            hi = rate
            if best is not None:
                break
            rate = rate / step
        step = min(step * step, MAX_STEP)
    while best is not None and hi is not None and tried < MAX_POINTS and hi > lo * (1 + RATE_TOLERANCE):
        mid = (lo + hi) / 2
        p, tried = probe(mid), tried + 1
        if p["meets"]:
            lo, best = mid, p
        else:
            hi = mid
    return lo, hi, best, last


def search_config(card: ModelCard, cfg: Config, runtime: RuntimeChoice | None, prompt: Lengths, output: Lengths,
                  slo: Slo, seed: int = 0, context: int | None = None) -> dict:
    """The highest rate meeting the SLO for one configuration (or why it cannot run); `context`: the tokens each
    slot of a per-slot runtime holds instead of its default."""
    layer_split = runtime is not None and runtime.profile.multi_gpu == "layer"  # llama.cpp -sm layer: pipeline stages
    wl = make_workload(quant=cfg.quant, kv_quant=cfg.kv_quant, tp=1 if layer_split else cfg.tp,
                       pp=cfg.tp if layer_split else 1)
    row = {"hardware": cfg.hw.name, "tp": cfg.tp, "gpus_per_replica": cfg.tp, "quant": cfg.quant,
           "kv_quant": cfg.kv_quant}
    try:
        check_runtime_supports(runtime, card, cfg.hw, wl.quant, wl.kv_quant)
        fleet = build_fleet(card, cfg.hw, wl, policy_for(runtime, cfg.hw, cfg.tp, context),
                            eff=expected_efficiency(cfg.hw, runtime, card.architecture.max_context))
    except RooflineError as err:  # the search itself tries more GPUs and smaller formats: no advice to give
        return {**row, "fits": False, "why": str(err).removesuffix(MORE_MEMORY)}
    alone = alone_misses(fleet, prompt, output, slo)
    if alone:
        return {**row, "fits": True, "max_rate_per_s": 0.0, "points": 0, "why": alone}
    top = saturation_rate(fleet, prompt, output, slo.itl_s)
    points: list[dict] = []

    def probe(rate: float, span: float = 1.0) -> dict:
        p = load_point(fleet, rate, prompt, output, slo, seed + (span > 1), span)
        points.append(p)
        return p

    try:
        lo, hi, best, rate = highest_passing(probe, top)
        why = f"even {rate:.3g} req/s misses the SLO"
        if best is not None:
            lo, failed, best = confirm(probe, lo, best)
            if failed is not None:
                hi = failed
                why = f"down to {failed:.3g} req/s the SLO fails over {CONFIRM_SPAN}x longer runs (the KV pool fills)"
    except RooflineError as err:  # a request this configuration cannot hold (a runtime's slot context)
        return {**row, "fits": False, "why": str(err)}
    row.update(fits=True, saturation_estimate_per_s=top, points=len(points),
               simulated_requests=sum(p["requests"] for p in points))
    if best is None:
        return {**row, "max_rate_per_s": 0.0, "why": why}
    s = best["result"].summary()
    return {**row, "max_rate_per_s": lo, "bracket_top_per_s": hi,  # None: no rate tried failed
            "concurrency": lo * s["e2e_s"]["mean"],  # Little's law: requests in the system at that rate
            # sustained at that rate: every request's output tokens (the run's own figure also counts its drain)
            "output_tok_s": lo * s["output_tokens_per_request"],
            "ttft_p90_s": s["ttft_s"]["p90"], "tpot_p90_s": s["tpot_s"]["p90"],
            "attainment": best["attainment"], "kv_pool_tokens": s["kv_pool_tokens_per_replica"]}


# a GPU-hour from a tenth of a cent to $10,000 (cloud rates are $0.2-10): outside it, a typo; 1e300 printed a cost
# of 1e300 per million tokens
PRICE_RANGE = (1e-3, 1e4)
# requests/s a fleet is sized for: a million, beyond any deployment published (1e300 printed 299-digit GPU counts)
MAX_TARGET_RATE = 1e6


def parse_prices(text: str | None, hws: list[HardwareCard]) -> dict[str, float]:
    """--usd-per-gpu-hour: one price for every card ('3.5') or per card ('h100-sxm=3.99,b200=6.69'); not given,
    each card's cited cloud rate (`cloud_usd_per_gpu_hour`), where it has one."""
    if text is None:
        return {h.name: h.cloud_usd_per_gpu_hour for h in hws if h.cloud_usd_per_gpu_hour}
    names = {a.lower(): h.name for h in hws for a in names_of(h)}  # a card's name or any alias of it
    try:
        if "=" not in text:
            out = dict.fromkeys(names.values(), float(text))
        else:
            out = {}
            for part in text.split(","):
                given, _, value = part.partition("=")
                name = names.get(given.strip().lower())
                if name is None:
                    raise RooflineError(f"--usd-per-gpu-hour {text!r}: {given.strip()!r} is not one of the cards "
                                        f"searched ({', '.join(sorted(set(names.values())))})")
                if name in out:
                    raise RooflineError(f"--usd-per-gpu-hour {text!r}: {name} is priced twice; give it once")
                out[name] = float(value)
    except ValueError:
        raise RooflineError(f"--usd-per-gpu-hour {text!r}: give a price like 3.5, or per card like "
                            f"h100-sxm=3.99,b200=6.69") from None
    if not all(PRICE_RANGE[0] <= v <= PRICE_RANGE[1] for v in out.values()):
        raise RooflineError(f"--usd-per-gpu-hour {text!r}: prices must be between {PRICE_RANGE[0]:g} and "
                            f"{PRICE_RANGE[1]:g} USD per GPU-hour")
    return out


def _search(args) -> dict:
    return search_config(*args)


def capacity(card: ModelCard, hws: list[HardwareCard], runtime: RuntimeChoice | None, prompt: Lengths,
             output: Lengths, slo_ttft_s: float, slo_itl_s: float, target_rate: float | None = None,
             usd_per_gpu_hour: dict[str, float] | None = None, seed: int = 0, workers: int | None = None,
             advance: Callable[[], None] | None = None, weights: str | None = None,
             context: int | None = None) -> list[dict]:
    """Every candidate configuration's row (`weights`: one weight format only, as `candidates` takes it), searched
    in `workers` processes (default: up to 2, one per core); `advance()` is called as each is done."""
    check_slos(slo_ttft_s, slo_itl_s)
    if target_rate is not None and not 0 < target_rate <= MAX_TARGET_RATE:
        raise RooflineError(f"--target-rate: must be a number of requests/s above 0 and at most {MAX_TARGET_RATE:g}, "
                            f"got {target_rate}")
    slo = Slo(slo_ttft_s, slo_itl_s)
    jobs = [(card, cfg, runtime, prompt, output, slo, seed, context) for hw in hws
            for cfg in candidates(card, hw, runtime, weights)]
    workers = workers or min(2, os.cpu_count() or 1, len(jobs))
    advance = advance or (lambda: None)
    rows = []
    with ProcessPoolExecutor(workers) if workers > 1 else nullcontext() as pool:
        for row in pool.map(_search, jobs) if pool else map(_search, jobs):
            rows.append(row)
            advance()
    prices = usd_per_gpu_hour or {}
    for row in rows:
        if not row.get("max_rate_per_s"):
            continue
        if target_rate:
            row["replicas"] = math.ceil(target_rate / row["max_rate_per_s"])
            row["gpus"] = row["replicas"] * row["tp"]
        price = prices.get(row["hardware"])
        if price:
            # the replica's GPUs for an hour over the output tokens it serves in that hour at the max rate
            row["usd_per_gpu_hour"] = price
            row["usd_per_m_output_tokens"] = price * row["tp"] / (row["output_tok_s"] * 3600) * 1e6
    return rows
