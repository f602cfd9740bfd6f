"""`roofline engine run`: run a card's shapes in the micro-engine and print measured beside predicted.

This is the only command that imports torch (through engine/), and only when it runs."""

from __future__ import annotations

import random
from typing import Annotated, Optional

import typer

from ..calibration import engine_quant
from ..errors import RooflineError
from ..reduce import reduce_card
from ..request import predict
from ..workload import make_workload
from .common import CardsOpt, JsonOpt, store
from .output import Column, emit, table
from .predict_cmd import TokOpt, fmt_rate, fmt_s, tokens

app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None)
KEYS = ("ttft_s", "itl_s", "prefill_tok_s", "decode_tok_s")


def _engine():
    try:
        from engine.engine import LLMEngine
        from engine.model import EngineError
    except ImportError as err:
        raise RooflineError(f"the engine needs torch: pip install 'roofline[engine]' ({err})") from None
    return LLMEngine, EngineError


def measure_request(eng, prompt: int, output: int, batch: int, seed: int = 0) -> dict:
    """Serve `batch` identical-shape requests together; TTFT = prefill step + first decode step."""
    rng = random.Random(seed)
    vocab = eng.card.architecture.vocab_size
    for _ in range(batch):
        eng.add_request([rng.randrange(vocab) for _ in range(prompt)], output)
    while not eng.scheduler.idle:
        eng.step()
    steps = eng.stats
    prefill = [s for s in steps if s.prefill_tokens]
    decode = [s for s in steps if not s.prefill_tokens]
    t_pre = sum(s.seconds for s in prefill)
    itl = sum(s.seconds for s in decode) / max(len(decode), 1)
    return {"ttft_s": t_pre + (decode[0].seconds if decode else 0.0), "itl_s": itl,
            "prefill_tok_s": batch * prompt / t_pre, "decode_tok_s": 1.0 / itl if itl else float("nan")}


@app.command("run", help="Run a model card's shapes for real and compare with `roofline predict`.")
def run(model: Annotated[str, typer.Option("--model", "-m", help="Model card.")],
        layers: Annotated[Optional[int], typer.Option(help="Run only the first N layers (same shapes).")] = None,
        vocab: Annotated[Optional[int], typer.Option(help="Smaller vocabulary.")] = None,
        prompt: TokOpt = "128", output: TokOpt = "32",
        batch: Annotated[int, typer.Option(help="Concurrent requests.")] = 1,
        device: Annotated[str, typer.Option(help="cpu or cuda.")] = "cpu",
        dtype: Annotated[str, typer.Option(help="fp32, bf16 or fp16.")] = "fp32",
        weights: Annotated[Optional[str], typer.Option(help="Weight-only int8 or int4 for the linear layers.")] = None,
        hw: Annotated[Optional[str], typer.Option("--hw", help="Card to predict with (default: this device).")] = None,
        as_json: JsonOpt = False, cards: CardsOpt = None):
    LLMEngine, EngineError = _engine()
    st = store(cards)
    card = reduce_card(st.model(model), layers, vocab)
    p, o = tokens("--prompt", prompt), tokens("--output", output)
    if batch <= 0:
        raise RooflineError(f"--batch: must be > 0, got {batch}")
    try:
        if weights not in (None, "int8", "int4"):
            raise RooflineError(f"--weights {weights}: use int8 or int4")
        eng = LLMEngine(card, dtype=dtype, device=device, max_num_seqs=batch, max_step_tokens=batch * p,
                        max_kv_bytes=4e9, weight_format=weights)
        measure_request(eng, min(p, 16), 2, 1)  # warm-up: allocator, kernels, rope tables
        eng.stats.clear()
        measured = measure_request(eng, p, o, batch)
    except EngineError as err:
        raise RooflineError(str(err)) from None
    hwc = st.hardware(hw or ("host" if device == "cpu" else _cuda_card(st)))
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


def _cuda_card(st) -> str:
    import torch

    return torch.cuda.get_device_name()
