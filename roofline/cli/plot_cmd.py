"""`roofline plot roofline|sweep|memory|serve`: pictures of a prediction or a simulated serving run (matplotlib,
imported only here)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from roofline.cli.common import (
    BurstOpt,
    CardsOpt,
    GivenLenOpt,
    GpusOpt,
    JsonOpt,
    KvOpt,
    ModelOpt,
    PpOpt,
    QuantOpt,
    RuntimeOpt,
    TokOpt,
    beyond_context,
    image_path,
    int_list,
    kv_default,
    model_and_quant,
    name_list,
    nonempty_path,
    parallel_layout,
    runtime_card,
    runtime_choice,
    runtime_efficiency,
    runtime_label,
    runtime_sizing,
    store,
    tokens,
    unique_cards,
)
from roofline.cli.output import emit
from roofline.errors import RooflineError
from roofline.perf.parallel import check_parallel
from roofline.perf.workload import check_context, make_workload
from roofline.sizing.memory import memory_budget

app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None)
OutOpt = Annotated[Path, typer.Option("--output-file", "-o", help="Image file: .png, .svg or .pdf.",
                                   parser=nonempty_path)]


def _plots():
    try:
        import matplotlib  # noqa: F401  (a dependency; checked here so a broken install is one line)

        from roofline.report import plots
    except ImportError:  # pragma: no cover - depends on the environment
        raise RooflineError("plots need matplotlib, a dependency of roofline that is missing here: "
                            "pip install matplotlib") from None
    return plots


def _done(path: Path, data: dict, as_json: bool) -> None:
    warnings = [f"[yellow]{w}[/yellow]" for w in data.get("warnings", [])]
    emit({"path": str(path), **data}, as_json, lambda: [*warnings, f"wrote {path}"])


@app.command("roofline", help="The roofline chart with the prefill and decode steps and their main ops.")
def roofline_plot(model: ModelOpt, hw: Annotated[str, typer.Option("--hw")], quant: QuantOpt = None,
                  kv_quant: KvOpt = None, prompt: TokOpt = "500", batch: int = 1, gpus: GpusOpt = 1,
                  out: OutOpt = Path("roofline.png"), as_json: JsonOpt = False, cards: CardsOpt = None,
                  runtime: RuntimeOpt = None):
    st = store(cards)
    card, quant = model_and_quant(st, model, quant)
    hwc = st.hardware(hw)
    choice = runtime_choice(st, runtime)
    card = runtime_card(card, choice)
    wl = make_workload(prompt_tokens=tokens("--prompt", prompt), batch=batch, quant=quant,
                       kv_quant=kv_default(choice, kv_quant), **parallel_layout(choice, gpus, 1))
    check_parallel(card, hwc, wl.tp, wl.pp)
    check_context(card.architecture.max_context, card.name, wl)
    eff = runtime_efficiency(choice, card, hwc, wl)
    held, dep, _ = runtime_sizing(choice, hwc, wl, card)
    b = memory_budget(card, held, wl.quant, wl.kv_quant, wl.tokens_held, wl.batch, dep)
    data = _plots().plot_roofline(card, hwc, wl, image_path(out), eff)
    unfit = [] if b.fits else [
        f"does not fit: {b.total_bytes / 1e9:,.1f} GB needed per GPU of {b.capacity_bytes / 1e9:,.1f} GB; the chart "
        "times it as if it did (see `roofline fits` for what does)"]
    _done(out, {"runtime": runtime_label(choice), **data, "fits_in_memory": bool(b.fits),
                "warnings": unfit + data.get("warnings", [])}, as_json)


@app.command("sweep", help="Aggregate and per-request tok/s against concurrency, with the memory limit.")
def sweep_plot(model: ModelOpt, hw: Annotated[str, typer.Option("--hw")],
               concurrency: Annotated[str, typer.Option()] = "1,2,4,8,16,32,64,128,256",
               quant: QuantOpt = None, kv_quant: KvOpt = None, prompt: TokOpt = "500", output: TokOpt = "512",
               gpus: GpusOpt = 1, pp: PpOpt = 1, out: OutOpt = Path("sweep.png"), as_json: JsonOpt = False,
               cards: CardsOpt = None, runtime: RuntimeOpt = None):
    st = store(cards)
    card, quant = model_and_quant(st, model, quant)
    hwc = st.hardware(hw)
    choice = runtime_choice(st, runtime)
    card = runtime_card(card, choice)
    wl = make_workload(prompt_tokens=tokens("--prompt", prompt), output_tokens=tokens("--output", output),
                       quant=quant, kv_quant=kv_default(choice, kv_quant), **parallel_layout(choice, gpus, pp))
    check_parallel(card, hwc, wl.tp, wl.pp)
    check_context(card.architecture.max_context, card.name, wl)
    eff = runtime_efficiency(choice, card, hwc, wl)
    held, dep, _ = runtime_sizing(choice, hwc, wl, card)
    data = _plots().plot_sweep(card, held, wl, int_list("--concurrency", concurrency), image_path(out), eff, dep)
    unfit = [c for c, fits in zip(data["concurrency"], data["fits"]) if not fits]
    note = [f"{len(unfit)} of {len(data['fits'])} concurrency levels do not fit in memory, from {min(unfit)}: "
            "drawn faded and dashed (see `roofline fits`)"] if unfit else []
    _done(out, {"runtime": runtime_label(choice), **data, "warnings": note + data.get("warnings", [])}, as_json)


@app.command("memory", help="Stacked memory budget against capacity, one bar per hardware card.")
def memory_plot(model: ModelOpt, hw: Annotated[str, typer.Option("--hw", help="Hardware card(s), comma-separated.")],
                quant: QuantOpt = None, kv_quant: KvOpt = None, context: TokOpt = "8k", concurrency: int = 1,
                gpus: GpusOpt = 1, pp: PpOpt = 1, out: OutOpt = Path("memory.png"), as_json: JsonOpt = False,
                cards: CardsOpt = None, runtime: RuntimeOpt = None):
    st = store(cards)
    card, quant = model_and_quant(st, model, quant)
    choice = runtime_choice(st, runtime)
    card = runtime_card(card, choice)
    hws = unique_cards([st.hardware(h) for h in name_list("--hw", hw)])
    wl = make_workload(batch=concurrency, quant=quant, kv_quant=kv_default(choice, kv_quant), **parallel_layout(choice, gpus, pp),
                       flags={"batch": "--concurrency"})
    for h in hws:
        check_parallel(card, h, wl.tp, wl.pp)
        runtime_efficiency(choice, card, h, wl)  # the runtime runs this hardware and these formats
    sized = [runtime_sizing(choice, h, wl, card)[:2] for h in hws]
    ctx = tokens("--context", context)
    data = _plots().plot_memory(card, [h for h, _ in sized], wl, ctx, image_path(out), [d for _, d in sized])
    unfit = [f"does not fit on {name}" for name, bar in data.items() if not bar["fits"]]
    _done(out, {"runtime": runtime_label(choice), "hardware": data, "warnings": beyond_context(card, ctx) + unfit},
          as_json)


@app.command("serve", help="A simulated serving run over time: running batch, queue and KV pool use.")
def serve_plot(model: ModelOpt, hw: Annotated[str, typer.Option("--hw")],
               concurrency: Annotated[Optional[int], typer.Option(help="Closed loop: N clients.")] = None,
               rate: Annotated[Optional[float], typer.Option(help="Open loop: requests per second.")] = None,
               trace: Annotated[Optional[str], typer.Option(help="Trace file (CSV or JSONL).")] = None,
               requests: Annotated[Optional[int], typer.Option(
                   help="Requests to serve (default 1,000; a trace: its every row).")] = None,
               prompt: GivenLenOpt = None, output: GivenLenOpt = None, burstiness: BurstOpt = None,
               seed: int = 0, quant: QuantOpt = None, kv_quant: KvOpt = None,
               gpus: GpusOpt = 1, pp: PpOpt = 1, out: OutOpt = Path("serve.png"), as_json: JsonOpt = False,
               cards: CardsOpt = None, runtime: RuntimeOpt = None):
    from roofline.cli.serve_cmd import run_serve

    path = image_path(out)
    result = run_serve(store(cards), model, hw, runtime, concurrency, rate, trace, requests, prompt, output,
                       burstiness, None, None, seed, quant, kv_quant, gpus, pp)
    s = result.summary()
    load = {"closed_loop": f"{concurrency} clients", "open_loop": f"{rate} req/s"}.get(s["mode"], f"trace {trace}")
    title = (f"{s['model']} on {s['hardware']} x{s['gpus']} · {s['runtime']} · {load} · {s['requests']} requests · "
             f"KV pool {s['kv_pool_tokens_per_replica']:,} tokens")
    data = _plots().plot_serve(result.metrics.series, path, title)
    _done(out, {"runtime": s["runtime"], **data}, as_json)
