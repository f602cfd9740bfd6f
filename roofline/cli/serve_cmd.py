"""`roofline serve` (a runtime's continuous batching over a request stream, simulated) and `roofline capacity`
(the load and the fleet that meet an SLO)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Optional

import typer

from roofline.cli.common import (
    DEFAULT_OUTPUT,
    DEFAULT_PROMPT,
    BurstOpt,
    CardsOpt,
    GivenLenOpt,
    GpusOpt,
    JsonOpt,
    KvOpt,
    LenOpt,
    PpOpt,
    QuantOpt,
    RuntimeOpt,
    SlotContextOpt,
    check_slot_context,
    context_tokens,
    fmt_rate,
    fmt_s,
    kv_default,
    model_and_quant,
    name_list,
    parallel_layout,
    runtime_card,
    runtime_choice,
    runtime_efficiency,
    runtime_label,
    runtime_policy,
    store,
    unique_cards,
)
from roofline.cli.output import Column, emit, progress, table
from roofline.errors import RooflineError
from roofline.perf.serving.policy import policy_for
from roofline.perf.serving.workload import parse_lengths
from roofline.perf.workload import make_workload
from roofline.sizing.precision import Formats

SloOpt = Annotated[Optional[float], typer.Option(help="SLO in seconds (--slo-itl bounds each request's TPOT, its mean "
                                                        "time per output token, as DistServe's goodput does).")]
MIN_NETWORK_GBPS = 1e-3  # 1 Mbit/s: below it one KV hand-off takes hours, a unit typo rather than a network
DISTS = ("ttft_s", "itl_s", "tpot_s", "e2e_s", "queue_wait_s")
LABELS = {"ttft_s": "TTFT", "itl_s": "ITL (every gap)", "tpot_s": "TPOT (per request)", "e2e_s": "end-to-end",
          "queue_wait_s": "queue wait"}


def _load_options(rate, trace, prompt, output, burstiness) -> tuple[str, str, float]:
    """--prompt/--output/--burstiness with their defaults, refused where the load mode would ignore them (None: not
    given)."""
    if trace and (prompt is not None or output is not None):
        raise RooflineError("--prompt/--output draw the lengths of generated requests; a --trace gives each "
                            "request's own: drop them")
    if burstiness is not None and rate is None:
        raise RooflineError("--burstiness shapes the gaps of an open loop (--rate); drop it or give --rate")
    prompt = DEFAULT_PROMPT if prompt is None else prompt  # an empty --prompt '' is a value, refused by parse_lengths
    output = DEFAULT_OUTPUT if output is None else output
    return prompt, output, 1.0 if burstiness is None else burstiness


def run_serve(st, model, hw, runtime, concurrency, rate, trace, requests, prompt, output, burstiness, slo_ttft,
              slo_itl, seed, quant, kv_quant, gpus, pp, replicas=1, router="round_robin", disagg=None,
              network_gbps=None, context=None):
    """Options -> a ServingResult (shared by serve, sweep and plot serve). The runtime profile gives both the
    scheduler's limits (its serving policy) and the step timer's efficiency."""
    from roofline.perf.serving.run import DEFAULT_REQUESTS, build_fleet, parse_disagg, serve

    if seed < 0:
        raise RooflineError(f"--seed: give a whole number >= 0, got {seed}")
    if trace is not None and not trace.strip():
        raise RooflineError("--trace: empty path; give a CSV or JSONL trace file")
    prompt, output, burstiness = _load_options(rate, trace, prompt, output, burstiness)
    card, quant = model_and_quant(st, model, quant)
    hwc = st.hardware(hw)
    choice = runtime_choice(st, runtime)
    card = runtime_card(card, choice)
    wl = make_workload(quant=quant, kv_quant=kv_default(choice, kv_quant), **parallel_layout(choice, gpus, pp))
    if network_gbps is not None and not MIN_NETWORK_GBPS <= network_gbps < math.inf:
        raise RooflineError(f"--network-gbps: must be a finite number of at least {MIN_NETWORK_GBPS:g} Gbit/s, got "
                            f"{network_gbps}")
    if disagg and replicas != 1:
        raise RooflineError(f"--replicas {replicas} with --disagg {disagg}: a disaggregated fleet is P prefill and D "
                            "decode replicas; give their counts in --disagg P:D and drop --replicas")
    if network_gbps is not None and not disagg:
        raise RooflineError("--network-gbps sets the KV hand-off rate of --disagg P:D; add --disagg or drop it")
    eff = runtime_efficiency(choice, card, hwc, wl)
    slot_context = context_tokens(context)
    fleet = build_fleet(card, hwc, wl, policy_for(choice, hwc, wl.tp * wl.pp, slot_context), replicas,
                        router.replace("-", "_"),
                        parse_disagg(disagg), network_gbps * 1e9 / 8 if network_gbps else None, eff=eff)
    trace_path = Path(trace) if trace else None
    prompt_lengths, output_lengths = parse_lengths("--prompt", prompt), parse_lengths("--output", output)
    with progress("simulating requests", None if trace else requests or DEFAULT_REQUESTS) as advance:
        result = serve(fleet, prompt_lengths, output_lengths, requests, concurrency, rate, trace_path, burstiness,
                       seed, slo_ttft, slo_itl, advance)
    label = Formats(card, hwc, wl.quant, wl.kv_quant).weights_label  # as predict labels it
    result.extra.update(model=card.name, hardware=hwc.name, quant=label, kv_quant=wl.kv_quant, tp=wl.tp, pp=wl.pp,
                        efficiency_source=fleet.setup.eff.source, router=router, disagg=disagg,
                        network_gbps=network_gbps, kv_transfer_gbps=_transfer_gbps(fleet) if disagg else None,
                        decode_replicas=fleet.replicas, prefill_replicas=fleet.prefill_replicas)
    return result


def _transfer_gbps(fleet) -> float:
    """The KV hand-off rate a disaggregated fleet uses, Gbit/s per GPU: --network-gbps, else the card's GPU link."""
    rate = fleet.transfer_bytes_per_s or fleet.setup.hw.interconnect.bandwidth_bytes_per_s_per_direction
    return rate * 8 / 1e9


