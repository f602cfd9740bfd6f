"""Calibration without torch: fit the efficiency model to engine step records and write a calibrated card.

Records come from engine.bench (one per measured step). The fit runs on the predictor's own operator graph
(`timed_step`), on a fitting split; the held-out split is only ever predicted.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import tempfile
from dataclasses import replace
from pathlib import Path

import yaml

from roofline.calibrate.fit import error_summary, fit_efficiency, fit_loss
from roofline.cards.hardware import HardwareCard
from roofline.cards.store import CardStore
from roofline.perf.efficiency import Efficiency, expected_efficiency
from roofline.perf.ops import Step
from roofline.perf.request import timed_step
from roofline.perf.workload import Workload
from roofline.sizing.reduce import reduce_card

CPU_PARAMS = ("memory", "memory_gemv", "memory_kv", "compute", "gemm_half_tokens", "gemm_floor", "attention",
              "kernel_overhead_s", "kernels_per_expert", "step_overhead_s")
# a row threshold, so tried on a grid (one pattern search per value) rather than stepped by the pattern search
GEMV_MAX_TOKENS = (1, 4, 8, 16, 32)
GPU_PARAMS = CPU_PARAMS + ("gemm_min_tokens",)
HELD_OUT_SHARE = 0.3
# Where the fit starts besides the card's defaults: the GEMM ramp trades `compute` against `gemm_half_tokens` (a
# lower plateau reached sooner fits mid-size prefill nearly as well), and from the CPU defaults alone 3 of 7 quick
# calibrations on a 2-core Sapphire Rapids VM settled at compute 0.48-0.62 / half 37-55 tokens (14-33% TTFT error on
# fresh shapes) where the other 4 found 0.85-0.90 / 90-110 tokens (3-6%). The start with the least loss wins.
RAMP_STARTS = ({}, {"compute": 0.95, "gemm_half_tokens": 128.0}, {"compute": 0.5, "gemm_half_tokens": 32.0})
# what the card keeps of each measured step (enough to refit it offline: `fit_records(card.calibration[...])`)
MEASUREMENT_KEYS = ("card", "layers", "vocab", "dtype", "phase", "batch", "context", "new_tokens", "seconds")
# kept where the records have them: device seconds (CUDA events; = seconds on the CPU) and the decode mode
TIMING_KEYS = ("device_seconds", "mode")


def engine_quant(dtype: str, weights: str | None = None) -> str:
    """The engine's formats as a roofline --quant: every weight in `dtype`; with weight-only int8/int4 the linear
    layers (lm_head included) in that format while MoE expert banks and the embedding stay in `dtype`."""
    if weights is None:
        return f"default={dtype}"
    return f"default={weights},lm_head={weights},experts={dtype},embedding={dtype}"


def point_key(r: dict) -> str:
    return f"{r['card']}|{r['layers']}|{r['dtype']}|{r['phase']}|{r['batch']}|{r['context']}|{r['new_tokens']}"


def is_held_out(r: dict) -> bool:
    """A fixed ~30% of points, chosen by a hash of the point (not by order), that the fit never sees."""
    return int(hashlib.sha256(point_key(r).encode()).hexdigest(), 16) % 100 < HELD_OUT_SHARE * 100


def predict_step(r: dict, hw: HardwareCard, eff: Efficiency, store: CardStore, cache: dict) -> float:
    """Predicted seconds of the measured step `r` on `hw` at efficiency `eff`."""
    key = (r["card"], r["layers"], r["vocab"])
    if key not in cache:
        cache[key] = reduce_card(store.model(r["card"]), int(r["layers"]), int(r["vocab"]))
    card = cache[key]
    n = int(r["new_tokens"]) if r["phase"] == "prefill" else 1
    wl = Workload(prompt_tokens=max(n, 1), quant=engine_quant(r["dtype"]), kv_quant=r["dtype"])
    step = Step(r["phase"], n, int(r["batch"]), int(r["context"]))
    return float(timed_step(card, hw, step, wl, eff).total_s)


def fit_records(records: list[dict], hw: HardwareCard, store: CardStore, on_step=None,
                gemv_max_tokens: int | None = None) -> tuple[Efficiency, dict]:
    """Fit on the fitting split; report errors on both splits per phase. Returns (efficiency, summary).
    `gemv_max_tokens`, where the measured runtime states it, is taken as given; else tried on a grid."""
    cache: dict = {}
    fit = [r for r in records if not is_held_out(r)]
    held = [r for r in records if is_held_out(r)]

    def predict(rows):
        return lambda eff: [predict_step(r, hw, eff, store, cache) for r in rows]

    params = CPU_PARAMS if hw.kind == "cpu" else GPU_PARAMS
    measured = [r["seconds"] for r in fit]
    candidates = (gemv_max_tokens,) if gemv_max_tokens else GEMV_MAX_TOKENS
    fits = [fit_efficiency(predict(fit), measured, replace(expected_efficiency(hw), gemv_max_tokens=rows, **start),
                           params, on_step=on_step) for rows in candidates for start in RAMP_STARTS]
    eff = min(fits, key=lambda e: fit_loss(predict(fit), measured, e))
    summary = {}
    for label, rows in (("fit", fit), ("held_out", held)):
        preds = predict(rows)(eff)
        summary[label] = {phase: error_summary([p for p, r in zip(preds, rows) if r["phase"] == phase],
                                               [r["seconds"] for r in rows if r["phase"] == phase])
                          for phase in ("prefill", "decode")}
        summary[label + "_points"] = [{**r, "predicted": p} for r, p in zip(rows, preds)]
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
    values = {k: getattr(eff, k) for k in names if getattr(eff, k) is not None}
    data["calibration"] = {
        **meta, "date": dt.date.today().isoformat(), "values": values, "microbench": measured,
        "residuals": {k: v for k, v in summary.items() if not k.endswith("_points")},
        "points": {"fit": len(summary["fit_points"]), "held_out": len(summary["held_out_points"])},
        "measurements": [{**{k: r[k] for k in MEASUREMENT_KEYS}, **{k: r[k] for k in TIMING_KEYS if k in r},
                          "split": split, "predicted_s": r["predicted"]}
                         for split in ("fit", "held_out") for r in summary[f"{split}_points"]],
    }
    data.pop("efficiency", None)
    return data


def write_card_atomic(directory: Path, data: dict) -> Path:
    """Write hardware/<name>.yaml under `directory` atomically: an interrupted run leaves the old card intact."""
    target = Path(directory) / "hardware" / f"{data['name']}.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(data, f, sort_keys=False, width=120)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target
