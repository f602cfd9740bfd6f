"""Calibration without torch: fit the efficiency model to engine step records and write a calibrated card.

Records are StepRecords from roofline.engine.measure.bench (one per measured step). The fit runs on the predictor's
own operator graph
(`timed_step`), on a fitting split; the held-out split is only ever predicted.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import replace
from pathlib import Path

import yaml

from roofline.calibrate.fit import error_summary, fit_efficiency, fit_loss
from roofline.cards.files import write_atomic
from roofline.cards.hardware import HardwareCard
from roofline.cards.runtime import EfficiencyOverrides, RuntimeProfile
from roofline.cards.store import CardStore
from roofline.engine.core.records import StepRecord
from roofline.perf.efficiency import Efficiency, expected_efficiency
from roofline.perf.ops import Step
from roofline.perf.request import timed_step
from roofline.perf.workload import Workload
from roofline.sizing.reduce import reduce_card

CPU_PARAMS = ("memory", "memory_gemv", "memory_kv", "memory_act", "compute", "gemm_half_tokens", "gemm_floor",
              "attention", "scan", "kernel_overhead_s", "kernels_per_expert", "routing_concentration",
              "step_overhead_s", "sequence_overhead_s")
# a row threshold, so tried on a grid (one pattern search per value) rather than stepped by the pattern search
GEMV_MAX_TOKENS = (1, 4, 8, 16, 32)
GPU_PARAMS = CPU_PARAMS + ("gemm_min_tokens", "token_overhead_s")
# where the GPU fit starts the host work per new token: the order of the Python list work per token in the engine's
# step_meta (the H100 calibrations of docs/calibration.md settled at 0.8-1.0 us)
TOKEN_OVERHEAD_START_S = 1e-6
HELD_OUT_SHARE = 0.3
# On a GPU the weights' bandwidth fraction is measured, not fitted: the grid's decode steps cannot tell it from the
# per-kernel launch cost (a slower bus and cheaper launches fit them as well), and fits of one H200 had put it
# anywhere from 0.30 to 1.00 (docs/calibration.md, "The weights' bandwidth measured, not fitted")
PINNED_BY_WEIGHTS_MEMORY = ("memory", "memory_gemv")
# Where the fit starts besides the card's defaults: the GEMM ramp trades `compute` against `gemm_half_tokens` (a
# lower plateau reached sooner fits mid-size prefill nearly as well), and decode trades the bandwidth fraction
# against the per-kernel overhead and the matrix-vector fraction, so from one start the search can settle in the
# wrong basin (docs/calibration.md; from a GPU card's default memory 0.95 a known 0.6 was refound as 0.48). The
# start with the least loss wins.
FIT_STARTS = ({}, {"compute": 0.95, "gemm_half_tokens": 128.0}, {"compute": 0.5, "gemm_half_tokens": 32.0},
              {"memory": 0.7})


# the fitted `memory_act` is this activation's pass rate (most cards run it); the others are timed relative to it
REFERENCE_ACTIVATION = "silu"


def activation_costs(seconds: dict[str, float]) -> dict[str, float]:
    """Each activation's measured pass time over the reference activation's (microbench.activations)."""
    return {name: round(s / seconds[REFERENCE_ACTIVATION], 3) for name, s in seconds.items()}


def engine_quant(dtype: str, weights: str | None = None) -> str:
    """The engine's formats as a roofline --quant: every weight in `dtype`; with weight-only int8/int4 the linear
    layers (lm_head included) in that format while MoE expert banks and the embedding stay in `dtype`."""
    if weights is None:
        return f"default={dtype}"
    return f"default={weights},lm_head={weights},experts={dtype},embedding={dtype}"


def is_held_out(r: StepRecord) -> bool:
    """A fixed ~30% of points, chosen by a hash of the point (not by order), that the fit never sees."""
    return int(hashlib.sha256(r.key.encode()).hexdigest(), 16) % 100 < HELD_OUT_SHARE * 100


def predict_step(r: StepRecord, hw: HardwareCard, eff: Efficiency, store: CardStore, cache: dict) -> float:
    """Predicted seconds of the measured step `r` on `hw` at efficiency `eff`."""
    key = (r.card, r.layers, r.vocab)
    if key not in cache:
        cache[key] = reduce_card(store.model(r.card), r.layers, r.vocab)
    n = r.new_tokens if r.phase == "prefill" else 1
    wl = Workload(prompt_tokens=max(n, 1), quant=engine_quant(r.dtype), kv_quant=r.dtype)
    return float(timed_step(cache[key], hw, Step(r.phase, n, r.batch, r.context), wl, eff).total_s)


def weights_bandwidth_fraction(measured: dict, hw: HardwareCard) -> float | None:
    """The matrix-vector read microbenchmark's rate over `hw`'s bandwidth, at most 1: the better of its two runs
    (before and after the grid), a bus ceiling being only ever under-measured. None where it was not measured."""
    reads = [measured[k]["mv_read_bytes_per_s"] for k in ("bandwidth", "bandwidth_repeat")
             if "mv_read_bytes_per_s" in measured.get(k, {})]
    return min(1.0, max(reads) / hw.memory.bandwidth_bytes_per_s) if reads else None


def fit_records(records: list[StepRecord], hw: HardwareCard, store: CardStore, on_step=None,
                gemv_max_tokens: int | None = None, activation_cost: dict[str, float] | None = None,
                graph_limits: dict[str, float] | None = None,
                weights_memory: float | None = None) -> tuple[Efficiency, dict]:
    """Fit on the fitting split; report errors on both splits per phase. Returns (efficiency, summary).
    `gemv_max_tokens`, where the measured runtime states it, is taken as given; else tried on a grid;
    `activation_cost` (measured) is kept as given. `graph_limits` (graph_max_batch, graph_max_context), where the
    engine replayed decode steps as CUDA graphs: their launch cost is fitted apart (`graph_kernel_overhead_s`).
    `weights_memory`, a measured fraction of the card's bandwidth, holds `memory` and `memory_gemv` there unfitted."""
    cache: dict = {}
    fit = [r for r in records if not is_held_out(r)]
    held = [r for r in records if is_held_out(r)]

    def predict(rows):
        return lambda eff: [predict_step(r, hw, eff, store, cache) for r in rows]

    params = CPU_PARAMS if hw.kind == "cpu" else GPU_PARAMS
    measured = [r.seconds for r in fit]
    candidates = (gemv_max_tokens,) if gemv_max_tokens else GEMV_MAX_TOKENS
    base = replace(expected_efficiency(hw), activation_cost=activation_cost or {})
    starts = FIT_STARTS
    if weights_memory:
        base = replace(base, memory=weights_memory, memory_gemv=weights_memory)
        params = tuple(p for p in params if p not in PINNED_BY_WEIGHTS_MEMORY)
        starts = tuple(s for s in FIT_STARTS if not set(s) & set(PINNED_BY_WEIGHTS_MEMORY))
    if "token_overhead_s" in params and not base.token_overhead_s:  # from 0 the multiplicative search never moves
        base = replace(base, token_overhead_s=TOKEN_OVERHEAD_START_S)
    if graph_limits and any(r.mode == "graphs" for r in fit):  # starts at the ordinary launch cost
        base = replace(base, graph_kernel_overhead_s=base.kernel_overhead_s, **graph_limits)
        params = params + ("graph_kernel_overhead_s",)
    fits = [fit_efficiency(predict(fit), measured, replace(base, gemv_max_tokens=rows, **start),
                           params, on_step=on_step) for rows in candidates for start in starts]
    eff = min(fits, key=lambda e: fit_loss(predict(fit), measured, e))
    summary = {}
    for label, rows in (("fit", fit), ("held_out", held)):
        preds = predict(rows)(eff)
        summary[label] = {phase: error_summary([p for p, r in zip(preds, rows) if r.phase == phase],
                                               [r.seconds for r in rows if r.phase == phase])
                          for phase in ("prefill", "decode")}
        summary[label + "_points"] = [{**r.to_dict(), "predicted": p} for r, p in zip(rows, preds)]
    return eff, summary


