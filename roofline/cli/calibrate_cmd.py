"""`roofline calibrate`: measure this device, run the engine over a grid, fit the predictor, write a card."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from roofline.calibrate.calibration import (
    calibrated_card,
    fit_records,
    write_card_atomic,
)
from roofline.cards.store import user_dir
from roofline.cli.common import CardsOpt, JsonOpt, store
from roofline.cli.engine_cmd import engine_modules
from roofline.cli.output import Column, emit, table
from roofline.errors import RooflineError

# Engine grids: dense (llama), MoE (qwen3-30b-a3b), sliding window + MoE (gpt-oss-20b), each `models` entry a card,
# its first N layers and the phases it runs. One layer keeps the shapes exact and the run short; decode steps of a
# second layer show the fit a cost per layer apart from the cost per step (with one layer the two are one
# unknown; the 2-layer steps cost 4-8 of the quick grid's ~100 s on a 2-core EPYC). Vocab 4096
# keeps the lm_head from dominating. `repeats`: steps per point (the median is kept); `passes`: passes over a
# model's points (the fastest is kept). On the 2-core CI machine a point's median was at times 1.9x its usual
# value for a whole burst of steps (llama-3.1-8b 1 x 256 tokens: 170 ms, else 85-102), which moved the quick
# grid's fit (one point per shape); a second pass has to meet the same spell to keep it.
QUICK = dict(models=[("llama-3.1-8b", 1), ("llama-3.1-8b", 2, ("decode",)), ("qwen3-30b-a3b", 1), ("gpt-oss-20b", 1)],
             vocab=4096, prefill=[(1, 64), (1, 256), (4, 128), (8, 256)], decode_batches=[1, 4, 16, 32],
             contexts=[64, 512], repeats=3, passes=2)
# a seconds-long grid for tests and smoke checks: one small dense card
SMOKE = dict(models=[("qwen2.5-3b", 1)], vocab=512, prefill=[(1, 32), (2, 64)], decode_batches=[1, 4],
             contexts=[16, 128], repeats=3, passes=1)
# The full grid runs 2-layer prefill on llama only: on a 2-core EPYC in bf16 the other five cards' 2-layer prefill
# took 390 of the 960 s the grid took with it (a prefill step's per-step cost is small beside its per-layer cost).
# Without it the grid took 8.6 min in one pass and 10.9 min in two (the second re-times only steps under 0.3 s).
FULL = dict(models=[("llama-3.1-8b", 1), ("llama-3.1-8b", 2)]
            + [m for card in ("qwen2.5-7b", "qwen3-30b-a3b", "mixtral-8x7b", "gpt-oss-20b", "gemma-3-27b")
               for m in ((card, 1), (card, 2, ("decode",)))],
            vocab=8192, prefill=[(1, 64), (1, 256), (1, 512), (4, 128), (8, 128), (8, 256)],
            decode_batches=[1, 2, 4, 8, 16, 32], contexts=[64, 512, 2048], repeats=3, passes=2)


GRIDS = {"quick": QUICK, "full": FULL, "smoke": SMOKE}


def _grid(spec: dict) -> list[dict]:
    points = []
    for card, layers, *phases in spec["models"]:
        phases = phases[0] if phases else ("prefill", "decode")
        for ctx in spec["contexts"]:
            if "prefill" in phases:
                points += [dict(card=card, layers=layers, phase="prefill", batch=b, context=ctx, new_tokens=n)
                           for b, n in spec["prefill"]]
            if "decode" in phases:
                points += [dict(card=card, layers=layers, phase="decode", batch=b, context=ctx, new_tokens=1)
                           for b in spec["decode_batches"]]
    return points


def calibrate_cmd(
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "auto",
    quick: Annotated[bool, typer.Option("--quick", help="A short grid (about 3 minutes on a 2-core CPU).")] = False,
    grid: Annotated[Optional[str], typer.Option(help="quick, full or smoke (seconds; for tests).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Card directory (default: $ROOFLINE_HOME).")] = None,
    hw: Annotated[Optional[str], typer.Option("--hw", help="Base card (default: recognised device or this host).")] = None,
    dtype: Annotated[Optional[str], typer.Option(help="Engine dtype (default: bf16 on CUDA and on CPUs whose bf16 GEMM doubles fp32, else fp32).")] = None,
    tp: Annotated[int, typer.Option("--tp", help="Also measure all-reduces over N processes and fit the link (N > 1).")] = 1,
    eager: Annotated[bool, typer.Option("--eager", help="Decode eagerly (no static buffers / CUDA graphs).")] = False,
    as_json: JsonOpt = False, cards: CardsOpt = None,
):
    """Measure the device, run engine shapes, fit the predictor's efficiencies, and write a calibrated card."""
    _, bench, device_info, EngineError = engine_modules()
    from rich.progress import Progress

    from roofline.cards.host import host_card

    try:
        dev = device_info.resolve(device)
    except EngineError as err:
        raise RooflineError(str(err)) from None
    st = store(cards)
    base = st.hardware(hw) if hw else (st.hardware(device_info.name(dev)) if dev == "cuda" else host_card())
    grid = grid or ("quick" if quick else "full")
    if grid not in GRIDS:
        raise RooflineError(f"--grid {grid}: use {', '.join(GRIDS)}")
    spec = GRIDS[grid]
    points = _grid(spec)
    with Progress(transient=True) as bar:
        task = bar.add_task("measuring the device", total=5 + len(points) * spec["passes"] + 20)
        measured, dtype = _microbench(dev, dtype, grid, lambda n: bar.advance(task, n))
        bar.update(task, description="running engine shapes")
        records = bench.run_grid(points, spec["vocab"], dev, dtype, lambda: bar.advance(task), st, spec["repeats"],
                                 spec["passes"], graphs=False if eager else None)
        if tp > 1:
            bar.update(task, description=f"all-reduces over {tp} processes")
            measured["all_reduce"] = _all_reduce(dev, tp)
        peaks = _measured_peaks(measured) if dev == "cpu" else None
        probe = base if peaks is None else _with_measured(base, measured, peaks)
        bar.update(task, description="fitting")
        eff, summary = fit_records(records, probe, st, on_step=lambda: bar.advance(task, 0.1),
                                   gemv_max_tokens=bench.matrix_vector_rows(dev, dtype))
    meta = {"device": device_info.name(dev), **device_info.versions(), "dtype": dtype, "grid": grid}
    data = calibrated_card(base, eff, summary, measured, meta, name=None if dev == "cuda" else "host-cpu",
                           measured_peaks=peaks)
    if tp > 1:
        data = _fit_link(data, base, measured, tp)
    path = write_card_atomic(out or user_dir(), data)
    result = {"card": data["name"], "path": str(path), "device": meta["device"], "efficiency": data["calibration"]["values"],
              "measured": {"read_bytes_per_s": measured["bandwidth"]["read_bytes_per_s"],
                           "gemm_peak_flop_per_s": {k: v["peak_flop_per_s"] for k, v in measured["gemm"].items()},
                           "launch_s": measured["launch_s"]},
              "all_reduce": data["calibration"].get("all_reduce"),
              "datasheet": {"bandwidth_bytes_per_s": base.memory.bandwidth_bytes_per_s, "peak_flops": base.peak_flops.as_dict()},
              "held_out": summary["held_out"], "fit": summary["fit"], "points": summary["held_out_points"]}
    emit(result, as_json, lambda: _render(result))


