"""Fit the default efficiencies (roofline/perf/efficiency.py DEFAULTS) to published measurements and print the error.

    python benchmarks/fit_defaults.py [--csv benchmarks/data/published_train.csv]

One parameter set per default group (discrete GPUs, NVIDIA SoC, Apple). Objective: mean |log(pred / measured)|
over the group's rows (robust to the few suspicious rows, e.g. Ollama's transcribed prefill figures H143-H149).
Coordinate descent on a multiplicative grid; prints the fitted values to paste into DEFAULTS, then the
per-row and per-metric errors with the fitted defaults.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from roofline.calibrate.fit import fit_efficiency, log_errors
from roofline.calibrate.published import predict_row, read_rows, summarize
from roofline.cards.hardware import default_key
from roofline.cards.store import CardStore
from roofline.perf.efficiency import DEFAULTS, Efficiency

CSV = Path(__file__).resolve().parent / "data" / "published_train.csv"
FRACTIONS = ("memory", "compute", "compute_int8", "compute_fp4", "attention")
# Left out of the fit (still reported): Ollama's transcribed Spark prefill figures. The 70B row (H149, 1,911 tok/s
# = 2 x 70.6e9 x 1911 = 270 TFLOP/s) exceeds the GB10's measured int8 peak (214 TOPS, hardware/dgx-spark.yaml), and PUBLISHED.md
# flags H147; llama.cpp's own pp2048 rows (H001-H013) are the primary prefill data for the Spark.
NOT_FITTED = {"H139", "H141", "H143", "H145", "H147", "H149"}
SECONDS = ("kernel_overhead_s", "step_overhead_s")


def fit_group(rows, store, start: Efficiency) -> Efficiency:
    measured = [float(r["value"]) for r in rows]

    def predict(eff: Efficiency) -> list[float]:
        return [predict_row(r, store, eff).predicted or m for r, m in zip(rows, measured)]

    return fit_efficiency(predict, measured, start, FRACTIONS + SECONDS)


def loss(rows, store, eff: Efficiency) -> float:
    measured = [float(r["value"]) for r in rows]
    return float(np.mean(np.abs(log_errors(lambda e: [predict_row(r, store, e).predicted or m
                                                     for r, m in zip(rows, measured)], measured, eff))))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", type=Path, default=CSV)
    args = ap.parse_args()
    store = CardStore()
    rows = read_rows(args.csv)
    groups: dict[str, list[dict]] = {}
    for row in rows:
        if row["id"] not in NOT_FITTED:
            groups.setdefault(default_key(store.hardware(row["hw_card"])), []).append(row)
    fitted = {}
    for key, group in sorted(groups.items()):
        start = DEFAULTS[key]
        fitted[key] = fit_group(group, store, start)
        print(f"{key}: {len(group)} rows, mean |log err| {loss(group, store, start):.3f} -> "
              f"{loss(group, store, fitted[key]):.3f}")
        print("   ", {k: round(v, 8) for k in FRACTIONS + SECONDS if (v := getattr(fitted[key], k)) is not None})
    preds = []
    for row in rows:
        eff = fitted[default_key(store.hardware(row["hw_card"]))]
        preds.append(predict_row(row, store, eff))
    print(f"\n{'row':6} {'hardware':15} {'model':30} {'metric':17} {'measured':>10} {'predicted':>10} {'err%':>7}")
    for p in preds:
        pred = "skipped" if p.predicted is None else f"{p.predicted:10.1f}"
        err = "" if p.error_pct is None else f"{p.error_pct:+7.1f}"
        mark = "*" if p.row_id in NOT_FITTED else " "
        print(f"{p.row_id:5}{mark} {p.hw:15} {p.model:30} {p.metric:17} {p.measured:10.1f} {pred:>10} {err:>7} {p.skipped or ''}")
    print("(* = not used in the fit)")
    shipped = [predict_row(row, store) for row in rows]
    for label, batch in (("shipped DEFAULTS", shipped), ("this run's refit", preds)):
        print(f"\nper metric with {label} (all rows):")
        for metric, s in summarize(batch).items():
            print(f"  {metric:17} n={s['n']:3}  median |err| {s['median_ape_pct']:5.1f}%  p90 {s['p90_ape_pct']:5.1f}%  "
                  f"bias {s['bias_pct']:+5.1f}%")


if __name__ == "__main__":
    main()
