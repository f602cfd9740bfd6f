"""`roofline predict`: one request shape on one card, expected beside ceiling, and why."""

from __future__ import annotations

import csv
import io
import sys
from typing import Annotated, Optional

import typer

from roofline.cards.units import QuantityError, parse_tokens
from roofline.cli.common import (
    CardsOpt,
    JsonOpt,
    RuntimeOpt,
    kv_default,
    runtime_choice,
    runtime_efficiency,
    store,
)
from roofline.cli.output import Column, emit, table
from roofline.errors import RooflineError
from roofline.perf.request import Prediction, predict
from roofline.perf.workload import make_workload
from roofline.sizing.reduce import reduce_card

ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Model card name, alias or path (YAML or config.json).")]
HwOpt = Annotated[str, typer.Option("--hw", help="Hardware card name, alias or path.")]
QuantOpt = Annotated[Optional[str], typer.Option("--quant", help="Weight format, e.g. bf16, fp8, int4, q4_k_m, nvfp4, or "
                                                 "per component: experts=mxfp4,default=q8_0 (default: the card's "
                                                 "native formats; see `roofline formats`).")]
KvOpt = Annotated[Optional[str], typer.Option("--kv-quant", help="KV-cache format: bf16, fp16, fp8, q8_0, q4_0 "
                                              "(default: the runtime's, else bf16).")]
TokOpt = Annotated[str, typer.Option(help="Token count: 500, 4k, 128K, 1M.")]
GpusOpt = Annotated[int, typer.Option("--gpus", help="GPUs in tensor parallel (shards weights and KV heads).")]
PpOpt = Annotated[int, typer.Option("--pp", help="Pipeline-parallel stages (GPUs = gpus x pp).")]


def tokens(option: str, value: str | int) -> int:
    try:
        return parse_tokens(value)
    except QuantityError:
        raise RooflineError(f"{option}: {value!r} is not a token count > 0 (like 500, 4k, 128K or 1M)") from None


def fmt_s(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:,.0f} us"
    if seconds < 1:
        return f"{seconds * 1e3:,.1f} ms"
    return f"{seconds:,.2f} s"


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:,.2f}"


def flat(p: Prediction) -> dict:
    """The --json document: the headline metrics at top level, details under `phases`."""
    data = p.model_dump()
    data["ceiling"] = {k: v for k, v in data["ceiling"].items() if k in ("ttft_s", "itl_s", "prefill_tok_s", "decode_tok_s", "decode_tok_s_aggregate", "e2e_s")}
    return data


def why(p: Prediction, phase: str) -> str:
    r = p.phases[phase]
    if r.bound == "memory":
        return f"memory-bound: {r.bytes / 1e9:,.2f} GB moved, intensity {r.arithmetic_intensity:,.1f} FLOP/B < ridge {r.ridge_flop_per_byte:,.0f}"
    if r.bound == "compute":
        return f"compute-bound: {r.flops / 1e12:,.2f} TFLOP, intensity {r.arithmetic_intensity:,.0f} FLOP/B vs ridge {r.ridge_flop_per_byte:,.0f}"
    return "overhead-bound: kernel launches and per-step costs exceed the math and the memory traffic"


