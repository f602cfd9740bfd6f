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
GPUs) and runtimes/ollama.yaml. Judged elsewhere: MoE prompts, whose experts see 16-64 tokens a step, never enter it.
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

from roofline.calibrate.published import predict_row, read_rows, runtime_of
from roofline.importers import open_store

SWEEPS = Path(__file__).resolve().parent / "data" / "mmq_microbatch_sweeps.csv"
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
    """(efficiency, loss) minimising the sweep's mean |log error| at one half point (golden section in log space)."""
    f = lambda e: sweep_loss(rows, store, fmt, e, half_tokens)  # noqa: E731
    a, b = math.log(0.02), math.log(1.0)
    g = (math.sqrt(5) - 1) / 2
    for _ in range(30):
        c, d = b - g * (b - a), a + g * (b - a)
        a, b = (a, d) if f(math.exp(c)) < f(math.exp(d)) else (c, b)
    e = math.exp((a + b) / 2)
    return e, f(e)


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
    print(f"gemm_half_tokens (median over {len(halves)} sweeps): {statistics.median(halves):.0f} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
