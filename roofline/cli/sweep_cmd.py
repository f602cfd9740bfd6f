"""`roofline sweep` (the concurrency table) and `roofline compare` (cards side by side)."""

from __future__ import annotations

from typing import Annotated, Optional

import numpy as np
import typer

from roofline.cli.common import (
    CardsOpt,
    GpusOpt,
    JsonOpt,
    KvOpt,
    PpOpt,
    QuantOpt,
    RuntimeOpt,
    SlotContextOpt,
    TokOpt,
    context_tokens,
    fmt_rate,
    fmt_s,
    int_list,
    kv_default,
    model_and_quant,
    name_list,
    parallel_layout,
    runtime_card,
    runtime_choice,
    runtime_efficiency,
    runtime_label,
    runtime_runs,
    runtime_sizing,
    store,
    tokens,
    unique_cards,
    warn_batch_beyond_runtime,
)
from roofline.cli.output import Column, check_formats, emit, progress, table
from roofline.cli.predict_cmd import csv_row
from roofline.errors import RooflineError
from roofline.perf.grid import sweep_arrays
from roofline.perf.instead import run_instead
from roofline.perf.parallel import check_parallel
from roofline.perf.request import predict
from roofline.perf.workload import check_context, make_workload
from roofline.sizing.memory import max_concurrency


def _memory_note(first: dict, level: int, limit: int, wl, capacity: str) -> str:
    """Where memory runs out, from the first row's per-GPU bytes."""
    return (f"memory runs out above {limit} concurrent requests of {wl.prompt_tokens + wl.output_tokens:,} tokens: "
            f"weights {first['weights_bytes_per_gpu'] / 1e9:,.1f} GB + KV "
            f"{first['kv_bytes_per_gpu'] / level / 1e9:,.3f} GB per request on {capacity} (see `roofline fits` for "
            "every line)")


def sweep_cmd(
    model: Annotated[str, typer.Option("--model", "-m", help="Model card.")],
    hw: Annotated[str, typer.Option("--hw", help="Hardware card.")],
    concurrency: Annotated[str, typer.Option(help="Concurrent requests, comma-separated.")] = "1,4,8,16,32,64",
    quant: QuantOpt = None, kv_quant: KvOpt = None, prompt: TokOpt = "500", output: TokOpt = "512",
    gpus: GpusOpt = 1, pp: PpOpt = 1, as_json: JsonOpt = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print CSV rows.")] = False, cards: CardsOpt = None,
    runtime: RuntimeOpt = None,
    static: Annotated[bool, typer.Option("--static", help="Time one static batch of N prompts arriving together "
                                         "(the analytic predictor) instead of simulating N clients.")] = False,
    requests_per_client: Annotated[Optional[int], typer.Option(help="Closed loop: requests each client sends.  "
                                                               "[default: 4]")] = None,
    seed: Annotated[Optional[int], typer.Option(min=0, help="Closed loop: random seed.  [default: 0]")] = None,
    context: SlotContextOpt = None,
):
    """Aggregate and per-request tok/s, ITL and TTFT as concurrency grows. By default N clients in a closed loop
    (each sends its next request when the last completes) through the runtime's scheduler, with the static
    batch's figures beside them as static_* columns; --static gives the static batch alone (stops where memory
    runs out)."""
    check_formats(as_json, as_csv)
    requests_per_client, seed = _closed_loop_options(static, requests_per_client, seed)
    st = store(cards)
    card, quant = model_and_quant(st, model, quant)
    hwc = st.hardware(hw)
    choice = runtime_choice(st, runtime)
    card = runtime_card(card, choice)
    levels = int_list("--concurrency", concurrency)
    wl = make_workload(prompt_tokens=tokens("--prompt", prompt), output_tokens=tokens("--output", output),
                       quant=quant, kv_quant=kv_default(choice, kv_quant), **parallel_layout(choice, gpus, pp),
                       batch=max(levels), flags={"batch": "--concurrency"})
    check_parallel(card, hwc, wl.tp, wl.pp)
    check_context(card.architecture.max_context, card.name, wl)
    eff = runtime_efficiency(choice, card, hwc, wl)
    slot_context = context_tokens(context)
    held, dep, capacity = runtime_sizing(choice, hwc, wl, card, slot_context)
    limit = max_concurrency(card, held, wl.quant, wl.kv_quant, wl.prompt_tokens + wl.output_tokens, dep)
    if limit < 1:
        _refuse_unfit(card, hwc, held, wl, eff, dep, runtime_runs(choice, card, hwc))
    b = np.array(levels, float)
    v = sweep_arrays(card, held, wl, b, np.full_like(b, wl.prompt_tokens), eff=eff, dep=dep)
    rows = [{"concurrency": n, **{k: float(v[k][i]) for k in v if k != "fits_in_memory"},
             "fits_in_memory": bool(v["fits_in_memory"][i])} for i, n in enumerate(levels)]
    note = _memory_note(rows[0], levels[0], limit, wl, capacity)
    data = {"model": card.name, "hardware": hwc.name, "runtime": runtime_label(choice), "prompt_tokens": wl.prompt_tokens,
            "output_tokens": wl.output_tokens, "max_concurrency": limit,
            "mode": "static" if static else "closed_loop", "rows": rows}
    if not static:
        rows = data["rows"] = _closed_loop_rows(card, hwc, wl, choice, eff, levels, rows, requests_per_client, seed,
                                                slot_context)

    header = (f"{card.name} on {hwc.name} · runtime {data['runtime']} · {wl.prompt_tokens}-token prompts → "
              f"{wl.output_tokens} tokens")
    if static:
        emit(data, as_json, lambda: _render_static(header, rows, limit, note), as_csv=as_csv, csv_rows=lambda: rows)
    else:
        emit(data, as_json, lambda: _render_closed(header, rows, limit, max(levels), note, requests_per_client),
             as_csv=as_csv, csv_rows=lambda: rows)