def serve_cmd(
    model: Annotated[str, typer.Option("--model", "-m", help="Model card.")],
    hw: Annotated[str, typer.Option("--hw", help="Hardware card.")],
    runtime: RuntimeOpt = None,
    concurrency: Annotated[Optional[int], typer.Option(help="Closed loop: N clients, each sends its next request "
                                                       "when the last one completes.")] = None,
    rate: Annotated[Optional[float], typer.Option(help="Open loop: requests per second.")] = None,
    trace: Annotated[Optional[str], typer.Option(help="Trace file (CSV or JSONL): arrival_s, prompt_tokens, "
                                                 "output_tokens[, prefix_id, prefix_tokens].")] = None,
    requests: Annotated[Optional[int], typer.Option(help="Requests to serve (default 1,000; a trace: its every row, "
                                                    "or at most this many).")] = None,
    prompt: GivenLenOpt = None, output: GivenLenOpt = None, burstiness: BurstOpt = None,
    slo_ttft: SloOpt = None, slo_itl: SloOpt = None,
    seed: Annotated[int, typer.Option(min=0, help="Random seed (arrivals and lengths).")] = 0,
    quant: QuantOpt = None, kv_quant: KvOpt = None, gpus: GpusOpt = 1, pp: PpOpt = 1,
    replicas: Annotated[int, typer.Option(help="Replicas behind the router.")] = 1,
    router: Annotated[str, typer.Option(help="round_robin, least_tokens or prefix.")] = "round_robin",
    disagg: Annotated[Optional[str], typer.Option(help="Prefill/decode disaggregation P:D replicas.")] = None,
    network_gbps: Annotated[Optional[float], typer.Option(help="KV transfer rate for --disagg in Gbit/s per GPU "
                                                          "(default: the card's GPU link).")] = None,
    context: SlotContextOpt = None,
    as_json: JsonOpt = False, cards: CardsOpt = None,
):
    """Simulate a runtime serving a request stream: TTFT, ITL, end-to-end percentiles, throughput, goodput."""
    result = run_serve(store(cards), model, hw, runtime, concurrency, rate, trace, requests, prompt, output,
                       burstiness, slo_ttft, slo_itl, seed, quant, kv_quant, gpus, pp, replicas, router, disagg,
                       network_gbps, context)
    data = result.summary()
    offered = rate if rate is not None else trace_rate(result) if trace else None
    if offered:  # arrivals faster than the fleet serves: the queue, and so TTFT, grow with the run
        from roofline.perf.serving.capacity import overloaded

        m = result.metrics
        data["overloaded"] = overloaded(result, offered, m.first_arrival_s, m.last_arrival_s)
        data.setdefault("rate_per_s", offered)
    elif trace:  # every row at one instant: a burst, no rate to be over
        data["overloaded"] = None
    emit(data, as_json, lambda: render_serve(data))


def trace_rate(result) -> float | None:
    """A trace's mean arrival rate (requests/s over its span of arrivals); None for a trace of one instant."""
    m = result.metrics
    span_s = m.last_arrival_s - m.first_arrival_s
    return (m.finished - 1) / span_s if m.finished > 1 and span_s > 0 else None


