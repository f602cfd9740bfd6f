"""`roofline sweep` (the concurrency table) and `roofline compare` (cards side by side)."""

from __future__ import annotations

from typing import Annotated

import numpy as np
import typer

from roofline.cli.common import (
    CardsOpt,
    JsonOpt,
    RuntimeOpt,
    int_list,
    kv_default,
    runtime_choice,
    runtime_efficiency,
    runtime_label,
    store,
)
from roofline.cli.output import Column, emit, table
from roofline.cli.predict_cmd import (
    GpusOpt,
    KvOpt,
    PpOpt,
    QuantOpt,
    TokOpt,
    fmt_rate,
    fmt_s,
    tokens,
    write_csv,
)
from roofline.perf.grid import sweep_arrays
from roofline.perf.parallel import check_parallel
from roofline.perf.request import predict
from roofline.perf.workload import make_workload
from roofline.sizing.memory import Deployment, max_concurrency


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
    requests_per_client: Annotated[int, typer.Option(help="Closed loop: requests each client sends.")] = 4,
    seed: Annotated[int, typer.Option(help="Closed loop: random seed.")] = 0,
):
    """Aggregate and per-request tok/s, ITL and TTFT as concurrency grows. By default N clients in a closed loop
    (each sends its next request when the last completes) through the runtime's scheduler, with the static
    batch's figures beside them as static_* columns; --static gives the static batch alone (stops where memory
    runs out)."""
    st = store(cards)
    card, hwc = st.model(model), st.hardware(hw)
    choice = runtime_choice(st, runtime)
    levels = int_list("--concurrency", concurrency)
    wl = make_workload(prompt_tokens=tokens("--prompt", prompt), output_tokens=tokens("--output", output),
                       quant=quant, kv_quant=kv_default(choice, kv_quant), tp=gpus, pp=pp)
    check_parallel(card, hwc, wl.tp, wl.pp)
    eff = runtime_efficiency(choice, card, hwc, wl)
    limit = max_concurrency(card, hwc, wl.quant, wl.kv_quant, wl.prompt_tokens + wl.output_tokens,
                            Deployment(wl.tp, wl.pp))
    b = np.array(levels, float)
    v = sweep_arrays(card, hwc, wl, b, np.full_like(b, wl.prompt_tokens), eff=eff)
    rows = [{"concurrency": n, **{k: float(v[k][i]) for k in v if k != "fits_in_memory"},
             "fits_in_memory": bool(v["fits_in_memory"][i])} for i, n in enumerate(levels)]
    shown = [r for r in rows if r["fits_in_memory"]]
    note = (f"memory runs out above {limit} concurrent requests of {wl.prompt_tokens + wl.output_tokens:,} tokens: "
            f"weights {rows[0]['weights_bytes'] / 1e9:,.1f} GB + KV {(rows[0]['kv_bytes'] / levels[0]) / 1e9:,.3f} GB "
            f"per request on {hwc.memory.capacity_bytes / 1e9:,.1f} GB (see `roofline fits` for every line)")
    data = {"model": card.name, "hardware": hwc.name, "runtime": runtime_label(choice), "prompt_tokens": wl.prompt_tokens,
            "output_tokens": wl.output_tokens, "max_concurrency": limit,
            "mode": "static" if static else "closed_loop", "rows": rows}
    if not static:
        rows = data["rows"] = _closed_loop_rows(card, hwc, wl, choice, eff, levels, rows, requests_per_client, seed)
    if as_csv:
        import csv
        import sys

        writer = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
        return

    def render_closed():
        cols = [Column(c, "right") for c in ("clients", "aggregate tok/s", "per-request tok/s", "TTFT p50", "TTFT p90",
                                             "ITL p50", "peak batch", "static tok/s", "static TTFT")]
        yield table(f"{card.name} on {hwc.name} · runtime {data['runtime']} · {wl.prompt_tokens}-token prompts → "
                    f"{wl.output_tokens} tokens · closed loop of N clients, {requests_per_client} requests each "
                    f"(static_*: one batch of N arriving together)", cols,
                    [(r["concurrency"], fmt_rate(r["output_tok_s"]), fmt_rate(r["output_tok_s_per_request"]),
                      fmt_s(r["ttft_p50_s"]), fmt_s(r["ttft_p90_s"]), fmt_s(r["itl_p50_s"]), r["peak_running"],
                      fmt_rate(r["static_decode_tok_s_aggregate"]) if r["fits_in_memory"] else "OOM",
                      fmt_s(r["static_ttft_s"]) if r["fits_in_memory"] else "OOM") for r in rows])
        if limit < max(levels):
            yield f"above {limit} clients requests wait for KV blocks: " + note

    def render():
        cols = [Column("concurrency", "right"), Column("aggregate tok/s", "right"), Column("per-request tok/s", "right"),
                Column("ITL", "right"), Column("TTFT", "right"), Column("memory GB/GPU", "right")]
        yield table(f"{card.name} on {hwc.name} · runtime {data['runtime']} · {wl.prompt_tokens}-token prompts → {wl.output_tokens} tokens "
                    f"(expected mode)", cols,
                    [(r["concurrency"], fmt_rate(r["decode_tok_s_aggregate"]), fmt_rate(r["decode_tok_s"]),
                      fmt_s(r["itl_s"]), fmt_s(r["ttft_s"]), f"{r['memory_per_gpu_bytes'] / 1e9:,.1f}")
                     for r in shown])
        if len(shown) < len(rows) or limit < 10**9:
            yield ("stopped: " if len(shown) < len(rows) else "") + note

    emit(data, as_json, render if static else render_closed)


