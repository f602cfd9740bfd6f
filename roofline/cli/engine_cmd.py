"""`roofline engine run`: run a card's shapes in the micro-engine and print measured beside predicted.

engine/ (and so torch) is imported only when an engine command runs: engine run, calibrate, validate."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from roofline.calibrate.calibration import engine_quant
from roofline.cli.common import CardsOpt, JsonOpt, store
from roofline.cli.output import Column, emit, table
from roofline.cli.predict_cmd import TokOpt, fmt_rate, fmt_s, tokens
from roofline.engine import load
from roofline.errors import RooflineError
from roofline.perf.request import predict
from roofline.perf.workload import make_workload
from roofline.sizing.reduce import reduce_card

app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None)
KEYS = ("ttft_s", "itl_s", "prefill_tok_s", "decode_tok_s")


@app.command("run", help="Run a model card's shapes for real and compare with `roofline predict`.")
def run(model: Annotated[str, typer.Option("--model", "-m", help="Model card.")],
        layers: Annotated[Optional[int], typer.Option(help="Run only the first N layers (same shapes).")] = None,
        vocab: Annotated[Optional[int], typer.Option(help="Smaller vocabulary.")] = None,
        prompt: TokOpt = "128", output: TokOpt = "32",
        batch: Annotated[int, typer.Option(help="Concurrent requests.")] = 1,
        device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "cpu",
        dtype: Annotated[str, typer.Option(help="fp32, bf16 or fp16.")] = "fp32",
        weights: Annotated[Optional[str], typer.Option(help="Weight-only int8 or int4 for the linear layers.")] = None,
        hw: Annotated[Optional[str], typer.Option("--hw", help="Card to predict with (default: this device).")] = None,
        as_json: JsonOpt = False, cards: CardsOpt = None):
    eng_mod = load()
    engine, bench, dev, EngineError = eng_mod.engine, eng_mod.bench, eng_mod.device, eng_mod.EngineError
    st = store(cards)
    card = reduce_card(st.model(model), layers, vocab)
    p, o = tokens("--prompt", prompt), tokens("--output", output)
    if batch <= 0:
        raise RooflineError(f"--batch: must be > 0, got {batch}")
    try:
        if weights not in (None, "int8", "int4"):
            raise RooflineError(f"--weights {weights}: use int8 or int4")
        device = dev.resolve(device)
        eng = engine.LLMEngine(card, dtype=dtype, device=device, max_num_seqs=batch, max_step_tokens=batch * p,
                               max_kv_bytes=4e9, weight_format=weights)
        # warm-up at the measured shapes (other prompts, so no prefix-cache hits): allocator, kernels per shape
        bench.measure_request(eng, p, min(o, 2), batch, seed=1)
        measured = bench.measure_request(eng, p, o, batch, seed=0).to_dict()
    except EngineError as err:
        raise RooflineError(str(err)) from None
    hwc = st.hardware(hw or ("host" if device == "cpu" else dev.name(device)))
    wl = make_workload(prompt_tokens=p, output_tokens=o, batch=batch, quant=engine_quant(dtype, weights),
                       kv_quant=dtype)
    pred = predict(card, hwc, wl)
    predicted = {k: getattr(pred, k) for k in KEYS}
    data = {"model": card.name, "device": device, "dtype": dtype, "hardware": hwc.name, "prompt_tokens": p,
            "output_tokens": o, "batch": batch, "measured": measured, "predicted": predicted,
            "error_pct": {k: 100 * (predicted[k] - measured[k]) / measured[k] for k in KEYS},
            "efficiency_source": pred.efficiency_source}

    def render():
        fmt = {"ttft_s": fmt_s, "itl_s": fmt_s, "prefill_tok_s": fmt_rate, "decode_tok_s": fmt_rate}
        rows = [(k, fmt[k](measured[k]), fmt[k](predicted[k]), f"{data['error_pct'][k]:+.1f}%") for k in KEYS]
        yield table(f"{card.name} on {device} ({dtype}) · {p} → {o} tokens · batch {batch}",
                    ["", Column("measured", "right"), Column(f"predicted ({hwc.name})", "right"),
                     Column("error", "right")], rows, caption=f"predicted with {pred.efficiency_source}")

    emit(data, as_json, render)
