"""`roofline calibrate`: measure this device, run the engine over a grid, fit the predictor, write a card."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from roofline.calibrate.grids import grid_spec
from roofline.calibrate.quality import should_write, versus_existing
from roofline.cards.files import check_output_dir
from roofline.cards.card_file import read_yaml
from roofline.cards.store import user_dir, writable_user_dir
from roofline.cli.common import CardsOpt, JsonOpt, host_card_name, store
from roofline.cli.output import Column, console, emit, table
from roofline.engine import check_dtype
from roofline.errors import RooflineError


def calibrate_cmd(
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "auto",
    quick: Annotated[bool, typer.Option("--quick", help="A short grid (about 2 minutes on a 2-core CPU).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Write the card even when the run looks contended or the "
                                        "existing card predicts better.")] = False,
    grid: Annotated[Optional[str], typer.Option(help="quick, full or smoke (seconds; for tests).")] = None,
    out: Annotated[Optional[str], typer.Option("--out", help="Card directory (default: $ROOFLINE_HOME).")] = None,
    hw: Annotated[Optional[str], typer.Option("--hw", help="Base card (default: recognised device or this host).")] = None,
    dtype: Annotated[Optional[str], typer.Option(help="Engine dtype (default: bf16 on CUDA and on CPUs whose bf16 GEMM doubles fp32, else fp32).")] = None,
    tp: Annotated[int, typer.Option("--tp", help="Also measure all-reduces over N processes and fit the link (N > 1).")] = 1,
    eager: Annotated[bool, typer.Option("--eager", help="Decode eagerly (no static buffers / CUDA graphs).")] = False,
    as_json: JsonOpt = False, cards: CardsOpt = None,
):
    """Measure the device, run engine shapes, fit the predictor's efficiencies, and write a calibrated card."""
    from rich.progress import Progress as Bar

    # the fit and the engine load on first use, so other commands start without them
    from roofline.calibrate.calibration import ENGINE_RUNTIME, engine_profile, write_card_atomic
    from roofline.calibrate.device_run import Progress, calibrate

    grid, home, directory = _checked_options(dtype, hw, quick, grid, out, tp)
    st = store(cards)

    err = console(stderr=True)
    with Bar(transient=True, console=err, disable=not err.is_terminal) as bar:  # stdout stays the report or --json
        task = bar.add_task("starting the engine", total=None)
        progress = Progress(total=lambda n: bar.update(task, total=n), advance=lambda n: bar.advance(task, n),
                            stage=lambda text: bar.update(task, description=text))
        run = calibrate(st, device, grid, hw, dtype, progress, tp=tp, eager=eager)
    data, base, measured, summary, quality = run["card"], run["base"], run["measured"], run["summary"], run["quality"]
    existing = _existing(directory / f"{data['name']}.yaml")
    write, note = should_write(quality, versus_existing(quality, existing), force)
    data["calibration"]["quality"] = {"verdict": quality.verdict, "reasons": quality.reasons}
    path = profile_path = None
    if write:
        path = write_card_atomic(home, data)
        profile = engine_profile(st.get("runtimes", ENGINE_RUNTIME), data)  # --runtime roofline-engine
        profile_path = write_card_atomic(home, profile, kind="runtimes")
    result = {"card": data["name"], "path": str(path) if path else None, "written": write, "note": note,
              "cards_option": None if out is None or _is_user_dir(out) else out,
              "runtime_profile": str(profile_path) if profile_path else None,
              "quality": {"verdict": quality.verdict, "reasons": quality.reasons,
                          "held_out_median_pct": quality.held_out_median_pct,
                          "bandwidth_gap": quality.bandwidth_gap, "pass_gap": quality.pass_gap},
              "device": data["calibration"]["device"], "all_reduce": data["calibration"].get("all_reduce"),
              "efficiency": data["calibration"]["values"],
              "measured": {"read_bytes_per_s": measured["bandwidth"]["read_bytes_per_s"],
                           "gemm_peak_flop_per_s": {k: v["peak_flop_per_s"] for k, v in measured["gemm"].items()},
                           "launch_s": measured["launch_s"]},
              "datasheet": {"bandwidth_bytes_per_s": base.memory.bandwidth_bytes_per_s,
                            "peak_flops": base.peak_flops.as_dict()},
              "held_out": summary["held_out"], "fit": summary["fit"], "points": summary["held_out_points"]}
    emit(result, as_json, lambda: _render(result))
    if not write:
        raise RooflineError(f"calibrate: {note}")


def _checked_options(dtype: str | None, hw: str | None, quick: bool, grid: str | None, out: str | None,
                     tp: int) -> tuple[str, Path, Path]:
    """(the grid, the card home, its card directory), every option checked before minutes of measuring."""
    check_dtype(dtype)
    host_card_name(hw)  # an empty --hw is refused, not read as this machine
    if tp < 1:
        raise RooflineError(f"--tp: must be at least 1, got {tp}")
    grid = _grid_name(quick, grid)
    home = _card_home(out)
    return grid, home, _writable_card_dirs(home)


def _grid_name(quick: bool, grid: str | None) -> str:
    """--grid, or quick with --quick, else full; --quick beside another --grid is a contradiction, and an unknown
    grid is refused, both before measuring."""
    if quick and grid is not None and grid != "quick":
        raise RooflineError(f"--quick is --grid quick; give --grid {grid} or --quick, not both")
    if grid is not None and not grid.strip():
        raise RooflineError("--grid: empty; name a grid (quick, full, smoke) or leave --grid out for full")
    name = grid or ("quick" if quick else "full")
    grid_spec(name)
    return name


def _writable_card_dirs(home: Path) -> Path:
    """home/hardware (returned) and home/runtimes, both writable, neither holding a card path that is not a file:
    calibrate writes one card in each, after minutes of measuring."""
    directory = check_output_dir(home / "hardware", "--out")
    for folder in (directory, check_output_dir(home / "runtimes", "--out")):
        odd = next((p for p in sorted(folder.glob("*.yaml")) if not p.is_file()), None) if folder.is_dir() else None
        if odd is not None:
            raise RooflineError(f"--out: {odd} is not a file; calibrate writes its cards there: move it away")
    return directory


def _existing(target: Path) -> dict | None:
    """The card already at `target` (to compare with), or None when there is none or it cannot be read."""
    if not target.exists():
        return None
    try:
        return read_yaml(target)
    except RooflineError:
        return None


def _is_user_dir(out: str) -> bool:
    home = user_dir()
    return home is not None and Path(out).resolve() == home.resolve()


def _card_home(out: str | None) -> Path:
    """The card directory calibrate writes to: --out (text, not Path: Path('') is the working directory, refused) or
    $ROOFLINE_HOME."""
    if out is not None and not out.strip():
        raise RooflineError("--out: empty path; give the card directory to write, or leave --out out ($ROOFLINE_HOME)")
    return Path(out) if out is not None else writable_user_dir("--out")


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
    q = r["quality"]
    for reason in q["reasons"]:
        yield f"[yellow]warning[/yellow]: {reason}"
    if r["written"]:
        if r["note"]:
            yield f"[yellow]warning[/yellow]: {r['note']}"
        cards = f" --cards {r['cards_option']}" if r["cards_option"] else ""
        yield f"wrote {r['path']} — `roofline predict --hw {r['card']}{cards}` now uses it"
    else:
        yield f"[bold red]not written[/bold red]: {r['note']}"
