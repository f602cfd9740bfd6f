"""`roofline validate`: the predictor's error against fresh engine runs or a published-measurements CSV."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Annotated, Optional

import typer

from roofline.calibrate.calibration import engine_quant
from roofline.calibrate.fit import error_summary
from roofline.calibrate.published import breakdown, predict_row, read_rows, summarize
from roofline.cli.common import CardsOpt, JsonOpt, int_list, store
from roofline.cli.engine_cmd import engine_modules
from roofline.cli.output import Column, emit, table
from roofline.errors import RooflineError
from roofline.perf.request import predict
from roofline.perf.workload import make_workload
from roofline.sizing.reduce import reduce_card

STEP_TOKENS = 2048  # the engine's chunked-prefill budget, as serving engines run (calibrate measures up to 2048)
METRICS = {"ttft": "ttft_s", "itl": "itl_s", "prefill_tok_s": "prefill_tok_s", "decode_tok_s": "decode_tok_s"}
# Shapes never used by `calibrate` (other cards, vocab and request sizes): dense with QKV bias, MoE, sliding window
# with sandwich norms, sliding window on every layer.
FRESH = dict(cards=["qwen2.5-7b", "mixtral-8x7b", "gemma-3-27b", "mistral-7b"], layers=1, vocab=3000,
             batches=[1, 4, 16, 32], prompts=[48, 160], output=8, repeats=3, passes=2)


def engine_points(hw, st, device: str, dtype: str, spec: dict, advance) -> list[dict]:
    """Serve each fresh shape in the engine in each of `spec["passes"]` passes over a card's shapes; predict the same
    shape on `hw`."""
    engine, bench, _, EngineError = engine_modules()
    points = []
    for name in spec["cards"]:
        card = reduce_card(st.model(name), spec["layers"], spec["vocab"])
        try:
            eng = engine.LLMEngine(card, dtype=dtype, device=device, max_num_seqs=max(spec["batches"]),
                                   max_step_tokens=STEP_TOKENS, max_kv_bytes=2e9)
        except EngineError as err:
            raise RooflineError(str(err)) from None
        shapes = [(batch, prompt) for batch in spec["batches"] for prompt in spec["prompts"]]
        got: dict[tuple, dict] = {}
        for pass_ in range(spec["passes"]):
            for batch, prompt in shapes:
                run = _median_request(bench, eng, prompt, spec["output"], batch, spec["repeats"], pass_)
                got[batch, prompt] = _faster(got.get((batch, prompt)), run)
                advance()
        for batch, prompt in shapes:
            wl = make_workload(prompt_tokens=prompt, output_tokens=spec["output"], batch=batch,
                               quant=engine_quant(dtype), kv_quant=dtype)
            p = predict(card, hw, wl)
            points.append({"card": name, "batch": batch, "prompt": prompt, "output": spec["output"],
                           **{f"measured_{k}": got[batch, prompt][v] for k, v in METRICS.items()},
                           **{f"predicted_{k}": getattr(p, v) for k, v in METRICS.items()}})
        del eng
    return points


def _median_request(bench, eng, prompt: int, output: int, batch: int, repeats: int, pass_: int) -> dict:
    """Median per metric over `repeats` served runs, or one run where a step averages LONG_STEP_S or more (as
    calibration times long steps); the first pass serves one warm-up request before them (kernels for these
    shapes). Every run has its own random prompts, so none is served from the prefix cache."""
    seed = ((batch * 1000 + prompt) * 10 + pass_) * 100
    first = bench.measure_request(eng, prompt, output, batch, seed=seed)
    long = (first["ttft_s"] + (output - 1) * first["itl_s"]) / output >= bench.LONG_STEP_S
    runs = [] if pass_ == 0 else [first]  # the first pass's first run is its warm-up
    runs += [bench.measure_request(eng, prompt, output, batch, seed=seed + r + 1)
             for r in range((1 if long else repeats) - len(runs))]
    return {k: statistics.median(run[k] for run in runs) for k, v in runs[0].items() if isinstance(v, float)}


def _faster(kept: dict | None, run: dict) -> dict:
    """Each phase from the pass that ran it faster (prefill: TTFT, prefill tok/s; decode: ITL, decode tok/s), as
    calibration keeps each grid point's faster pass: a slow spell of the shared CPU must recur on every pass to move
    a point."""
    if kept is None:
        return run
    pre = min(kept, run, key=lambda r: r["ttft_s"])
    dec = min(kept, run, key=lambda r: r["itl_s"])
    return {"ttft_s": pre["ttft_s"], "prefill_tok_s": pre["prefill_tok_s"],
            "itl_s": dec["itl_s"], "decode_tok_s": dec["decode_tok_s"]}


def _scatter(points: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(METRICS), figsize=(4 * len(METRICS), 4), dpi=100)
    for ax, key in zip(axes, METRICS):
        m = [p[f"measured_{key}"] for p in points]
        q = [p[f"predicted_{key}"] for p in points]
        ax.loglog(m, q, "o", alpha=0.7)
        lo, hi = min(m + q), max(m + q)
        ax.plot([lo, hi], [lo, hi], "k--", lw=1)
        ax.set_title(key)
        ax.set_xlabel("measured")
        ax.set_ylabel("predicted")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def validate_cmd(
    hw: Annotated[Optional[str], typer.Option("--hw", help="Card to predict with (engine shapes).")] = None,
    engine_shapes: Annotated[bool, typer.Option("--engine-shapes", help="Run fresh shapes in the engine.")] = False,
    published: Annotated[Optional[Path], typer.Option("--published", help="A published-measurements CSV.")] = None,
    device: Annotated[str, typer.Option(help="Engine device: cpu or cuda.")] = "cpu",
    dtype: Annotated[Optional[str], typer.Option(help="Engine dtype (default: the card's calibration dtype).")] = None,
    out: Annotated[Optional[Path], typer.Option("--output-file", "-o", help="Predicted-vs-measured scatter (.png).")] = None,
    model: Annotated[str, typer.Option("--model", "-m", help="Engine shapes: model cards, comma-separated.")]
    = ",".join(FRESH["cards"]),
    batch: Annotated[str, typer.Option(help="Engine shapes: concurrent requests, comma-separated.")]
    = ",".join(map(str, FRESH["batches"])),
    prompt: Annotated[str, typer.Option(help="Engine shapes: prompt tokens, comma-separated.")]
    = ",".join(map(str, FRESH["prompts"])),
    output: Annotated[int, typer.Option(min=2, help="Engine shapes: tokens generated per request.")] = FRESH["output"],
    layers: Annotated[int, typer.Option(min=1, help="Engine shapes: first N layers of each card.")] = FRESH["layers"],
    vocab: Annotated[int, typer.Option(min=2, help="Engine shapes: vocabulary size.")] = FRESH["vocab"],
    passes: Annotated[int, typer.Option(min=1, help="Engine shapes: passes over each card's shapes (each phase keeps "
                                        "its faster pass, as calibrate keeps each point's).")] = FRESH["passes"],
    as_json: JsonOpt = False, cards: CardsOpt = None,
):
    """Report the predictor's error per metric: median and p90 absolute % error and bias."""
    st = store(cards)
    if published is not None:
        return _published(st, published, as_json)
    if not engine_shapes:
        raise RooflineError("say what to validate against: --engine-shapes (with --hw) or --published FILE.csv")
    card = st.hardware(hw or "host")
    dtype = dtype or (card.calibration or {}).get("dtype", "fp32")
    spec = {**FRESH, "cards": [m.strip() for m in model.split(",") if m.strip()], "batches": int_list("--batch", batch),
            "prompts": int_list("--prompt", prompt), "output": output, "layers": layers, "vocab": vocab, "passes": passes}
    for name in spec["cards"]:
        st.model(name)  # an unknown card fails here, before any engine starts
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task("running fresh engine shapes",
                            total=len(spec["cards"]) * len(spec["batches"]) * len(spec["prompts"]) * spec["passes"])
        points = engine_points(card, st, device, dtype, spec, lambda: bar.advance(task))
    metrics = {k: error_summary([p[f"predicted_{k}"] for p in points], [p[f"measured_{k}"] for p in points])
               for k in METRICS}
    if out:
        _scatter(points, out, f"{card.name}: predicted vs measured ({len(points)} fresh engine shapes)")
    data = {"hardware": card.name, "efficiency_source": predict(reduce_card(st.model("llama-3.1-8b"), 1, 64), card,
                                                                 make_workload()).efficiency_source,
            "metrics": metrics, "points": points, "plot": str(out) if out else None}
    emit(data, as_json, lambda: _render(data))


