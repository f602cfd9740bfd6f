"""Replay stored GPU serving runs through the simulator without the GPU: the same traces, re-simulated on a
calibrated card (the run's own, or another run's), against what the engine measured; and the simulator's step
times on the engine's own logged steps (docs/serving.md, "`validate --serving` on an H100").

    PYTHONPATH=. python benchmarks/serving_replay.py benchmarks/data/h100-2026-11-26b/flash-attention \
        [--card benchmarks/data/h100-2026-11-26b/batched-chunks/calibrated-h100-sxm.yaml] [--refit]

--refit: the card's stored steps refitted by today's `calibrate` fit first (benchmarks/gpu_refit.py; ~1 min a card).
--matrix: every run's card refitted, each predicting every run's traces (docs/calibration.md, "The weights' bandwidth
measured, not fitted"; the eight H200 runs: ~12 min).

Each run folder holds `serving.json` (validate --serving's two-layer cut) and, where it ran, `serving_whole.json`
(whole qwen2.5-7b), as `benchmarks/serving_whole.py` writes them with every step logged.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import yaml
from gpu_refit import card_file, refit

from roofline.calibrate.serving_validation import errors, predicted_step_s, simulated, simulator_setup, step_kind, trace
from roofline.cards.hardware import HardwareCard
from roofline.cards.store import CardStore
from roofline.sizing.memory import BLOCK_TOKENS
from roofline.sizing.reduce import reduce_card

KEYS = ("ttft_p50_s", "ttft_p90_s", "itl_p50_s", "itl_p90_s", "output_tok_s")


def replay_errors(path: Path, hw: HardwareCard, st: CardStore) -> list[dict]:
    """Per stored trace: each metric's error re-simulated on `hw` (KEYS), its name, and the simulated / measured - 1
    of every logged step by kind."""
    d = json.loads(path.read_text())
    spec, rows = d["spec"], d["traces"]
    card = reduce_card(st.model(spec["model"]), spec["layers"], spec["vocab"])
    # the stored runs before kv_blocks was recorded had a 1 GB pool that 64 requests never filled: None sizes it
    setup = simulator_setup(card, hw, spec, d["dtype"], BLOCK_TOKENS, rows[0].get("kv_blocks"))
    rate = next(r["rate_per_s"] for r in rows if r["clients"] is None)
    out = []
    for r in rows:
        predicted, _ = simulated(setup, trace(spec, rate), r["clients"])
        kinds: dict[str, list[float]] = {}
        for host_s, _device_s, mode, chunks in r["steps"].get("log", []):
            kinds.setdefault(step_kind(chunks), []).append(predicted_step_s(setup.timer, chunks) / host_s - 1)
        out.append({**errors(predicted, r["measured"]), "trace": r["trace"], "steps": kinds})
    return out


def replay(path: Path, hw: HardwareCard, st: CardStore) -> list[str]:
    """Markdown rows: per trace, each metric's error re-simulated on `hw`, and the step-time ratio by kind."""
    out = []
    for err in replay_errors(path, hw, st):
        steps = ", ".join(f"{k} {100 * float(np.median(v)):+.0f}% (n={len(v)})" for k, v in err["steps"].items())
        out.append(f"| {path.parent.name}/{path.stem} | {err['trace']} | "
                   + " | ".join(f"{err[k]:+.1f}%" for k in KEYS) + f" | {steps} |")
    return out


TARGET_PCT = {"output_tok_s": 10.0}  # issue 15's targets: throughput within 10%, TTFT and ITL within 15%


def matrix(runs: list[Path], st: CardStore) -> None:
    """Every run's card refitted by today's fit, each predicting every run's traces: per metric the median |error|
    and how many traces meet the target, over all pairs and over each card's own traces."""
    pairs: dict[str, list[list[float]]] = {"all pairs": [], "own card": []}
    for card_run in runs:
        hw, summary = refit(card_file(card_run), st, graphs_apart=True)
        v = hw.calibration["values"]
        print(f"{card_run}: memory {v['memory']:.3f}, graph launch {v['graph_kernel_overhead_s'] * 1e6:.1f} us, "
              f"held-out decode {summary['held_out']['decode']['median_ape_pct']:.1f}%", flush=True)
        for run in runs:
            for served in sorted(run.glob("serving*.json")):
                for err in replay_errors(served, hw, st):
                    row = [abs(err[k]) for k in KEYS]
                    pairs["all pairs"].append(row)
                    if run == card_run:
                        pairs["own card"].append(row)
    print("| traces | " + " | ".join(KEYS) + " |\n|---|" + "---:|" * len(KEYS))
    for label, rows in pairs.items():
        a = np.array(rows)
        cells = [f"{np.median(a[:, i]):.1f}% ({int((a[:, i] <= TARGET_PCT.get(k, 15.0)).sum())}/{len(a)})"
                 for i, k in enumerate(KEYS)]
        print(f"| {label} | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--card", type=Path, help="a calibrated card (default: each run's own)")
    ap.add_argument("--refit", action="store_true", help="refit the card's stored steps with today's fit first")
    ap.add_argument("--matrix", action="store_true", help="every run's card, refitted, on every run's traces: "
                    "median |error| (traces within the target)")
    args = ap.parse_args()
    st = CardStore()
    if args.matrix:
        return matrix(args.runs, st)
    print("| run | trace | TTFT p50 | TTFT p90 | ITL p50 | ITL p90 | output tok/s | step time, median (simulated / "
          "measured - 1) |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for run in args.runs:
        card = args.card or card_file(run)
        hw = refit(card, st, graphs_apart=True)[0] if args.refit else \
            HardwareCard.model_validate(yaml.safe_load(card.read_text()))
        for served in sorted(run.glob("serving*.json")):
            print("\n".join(replay(served, hw, st)), flush=True)


if __name__ == "__main__":
    main()