def _refuse_unfit(card, hwc, held, wl, eff, dep, runs) -> None:
    """Nothing to tabulate: why, and what would fit, in one line."""
    fixes = [a["flag"] for a in run_instead(card, held, wl.model_copy(update={"batch": 1}), None, eff, dep, runs)]
    raise RooflineError(f"{card.name} does not fit on {hwc.name} even at concurrency 1 "
                        f"({wl.prompt_tokens + wl.output_tokens:,} tokens per request); "
                        + (f"try {' or '.join(fixes)}" if fixes else "see `roofline fits`"))


def _render_closed(header: str, rows: list[dict], limit: int, top: int, note: str, requests_per_client: int):
    cols = [Column(c, "right") for c in ("clients", "aggregate tok/s", "per-request tok/s", "TTFT p50", "TTFT p90",
                                         "ITL p50", "peak batch", "static tok/s", "static TTFT")]
    yield table(f"{header} · closed loop of N clients, {requests_per_client} requests each (static_*: one batch of N "
                "arriving together)", cols,
                [(r["concurrency"], fmt_rate(r["output_tok_s"]), fmt_rate(r["output_tok_s_per_request"]),
                  fmt_s(r["ttft_p50_s"]), fmt_s(r["ttft_p90_s"]), fmt_s(r["itl_p50_s"]), r["peak_running"],
                  fmt_rate(r["static_decode_tok_s_aggregate"]) if r["fits_in_memory"] else "OOM",
                  fmt_s(r["static_ttft_s"]) if r["fits_in_memory"] else "OOM") for r in rows])
    if limit < top:
        yield (f"a static batch of more than {limit} does not fit (each request at its full length): " + note +
               "; in the closed loop requests hold KV as they grow, so more run at once ('peak batch'), until the pool "
               "fills and the rest wait or are preempted")


def _render_static(header: str, rows: list[dict], limit: int, note: str):
    shown = [r for r in rows if r["fits_in_memory"]]
    cols = [Column("concurrency", "right"), Column("aggregate tok/s", "right"), Column("per-request tok/s", "right"),
            Column("ITL", "right"), Column("TTFT", "right"), Column("memory GB/GPU", "right")]
    yield table(f"{header} (expected mode)", cols,
                [(r["concurrency"], fmt_rate(r["decode_tok_s_aggregate"]), fmt_rate(r["decode_tok_s"]),
                  fmt_s(r["itl_s"]), fmt_s(r["ttft_s"]), f"{r['memory_per_gpu_bytes'] / 1e9:,.1f}") for r in shown])
    if len(shown) < len(rows) or limit < 10**9:
        yield ("stopped: " if len(shown) < len(rows) else "") + note


STATIC_KEYS = ("decode_tok_s_aggregate", "decode_tok_s", "ttft_s", "itl_s")


def _closed_loop_options(static: bool, requests_per_client: int | None, seed: int | None) -> tuple[int, int]:
    """--requests-per-client and --seed with their defaults; refused with --static, which simulates nothing."""
    if static and (requests_per_client is not None or seed is not None):
        raise RooflineError("--requests-per-client and --seed drive the closed loop; --static times one batch: drop "
                            "them or --static")
    from roofline.perf.serving.run import REQUESTS_PER_CLIENT

    return REQUESTS_PER_CLIENT if requests_per_client is None else requests_per_client, seed or 0


