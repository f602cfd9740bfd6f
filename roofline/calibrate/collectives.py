"""Fit the predictor's all-reduce cost to measured all-reduce times: the link efficiency and the per-hop latency.

The predictor times an all-reduce of M bytes over tp GPUs (perf/parallel.ring_all_reduce, perf/timing._add_link) as
    t = hops x latency_s + link_bytes / (bandwidth_per_direction x link),  (link_bytes, hops) = ring_all_reduce(M, tp)
which is linear in link_bytes: an intercept (hops x latency) and a slope (1 / achieved link bytes/s). A least-squares
line through the measurements, weighted by 1/t so small messages count as much as large ones, gives both.
"""

from __future__ import annotations

import numpy as np

from roofline.errors import RooflineError
from roofline.perf.parallel import ring_all_reduce


def fit_all_reduce(points: list[dict], tp: int, bandwidth_bytes_per_s: float) -> dict:
    """points: [{"bytes": message bytes, "seconds": all-reduce time}] over several sizes; bandwidth: the card's
    per-direction link rate. Returns link (achieved / card rate, capped at 1), latency_s per hop, the achieved
    bytes/s and each point's fitted seconds."""
    if len({p["bytes"] for p in points}) < 2:
        raise RooflineError("the all-reduce fit needs measurements at two message sizes or more")
    link_bytes, hops = np.array([ring_all_reduce(p["bytes"], tp)[0] for p in points]), ring_all_reduce(1.0, tp)[1]
    t = np.array([p["seconds"] for p in points])
    w = 1.0 / t  # relative errors: [1, x] rows and t, each scaled by 1/t
    (intercept, slope), *_ = np.linalg.lstsq(np.stack([w, link_bytes * w], axis=1), t * w, rcond=None)
    if intercept < 0:  # no measurable latency: a line through the origin
        intercept, slope = 0.0, float(np.sum(link_bytes * t * w * w) / np.sum((link_bytes * w) ** 2))
    if slope <= 0:
        raise RooflineError("all-reduce times did not grow with the message size; measure larger messages")
    achieved = 1.0 / slope
    fitted = intercept + slope * link_bytes
    return {"link": float(min(achieved / bandwidth_bytes_per_s, 1.0)), "latency_s": float(intercept / hops),
            "achieved_bytes_per_s": float(achieved), "tp": tp,
            "points": [{**p, "fitted_s": float(f)} for p, f in zip(points, fitted)],
            "median_ape_pct": float(np.median(np.abs(fitted - t) / t) * 100)}


def with_collectives(data: dict, fit: dict, bandwidth_bytes_per_s: float, measured_link: bool) -> dict:
    """A calibrated card's data with the fitted link efficiency (calibration values) and per-hop latency
    (interconnect.latency). `measured_link`: the card had no link, so its rate is the one measured here (a CPU's
    ranks exchange through memory: the copy bandwidth)."""
    ic = data.setdefault("interconnect", {})
    ic["latency"] = fit["latency_s"]
    sources = data.setdefault("sources", {})
    sources["interconnect.latency"] = f"fitted by roofline calibrate --tp {fit['tp']} to measured all-reduce times"
    if measured_link:
        ic.update({"kind": "shared-memory", "bandwidth_per_direction": bandwidth_bytes_per_s,
                   "gpus_per_node": max(ic.get("gpus_per_node", 1), fit["tp"])})
        sources["interconnect.bandwidth_per_direction"] = "measured by roofline calibrate (memory copy bandwidth)"
    data["calibration"]["values"]["link"] = fit["link"]
    data["calibration"]["all_reduce"] = fit
    return data