STATIC_KEYS = ("decode_tok_s_aggregate", "decode_tok_s", "ttft_s", "itl_s")


def _closed_loop_rows(card, hwc, wl, choice, eff, levels, static_rows, requests_per_client, seed) -> list[dict]:
    """The closed-loop simulation at each level, with the static batch's figures as static_* columns."""
    from roofline.perf.serving.policy import policy_for
    from roofline.perf.serving.run import build_fleet, closed_loop_row
    from roofline.perf.serving.workload import Lengths

    fleet = build_fleet(card, hwc, wl, policy_for(choice), eff=eff)
    prompt, output = Lengths("fixed", wl.prompt_tokens), Lengths("fixed", wl.output_tokens)
    rows = []
    for n, st in zip(levels, static_rows):
        row = closed_loop_row(fleet, n, prompt, output, requests_per_client, seed)
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
    st = store(cards)
    models = [st.model(m) for m in model.split(",") if m.strip()]
    hws = [st.hardware(h) for h in hw.split(",") if h.strip()]
    choice = runtime_choice(st, runtime)
    wl = make_workload(prompt_tokens=tokens("--prompt", prompt), output_tokens=tokens("--output", output),
                       batch=batch, quant=quant, kv_quant=kv_default(choice, kv_quant), tp=gpus, pp=pp)
    preds = [predict(m, h, wl, eff=runtime_efficiency(choice, m, h, wl)) for m in models for h in hws]
    if as_csv:
        write_csv(preds)
        return
    data = [p.model_dump(exclude={"phases"}) for p in preds]

    def render():
        cols = ["model", "hardware", "weights", Column("TTFT", "right"), Column("ITL", "right"),
                Column("decode tok/s", "right"), Column("ceiling", "right"), Column("prefill tok/s", "right"),
                "decode bound", Column("memory GB/GPU", "right"), "fits"]
        yield table(f"{wl.prompt_tokens}-token prompt → {wl.output_tokens} tokens, batch {wl.batch} · runtime "
                    f"{runtime_label(choice)} (expected mode)",
                    cols, [(p.model, p.hardware, p.quant, fmt_s(p.ttft_s), fmt_s(p.itl_s), fmt_rate(p.decode_tok_s),
                            fmt_rate(p.ceiling.decode_tok_s), fmt_rate(p.prefill_tok_s), p.bound["decode"],
                            f"{p.memory_per_gpu_bytes / 1e9:,.1f}", "yes" if p.fits_in_memory else "NO")
                           for p in preds])

    emit(data, as_json, render)