def calibrated_card(base: HardwareCard, eff: Efficiency, summary: dict, measured: dict, meta: dict,
                    name: str | None = None, measured_peaks: dict | None = None) -> dict:
    """The base card with measured figures where the device was measured, and a `calibration` section."""
    data = base.model_dump(mode="json", by_alias=True, exclude_none=True)
    if name:
        data["name"] = name
    if measured_peaks:  # a CPU host: its card's peaks and bandwidth are what was measured
        data["peak_flops"] = measured_peaks
        data["memory"]["bandwidth"] = measured["bandwidth"]["read_bytes_per_s"]
        data["sources"] = {**data.get("sources", {}), "memory.bandwidth": "measured by roofline calibrate (read)",
                           "peak_flops": "measured by roofline calibrate (best GEMM shape per dtype)"}
        data.setdefault("uncertain", {}).pop("peak_flops", None)
        data["uncertain"].pop("memory.bandwidth", None)
    names = GPU_PARAMS + ("gemv_max_tokens", "compute_fp32", "compute_bf16", "compute_int8", "compute_fp4")
    if eff.graph_kernel_overhead_s is not None:  # the graph launch cost and the steps it applies to
        names += ("graph_kernel_overhead_s", "graph_max_batch", "graph_max_context")
    values = {k: getattr(eff, k) for k in names if getattr(eff, k) is not None}
    data["calibration"] = {
        **meta, "date": dt.date.today().isoformat(), "values": values, "microbench": measured,
        **({"activation_cost": eff.activation_cost} if eff.activation_cost else {}),
        "residuals": {k: v for k, v in summary.items() if not k.endswith("_points")},
        "points": {"fit": len(summary["fit_points"]), "held_out": len(summary["held_out_points"])},
        # every measured step, enough to refit offline: fit_records([StepRecord.from_dict(m) for m in ...])
        "measurements": [{**_measurement(r), "split": split, "predicted_s": r["predicted"]}
                         for split in ("fit", "held_out") for r in summary[f"{split}_points"]],
    }
    data.pop("efficiency", None)
    return data


