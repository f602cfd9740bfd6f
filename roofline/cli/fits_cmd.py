"""`roofline fits`: the memory budget line by line, a verdict, the limits, and what would fit instead."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from roofline.cards.units import QuantityError, parse_quantity
from roofline.cli.common import CardsOpt, JsonOpt, model_and_quant, store
from roofline.cli.output import Column, emit, table
from roofline.cli.predict_cmd import GpusOpt, KvOpt, PpOpt, QuantOpt, tokens
from roofline.errors import RooflineError
from roofline.perf.parallel import check_parallel
from roofline.perf.workload import make_workload
from roofline.sizing.alternatives import what_would_fit
from roofline.sizing.memory import (
    BLOCK_TOKENS,
    MAX_STEP_TOKENS,
    Budget,
    Deployment,
    max_concurrency,
    max_context,
    memory_budget,
    min_gpus,
)


def _gb(n: float) -> str:
    return f"{n / 1e9:,.2f}"


def fits_cmd(
    model: Annotated[str, typer.Option("--model", "-m", help="Model card.")],
    hw: Annotated[str, typer.Option("--hw", help="Hardware card.")],
    quant: QuantOpt = None, kv_quant: KvOpt = "bf16",
    context: Annotated[str, typer.Option(help="Tokens each sequence holds (prompt + output): 8k, 128K, 1M.")] = "8k",
    concurrency: Annotated[int, typer.Option(help="Concurrent sequences.")] = 1,
    gpus: GpusOpt = 1, pp: PpOpt = 1,
    block_tokens: Annotated[int, typer.Option("--block-tokens", help="Paged-KV block size in tokens.")] = BLOCK_TOKENS,
    max_step_tokens: Annotated[int, typer.Option("--max-step-tokens", help="Tokens per engine step (sizes the "
                                                 "activation workspace).")] = MAX_STEP_TOKENS,
    runtime: Annotated[Optional[str], typer.Option(help="Runtime overhead per GPU, e.g. '2 GB' (default by kind).")] = None,
    as_json: JsonOpt = False, cards: CardsOpt = None,
):
    """Does it fit? Weights, KV cache, activations, runtime and OS reserve against the card's memory."""
    st = store(cards)
    card, quant = model_and_quant(st, model, quant)
    hwc = st.hardware(hw)
    ctx = tokens("--context", context)
    if concurrency <= 0:
        raise RooflineError(f"--concurrency: must be > 0, got {concurrency}")
    wl = make_workload(quant=quant, kv_quant=kv_quant, batch=concurrency, tp=gpus, pp=pp)
    for label, value in (("--block-tokens", block_tokens), ("--max-step-tokens", max_step_tokens)):
        if value <= 0:
            raise RooflineError(f"{label}: must be > 0, got {value}")
    try:
        runtime_bytes = None if runtime is None else parse_quantity(runtime, "bytes")
    except QuantityError as err:
        raise RooflineError(f"--runtime: {err}") from None
    check_parallel(card, hwc, wl.tp, wl.pp)
    dep = Deployment(wl.tp, wl.pp, block_tokens, max_step_tokens, runtime_bytes)
    b = memory_budget(card, hwc, wl.quant, wl.kv_quant, ctx, wl.batch, dep)
    best = min_gpus(card, hwc, wl.quant, wl.kv_quant, ctx, wl.batch, dep)
    data = {
        "model": card.name, "hardware": hwc.name, "quant": wl.quant, "kv_quant": wl.kv_quant, "context_tokens": ctx,
        "concurrency": wl.batch, "gpus": dep.gpus, "tp": dep.tp, "pp": dep.pp, "fits": bool(b.fits),
        "capacity_bytes": b.capacity_bytes, "total_bytes": float(b.total_bytes), "headroom_bytes": float(b.headroom_bytes),
        "budget": {k: round(float(v)) for k, v in (("weights", b.weights_bytes), ("kv", b.kv_bytes),
                   ("activations", b.activations_bytes), ("runtime", b.runtime_bytes), ("reserved", b.reserved_bytes))},
        "weights_by_component": {k: round(v) for k, v in b.weights_by_component.items()}, "kv_bytes_per_token": b.kv_bytes_per_token,
        "kv_bytes_per_sequence": float(b.kv_bytes_per_sequence),
        "max_context": max_context(card, hwc, wl.quant, wl.kv_quant, wl.batch, dep),
        "max_concurrency": max_concurrency(card, hwc, wl.quant, wl.kv_quant, ctx, dep),
        "min_gpus": best.gpus if best else None,
        "min_gpus_layout": {"tp": best.tp, "pp": best.pp} if best else None,
        "suggestions": [f"{a.flag}: {a.detail}"
                        for a in what_would_fit(card, hwc, wl.quant, wl.kv_quant, ctx, wl.batch, dep, b)],
        "warnings": [f"{ctx:,} tokens is beyond {card.name}'s max context of {card.architecture.max_context:,}"]
        if ctx > card.architecture.max_context else [],
    }
    emit(data, as_json, lambda: render(data, b, card, hwc))


