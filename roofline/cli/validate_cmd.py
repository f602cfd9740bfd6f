"""`roofline validate`: the predictor's error against fresh engine runs or a published-measurements CSV."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from roofline.calibrate.loso_report import error_cell, within_ceiling_cell
from roofline.calibrate.published import read_published, validate_published
from roofline.calibrate.validation import (
    FRESH,
    METRICS,
    engine_points,
    grid_shapes,
    random_shapes,
    summarize_families,
    summarize_points,
)
from roofline.cli.common import (CardsOpt, JsonOpt, host_card_name, image_path, int_list, name_list, nonempty_path,
                                  store)
from roofline.cli.output import Column, emit, progress, table
from roofline.engine import check_dtype, load
from roofline.errors import RooflineError
from roofline.perf.efficiency import expected_efficiency
from roofline.perf.workload import check_context, make_workload


# the --engine-shapes options' defaults (FRESH as the command line writes them): given or not is told by them
SHAPE_DEFAULTS = {"--model": ",".join(FRESH["cards"]), "--batch": ",".join(map(str, FRESH["batches"])),
                  "--prompt": ",".join(map(str, FRESH["prompts"])), "--output": FRESH["output"],
                  "--layers": FRESH["layers"], "--vocab": FRESH["vocab"], "--passes": FRESH["passes"]}


# shapes `--random` draws, at most: 40 take minutes; the draw avoids repeats among ~1.5M distinct shapes
MAX_RANDOM_SHAPES = 10_000


def validate_cmd(
    hw: Annotated[Optional[str], typer.Option("--hw", help="Card to predict with (engine shapes).")] = None,
    engine_shapes: Annotated[bool, typer.Option("--engine-shapes", help="Run fresh shapes in the engine.")] = False,
    published: Annotated[Optional[list[Path]], typer.Option("--published", parser=nonempty_path,
                                                            help="A published-measurements CSV "
                                                            "(repeat for several).")] = None,
    by_source: Annotated[bool, typer.Option("--by-source", help="With --published: fit the runtime profiles "
                                            "leaving each source out and predict it (before: generic; after: "
                                            "profiles), per runtime and metric and per runtime x hardware.")] = False,
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", min=1, help="With --by-source: processes fitting "
                                                "the held-out sources at once (default: every CPU core).")] = None,
    serving: Annotated[bool, typer.Option("--serving", help="Serve a Poisson trace and a closed loop in the engine "
                                          "for real and in the serving simulator; TTFT/ITL/throughput errors.")] = False,
    device: Annotated[str, typer.Option(help="Engine device: cpu or cuda.")] = "cpu",
    dtype: Annotated[Optional[str], typer.Option(help="Engine dtype (default: the card's calibration dtype).")] = None,
    out: Annotated[Optional[Path], typer.Option("--output-file", "-o", parser=nonempty_path,
                                                     help="Predicted-vs-measured scatter (.png).")] = None,
    model: Annotated[str, typer.Option("--model", "-m", help="Engine shapes: model cards, comma-separated.")]
    = SHAPE_DEFAULTS["--model"],
    batch: Annotated[str, typer.Option(help="Engine shapes: concurrent requests, comma-separated.")]
    = SHAPE_DEFAULTS["--batch"],
    prompt: Annotated[str, typer.Option(help="Engine shapes: prompt tokens, comma-separated.")]
    = SHAPE_DEFAULTS["--prompt"],
    output: Annotated[int, typer.Option(min=2, help="Engine shapes: output tokens.")] = SHAPE_DEFAULTS["--output"],
    layers: Annotated[int, typer.Option(min=1, help="Engine shapes: first N layers.")] = SHAPE_DEFAULTS["--layers"],
    vocab: Annotated[int, typer.Option(min=2, help="Engine shapes: vocabulary size.")] = SHAPE_DEFAULTS["--vocab"],
    passes: Annotated[int, typer.Option(min=1, help="Engine shapes: passes over each card's shapes (each phase keeps "
                                        "its faster pass, as calibrate does).")] = SHAPE_DEFAULTS["--passes"],
    random_n: Annotated[Optional[int], typer.Option("--random", min=1, max=MAX_RANDOM_SHAPES,
                                                    help="Engine shapes: N shapes drawn at random "
                                                    "over the bundled cards the engine runs (not the quick grid's), "
                                                    "batch 1-32, prompt 16-1024; replaces --model/--batch/--prompt.")]
    = None,
    seed: Annotated[int, typer.Option(min=0, help="Engine shapes: the --random draw's seed.")] = 0,
    as_json: JsonOpt = False, cards: CardsOpt = None,
):
    """Report the predictor's error per metric: median and p90 absolute % error and bias."""
    st = store(cards)
    _check_one_mode(published, serving, engine_shapes, engine_options={
        "--hw": hw, "--dtype": dtype, "--random": random_n, "--device": device != "cpu"}, by_source=by_source,
        jobs=jobs, out=out)
    _check_engine_options(serving, engine_shapes, dtype, random_n, seed, {
        "--model": model, "--batch": batch, "--prompt": prompt, "--output": output, "--layers": layers,
        "--vocab": vocab, "--passes": passes})
    if out is not None:
        out = image_path(out)
    if published and by_source:
        return _by_source(st, published, as_json, jobs or os.cpu_count() or 1)
    if published:
        if len(published) > 1:
            raise RooflineError("--published: several files need --by-source (or validate one file at a time)")
        return _published(st, published[0], as_json, out)
    if serving:
        return _serving(st, hw, device, dtype, as_json)
    if not engine_shapes:
        raise RooflineError("say what to validate against: --engine-shapes, --serving (with --hw) or --published "
                            "FILE.csv")
    spec = {**FRESH, "cards": name_list("--model", model), "batches": int_list("--batch", batch),
            "prompts": int_list("--prompt", prompt), "output": output, "layers": layers, "vocab": vocab, "passes": passes}
    _engine_shapes(st, hw, device, dtype, spec, random_n, seed, out, as_json)