def _measurement(point: dict) -> dict:
    """What the card keeps of a measured step: the shape and its seconds (device and torch are the card's meta)."""
    keep = {k: point[k] for k in ("card", "layers", "vocab", "dtype", "phase", "batch", "context", "new_tokens",
                                  "seconds")}
    # where the engine timed it: device seconds (CUDA events; = seconds on the CPU) and the decode mode it ran in
    return {**keep, **{k: point[k] for k in ("device_seconds", "mode") if point.get(k) not in (None, "")}}


ENGINE_RUNTIME = "roofline-engine"


def engine_profile(profile: RuntimeProfile, card: dict) -> dict:
    """The micro-engine's runtime profile with the calibrated `card`'s fit as its entry for that card
    (`devices.<card name>`): "this hardware under the roofline engine" in the same place as every other runtime.
    `card` is what `calibrated_card` returns; entries for other devices are kept."""
    data = profile.model_dump(mode="json", exclude_none=True)
    cal = card["calibration"]
    keep = set(EfficiencyOverrides.model_fields) - {"compute_by_format"}
    data.setdefault("devices", {})[card["name"]] = {k: v for k, v in cal["values"].items() if k in keep}
    data["sources"] = {**data["sources"], f"devices.{card['name']}":
                       f"roofline calibrate on {cal.get('date', '?')} on {cal.get('device', '?')} "
                       f"({cal['points']['fit']} engine steps fitted, {cal['points']['held_out']} held out)"}
    return data


def write_card_atomic(directory: Path, data: dict, kind: str = "hardware") -> Path:
    """Write <kind>/<name>.yaml (hardware card or runtime profile) under `directory` atomically (the one safe-write
    helper): an interrupted run leaves the old file intact, a planted temporary file or symlink is never followed."""
    target = Path(directory) / kind / f"{data['name']}.yaml"
    return write_atomic(target, yaml.safe_dump(data, sort_keys=False, width=120), "--out")