def kv_per_token(card, d: dict) -> str:
    """'128.0 KiB/token': the long-context marginal; with sliding windows, the in-window figure too."""
    from roofline.sizing.kv import kv_bytes_per_token_in_window, shortest_window

    window = shortest_window(card)
    short = kv_bytes_per_token_in_window(card, d["kv_quant"]) / d["gpus"]
    if window is None or abs(short - d["kv_bytes_per_token"]) < 1:
        return f"{d['kv_bytes_per_token'] / 1024:,.1f} KiB/token"
    return f"{short / 1024:,.1f} KiB/token up to the {window:,}-token window, {d['kv_bytes_per_token'] / 1024:,.1f} beyond"


def render(d: dict, b: Budget, card, hw):
    per = " per GPU" if d["gpus"] > 1 else ""
    rows = [(f"  {c}", _gb(v)) for c, v in b.weights_by_component.items() if v >= 5e6]
    rows.insert(0, (f"weights ({d['quant'] or 'native: ' + '+'.join(dict.fromkeys(card.weights.values()))})",
                    _gb(b.weights_bytes)))
    rows += [(f"KV cache: {d['concurrency']} × {d['context_tokens']:,} tokens ({d['kv_quant']}, "
              f"{kv_per_token(card, d)}, {BLOCK_TOKENS}-token blocks)", _gb(d["budget"]["kv"])),
             ("activations (max step tokens)", _gb(d["budget"]["activations"])),
             ("runtime (CUDA context, framework)", _gb(d["budget"]["runtime"]))]
    if d["budget"]["reserved"]:
        rows.append(("reserved by the OS/CPU (unified memory)", _gb(d["budget"]["reserved"])))
    cap = _gb(d["capacity_bytes"]) + (f" ({d['capacity_bytes'] / 2**30:,.0f} GiB)" if hw.memory.capacity_binary else "")
    rows += [("total", _gb(d["total_bytes"])), (f"capacity{per}", cap)]
    title = f"{card.name} on {d['gpus']} × {hw.name}" if d["gpus"] > 1 else f"{card.name} on {hw.name}"
    yield table(f"memory budget{per}: {title} · {d['concurrency']} sequence(s) × {d['context_tokens']:,} tokens held "
                f"(--context: prompt + output per sequence)", ["line", Column("GB", "right")], rows)
    if d["fits"]:
        yield f"[bold green]fits[/bold green] with {_gb(d['headroom_bytes'])} GB to spare"
    else:
        yield f"[bold red]does not fit[/bold red]: short by {_gb(-d['headroom_bytes'])} GB"
    yield (f"max context at {d['concurrency']} sequence(s): {d['max_context']:,} tokens "
           f"(model max {card.architecture.max_context:,}) · max concurrency at {d['context_tokens']:,} tokens: "
           f"{d['max_concurrency']:,} · fewest GPUs: {d['min_gpus'] or 'none of this card holds it'}")
    for s in d["suggestions"]:
        yield f"  would fit: {s}"
    for w in d["warnings"]:
        yield f"[yellow]note[/yellow]: {w}"
