"""How fast llama.cpp's MMQ prompt kernels reach their large-GEMM rate as the micro-batch grows: `gemm_half_tokens`.

    PYTHONPATH=. python benchmarks/mmq_ramp.py

An MMQ thread block loads and dequantizes a tile of weights, then multiplies it with a tile of up to 128 tokens; at a
small micro-batch the weight work is shared by few tokens. The predictor models this as a GEMM of M tokens reaching
M / (M + gemm_half_tokens) of its large-GEMM efficiency. Three published llama-bench sweeps of one dense 8B model over
`-ub` 16..512 on an RTX 4090 (benchmarks/data/mmq_microbatch_sweeps.csv, the PR columns of llama.cpp PRs #7676,
#7860 and #8278, mid-2024 MMQ on int8 tensor cores) fix it: for each sweep and each candidate half point, the
format's efficiency is fitted, and the half point with the lowest mean |log error| over the sweep wins. The
predictor's own per-step costs (the shipped llama.cpp profile's launch cost per kernel) stay in, so the ramp holds only
what they leave. The median over the sweeps is the `gemm_half_tokens` of runtimes/llama.cpp.yaml (b3216 on, NVIDIA
GPUs) and runtimes/ollama.yaml. Judged elsewhere: MoE prompts, whose experts see 16-64 tokens a step, never enter it,
and the 2026 sweeps of llama.cpp PR #24127 (benchmarks/data/mmq_microbatch_heldout.csv, partial tables; a format
roofline does not size, IQ2_S, among them), for which the half point each point implies is printed from the ramp alone:
a point at M tokens running at q of the -ub 512 rate implies h = 512 M (q - 1) / (M - 512 q).
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
from pathlib import Path

from roofline.calibrate.published import predict_row, read_rows, runtime_of
from roofline.calibrate.runtime_fit import golden
from roofline.importers import open_store

SWEEPS = Path(__file__).resolve().parent / "data" / "mmq_microbatch_sweeps.csv"
HELD_OUT = Path(__file__).resolve().parent / "data" / "mmq_microbatch_heldout.csv"
REFERENCE_UB = 512  # tokens: the held-out sweeps' rates are read relative to -ub 512
SCOPE = "nvidia-gpu"
HALF_POINTS = [float(h) for h in range(0, 257, 4)]  # tokens


def with_ramp(choice, fmt: str, efficiency: float, half_tokens: float):
    """The shipped profile with `fmt`'s fitted efficiency and the ramp's half point set on SCOPE."""
    prof = choice.profile
    fitted = prof.fitted[SCOPE].model_copy(update={"gemm_half_tokens": half_tokens,
                                                   "compute_by_format": {fmt: efficiency}})
    return choice.model_copy(update={"profile": prof.model_copy(update={"fitted": {SCOPE: fitted}})})


def sweep_loss(rows: list[dict], store, fmt: str, efficiency: float, half_tokens: float) -> float:
    total = 0.0
    for row in rows:
        p = predict_row(row, store, runtime=with_ramp(runtime_of(row, store), fmt, efficiency, half_tokens))
        total += abs(math.log(p.predicted / p.measured))
    return total / len(rows)


def best_efficiency(rows: list[dict], store, fmt: str, half_tokens: float) -> tuple[float, float]:
    """(efficiency, loss) minimising the sweep's mean |log error| at one half point (the fitter's golden section)."""
    e = golden(lambda v: sweep_loss(rows, store, fmt, v, half_tokens), 0.02, 1.0)
    return e, sweep_loss(rows, store, fmt, e, half_tokens)


def held_out(half_tokens: float) -> None:
    """Each held-out point's rate relative to -ub 512: measured, the ramp's, and the half point it implies."""
    with HELD_OUT.open(newline="") as f:
        points = list(csv.DictReader(f))
    ref = {(p["gpu"], p["weight"]): float(p["tok_s"]) for p in points if int(p["ub"]) == REFERENCE_UB}
    ramp = lambda m: m / (m + half_tokens)  # noqa: E731
    print(f"held out (not fitted on), {HELD_OUT.name}: rate at -ub M over -ub {REFERENCE_UB}")
    for p in (p for p in points if int(p["ub"]) != REFERENCE_UB):
        m, q = int(p["ub"]), float(p["tok_s"]) / ref[(p["gpu"], p["weight"])]
        predicted = ramp(m) / ramp(REFERENCE_UB)
        implied = REFERENCE_UB * m * (q - 1) / (m - REFERENCE_UB * q)
        print(f"    {p['gpu']:9s} {p['weight']:7s} -ub {m:4d}  measured {q:5.3f}  ramp {predicted:5.3f} "
              f"({predicted / q - 1:+.1%})  implied half point {implied:5.1f} tokens")


def main() -> int:
    store = open_store([])
    rows = read_rows(SWEEPS)
    by_source: dict[str, list[dict]] = {}
    for row in rows:
        by_source.setdefault(row["source"], []).append(row)
    halves = []
    print(f"{'sweep':60s} {'fmt':7s} {'half (tok)':>10s} {'eff':>6s} {'|log err|':>9s} {'no ramp':>8s}")
    for source, members in by_source.items():
        fmt = members[0]["weight_quant"]
        fits = [(h, *best_efficiency(members, store, fmt, h)) for h in HALF_POINTS]
        h, eff, loss = min(fits, key=lambda t: t[2])
        halves.append(h)
        print(f"{source[:60]:60s} {fmt:7s} {h:10.0f} {eff:6.3f} {loss:9.3f} {fits[0][2]:8.3f}")
        for row in members:
            p = predict_row(row, store, runtime=with_ramp(runtime_of(row, store), fmt, eff, h))
            print(f"    {row['engine'][-8:]:>8s}  measured {p.measured:8.0f}  predicted {p.predicted:8.0f}  "
                  f"{p.predicted / p.measured - 1:+.1%}")
    half = statistics.median(halves)
    print(f"gemm_half_tokens (median over {len(halves)} sweeps): {half:.0f} tokens")
    held_out(half)
    return 0


if __name__ == "__main__":
    sys.exit(main())