def _render(d: dict):
    yield _error_table(f"predictor error on {d['hardware']} ({d['efficiency_source']})", d["metrics"])
    if d.get("plot"):
        yield f"wrote {d['plot']}"


def _error_table(title: str, metrics: dict):
    """One row per metric: n, median and p90 |error|, bias."""
    return table(title, ["metric", Column("n", "right"), Column("median |err|", "right"),
                         Column("p90 |err|", "right"), Column("bias", "right")],
                 [(k, s["n"], f"{s['median_ape_pct']:.1f}%", f"{s['p90_ape_pct']:.1f}%", f"{s['bias_pct']:+.1f}%")
                  for k, s in metrics.items()])


def _published(st, path: Path, as_json: bool) -> None:
    if not path.is_file():
        raise RooflineError(f"--published {path}: no such file")
    rows = read_rows(path)
    needed = {"id", "metric", "value", "isl", "osl", "batch"}
    have = set(rows[0]) if rows else set()
    if not rows or not needed <= have or not ({"hw_card", "hardware"} & have and {"model_card", "model"} & have):
        raise RooflineError(f"--published {path}: needs the columns of published_train.csv "
                            f"({', '.join(sorted(needed))}, hw_card or hardware, model_card or model)")
    preds = [predict_row(r, st, ceiling=True) for r in rows]
    data = {"file": str(path), "metrics": summarize(preds),
            "metrics_within_ceiling": summarize([p for p in preds if not p.beyond_ceiling]),
            "by_engine_hardware": breakdown(preds),
            "rows": [{"id": p.row_id, "hardware": p.hw, "model": p.model, "metric": p.metric, "measured": p.measured,
                      "predicted": p.predicted, "error_pct": p.error_pct, "ceiling": p.ceiling,
                      "beyond_ceiling": p.beyond_ceiling} for p in preds if p.predicted is not None],
            "skipped": [{"id": p.row_id, "why": p.skipped} for p in preds if p.predicted is None]}
    beyond = [r for r in data["rows"] if r["beyond_ceiling"]]

    def render():
        yield _error_table(f"{path.name}: {len(data['rows'])} rows predicted, {len(data['skipped'])} skipped",
                           data["metrics"])
        yield table("where the error comes from (engine x hardware)",
                    ["metric", "engine", "hardware", Column("n", "right"), Column("median |err|", "right"),
                     Column("bias", "right")],
                    [(g["metric"], g["engine"], g["hardware"], g["n"], f"{g['median_ape_pct']:.1f}%",
                      f"{g['bias_pct']:+.1f}%") for g in data["by_engine_hardware"]])
        if beyond:
            yield table("measured beyond the datasheet ceiling (peaks, no overhead) under the row's stated conditions",
                        ["row", "metric", "hardware", "model", Column("measured", "right"),
                         Column("ceiling", "right")],
                        [(r["id"], r["metric"], r["hardware"], r["model"], f"{r['measured']:,.4g}",
                          f"{r['ceiling']:,.4g}") for r in beyond])
            yield _error_table(f"without the {len(beyond)} rows beyond the ceiling", data["metrics_within_ceiling"])
        if data["skipped"]:
            yield table("skipped", ["row", "why"], [(s["id"], s["why"]) for s in data["skipped"]])

    emit(data, as_json, render)
