"""`roofline predict`: one request shape on one card, expected beside ceiling, and why."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from roofline.cli.common import (
    CardsOpt,
    GpusOpt,
    HwOpt,
    JsonOpt,
    KvOpt,
    ModelOpt,
    PpOpt,
    QuantOpt,
    RuntimeOpt,
    TokOpt,
    fmt_margin,
    fmt_rate,
    fmt_s,
    kv_default,
    model_and_quant,
    parallel_layout,
    runtime_card,
    runtime_choice,
    runtime_efficiency,
    runtime_runs,
    runtime_sizing,
    store,
    tokens,
    warn_batch_beyond_runtime,
)
from roofline.cli.output import Column, check_formats, emit, table, warn_on_success
from roofline.cli.output import write_csv as write_rows
from roofline.errors import RooflineError
from roofline.perf.instead import run_instead
from roofline.perf.request import Prediction, predict
from roofline.perf.workload import make_workload
from roofline.sizing.reduce import reduce_card


def flat(p: Prediction) -> dict:
    """The --json document: the headline metrics at top level, details under `phases`."""
    data = p.model_dump()
    data["ceiling"] = {k: v for k, v in data["ceiling"].items() if k in ("ttft_s", "itl_s", "prefill_tok_s", "decode_tok_s", "decode_tok_s_aggregate", "e2e_s")}
    return data


def why(p: Prediction, phase: str) -> str:
    """The bound and the numbers behind it, never contradicting each other: the bound is the largest share of the
    step's time (ops are classed one by one as compute- or memory-limited); the step-average intensity is context."""
    r = p.phases[phase]
    share = r.limit_share
    split = f"compute {share['compute']:.0%} · memory {share['memory']:.0%} · overhead {share['overhead']:.0%}"
    above = r.arithmetic_intensity > r.ridge_flop_per_byte
    avg = (f"step average {r.arithmetic_intensity:,.1f} FLOP/B, {'above' if above else 'below'} the datasheet ridge "
           f"{r.ridge_flop_per_byte:,.0f}")
    if (r.bound == "compute") != above and r.bound != "overhead":  # the ridge at peak rates, the bound at reached ones
        less, more = ("compute", "bandwidth") if r.bound == "compute" else ("bandwidth", "compute")
        avg += f" (its kernels reach a smaller share of the {less} peak than of the {more}: the ridge they meet is " \
               f"{'lower' if r.bound == 'compute' else 'higher'})"
    if r.bound == "memory":
        return f"memory-bound ({split} of the time): {r.bytes / 1e9:,.2f} GB moved; {avg}"
    if r.bound == "compute":
        return f"compute-bound ({split} of the time): {r.flops / 1e12:,.2f} TFLOP; {avg}"
    return (f"overhead-bound ({split} of the time): fixed costs (kernel launches, per-step host work, collective "
            "latency under tensor parallelism, per MoE expert in a prompt) exceed math and memory")


def inputs_line(p: Prediction, extra: dict[str, str] | None = None) -> str:
    """Every input that changed the answer, in one header line."""
    parts = [f"{p.model} on {p.hardware}", f"runtime {p.runtime}", f"weights {p.quant}, KV {p.kv_quant}",
             f"{p.prompt_tokens:,}-token prompt → {p.output_tokens:,} tokens", f"batch {p.batch}"]
    if p.cached_tokens:
        parts.append(f"{p.cached_tokens:,} tokens cached before the prompt")
    if p.gpus > 1:
        parts.append(f"{p.gpus} GPUs (tp {p.tp}, pp {p.pp})")
    if p.spec_tokens:
        parts.append(f"speculative k={p.spec_tokens} a={p.accept_rate}, draft "
                     + (p.draft if p.draft else "the model's own MTP layers"))
    parts += [f"{k} {v}" for k, v in (extra or {}).items()]
    return " · ".join(parts)


def margin(p: Prediction) -> str:
    """How far the memory need is from the capacity."""
    return fmt_margin(p.memory_headroom_bytes)


def render_prediction(p: Prediction, instead: list[dict], extra: dict[str, str] | None = None, capacity: str = ""):
    if not p.fits_in_memory:
        yield (f"[bold red]does NOT fit[/bold red]: needs {p.memory_per_gpu_bytes / 1e9:,.1f} GB"
               f"{' per GPU' if p.gpus > 1 else ''} of {capacity}, short by {margin(p)}; the figures below assume it "
               "did")
        yield from instead_lines(instead)
    c = p.ceiling
    rows = [("TTFT (the prefill step samples it)", fmt_s(p.ttft_s), fmt_s(c.ttft_s)),
            ("ITL (mean over the answer)", fmt_s(p.itl_s), fmt_s(c.itl_s)),
            ("prefill tok/s", fmt_rate(p.prefill_tok_s), fmt_rate(c.prefill_tok_s)),
            ("decode tok/s per sequence", fmt_rate(p.decode_tok_s), fmt_rate(c.decode_tok_s)),
            ("decode tok/s aggregate", fmt_rate(p.decode_tok_s_aggregate), fmt_rate(c.decode_tok_s_aggregate)),
            ("end-to-end", fmt_s(p.e2e_s), fmt_s(c.e2e_s))]
    title = ("[does NOT fit] " if not p.fits_in_memory else "") + inputs_line(p, extra)
    yield table(title, ["", Column("expected", "right"), Column("ceiling", "right")], rows,
                caption=f"expected: {p.efficiency_source}; ceiling: 100% of datasheet peaks, no overhead")
    phase_rows = []
    for name, r in p.phases.items():
        top = ", ".join(f"{op} {t / r.time_s:.0%}" for op, t in r.top_ops[:4] if r.time_s)
        phase_rows.append((name, fmt_s(r.time_s), why(p, name), top))
    yield table("why (expected mode, per step)", ["phase", Column("time", "right"), "bound", "top ops"], phase_rows)
    verdict = f"fits, {margin(p)} to spare" if p.fits_in_memory else \
        f"[bold red]does NOT fit[/bold red], short by {margin(p)} (see `roofline fits`)"
    whole = f" over {p.gpus} GPUs" if p.gpus > 1 else ""
    per = "each GPU holds" if p.gpus > 1 else "with activations, runtime and OS"
    draft = f" (with the draft {p.draft})" if p.draft else ""
    yield (f"memory{draft}: weights {p.weights_bytes / 1e9:,.1f} GB, KV {p.kv_bytes / 1e9:,.2f} GB{whole}; {per} "
           f"{p.memory_per_gpu_bytes / 1e9:,.1f} GB of {capacity} — {verdict}")