def _check_engine_options(serving: bool, engine_shapes: bool, dtype: str | None, random_n: int | None, seed: int,
                          shape_options: dict) -> None:
    """Engine runs: a --dtype the engine runs; --serving serves its own fixed traces, so the options that shape
    --engine-shapes runs (`shape_options`, --random, --seed) do not apply to it; --seed needs --random."""
    if serving:
        given = [flag for flag, value in shape_options.items() if value != SHAPE_DEFAULTS[flag]]
        given += ["--random"] * (random_n is not None) + ["--seed"] * (seed != 0)
        if given:
            raise RooflineError(f"{given[0]} sets up --engine-shapes runs; --serving serves its own traces: drop it")
    if serving or engine_shapes:
        check_dtype(dtype)
    if engine_shapes and seed and not random_n:
        raise RooflineError("--seed sets the --random draw; add --random N or drop --seed")
    drawn = [flag for flag in ("--model", "--batch", "--prompt", "--layers")
             if shape_options.get(flag, SHAPE_DEFAULTS[flag]) != SHAPE_DEFAULTS[flag]]
    if engine_shapes and random_n and drawn:
        raise RooflineError(f"{drawn[0]}: --random N draws each shape's model, layers, batch and prompt itself; drop "
                            f"{drawn[0]} or --random")


def _check_one_mode(published, serving: bool, engine_shapes: bool, engine_options: dict, by_source: bool = False,
                    jobs: int | None = None, out: Path | None = None) -> None:
    """One of --published, --serving and --engine-shapes; with --published, none of the options that only set up
    engine runs (`engine_options`: flag -> whether it was given); --jobs only with --by-source, -o only where a
    scatter is drawn."""
    if jobs is not None and not (published and by_source):
        raise RooflineError("--jobs: only --published ... --by-source fits in several processes; drop --jobs")
    if out is not None and (by_source or serving):
        raise RooflineError("-o: the scatter is drawn for --published FILE or --engine-shapes; drop -o")
    modes = [flag for flag, on in (("--published", published), ("--serving", serving),
                                   ("--engine-shapes", engine_shapes)) if on]
    if len(modes) > 1:
        raise RooflineError(f"{' and '.join(modes)}: validate one thing at a time; give one of them")
    given = [flag for flag, on in engine_options.items() if on]
    if published and given:
        raise RooflineError(f"{given[0]} sets up the engine runs of --engine-shapes or --serving; --published "
                            "predicts each row on its own card: drop it")


