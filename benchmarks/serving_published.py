"""Published rows measured under load, predicted by the serving simulator and by the static-batch predictor.

Rows of benchmarks/data/*.csv whose metric is a serving latency or throughput (ttft_ms, itl_ms, tpot_ms,
agg_output_tok_s) and whose load is stated: an open-loop request rate ("QPS=16", "request rate 4 req/s"), all
requests at once ("QPS=INF" / batch `max` with a stated request count), or a batch of N requests (batch column N:
one round of N clients). Each row runs through its own runtime profile (engine text and date -> runtime@version,
as `validate --published` reads it): the profile's scheduler limits and efficiency. The static predictor is
`roofline.calibrate.published.predict_row` with the same profile. Prints one markdown table (docs/serving.md).
Rows whose prompt/output lengths are not stated (ShareGPT runs) are listed as skipped."""

import csv
import math
import re
import sys
from pathlib import Path

import numpy as np

from roofline.calibrate.published import cards_of, predict_row, runtime_of
from roofline.calibrate.row_conditions import CLOSED_LOOP, REQUEST_RATE, requests_sent
from roofline.cards.store import CardStore
from roofline.errors import RooflineError
from roofline.perf.efficiency import expected_efficiency
from roofline.perf.serving.policy import policy_for
from roofline.perf.serving.run import build_fleet
from roofline.perf.serving.simulator import ClosedLoop, simulate
from roofline.perf.serving.workload import Lengths, Request, open_loop
from roofline.perf.workload import make_workload

DATA = Path(__file__).parent / "data"
FILES = ("published_train.csv", "published_collected.csv", "published_extra.csv")
METRICS = ("ttft_ms", "itl_ms", "tpot_ms", "agg_output_tok_s")
DEFAULT_REQUESTS = 500  # an open-loop row that does not state its request count


def load_of(row: dict) -> tuple[str, float, int] | str:
    """('open', rate, requests) | ('burst', 0, requests) | ('batch', N clients, requests: a closed loop's stated count,
    else N), or why the load is not stated."""
    notes, batch = row.get("notes", ""), row["batch"].strip().lower()
    count = requests_sent(row)
    if re.search(r"QPS\s*=\s*INF|infinite request rate", notes, re.I) or batch == "max":
        return ("burst", 0.0, count) if count else "all requests at once, but how many is not stated"
    rate = REQUEST_RATE.search(notes)
    if rate:
        return "open", float(rate.group(1) or rate.group(2)), count or DEFAULT_REQUESTS
    if batch.isdigit() and int(batch) > 1:  # N clients; the requests a closed loop states, else one round
        return "batch", float(batch), count if count and CLOSED_LOOP.search(notes) else int(batch)
    return "no load stated (batch 1 or empty, no request rate)"


def simulated(row: dict, st: CardStore, load: tuple[str, float, int]) -> float:
    card, hw, gpus = cards_of(row, st)
    choice = runtime_of(row, st)
    tp = int(row["tp"] or 1)
    quant = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8"}.get(row["weight_quant"].strip().lower())
    kv = "fp8" if row["kv_dtype"].lower().startswith("fp8") else "bf16"
    wl = make_workload(quant=quant, kv_quant=kv, tp=tp)
    fleet = build_fleet(card, hw, wl, policy_for(choice), replicas=max(gpus // tp, 1), router="least_tokens",
                        eff=expected_efficiency(hw, choice))
    isl, osl = int(row["isl"]), int(row["osl"])
    kind, rate, n = load
    if kind == "open":
        r = simulate(fleet, open_loop(rate, n, Lengths("fixed", isl), Lengths("fixed", osl), seed=0),
                     shared_prefixes=False)
    elif kind == "burst":
        r = simulate(fleet, [Request(0.0, isl, osl)] * n, shared_prefixes=False)
    else:  # lengths drawn +/- the stated variance ("~20k input tokens (±15% variance)"): clients fall out of step
        spread = re.search(r"±\s*(\d+)\s*%", row.get("notes", ""))
        f = int(spread.group(1)) / 100 if spread else 0.0
        draw = [Lengths("uniform", x * (1 - f), x * (1 + f)) if f else Lengths("fixed", x) for x in (isl, osl)]
        rng = np.random.default_rng(0)
        sizes = [Request(0.0, int(p), int(o)) for p, o in zip(draw[0].draw(rng, n), draw[1].draw(rng, n))]
        r = simulate(fleet, closed=ClosedLoop(int(rate), sizes), shared_prefixes=False)
    s = r.summary()
    stat = "p50" if "median" in row["notes"].lower() else "mean"
    metric = row["metric"]
    if metric == "agg_output_tok_s":
        return s["output_tok_s"]
    key = {"ttft_ms": "ttft_s", "itl_ms": "itl_s", "tpot_ms": "tpot_s"}[metric]
    return s[key][stat] * 1e3


def main() -> None:
    st = CardStore()
    rows = [r for f in FILES for r in csv.DictReader((DATA / f).open()) if r["metric"] in METRICS]
    out, skipped = [], []
    for row in rows:
        load = load_of(row)
        if isinstance(load, str):
            continue  # not a row measured under a stated load
        if not row["isl"].strip() or not row["osl"].strip():
            skipped.append((row["id"], "prompt/output lengths not stated (ShareGPT)"))
            continue
        try:
            sim = simulated(row, st, load)
            static = predict_row(row, st, runtime=runtime_of(row, st)).predicted
        except (RooflineError, ValueError) as err:
            skipped.append((row["id"], str(err)))
            continue
        out.append((row, load, float(row["value"]), sim, static))
    print("| row | hardware | model | engine (profile) | load | metric | measured | simulated | error | static | error |")
    print("|---|---|---|---|---|---|---:|---:|---:|---:|---:|")
    errs_sim, errs_static = [], []
    for row, (kind, rate, n), measured, sim, static in out:
        load = {"open": f"Poisson {rate:g} req/s, {n} requests", "burst": f"{n} at once",
                "batch": f"{rate:g} clients, {n} requests"}[kind]
        e_sim = (sim - measured) / measured
        e_static = (static - measured) / measured if static else math.nan  # None: a row under a rate or closed loop
        errs_sim.append(abs(e_sim))
        errs_static.append(abs(e_static))
        choice = runtime_of(row, st)
        print(f"| {row['id']} | {row['hw_card']} x{row['gpus'] or 1} | {row['model_card']} {row['weight_quant']} | "
              f"{row['engine'][:28]} ({choice.label if choice else 'generic'}) | {load}, {row['isl']}->{row['osl']} | "
              f"{row['metric']} | {measured:,.4g} | {sim:,.4g} | {e_sim:+.0%} | "
              + (f"{static:,.4g} | {e_static:+.0%} |" if static else "— | — |"))
    if out:
        print(f"\n{len(out)} rows: median |error| simulated {np.median(errs_sim):.0%}, static batch "
              f"{np.nanmedian(errs_static):.0%}; mean |error| simulated {np.mean(errs_sim):.0%}, static "
              f"{np.nanmean(errs_static):.0%}")
    for rid, why in skipped:
        print(f"- {rid} skipped: {why}", file=sys.stdout)


if __name__ == "__main__":
    main()