def _all_reduce(dev: str, tp: int) -> list[dict]:
    from roofline.engine.measure import microbench

    return microbench.all_reduce(dev, tp)


def _fit_link(data: dict, base, measured: dict, tp: int) -> dict:
    """Fit the all-reduce measurements to the card's link (a CPU without one: the measured copy bandwidth)."""
    from roofline.calibrate.collectives import fit_all_reduce, with_collectives

    card_rate = base.interconnect.bandwidth_bytes_per_s_per_direction
    rate = card_rate or measured["bandwidth"]["copy_bytes_per_s"]
    fit = fit_all_reduce(measured["all_reduce"], tp, rate)
    return with_collectives(data, fit, rate, measured_link=not card_rate)


def _engine_dtype(dev: str, measured: dict) -> str:
    """bf16 on CUDA, and on CPUs whose measured bf16 GEMM at least doubles fp32 (AMX; AVX512-BF16 on a 2-core EPYC
    VM: 426 vs 155 GFLOP/s at 256 x 3584 x 18944); fp32 otherwise (bf16 emulated in fp32 units runs slower)."""
    peaks = {k: v["peak_flop_per_s"] for k, v in measured["gemm"].items()}
    return "bf16" if dev == "cuda" or peaks.get("bf16", 0) >= 2 * peaks["fp32"] else "fp32"


