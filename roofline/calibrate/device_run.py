"""`roofline calibrate` end to end: measure the device, run the engine over a grid, fit, and build the card."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from roofline.calibrate.calibration import (activation_costs, calibrated_card, fit_records,
                                           weights_bandwidth_fraction)
from roofline.calibrate.grids import grid_points, grid_spec
from roofline.calibrate.quality import assess
from roofline.cards.hardware import HardwareCard
from roofline.cards.store import CardStore

# bf16 runs at least this many times the fp32 GEMM rate before the engine chooses it on a CPU: below that, bf16 is
# emulated in fp32 units and runs slower than fp32 (measured figures: docs/calibration.md)
BF16_OVER_FP32 = 2.0


@dataclass
class Progress:
    """Callbacks a caller may pass to show progress: `total(n)` once, `advance(n)`, `stage(text)`."""

    total: Callable[[float], None] = lambda n: None
    advance: Callable[[float], None] = lambda n: None
    stage: Callable[[str], None] = lambda text: None


def engine_dtype(dev: str, measured: dict) -> str:
    """bf16 on CUDA, and on CPUs whose measured bf16 GEMM reaches BF16_OVER_FP32 x fp32 (AMX, AVX512-BF16)."""
    peaks = {k: v["peak_flop_per_s"] for k, v in measured["gemm"].items()}
    return "bf16" if dev == "cuda" or peaks.get("bf16", 0) >= BF16_OVER_FP32 * peaks["fp32"] else "fp32"


def microbenchmarks(microbench, dev: str, dtype: str | None, full: bool, advance) -> tuple[dict, str]:
    """The device's figures and the engine dtype: `dtype`, or chosen from the measured GEMM peaks."""
    measured = {"bandwidth": microbench.bandwidth(dev, 1 << 30 if full else 1 << 29)}
    advance(1)
    # fp32 always (the datasheet comparison), and the engine dtype or, unchosen, bf16 to choose by
    measured["gemm"] = microbench.gemm(dev, tuple(dict.fromkeys(("fp32", dtype or "bf16"))))
    dtype = dtype or engine_dtype(dev, measured)
    advance(2)
    measured["attention"] = microbench.attention(dev, dtype, (256, 1024, 4096) if full else (256, 1024))
    measured["launch_s"] = microbench.launch_overhead(dev)
    measured["activations_s"] = microbench.activations(dev, dtype)
    advance(2)
    return measured, dtype


def measured_peaks(measured: dict) -> dict:
    """A CPU card's peaks are what it measured: the best GEMM shape per dtype (fp16 as bf16)."""
    peaks = {k: v["peak_flop_per_s"] for k, v in measured["gemm"].items()}
    peaks.setdefault("fp16", peaks.get("bf16", peaks["fp32"]))
    return peaks


def with_measured(base: HardwareCard, measured: dict, peaks: dict) -> HardwareCard:
    data = base.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["memory"]["bandwidth"] = measured["bandwidth"]["read_bytes_per_s"]
    data["peak_flops"] = peaks
    return HardwareCard.model_validate(data)


def base_card(store: CardStore, device_info, dev: str, hw: str | None) -> HardwareCard:
    """The card the fit starts from: `hw`, else the recognised GPU, else this host's card."""
    from roofline.cards.host import host_card

    if hw:
        return store.hardware(hw)
    return store.hardware(device_info.name(dev)) if dev == "cuda" else host_card()


def fit_link(data: dict, base: HardwareCard, measured: dict, tp: int) -> dict:
    """Fit the all-reduce measurements to the card's link (a CPU without one: the measured copy bandwidth)."""
    from roofline.calibrate.collectives import fit_all_reduce, with_collectives

    card_rate = base.interconnect.bandwidth_bytes_per_s_per_direction
    rate = card_rate or measured["bandwidth"]["copy_bytes_per_s"]
    fit = fit_all_reduce(measured["all_reduce"], tp, rate)
    return with_collectives(data, fit, rate, measured_link=not card_rate)


def graph_limits(cfg) -> dict[str, float]:
    """The decode steps an engine of config `cfg` replays as CUDA graphs: up to its largest bucket of sequences,
    each within its static block tables' reach."""
    return {"graph_max_batch": float(cfg.graph_max_batch), "graph_max_context": float(cfg.graph_max_context)}


def calibrate(store: CardStore, device: str = "auto", grid: str = "quick", hw: str | None = None,
              dtype: str | None = None, progress: Progress | None = None, tp: int = 1, eager: bool = False) -> dict:
    """Measure, run the grid (decode eagerly with `eager`), fit; with `tp` > 1 also time all-reduces over `tp`
    processes and fit the link. Returns {"card": card data to write, "base": the base card, "measured": the
    microbenchmarks, "summary": the fit's residuals, "quality": the contention checks}."""
    from roofline.engine import load

    eng = load()
    progress = progress or Progress()
    dev = eng.resolve_device(device)
    if tp > 1:  # before minutes of measuring, not after
        eng.check_world(tp, dev)
    base = base_card(store, eng.device, dev, hw)
    spec = grid_spec(grid, dev)
    points = grid_points(spec)
    progress.total(5 + len(points) * spec["passes"] + 20)
    progress.stage("measuring the device")
    if dev == "cpu":  # the allocator regime the engine runs in (LLMEngine sets it too): GEMM and activation outputs
        eng.device.keep_freed_memory()  # reuse freed heap pages rather than fault fresh ones (2-3x on some runs)
    measured, dtype = microbenchmarks(eng.microbench, dev, dtype, grid == "full", progress.advance)
    progress.stage("running engine shapes")
    pass_log: dict = {}
    records = eng.bench.run_grid(points, spec["vocab"], dev, dtype, lambda: progress.advance(1), store,
                                 spec["repeats"], spec["passes"], pass_log=pass_log,
                                 graphs=False if eager else None)
    if tp > 1:
        progress.stage(f"all-reduces over {tp} processes")
        measured["all_reduce"] = eng.microbench.all_reduce(dev, tp)
    progress.stage("measuring the bandwidth again (contention check)")
    # the same microbenchmark after the grid: a machine that was busy during either shows two different buses
    measured["bandwidth_repeat"] = eng.microbench.bandwidth(dev, 1 << 30 if grid == "full" else 1 << 29)
    peaks = measured_peaks(measured) if dev == "cpu" else None
    probe = base if peaks is None else with_measured(base, measured, peaks)
    progress.stage("fitting")
    eff, summary = fit_records(records, probe, store, on_step=lambda: progress.advance(0.1),
                               gemv_max_tokens=eng.bench.matrix_vector_rows(dev, dtype),
                               activation_cost=activation_costs(measured["activations_s"]),
                               graph_limits=None if eager else graph_limits(eng.engine.EngineConfig()),
                               weights_memory=None if dev == "cpu" else weights_bandwidth_fraction(measured, base))
    meta = {"device": eng.device.name(dev), **eng.device.versions(), "dtype": dtype, "grid": grid}
    data = calibrated_card(base, eff, summary, measured, meta, name=None if dev == "cuda" else "host-cpu",
                           measured_peaks=peaks)
    if tp > 1:
        data = fit_link(data, base, measured, tp)
    reads = [measured["bandwidth"]["read_bytes_per_s"], measured["bandwidth_repeat"]["read_bytes_per_s"]]
    quality = assess(summary, reads, {str(i): s for i, s in pass_log.items()})
    return {"card": data, "base": base, "measured": measured, "summary": summary, "quality": quality}
