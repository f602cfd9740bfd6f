"""`roofline validate --engine-shapes`: serve shapes the calibration never ran in the engine, predict the same
shapes, and report the error per metric."""

from __future__ import annotations

import statistics

from roofline.calibrate.calibration import engine_quant
from roofline.calibrate.fit import error_summary
from roofline.cards.hardware import HardwareCard
from roofline.cards.store import CardStore
from roofline.engine.core.records import RequestTiming
from roofline.perf.request import predict
from roofline.perf.workload import make_workload
from roofline.sizing.reduce import reduce_card

STEP_TOKENS = 2048  # the engine's chunked-prefill budget, as serving engines run (calibrate measures up to 2048)
KV_POOL_BYTES = 2e9  # each validation engine's KV pool: room for batch 32 x the longest prompt on one layer
METRICS = {"ttft": "ttft_s", "itl": "itl_s", "prefill_tok_s": "prefill_tok_s", "decode_tok_s": "decode_tok_s"}
# Shapes never used by `calibrate` (other cards, vocab and request sizes): dense with QKV bias, MoE, sliding window
# with sandwich norms, sliding window on every layer.
FRESH = dict(cards=["qwen2.5-7b", "mixtral-8x7b", "gemma-3-27b", "mistral-7b"], layers=1, vocab=3000,
             batches=[1, 4, 16, 32], prompts=[48, 160], output=8, repeats=3, passes=2)


def engine_points(hw: HardwareCard, st: CardStore, device: str, dtype: str, spec: dict, advance) -> list[dict]:
    """Serve each shape in the engine in each of `spec["passes"]` passes over a card's shapes; predict the same
    shape on `hw`. One dict per shape: measured_* and predicted_* per METRICS key."""
    from roofline.engine import load

    eng_mod = load()
    points = []
    for name in spec["cards"]:
        card = reduce_card(st.model(name), spec["layers"], spec["vocab"])
        try:
            eng = eng_mod.engine.LLMEngine(card, dtype=dtype, device=device, max_num_seqs=max(spec["batches"]),
                                           max_step_tokens=STEP_TOKENS, max_kv_bytes=KV_POOL_BYTES)
        except eng_mod.EngineError as err:
            from roofline.errors import RooflineError

            raise RooflineError(str(err)) from None
        got = _serve_shapes(eng_mod.bench, eng, spec, advance)
        for (batch, prompt), run in got.items():
            wl = make_workload(prompt_tokens=prompt, output_tokens=spec["output"], batch=batch,
                               quant=engine_quant(dtype), kv_quant=dtype)
            p = predict(card, hw, wl)
            points.append({"card": name, "batch": batch, "prompt": prompt, "output": spec["output"],
                           **{f"measured_{k}": getattr(run, v) for k, v in METRICS.items()},
                           **{f"predicted_{k}": getattr(p, v) for k, v in METRICS.items()}})
        del eng
    return points


def _serve_shapes(bench, eng, spec: dict, advance) -> dict[tuple[int, int], RequestTiming]:
    """(batch, prompt) -> its timing, each phase from its faster pass."""
    shapes = [(batch, prompt) for batch in spec["batches"] for prompt in spec["prompts"]]
    got: dict[tuple[int, int], RequestTiming] = {}
    for pass_ in range(spec["passes"]):
        for batch, prompt in shapes:
            run = median_request(bench, eng, prompt, spec["output"], batch, spec["repeats"], pass_)
            got[batch, prompt] = faster(got.get((batch, prompt)), run)
            advance()
    return got


def median_request(bench, eng, prompt: int, output: int, batch: int, repeats: int, pass_: int) -> RequestTiming:
    """Median per metric over `repeats` served runs, or one run where a step averages bench.LONG_STEP_S or more (as
    calibration times long steps); the first pass serves one warm-up request before them (kernels for these
    shapes). Every run has its own random prompts, so none is served from the prefix cache."""
    seed = ((batch * 1000 + prompt) * 10 + pass_) * 100
    first = bench.measure_request(eng, prompt, output, batch, seed=seed)
    long = (first.ttft_s + (output - 1) * first.itl_s) / output >= bench.LONG_STEP_S
    runs = [] if pass_ == 0 else [first]  # the first pass's first run is its warm-up
    runs += [bench.measure_request(eng, prompt, output, batch, seed=seed + r + 1)
             for r in range((1 if long else repeats) - len(runs))]
    return RequestTiming(**{k: statistics.median(getattr(run, k) for run in runs)
                            for k in ("ttft_s", "itl_s", "prefill_tok_s", "decode_tok_s")})


def faster(kept: RequestTiming | None, run: RequestTiming) -> RequestTiming:
    """Each phase from the pass that ran it faster (prefill: TTFT, prefill tok/s; decode: ITL, decode tok/s), as
    calibration keeps each grid point's faster pass: a slow spell of a shared CPU must recur on every pass to move
    a point."""
    if kept is None:
        return run
    pre = min(kept, run, key=lambda r: r.ttft_s)
    dec = min(kept, run, key=lambda r: r.itl_s)
    return RequestTiming(ttft_s=pre.ttft_s, prefill_tok_s=pre.prefill_tok_s, itl_s=dec.itl_s,
                         decode_tok_s=dec.decode_tok_s)


def summarize_points(points: list[dict]) -> dict:
    """Per METRICS key: n, median and p90 absolute % error, bias."""
    return {k: error_summary([p[f"predicted_{k}"] for p in points], [p[f"measured_{k}"] for p in points])
            for k in METRICS}