def instead_lines(instead: list[dict]):
    if not instead:
        yield "  nothing single makes it fit on this hardware; see `roofline fits` for every line of the budget"
        return
    yield "[bold]run instead[/bold]:"
    for alt in instead:
        pred = alt.get("prediction")
        got = (f"; expected {fmt_rate(pred['decode_tok_s'])} tok/s per sequence, TTFT {fmt_s(pred['ttft_s'])}"
               if pred else "")
        yield f"  {alt['flag']}  ({alt['detail']}{got})"


def predict_cmd(
    model: ModelOpt, hw: HwOpt, quant: QuantOpt = None, kv_quant: KvOpt = None,
    prompt: TokOpt = "500", output: TokOpt = "200",
    batch: Annotated[int, typer.Option(help="Concurrent sequences sharing each step.")] = 1,
    cached_tokens: Annotated[str, typer.Option("--cached-tokens", help="Tokens already cached before the prompt "
                                               "(prefix reuse); they add to attention and KV, not to prefill work.")] = "0",
    context: Annotated[Optional[str], typer.Option("--context", hidden=True,
                                                   help="Deprecated: use --cached-tokens.")] = None,
    allow_beyond_context: Annotated[bool, typer.Option("--allow-beyond-context", help="Predict a request longer "
                                                       "than the model's max context (RoPE-scaled runs).")] = False,
    spec_tokens: Annotated[int, typer.Option("--spec-tokens", help="Draft tokens per verify step (0 = off).")] = 0,
    accept: Annotated[Optional[float], typer.Option("--accept", help="Draft acceptance rate in (0, 1).")] = None,
    draft: Annotated[Optional[str], typer.Option("--draft", help="Draft model card (needed with --spec-tokens unless "
                                                 "the model has MTP layers).")] = None,
    gpus: GpusOpt = 1, pp: PpOpt = 1,
    layers: Annotated[Optional[int], typer.Option(help="Only the first N layers (as `roofline engine run`).")] = None,
    vocab: Annotated[Optional[int], typer.Option(help="A smaller vocabulary (as `roofline engine run`).")] = None,
    as_json: JsonOpt = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print one CSV header and row.")] = False,
    cards: CardsOpt = None, runtime: RuntimeOpt = None,
):
    """Predict TTFT, ITL, tok/s and end-to-end latency of one request shape; expected beside ceiling."""
    check_formats(as_json, as_csv)
    if context is not None:
        # kept one release for scripts written before the rename; `fits --context` is tokens each sequence holds
        warn_on_success("predict --context is deprecated: use --cached-tokens (tokens cached before the prompt)")
        if cached_tokens != "0":
            raise RooflineError("give --cached-tokens only (--context is its deprecated name)")
        cached_tokens = context
    st = store(cards)
    choice = runtime_choice(st, runtime)
    warn_batch_beyond_runtime(choice, batch)
    card, quant = model_and_quant(st, model, quant)
    ctx = tokens("--cached-tokens", cached_tokens, allow_zero=True)
    wl = make_workload(prompt_tokens=tokens("--prompt", prompt), output_tokens=tokens("--output", output),
                       batch=batch, quant=quant, kv_quant=kv_default(choice, kv_quant), spec_tokens=spec_tokens, accept_rate=accept,
                       draft_model=draft, context_tokens=ctx, **parallel_layout(choice, gpus, pp),
                       allow_beyond_context=allow_beyond_context)
    card = runtime_card(reduce_card(card, layers, vocab), choice)
    hwc = st.hardware(hw)
    draft_card = st.model(draft) if draft else None
    eff = runtime_efficiency(choice, card, hwc, wl)
    held, dep, capacity = runtime_sizing(choice, hwc, wl, card)
    p = predict(card, held, wl, draft=draft_card, eff=eff, dep=dep)
    instead = [] if p.fits_in_memory else run_instead(card, held, wl, draft_card, eff, dep,
                                                      runtime_runs(choice, card, hwc))
    extra = {k: v for k, v in (("layers", layers and f"first {layers}"), ("vocab", vocab and f"{vocab:,}"),
                               ("beyond max context", allow_beyond_context and wl.tokens_held >
                                card.architecture.max_context and f"{card.architecture.max_context:,}")) if v}
    emit({**flat(p), "instead": instead}, as_json, lambda: render_prediction(p, instead, extra, capacity),
         as_csv=as_csv, csv_rows=lambda: [csv_row(p)])


def csv_row(p: Prediction) -> dict:
    row = {k: v for k, v in p.model_dump().items() if not isinstance(v, (dict, list))}
    row.update({f"bound_{k}": v for k, v in p.bound.items()})
    row.update({f"ceiling_{k}": v for k, v in p.ceiling.model_dump().items()})
    return row


def write_csv(preds: list[Prediction]) -> None:
    write_rows([csv_row(p) for p in preds])