def render_serve(d: dict):
    load = {"closed_loop": f"{d.get('concurrency')} clients (closed loop)",
            "open_loop": f"{d.get('rate_per_s')} req/s (open loop, burstiness {d.get('burstiness')})",
            "trace": f"trace {d.get('trace')}"}[d["mode"]]
    fleet = f"disaggregated {d['disagg']} (prefill:decode)" if d.get("disagg") else \
        f"{d['replicas']} replicas, router {d['router']}" if d.get("replicas", 1) > 1 else ""
    title = (f"{d['model']} on {d['hardware']} x{d['gpus']} · {d['runtime']} · {load} · {d['requests']} requests · "
             f"weights {d['quant']}, KV {d['kv_quant']}" + (f" · {fleet}" if fleet else ""))
    rows = [(LABELS[k], *(fmt_s(d[k][q]) for q in ("mean", "p50", "p90", "p95", "p99"))) for k in DISTS]
    yield table(title, ["", *(Column(q, "right") for q in ("mean", "p50", "p90", "p95", "p99"))], rows)
    goodput = ("goodput: no SLO given (--slo-ttft, --slo-itl)" if d["goodput_requests_per_s"] is None else
               f"goodput {d['goodput_requests_per_s']:.2f} req/s ({d['slo_attainment']:.0%} within the SLO: TTFT, "
               "and TPOT, each request's mean time per output token)")
    yield (f"throughput {d['requests_per_s']:.2f} req/s · output {fmt_rate(d['output_tok_s'])} tok/s "
           f"({fmt_rate(d['output_tok_s_per_gpu'])} per GPU) · total {fmt_rate(d['total_tok_s'])} tok/s · "
           f"{goodput} · preemptions {d['preemptions']} · KV pool {d['kv_pool_tokens_per_replica']:,} tokens per "
           "replica")
    if d.get("trace_cut_at"):
        yield (f"[yellow]the trace has more rows: served its first {d['trace_cut_at']:,} (--requests)[/yellow]")
    if d.get("overloaded"):
        yield (f"[yellow]overloaded: requests arrive at {d['rate_per_s']:.3g}/s and the queue keeps growing (served "
               f"{d['requests_per_s']:.2f}/s); TTFT grows with --requests (`roofline capacity` finds the rate that "
               "meets an SLO)[/yellow]")


def capacity_cmd(
    model: Annotated[str, typer.Option("--model", "-m", help="Model card.")],
    hw: Annotated[str, typer.Option("--hw", help="Hardware card(s), comma-separated.")],
    slo_ttft: Annotated[float, typer.Option(help="TTFT objective, seconds.")],
    slo_itl: Annotated[float, typer.Option(help="Objective on each request's TPOT (mean time per output token), "
                                           "seconds.")],
    runtime: RuntimeOpt = None, quant: QuantOpt = None,
    target_rate: Annotated[Optional[float], typer.Option(help="Requests/s the fleet must sustain.")] = None,
    usd_per_gpu_hour: Annotated[Optional[str], typer.Option(
        help="Price of one GPU-hour in USD, for every card (3.5) or per card (h100-sxm=3.99,b200=6.69).")] = None,
    prompt: LenOpt = DEFAULT_PROMPT, output: LenOpt = DEFAULT_OUTPUT,
    seed: Annotated[int, typer.Option(min=0, help="Random seed.")] = 0, context: SlotContextOpt = None,
    as_json: JsonOpt = False, cards: CardsOpt = None,
):
    """Search GPUs per replica, weight and KV formats (--quant: that weight format only) for the highest Poisson
    rate meeting the SLO."""
    from roofline.perf.serving import capacity as cap

    st = store(cards)
    card, weights = model_and_quant(st, model, quant)  # --quant, a checkpoint's name or an Ollama tag fixes it
    choice = runtime_choice(st, runtime)
    card = runtime_card(card, choice)
    hws = unique_cards([st.hardware(h) for h in name_list("--hw", hw)])
    if not hws:
        raise RooflineError("capacity needs at least one --hw card (comma-separated for several)")
    slot_context = context_tokens(context)
    for h in hws:  # the fixed format is one the runtime runs on each card, or one line says why not
        runtime_efficiency(choice, card, h, make_workload(quant=weights, kv_quant=kv_default(choice, None)))
        check_slot_context(choice, runtime_policy(choice, h, 1), slot_context)
    prices = cap.parse_prices(usd_per_gpu_hour, hws)
    prompt_lengths, output_lengths = parse_lengths("--prompt", prompt), parse_lengths("--output", output)
    longest, ctx = prompt_lengths.upper + output_lengths.upper, card.architecture.max_context
    if longest > ctx:  # every configuration would refuse the requests; say so once, before the search
        raise RooflineError(f"--prompt {prompt} --output {output}: requests of up to {longest:,.0f} tokens are beyond "
                            f"{card.name}'s context of {ctx:,}; shorten them")
    jobs = sum(len(cap.candidates(card, h, choice, weights)) for h in hws)
    with progress("searching configurations", jobs) as advance:
        rows = cap.capacity(card, hws, choice, prompt_lengths, output_lengths, slo_ttft, slo_itl, target_rate, prices,
                            seed, advance=advance, weights=weights, context=slot_context)
    data = {"model": card.name, "runtime": runtime_label(choice), "slo_ttft_s": slo_ttft, "slo_itl_s": slo_itl,
            "attainment": cap.ATTAINMENT, "prompt": prompt, "output": output, "target_rate_per_s": target_rate,
            "slot_context_tokens": slot_context,
            "load_point": {"min_requests": cap.MIN_REQUESTS, "min_arrival_s": cap.MIN_ARRIVAL_S,
                           "warmup_share": cap.WARMUP_SHARE, "overload_share": cap.OVERLOAD_SHARE,
                           "rate_tolerance": cap.RATE_TOLERANCE, "confirm_span": cap.CONFIRM_SPAN,
                           "pool_binds": cap.POOL_BINDS},
            "prices": {h.name: {"usd_per_gpu_hour": prices[h.name],
                                "source": ("--usd-per-gpu-hour" if usd_per_gpu_hour
                                           else h.sources.get("cloud_usd_per_gpu_hour", ""))}
                       for h in hws if h.name in prices},
            "configurations": rows}
    emit(data, as_json, lambda: render_capacity(data, bool(target_rate), bool(prices)))


