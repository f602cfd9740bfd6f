"""Refit stored GPU calibrations without the GPU and judge each fit on what it never saw (docs/calibration.md,
"NVIDIA H100 with CUDA graphs").

    PYTHONPATH=. python benchmarks/gpu_refit.py [benchmarks/data/h100-2026-11-26]   # ~4 min on 2 cores
    PYTHONPATH=. python benchmarks/gpu_refit.py benchmarks/data/h100-2026-11-26b \
        --engine-runs benchmarks/data/h100-2026-11-26b/flash-attention   # ~8 min
    PYTHONPATH=. python benchmarks/gpu_refit.py benchmarks/data/h200-2026-11-27   # ~10 min

Each run folder holds what `benchmarks/cuda_calibrate.sh` wrote on the GPU: the calibrated card
(`calibrated-<card>.yaml`, every measured step in `calibration.measurements`), `validate_quick.json` (validate's
default engine shapes, served for real) and `engine_<model>_b<batch>.json` (whole cards served by the engine). The
steps are refitted two ways: one launch cost for every step, and the launches of CUDA-graph-replayed decode steps
fitted apart (`graph_kernel_overhead_s`, what `calibrate` does now); then the validate points and the whole-card
runs are predicted from each fit.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml
from roofline.engine.core.records import StepRecord

from roofline.calibrate.calibration import calibrated_card, fit_records, weights_bandwidth_fraction
from roofline.calibrate.validation import predict_served, summarize_points
from roofline.cards.hardware import HardwareCard
from roofline.cards.store import CardStore
from roofline.perf.efficiency import expected_efficiency
from roofline.perf.request import predict
from roofline.perf.workload import make_workload
from roofline.sizing.reduce import reduce_card

DATA = Path(__file__).parent / "data" / "h100-2026-11-26"
LIMITS = ("graph_max_batch", "graph_max_context")  # where the engine replayed graphs, as the stored card says
PREDICTORS = {"one launch cost": False, "graph launches apart": True}  # label -> graph launches fitted apart
VALIDATE_VOCAB = 3000  # validate's --vocab default


def card_file(run: Path) -> Path:
    """The calibrated card a run folder holds (`calibrated-<card>.yaml`, one per run)."""
    found = sorted(run.glob("calibrated-*.yaml"))
    if len(found) != 1:
        raise SystemExit(f"{run}: expected one calibrated-<card>.yaml, found {len(found)}")
    return found[0]


def refit(card_file: Path, st: CardStore, graphs_apart: bool) -> tuple[HardwareCard, dict]:
    data = yaml.safe_load(card_file.read_text())
    return refit_records(stored_records(data["calibration"]), data, st, graphs_apart)


def stored_records(cal: dict) -> list[StepRecord]:
    """The steps a calibrated card's `calibration` section keeps (`from_dict` ignores `split`, `predicted_s`)."""
    return [StepRecord.from_dict(m) for m in cal["measurements"]]


def refit_records(records: list[StepRecord], data: dict, st: CardStore,
                  graphs_apart: bool = True) -> tuple[HardwareCard, dict]:
    """Fit `records` as `calibrate` does, on the datasheet card the calibrated card `data` was made from, with its
    measured figures; returns the refitted card and the fit's summary."""
    cal = data["calibration"]
    limits = {k: cal["values"][k] for k in LIMITS} if graphs_apart else None
    base = st.hardware(data["name"])
    eff, summary = fit_records(records, base, st, gemv_max_tokens=cal["values"].get("gemv_max_tokens"),
                               activation_cost=cal.get("activation_cost"), graph_limits=limits,
                               weights_memory=None if base.kind == "cpu" else
                               weights_bandwidth_fraction(cal["microbench"], base))
    meta = {k: cal[k] for k in ("device", "torch", "driver", "dtype", "grid") if k in cal}
    return HardwareCard.model_validate(calibrated_card(base, eff, summary, cal["microbench"], meta)), summary


def validate_errors(run: Path, hw: HardwareCard, st: CardStore) -> dict:
    """Median absolute % error of TTFT and ITL over validate's points, predicted on `hw`."""
    eff, points = expected_efficiency(hw), []
    for p in json.loads((run / "validate_quick.json").read_text())["points"]:
        card = reduce_card(st.model(p["card"]), p["layers"], VALIDATE_VOCAB)
        got = predict_served(card, hw, p["batch"], p["prompt"], p["output"], "bf16", eff)
        points.append({**p, "predicted_ttft": got.ttft_s, "predicted_itl": got.itl_s})
    summary = summarize_points(points)
    return {k: summary[k]["median_ape_pct"] for k in ("ttft", "itl")}


def whole_errors(run: Path, hw: HardwareCard, st: CardStore) -> dict:
    """Signed % error of TTFT and ITL of each whole-card engine run, predicted on `hw`."""
    out = {}
    for f in sorted(run.glob("engine_*.json")):
        d = json.loads(f.read_text())
        wl = make_workload(prompt_tokens=d["prompt_tokens"], output_tokens=d["output_tokens"], batch=d["batch"],
                           quant="bf16", kv_quant="bf16")
        p = predict(st.model(d["model"]), hw, wl)
        m = d["measured"]
        out[f"{d['model']} b{d['batch']}"] = (100 * (p.ttft_s / m["ttft_s"] - 1), 100 * (p.itl_s / m["itl_s"] - 1))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", nargs="?", type=Path, default=DATA, help="a folder of run folders")
    ap.add_argument("--engine-runs", type=Path, help="whole-card runs for a run folder that has none (another "
                    "run's folder on the same GPU)")
    args = ap.parse_args()
    root, st = args.root, CardStore()
    print("| measurements | predictor | calibration held-out prefill / decode | validate TTFT / ITL median | "
          "whole cards TTFT / ITL |")
    print("|---|---|---|---|---|")
    for run in sorted(p for p in root.iterdir() if p.is_dir()):
        for label, apart in PREDICTORS.items():
            hw, summary = refit(card_file(run), st, apart)
            held = summary["held_out"]
            val = validate_errors(run, hw, st)
            engine_runs = run if any(run.glob("engine_*.json")) or not args.engine_runs else args.engine_runs
            whole = "; ".join(f"{k} {t:+.0f}% / {i:+.0f}%" for k, (t, i) in whole_errors(engine_runs, hw, st).items())
            print(f"| {run.name} | {label} | {held['prefill']['median_ape_pct']:.1f}% / "
                  f"{held['decode']['median_ape_pct']:.1f}% | {val['ttft']:.1f}% / {val['itl']:.1f}% | {whole} |",
                  flush=True)


if __name__ == "__main__":
    main()