def _engine_shapes(st, hw: str | None, device: str, dtype: str | None, spec: dict, random_n: int | None, seed: int,
                   out: Path | None, as_json: bool) -> None:
    """Serve the chosen (or randomly drawn) shapes in the engine, predict them, report the error per metric and
    per layer family."""
    card = st.hardware(host_card_name(hw))
    dtype = dtype or (card.calibration or {}).get("dtype", "fp32")
    if random_n:
        shapes = random_shapes(st, random_n, seed, spec["vocab"], dtype)
    else:
        for name in spec["cards"]:  # an unknown card or a request it cannot hold fails here, before any engine starts
            model = st.model(name)
            for p in spec["prompts"]:
                check_context(model.architecture.max_context, model.name,
                              make_workload(prompt_tokens=p, output_tokens=spec["output"]))
        shapes = grid_shapes(spec)
    device = load().resolve_device(device)
    with progress("running fresh engine shapes", len(shapes) * spec["passes"]) as advance:
        points = engine_points(card, st, device, dtype, spec, advance, shapes)
    if out:
        from roofline.report.plots import plot_validation

        plot_validation(points, list(METRICS), out, f"{card.name}: predicted vs measured ({len(points)} fresh engine "
                        "shapes)")
    data = {"hardware": card.name, "efficiency_source": expected_efficiency(card).source,
            "metrics": summarize_points(points), "families": summarize_families(points),
            "seed": seed if random_n else None, "points": points, "plot": str(out) if out else None}
    emit(data, as_json, lambda: _render(data))


def _render(d: dict):
    yield _error_table(f"predictor error on {d['hardware']} ({d['efficiency_source']})", d["metrics"])
    yield table("per layer family", ["family", "metric", Column("n", "right"), Column("median |err|", "right"),
                                     Column("p90 |err|", "right"), Column("bias", "right")],
                [(fam, k, s["n"], f"{s['median_ape_pct']:.1f}%", f"{s['p90_ape_pct']:.1f}%", f"{s['bias_pct']:+.1f}%")
                 for fam, metrics in d["families"].items() for k, s in metrics.items() if k in ("ttft", "itl")])
    if d.get("plot"):
        yield f"wrote {d['plot']}"


def _error_table(title: str, metrics: dict):
    """One row per metric: n, median and p90 |error|, bias."""
    return table(title, ["metric", Column("n", "right"), Column("median |err|", "right"),
                         Column("p90 |err|", "right"), Column("bias", "right")],
                 [(k, s["n"], f"{s['median_ape_pct']:.1f}%", f"{s['p90_ape_pct']:.1f}%", f"{s['bias_pct']:+.1f}%")
                  for k, s in metrics.items()])


def _by_source(st, paths: list[Path], as_json: bool, jobs: int) -> None:
    """Leave-one-source-out over the rows of `paths` (minutes: every source's groups are refitted without it),
    fitted in `jobs` processes under a progress bar."""
    from roofline.calibrate.loso_report import loso_table
    from roofline.calibrate.row_params import fit_rows
    from roofline.calibrate.runtime_fit import leave_one_source_out

    rows = [r for p in paths for r in read_published(p)]
    fitted = fit_rows(rows, st)
    with progress("fitting without each source", len({r.source for r in fitted})) as advance:  # forks: no thread
        results = leave_one_source_out(fitted, st, advance=advance, workers=jobs)
    data = {"files": [str(p) for p in paths], "rows": len(rows), "fitted_rows": len(fitted),
            "by_runtime": loso_table(results), "by_runtime_hardware": loso_table(results, by="hardware"),
            "by_runtime_source": loso_table(results, by="source")}
    emit(data, as_json, lambda: render_by_source(data))