def render_prediction(p: Prediction):
    title = (f"{p.model} on {p.hardware} · runtime {p.runtime} · weights {p.quant}, KV {p.kv_quant} · {p.prompt_tokens:,}-token prompt → "
             f"{p.output_tokens:,} tokens · batch {p.batch}" + (f" · {p.gpus} GPUs (tp {p.tp}, pp {p.pp})" if p.gpus > 1 else "")
             + (f" · speculative k={p.spec_tokens} a={p.accept_rate}" if p.spec_tokens else ""))
    c = p.ceiling
    rows = [("TTFT (prefill + first decode step)", fmt_s(p.ttft_s), fmt_s(c.ttft_s)),
            ("ITL (mean over the answer)", fmt_s(p.itl_s), fmt_s(c.itl_s)),
            ("prefill tok/s", fmt_rate(p.prefill_tok_s), fmt_rate(c.prefill_tok_s)),
            ("decode tok/s per sequence", fmt_rate(p.decode_tok_s), fmt_rate(c.decode_tok_s)),
            ("decode tok/s aggregate", fmt_rate(p.decode_tok_s_aggregate), fmt_rate(c.decode_tok_s_aggregate)),
            ("end-to-end", fmt_s(p.e2e_s), fmt_s(c.e2e_s))]
    yield table(title, ["", Column("expected", "right"), Column("ceiling", "right")], rows,
                caption=f"expected: {p.efficiency_source}; ceiling: 100% of datasheet peaks, no overhead")
    phase_rows = []
    for name, r in p.phases.items():
        top = ", ".join(f"{op} {t / r.time_s:.0%}" for op, t in r.top_ops[:4] if r.time_s)
        phase_rows.append((name, fmt_s(r.time_s), why(p, name), top))
    yield table("why (expected mode, per step)", ["phase", Column("time", "right"), "bound", "top ops"], phase_rows)
    verdict = "fits" if p.fits_in_memory else "[bold red]does NOT fit[/bold red] (see `roofline fits`)"
    per = " per GPU" if p.gpus > 1 else ""
    yield (f"memory: weights {p.weights_bytes / 1e9:,.1f} GB, KV {p.kv_bytes / 1e9:,.2f} GB; with activations, "
           f"runtime and OS {p.memory_per_gpu_bytes / 1e9:,.1f} GB{per} of {p.memory_capacity_bytes / 1e9:,.1f} GB "
           f"— {verdict}")


def predict_cmd(
    model: ModelOpt, hw: HwOpt, quant: QuantOpt = None, kv_quant: KvOpt = None,
    prompt: TokOpt = "500", output: TokOpt = "200",
    batch: Annotated[int, typer.Option(help="Concurrent sequences sharing each step.")] = 1,
    context: Annotated[str, typer.Option(help="Tokens already cached before the prompt (prefix reuse).")] = "0",
    spec_tokens: Annotated[int, typer.Option("--spec-tokens", help="Draft tokens per verify step (0 = off).")] = 0,
    accept: Annotated[Optional[float], typer.Option("--accept", help="Draft acceptance rate in (0, 1).")] = None,
    draft: Annotated[Optional[str], typer.Option("--draft", help="Draft model card (default with --spec-tokens: MTP head).")] = None,
    gpus: GpusOpt = 1, pp: PpOpt = 1,
    layers: Annotated[Optional[int], typer.Option(help="Only the first N layers (as `roofline engine run`).")] = None,
    vocab: Annotated[Optional[int], typer.Option(help="A smaller vocabulary (as `roofline engine run`).")] = None,
    as_json: JsonOpt = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print one CSV header and row.")] = False,
    cards: CardsOpt = None, runtime: RuntimeOpt = None,
):
    """Predict TTFT, ITL, tok/s and end-to-end latency of one request shape; expected beside ceiling."""
    st = store(cards)
    choice = runtime_choice(st, runtime)
    ctx = 0 if context in ("0", 0) else tokens("--context", context)
    wl = make_workload(prompt_tokens=tokens("--prompt", prompt), output_tokens=tokens("--output", output),
                       batch=batch, quant=quant, kv_quant=kv_default(choice, kv_quant), spec_tokens=spec_tokens, accept_rate=accept,
                       draft_model=draft, context_tokens=ctx, tp=gpus, pp=pp)
    card, hwc = reduce_card(st.model(model), layers, vocab), st.hardware(hw)
    eff = runtime_efficiency(choice, card, hwc, wl)
    p = predict(card, hwc, wl, draft=st.model(draft) if draft else None, eff=eff)
    if as_csv:
        write_csv([p])
        return
    emit(flat(p), as_json, lambda: render_prediction(p))


def csv_row(p: Prediction) -> dict:
    row = {k: v for k, v in p.model_dump().items() if not isinstance(v, dict)}
    row.update({f"bound_{k}": v for k, v in p.bound.items()})
    row.update({f"ceiling_{k}": v for k, v in p.ceiling.model_dump().items()})
    return row


def write_csv(preds: list[Prediction]) -> None:
    buf = io.StringIO()
    rows = [csv_row(p) for p in preds]
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    sys.stdout.write(buf.getvalue())