def _closed_loop_rows(card, hwc, wl, choice, eff, levels, static_rows, requests_per_client, seed,
                      slot_context: int | None = None) -> list[dict]:
    """The closed-loop simulation at each level, with the static batch's figures as static_* columns."""
    from roofline.perf.serving.policy import policy_for
    from roofline.perf.serving.run import build_fleet, check_requests_per_client, check_size, closed_loop_row
    from roofline.perf.serving.workload import Lengths

    for n in levels:  # every level checked before the first is simulated, and all of them together
        check_size(1, n)
    check_requests_per_client(requests_per_client, sum(levels))  # the levels together, as one serve run's cap
    fleet = build_fleet(card, hwc, wl, policy_for(choice, hwc, wl.tp * wl.pp, slot_context), eff=eff)
    prompt, output = Lengths("fixed", wl.prompt_tokens), Lengths("fixed", wl.output_tokens)
    rows = []
    with progress("simulating the closed loops", sum(levels) * requests_per_client) as advance:
        for n, st in zip(levels, static_rows):
            row = closed_loop_row(fleet, n, prompt, output, requests_per_client, seed, advance)
            row.update({f"static_{k}": st[k] for k in STATIC_KEYS}, fits_in_memory=st["fits_in_memory"],
                       memory_per_gpu_bytes=st["memory_per_gpu_bytes"])
            rows.append(row)
    return rows


def compare_cmd(
    model: Annotated[str, typer.Option("--model", "-m", help="Model card(s), comma-separated.")],
    hw: Annotated[str, typer.Option("--hw", help="Hardware card(s), comma-separated.")],
    quant: QuantOpt = None, kv_quant: KvOpt = None, prompt: TokOpt = "500", output: TokOpt = "200",
    batch: Annotated[int, typer.Option(help="Concurrent sequences.")] = 1, gpus: GpusOpt = 1, pp: PpOpt = 1,
    as_json: JsonOpt = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print CSV rows.")] = False, cards: CardsOpt = None,
    runtime: RuntimeOpt = None,
):
    """Models x hardware side by side: TTFT, ITL, tok/s, memory, the decode bound."""
    check_formats(as_json, as_csv)
    st = store(cards)
    specs = [model_and_quant(st, m, quant) for m in name_list("--model", model)]
    hws = unique_cards([st.hardware(h) for h in name_list("--hw", hw)])
    if not specs or not hws:
        raise RooflineError("compare needs at least one --model and one --hw")
    choice = runtime_choice(st, runtime)
    specs = [(runtime_card(card, choice), q) for card, q in specs]
    warn_batch_beyond_runtime(choice, batch)
    runs = []
    for card, q in specs:
        wl = make_workload(prompt_tokens=tokens("--prompt", prompt), output_tokens=tokens("--output", output),
                           batch=batch, quant=q, kv_quant=kv_default(choice, kv_quant), **parallel_layout(choice, gpus, pp))
        for h in hws:
            eff = runtime_efficiency(choice, card, h, wl)
            held, dep, _ = runtime_sizing(choice, h, wl, card)
            p = predict(card, held, wl, eff=eff, dep=dep)
            runs.append((p, [] if p.fits_in_memory else run_instead(card, held, wl, None, eff, dep,
                                                                    runtime_runs(choice, card, h))))
    preds = [p for p, _ in runs]
    data = [{**p.model_dump(exclude={"phases"}), "instead": alt} for p, alt in runs]
    wl = make_workload(prompt_tokens=tokens("--prompt", prompt), output_tokens=tokens("--output", output),
                       batch=batch, kv_quant=kv_default(choice, kv_quant), **parallel_layout(choice, gpus, pp))

    def render():
        cols = ["model", "hardware", "weights", Column("TTFT", "right"), Column("ITL", "right"),
                Column("decode tok/s", "right"), Column("ceiling", "right"), Column("prefill tok/s", "right"),
                "decode bound", Column("memory GB/GPU", "right"), "fits"]
        misfits = [(p, alt) for p, alt in runs if not p.fits_in_memory]
        for p, alt in misfits:
            fix = f"; run instead with {alt[0]['flag']} ({alt[0]['detail']})" if alt else "; nothing single fits"
            yield f"[bold red]{p.model} does NOT fit on {p.hardware}[/bold red]{fix}"
        yield table(f"{wl.prompt_tokens}-token prompt → {wl.output_tokens} tokens, batch {wl.batch} · runtime "
                    f"{runtime_label(choice)} (expected mode)",
                    cols, [(p.model, p.hardware, p.quant, fmt_s(p.ttft_s), fmt_s(p.itl_s), fmt_rate(p.decode_tok_s),
                            fmt_rate(p.ceiling.decode_tok_s), fmt_rate(p.prefill_tok_s), p.bound["decode"],
                            f"{p.memory_per_gpu_bytes / 1e9:,.1f}",
                            "yes" if p.fits_in_memory else "NO" + (f" → {alt[0]['flag']}" if alt else ""))
                           for p, alt in runs])

    emit(data, as_json, render, as_csv=as_csv, csv_rows=lambda: [csv_row(p) for p in preds])