def render_by_source(d: dict):
    err = error_cell
    cols = ["runtime", "metric", Column("n", "right"), Column("sources", "right"),
            Column("before (generic): median / p90 / bias", "right"),
            Column("after (profiles): median / p90 / bias", "right")]
    yield table(f"leave-one-source-out: {d['fitted_rows']} of {d['rows']} rows with a runtime profile",
                cols + [Column("after, rows within the datasheet ceiling", "right")],
                [(g["runtime"], g["metric"], g["n"], g["sources"], err(g["before"]), err(g["after"]),
                  within_ceiling_cell(g))
                 for g in d["by_runtime"]])
    yield table("leave-one-source-out by runtime x hardware", ["runtime", "hardware"] + cols[1:],
                [(g["runtime"], g["hardware"], g["metric"], g["n"], g["sources"], err(g["before"]), err(g["after"]))
                 for g in d["by_runtime_hardware"]])
    yield table("leave-one-source-out by runtime x source document (each predicted from the others)",
                ["runtime", "source"] + cols[1:3] + cols[4:],
                [(g["runtime"], g["source"], g["metric"], g["n"], err(g["before"]), err(g["after"]))
                 for g in d["by_runtime_source"]])


def _published(st, path: Path, as_json: bool, out: Path | None) -> None:
    data = validate_published(st, path)
    beyond = [r for r in data["rows"] if r["beyond_ceiling"]]
    if out and data["rows"]:
        from roofline.report.plots import plot_scatter

        series: dict[str, tuple[list[float], list[float]]] = {}
        for r in data["rows"]:
            m, q = series.setdefault(r["metric"], ([], []))
            m.append(r["measured"])
            q.append(r["predicted"])
        plot_scatter(series, out, f"{path.name}: predicted vs measured ({len(data['rows'])} rows)")
    data["plot"] = str(out) if out and data["rows"] else None

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
        if data["plot"]:
            yield f"wrote {data['plot']}"

    emit(data, as_json, render)


def _serving(st, hw: str | None, device: str, dtype: str | None, as_json: bool) -> None:
    device = load().resolve_device(device)  # a clear line when torch is missing or the device is not there
    from roofline.calibrate.serving_validation import serving_validation, spec_for

    card = st.hardware(host_card_name(hw))
    dtype = dtype or (card.calibration or {}).get("dtype", "fp32")
    spec = spec_for(device)
    with progress("serving the traces in the engine, then simulating them", None):
        rows = serving_validation(card, st, device, dtype, spec)
    data = {"hardware": card.name, "spec": spec, "dtype": dtype, "traces": rows}
    cut = f"{spec['layers'] or 'all'} layers, vocab {spec['vocab'] or 'whole'}"

    def render():
        keys = ("ttft_p50_s", "ttft_p90_s", "itl_p50_s", "itl_p90_s", "output_tok_s")
        yield table(f"served by the engine vs simulated on {card.name} ({spec['model']}, {cut}, {dtype})",
                    ["trace", "metric", Column("measured", "right"), Column("simulated", "right"),
                     Column("error", "right")],
                    [(r["trace"], k, f"{r['measured'][k]:.4g}", f"{r['predicted'][k]:.4g}",
                      f"{r['error_pct'][k]:+.1f}%") for r in rows for k in keys])
        yield table("the engine's steps, measured and as the simulator times the same steps",
                    ["trace", "steps run", Column("steps", "right"), Column("host p50", "right"),
                     Column("device p50", "right"), Column("simulated p50", "right"), Column("busy / wall", "right")],
                    [(r["trace"], mode, str(v["steps"]), f"{v['host_s_p50'] * 1e3:.3g} ms",
                      f"{v['device_s_p50'] * 1e3:.3g} ms", f"{v['predicted_s_p50'] * 1e3:.3g} ms",
                      f"{v['busy_s']:.3g} / {r['steps']['wall_s']:.3g} s")
                     for r in rows for mode, v in r["steps"]["by_mode"].items()])

    emit(data, as_json, render)
