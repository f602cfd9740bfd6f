"""Fit efficiency parameters to measurements: coordinate descent on a multiplicative grid, minimising the mean
|log(predicted / measured)|. Used by `roofline calibrate` (engine steps) and benchmarks/fit_defaults.py
(published rows). Pure numpy: no torch."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable, Iterable, Sequence

import numpy as np

from roofline.perf.efficiency import FLOORS, FRACTIONS, Efficiency

STEPS = (2.0, 1.4, 1.18, 1.07, 1.02, 1.005)  # pattern search: multiplicative steps, coarse to fine
# where an unset (0) parameter starts: a routing concentration of 0 means uniform, the limit of large values, so the
# search comes down from nearly uniform (128 experts top-8 over 64 tokens: 123 touched, uniform 126)
UNSET_START = {"routing_concentration": 100.0}


def log_errors(predict: Callable[[Efficiency], Sequence[float]], measured: Sequence[float], eff: Efficiency) -> np.ndarray:
    pred = np.asarray(predict(eff), dtype=float)
    return np.log(np.maximum(pred, 1e-30) / np.asarray(measured, dtype=float))


def fit_loss(predict: Callable[[Efficiency], Sequence[float]], measured: Sequence[float], eff: Efficiency) -> float:
    """What the fit minimises: the mean |log(predicted / measured)|."""
    return float(np.mean(np.abs(log_errors(predict, measured, eff))))


def fit_efficiency(predict: Callable[[Efficiency], Sequence[float]], measured: Sequence[float], start: Efficiency,
                   params: Iterable[str], max_sweeps: int = 6, on_step: Callable[[], None] | None = None) -> Efficiency:
    """Pattern search over `params`: try each value x step and / step, keep improvements, shrink the step when a
    sweep finds none. Fractions stay in [0.02, 1]; seconds and tiles stay positive."""
    params = list(params)

    def loss(eff: Efficiency) -> float:
        return fit_loss(predict, measured, eff)

    best, best_loss = start, loss(start)
    for step in STEPS:
        for _ in range(max_sweeps):
            improved = False
            for name in params:
                current = getattr(best, name)
                if current is None:  # an unset per-kind refinement starts from its general value
                    current = best.memory if name.startswith("memory") else best.compute if name.startswith("compute") \
                        else best.attention if name == "scan" else 1e-6
                current = current or UNSET_START.get(name, 1e-6 if name.endswith("_s") else 1.0)
                for value in (current * step, current / step):
                    if name in FRACTIONS + FLOORS and not 0.02 <= value <= 1.0:
                        continue
                    trial = replace(best, **{name: value})
                    trial_loss = loss(trial)
                    if trial_loss < best_loss - 1e-9:
                        best, best_loss, improved = trial, trial_loss, True
                if on_step:
                    on_step()
            if not improved:
                break
    return best


def error_summary(pred: Sequence[float], measured: Sequence[float]) -> dict:
    """n, median and p90 absolute % error, and bias (median signed % error)."""
    pred, measured = np.asarray(pred, float), np.asarray(measured, float)
    if not len(pred):
        return {"n": 0, "median_ape_pct": math.nan, "p90_ape_pct": math.nan, "bias_pct": math.nan}
    err = 100.0 * (pred - measured) / measured
    return {"n": int(len(err)), "median_ape_pct": float(np.median(np.abs(err))),
            "p90_ape_pct": float(np.percentile(np.abs(err), 90)), "bias_pct": float(np.median(err))}
