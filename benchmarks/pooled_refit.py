"""Fits of several calibrations of one machine, judged on what none of them saw (docs/calibration.md, "NVIDIA H200, a
whole-depth card and three calibrations on one machine"):

    PYTHONPATH=. python benchmarks/pooled_refit.py benchmarks/data/h200-2026-11-27-deep \
        --runs first second third --judge first --drop llama-3.2-3b:28   # ~25 min on 2 cores

For each run, its own steps refitted, with and (with --drop) without a card's rows; then the runs pooled step by step,
each step at its fastest and its median over the runs (the fastest of passes spread in time, as `calibrate` keeps
the faster of two passes a grid apart). Each fit is judged on its held-out steps, and on the --judge run's validate
points, whole-card engine runs and served traces (benchmarks/serving_replay.py).
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace
from itertools import combinations
from pathlib import Path

import yaml
from gpu_refit import card_file, refit_records, stored_records, validate_errors, whole_errors
from serving_replay import KEYS, replay_errors

from roofline.cards.store import CardStore


def pooled(records: list[list], how) -> list:
    """Step by step over runs measured on the same grid: `how` (min, median) of host and device seconds."""
    out = []
    for same in zip(*records):
        assert len({r.key for r in same}) == 1, "the runs measured different grids"
        out.append(replace(same[0], seconds=float(how([r.seconds for r in same])),
                           device_seconds=float(how([r.device_seconds or r.seconds for r in same]))))
    return out


def judge(label: str, records: list, data: dict, run: Path, st: CardStore) -> str:
    """A markdown row: the fit's bandwidth fraction, held-out, validate, whole cards and served traces."""
    hw, summary = refit_records(records, data, st)
    held, val = summary["held_out"], validate_errors(run, hw, st)
    whole = "; ".join(f"{k} {t:+.0f}/{i:+.0f}" for k, (t, i) in whole_errors(run, hw, st).items())
    served = [abs(e[k]) for f in sorted(run.glob("serving*.json")) for e in replay_errors(f, hw, st) for k in KEYS]
    memory = hw.calibration["values"]["memory"]  # the weights' bandwidth fraction the fit settled at
    return (f"| {label} | {memory:.2f} | {held['prefill']['median_ape_pct']:.1f}% / "
            f"{held['decode']['median_ape_pct']:.1f}% | {val['ttft']:.1f}% / {val['itl']:.1f}% | {whole} | "
            f"{statistics.median(served):.1f}% ({max(served):.1f}%) |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", type=Path, help="a folder of run folders, each with a calibrated-<card>.yaml")
    ap.add_argument("--runs", nargs="+", required=True, help="run folders under root (calibrations of one machine)")
    ap.add_argument("--judge", required=True, help="the run whose validate, whole-card and served runs judge")
    ap.add_argument("--drop", help="CARD:LAYERS: also fit each run without that card's rows")
    args = ap.parse_args()
    st = CardStore()
    cards = {r: yaml.safe_load(card_file(args.root / r).read_text()) for r in args.runs}
    records = {r: stored_records(d["calibration"]) for r, d in cards.items()}
    run, data = args.root / args.judge, cards[args.judge]
    print("| fit on | memory | held out prefill / decode | validate TTFT / ITL | whole cards TTFT/ITL % | served "
          "|error|, median (max) |")
    print("|---|---:|---|---|---|---|")
    for r in args.runs:
        print(judge(r, records[r], cards[r], run, st), flush=True)
        if args.drop:
            card, layers = args.drop.split(":")
            kept = [x for x in records[r] if not (x.card == card and x.layers == int(layers))]
            print(judge(f"{r} without {args.drop}", kept, cards[r], run, st), flush=True)
    for k in range(2, len(args.runs) + 1):
        for group in combinations(args.runs, k):
            print(judge(f"fastest of {', '.join(group)}", pooled([records[r] for r in group], min), data, run, st),
                  flush=True)
    print(judge(f"median of {', '.join(args.runs)}", pooled([records[r] for r in args.runs], statistics.median),
                data, run, st))


if __name__ == "__main__":
    main()