def render_capacity(data: dict, target: bool, priced: bool):
    rows = data["configurations"]
    # cheapest first where priced (an unpriced card last), else the most requests/s per GPU
    order = (lambda r: r.get("usd_per_m_output_tokens", math.inf)) if priced else \
        (lambda r: -r["max_rate_per_s"] / r["tp"])
    ok = sorted((r for r in rows if r.get("max_rate_per_s")), key=order)
    cols = ["hardware", Column("GPUs/replica", "right"), "weights", "KV", Column("max req/s", "right"),
            Column("in system", "right"), Column("output tok/s", "right"), Column("TTFT p90", "right"),
            Column("TPOT p90", "right")]
    cols += [Column("replicas", "right"), Column("GPUs", "right")] if target else []
    cols += [Column("$/M out tok", "right")] if priced else []
    body = []
    for r in ok:
        line = [r["hardware"], r["tp"], r["quant"], r["kv_quant"], f"{r['max_rate_per_s']:.2f}",
                f"{r['concurrency']:.0f}", fmt_rate(r["output_tok_s"]), fmt_s(r["ttft_p90_s"]), fmt_s(r["tpot_p90_s"])]
        line += [r["replicas"], r["gpus"]] if target else []
        line += [f"{r['usd_per_m_output_tokens']:.2f}" if "usd_per_m_output_tokens" in r else "-"] if priced else []
        body.append(line)
    target_text = f" · target {data['target_rate_per_s']} req/s" if target else ""
    yield table(f"{data['model']} · {data['runtime']} · SLO TTFT <= {data['slo_ttft_s']} s and TPOT <= "
                f"{data['slo_itl_s']} s for {data['attainment']:.0%} of requests · Poisson arrivals · "
                f"{data['prompt']} -> {data['output']} tokens{target_text}", cols, body)
    skipped = [r for r in rows if not r.get("max_rate_per_s")]
    if skipped:
        yield table("configurations left out", ["hardware", "GPUs", "weights", "KV", "why"],
                    [(r["hardware"], r["tp"], r["quant"], r["kv_quant"], r.get("why", "")) for r in skipped])
    lp = data["load_point"]
    prices = data.get("prices") or {}
    if prices and not any(p["source"] == "--usd-per-gpu-hour" for p in prices.values()):
        listed = ", ".join(f"{name} ${p['usd_per_gpu_hour']:.2f}" for name, p in prices.items())
        yield (f"$/M out tok at each card's cited cloud rate per GPU-hour ({listed}; sources in `roofline hw show "
               "CARD`); give --usd-per-gpu-hour for your own")
    yield (f"each load point: max({lp['min_requests']} requests, {lp['min_arrival_s']:.0f} s of arrivals), the first "
           f"{lp['warmup_share']:.0%} not counted; overloaded when the queue grows by > {lp['overload_share']:.0%} of "
           f"the arrivals; bisection to {lp['rate_tolerance']:.0%}; where the KV pool binds (a preemption, or "
           f"{lp['pool_binds']:.0%} in use), the rate holds over {lp['confirm_span']}x the arrivals. 'in system': "
           f"requests in flight at that rate (Little's law).")