def _microbench(dev: str, dtype: str | None, grid: str, advance) -> tuple[dict, str]:
    """The device's figures and the engine dtype: `dtype`, or chosen from the measured GEMM peaks."""
    from roofline.engine.measure import microbench

    full = grid == "full"
    measured = {"bandwidth": microbench.bandwidth(dev, 1 << 30 if full else 1 << 29)}
    advance(1)
    # fp32 always (the datasheet comparison), and the engine dtype or, unchosen, bf16 to choose by
    measured["gemm"] = microbench.gemm(dev, tuple(dict.fromkeys(("fp32", dtype or "bf16"))))
    dtype = dtype or _engine_dtype(dev, measured)
    advance(2)
    measured["attention"] = microbench.attention(dev, dtype, (256, 1024, 4096) if full else (256, 1024))
    measured["launch_s"] = microbench.launch_overhead(dev)
    advance(2)
    return measured, dtype


def _measured_peaks(measured: dict) -> dict:
    """A CPU card's peaks are what it measured: the best GEMM shape per dtype (fp16 as bf16)."""
    peaks = {k: v["peak_flop_per_s"] for k, v in measured["gemm"].items()}
    peaks.setdefault("fp16", peaks.get("bf16", peaks["fp32"]))
    return peaks


def _with_measured(base, measured: dict, peaks: dict):
    from roofline.cards.hardware import HardwareCard

    data = base.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["memory"]["bandwidth"] = measured["bandwidth"]["read_bytes_per_s"]
    data["peak_flops"] = peaks
    return HardwareCard.model_validate(data)


def _render(r: dict):
    m = r["measured"]
    rows = [("read bandwidth", f"{m['read_bytes_per_s'] / 1e9:,.1f} GB/s",
             f"{r['datasheet']['bandwidth_bytes_per_s'] / 1e9:,.1f} GB/s")]
    for dtype, peak in m["gemm_peak_flop_per_s"].items():
        sheet = r["datasheet"]["peak_flops"].get(dtype)
        rows.append((f"GEMM {dtype}", f"{peak / 1e12:,.2f} TFLOP/s", f"{sheet / 1e12:,.2f} TFLOP/s" if sheet else "—"))
    rows.append(("kernel launch", f"{m['launch_s'] * 1e6:,.1f} us", ""))
    yield table(f"{r['device']}: measured vs card", ["", Column("measured", "right"), Column("card", "right")], rows)
    pts = [(p["card"], p["phase"], p["batch"], p["context"], p["new_tokens"], f"{p['seconds'] * 1e3:,.1f}",
            f"{p['predicted'] * 1e3:,.1f}", f"{100 * (p['predicted'] - p['seconds']) / p['seconds']:+.1f}%")
           for p in r["points"]]
    yield table("held-out points (never seen by the fit)", ["card", "phase", Column("batch", "right"),
                Column("context", "right"), Column("new", "right"), Column("measured ms", "right"),
                Column("predicted ms", "right"), Column("error", "right")], pts)
    summ = [(split, phase, s["n"], f"{s['median_ape_pct']:.1f}%", f"{s['p90_ape_pct']:.1f}%", f"{s['bias_pct']:+.1f}%")
            for split in ("fit", "held_out") for phase, s in r[split].items()]
    yield table("step-time error", ["split", "phase", Column("n", "right"), Column("median", "right"),
                                     Column("p90", "right"), Column("bias", "right")], summ)
    yield f"wrote {r['path']} — `roofline predict --hw {r['card']}` now uses it"
