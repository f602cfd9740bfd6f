"""`roofline calibrate`: measure this device, run the engine over a grid, fit the predictor, write a card."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from roofline.calibrate.calibration import ENGINE_RUNTIME, engine_profile, write_card_atomic
from roofline.calibrate.device_run import Progress, calibrate
from roofline.cards.store import user_dir
from roofline.cli.common import CardsOpt, JsonOpt, store
from roofline.cli.output import Column, emit, table


def calibrate_cmd(
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "auto",
    quick: Annotated[bool, typer.Option("--quick", help="A short grid (about 2 minutes on a 2-core CPU).")] = False,
    grid: Annotated[Optional[str], typer.Option(help="quick, full or smoke (seconds; for tests).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Card directory (default: $ROOFLINE_HOME).")] = None,
    hw: Annotated[Optional[str], typer.Option("--hw", help="Base card (default: recognised device or this host).")] = None,
    dtype: Annotated[Optional[str], typer.Option(help="Engine dtype (default: bf16 on CUDA and on CPUs whose bf16 GEMM doubles fp32, else fp32).")] = None,
    as_json: JsonOpt = False, cards: CardsOpt = None,
):
    """Measure the device, run engine shapes, fit the predictor's efficiencies, and write a calibrated card."""
    from rich.progress import Progress as Bar

    with Bar(transient=True) as bar:
        task = bar.add_task("starting the engine", total=None)
        progress = Progress(total=lambda n: bar.update(task, total=n), advance=lambda n: bar.advance(task, n),
                            stage=lambda text: bar.update(task, description=text))
        run = calibrate(store(cards), device, grid or ("quick" if quick else "full"), hw, dtype, progress)
    data, base, measured, summary = run["card"], run["base"], run["measured"], run["summary"]
    path = write_card_atomic(out or user_dir(), data)
    profile = engine_profile(store(cards).get("runtimes", ENGINE_RUNTIME), data)  # --runtime roofline-engine
    profile_path = write_card_atomic(out or user_dir(), profile, kind="runtimes")
    result = {"card": data["name"], "path": str(path), "runtime_profile": str(profile_path),
              "device": data["calibration"]["device"],
              "efficiency": data["calibration"]["values"],
              "measured": {"read_bytes_per_s": measured["bandwidth"]["read_bytes_per_s"],
                           "gemm_peak_flop_per_s": {k: v["peak_flop_per_s"] for k, v in measured["gemm"].items()},
                           "launch_s": measured["launch_s"]},
              "datasheet": {"bandwidth_bytes_per_s": base.memory.bandwidth_bytes_per_s,
                            "peak_flops": base.peak_flops.as_dict()},
              "held_out": summary["held_out"], "fit": summary["fit"], "points": summary["held_out_points"]}
    emit(result, as_json, lambda: _render(result))


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
