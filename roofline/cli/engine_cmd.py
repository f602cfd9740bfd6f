"""`roofline engine run`: run a card's shapes in the micro-engine and print measured beside predicted.

engine/ (and so torch) is imported only when an engine command runs: engine run, calibrate, validate."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from roofline.calibrate.calibration import engine_quant
from roofline.cli.common import CardsOpt, JsonOpt, TokOpt, fmt_rate, fmt_s, host_card_name, store, tokens
from roofline.cli.output import Column, emit, progress, table
from roofline.engine import check_dtype, load
from roofline.errors import RooflineError
from roofline.perf.request import predict
from roofline.perf.workload import check_context, make_workload
from roofline.sizing.kv import kv_bytes
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
        eager: Annotated[bool, typer.Option("--eager", help="Decode eagerly (no static buffers / CUDA graphs).")] = False,
        tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel processes (gloo on the CPU, NCCL on GPUs).")] = 1,
        as_json: JsonOpt = False, cards: CardsOpt = None):
    st = store(cards)
    card, p, o = _checked_run(st, model, layers, vocab, prompt, output, batch, tp, dtype, hw)
    if weights not in (None, "int8", "int4"):
        raise RooflineError(f"--weights {weights}: use int8 or int4")
    if device == "cpu":
        _check_run_time(card, st.hardware("host"), p, o, batch, dtype, weights)
    eng_mod = load()
    engine, bench, dev, EngineError = eng_mod.engine, eng_mod.bench, eng_mod.device, eng_mod.EngineError
    try:
        device = dev.resolve(device)
        options = dict(dtype=dtype, max_num_seqs=batch, max_step_tokens=batch * p,
                       max_kv_bytes=pool_bytes(card, p + o, batch, dtype), weight_format=weights,
                       graphs=False if eager else None)
        run = _serve_tp if tp > 1 else _serve
        with progress(f"running {card.name} in the engine (warm-up, then the measured run)", None):
            full = run(engine, bench, card, device, options, p, o, batch, tp)
    except EngineError as err:
        raise RooflineError(str(err)) from None
    measured = {k: full[k] for k in KEYS}
    hwc = st.hardware(host_card_name(hw, "host" if device == "cpu" else dev.name(device)))
    wl = make_workload(prompt_tokens=p, output_tokens=o, batch=batch, quant=engine_quant(dtype, weights),
                       kv_quant=dtype, tp=tp)
    pred, note = _predict(card, hwc, wl)
    predicted = {k: getattr(pred, k) if pred else None for k in KEYS}
    data = {"model": card.name, "device": device, "dtype": dtype, "hardware": hwc.name, "prompt_tokens": p,
            "output_tokens": o, "batch": batch, "tp": tp, "mode": full["mode"], "decode_modes": full["decode_modes"],
            "measured": measured, "measured_device": full["device"], "predicted": predicted,
            "error_pct": {k: 100 * (predicted[k] - measured[k]) / measured[k] if pred else None for k in KEYS},
            "efficiency_source": pred.efficiency_source if pred else note, "tokens": full["tokens"],
            "device_time": "CUDA events" if device == "cuda" else "the host's (on the CPU the device is the host)"}

    def render():
        fmt = {"ttft_s": fmt_s, "itl_s": fmt_s, "prefill_tok_s": fmt_rate, "decode_tok_s": fmt_rate}
        rows = [(k, fmt[k](measured[k]), fmt[k](predicted[k]) if pred else "—",
                 f"{data['error_pct'][k]:+.1f}%" if pred else "—") for k in KEYS]
        yield table(f"{card.name} on {device} ({dtype}) · {p} → {o} tokens · batch {batch}",
                    ["", Column("measured", "right"), Column(f"predicted ({hwc.name})", "right"),
                     Column("error", "right")], rows,
                    caption=f"predicted with {data['efficiency_source']}; decode {data['mode']}, tp {tp}")

    emit(data, as_json, render)


# The most KV cache `engine run` gives the engine (it sizes its pool from free memory, at most this): room for a
# few thousand tokens of any card at full depth, without taking a laptop's memory
KV_POOL_BYTES = 4e9
MAX_RUN_S = 600.0  # a CPU run `roofline predict` puts beyond this (warm-up and measured run) is refused
POOL_SLACK_TOKENS = 1024  # pool beyond twice what the run's sequences hold (the warm-up's blocks, block rounding)


def pool_bytes(card, tokens_per_sequence: int, batch: int, dtype: str) -> float:
    """The KV pool `engine run` asks for: twice what its sequences hold plus slack, at most KV_POOL_BYTES (the
    pool is allocated and zeroed whole: a 10-token run of a tiny card had taken 4 GB)."""
    need = batch * kv_bytes(card, tokens_per_sequence, dtype)
    return min(KV_POOL_BYTES, 2 * need + kv_bytes(card, POOL_SLACK_TOKENS, dtype))


def _checked_run(st, model: str, layers, vocab, prompt: str, output: str, batch: int, tp: int, dtype: str, hw):
    """(the card cut to --layers/--vocab, prompt tokens, output tokens), every option checked before torch loads."""
    host_card_name(hw)  # an empty --hw is refused before minutes of running
    full_card = st.model(model)
    if vocab is not None and vocab > full_card.architecture.vocab_size:
        raise RooflineError(f"--vocab {vocab:,}: more than {full_card.name}'s {full_card.architecture.vocab_size:,} "
                            "tokens; give a smaller vocabulary or drop --vocab")
    card = reduce_card(full_card, layers, vocab)
    p, o = tokens("--prompt", prompt), tokens("--output", output)
    if batch <= 0 or tp <= 0:
        raise RooflineError(f"--batch and --tp: must be > 0, got {batch} and {tp}")
    if o < 2:
        raise RooflineError("--output: the engine times the gaps between output tokens; give at least 2")
    check_context(card.architecture.max_context, card.name, make_workload(prompt_tokens=p, output_tokens=o,
                                                                         batch=batch))
    check_dtype(dtype)
    _check_kv_pool(card, p + o, batch, dtype)
    _check_step_memory(card, p, batch, dtype)
    if hw:
        st.hardware(hw)  # an unknown card is refused before the engine runs, not after
    return card, p, o


def _check_kv_pool(card, tokens_per_sequence: int, batch: int, dtype: str) -> None:
    """Refuse, before torch loads, a batch whose sequences' KV cache cannot fit the engine's pool."""
    need = batch * kv_bytes(card, tokens_per_sequence, dtype)
    if need > KV_POOL_BYTES:
        raise RooflineError(f"--batch {batch:,}: {batch:,} sequences of {tokens_per_sequence:,} tokens need "
                            f"{need / 1e9:,.1f} GB of KV cache, more than the engine's {KV_POOL_BYTES / 1e9:.0f} GB "
                            "pool; give a smaller --batch, --prompt or --output, or fewer --layers")


def _predict(card, hwc, wl):
    """(prediction, None), or (None, why) where a --tp run's card has no link to predict its all-reduces with
    (the host's card gets one from `roofline calibrate --tp 2`)."""
    try:
        return predict(card, hwc, wl), None
    except RooflineError as err:
        if wl.tp == 1:
            raise
        return None, f"no prediction: {err}"


def _serve(engine, bench, card, device: str, options: dict, prompt: int, output: int, batch: int, tp: int) -> dict:
    """One process: warm up at the measured shapes (other prompts, so no prefix-cache hits), then measure."""
    eng = engine.LLMEngine(card, device=device, **options)
    bench.measure_request(eng, prompt, min(output, 2), batch, seed=1)
    return {**bench.measure_request(eng, prompt, output, batch, seed=0).to_dict(), "mode": eng.mode}


def _serve_tp(engine, bench, card, device: str, options: dict, prompt: int, output: int, batch: int, tp: int) -> dict:
    """`tp` processes over torch.distributed (engine/parallel.py); rank 0's measurements."""
    from roofline.engine import parallel

    parallel.check_tp(card, tp)
    return parallel.run_ranks(tp, device, parallel.serve, card, options, prompt, output, batch)


def _check_step_memory(card, prompt: int, batch: int, dtype: str) -> None:
    """Refuse, before torch loads, a run whose one prefill step (every prompt at once) needs more memory for its
    weights and activations (`activation_bytes`, the one formula `fits` uses) than this host has available."""
    from types import SimpleNamespace

    from roofline.cards.formats import kv_format
    from roofline.cards.host import available_bytes
    from roofline.sizing.memory import Deployment, activation_bytes
    from roofline.sizing.params import weight_bytes

    step = batch * prompt
    engine_dtype = SimpleNamespace(act_bytes=kv_format(dtype).bytes_per_value)  # the engine computes in --dtype
    acts = float(activation_bytes(card, engine_dtype, Deployment(max_step_tokens=step), batch))
    need, free = acts + sum(weight_bytes(card, dtype).values()), available_bytes()
    if need > free:
        raise RooflineError(f"{card.name} in {dtype}: about {(need - acts) / 1e9:,.1f} GB of weights and "
                            f"{acts / 1e9:,.1f} GB of activations for one {step:,}-token prefill step (--prompt x "
                            f"--batch), more than the {free / 1e9:,.1f} GB this host has available; give fewer "
                            f"--layers, a shorter --prompt or a smaller --batch")


def _check_run_time(card, host, prompt: int, output: int, batch: int, dtype: str, weights: str | None) -> None:
    """Refuse, before torch loads, a CPU run the predictor puts beyond MAX_RUN_S (its warm-up runs the same prompts
    again): a 120k-token prompt's attention alone takes the host's cores tens of minutes."""
    wl = make_workload(prompt_tokens=prompt, output_tokens=output, batch=batch, quant=engine_quant(dtype, weights),
                       kv_quant=dtype)
    try:
        pred = predict(card, host, wl)
    except RooflineError:
        return  # nothing to judge by: the engine's own checks stand
    seconds = 2 * pred.ttft_s + pred.e2e_s
    if seconds > MAX_RUN_S:
        raise RooflineError(f"--prompt {prompt:,} --output {output:,} --batch {batch:,}: about {seconds / 60:,.0f} "
                            f"minutes on this host's CPU by `roofline predict` (warm-up and run), over the "
                            f"{MAX_RUN_S / 60:.0f}-minute limit; give a shorter --prompt or --output, a smaller "
                            f"--batch or fewer --layers")
