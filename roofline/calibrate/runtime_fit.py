"""Fit runtime profiles' free efficiencies to published rows, and judge them leave-one-source-out.

A fit group is one runtime on one hardware scope (vendor-kind: nvidia-gpu, nvidia-soc, apple-soc, amd-gpu, ...).
Its free parameters: the bandwidth fraction `memory` (set by latency-bound rows: decode and ITL at batch <= 8) and
one large-GEMM efficiency per weight format (`compute_by_format`, set by prefill, TTFT and large-batch rows). Each is
fitted by golden-section search on log(value) minimising the mean of min(|log(predicted / measured)|, 1) over the
group's rows (a row 2.7x off counts no more than one 2.7x off: rows beyond the ceiling cannot drag a fit), two
rounds of coordinate descent. Leave-one-source-out: for each source document, the groups its rows fall in are refitted
on every other document's rows and its rows predicted; a group with no other rows keeps the profile's priors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from roofline.calibrate.fit import error_summary
from roofline.calibrate.published import RowPrediction, _quant_text, predict_row, runtime_of
from roofline.cards.formats import weight_format
from roofline.cards.runtime import EfficiencyOverrides, RuntimeChoice
from roofline.cards.store import CardStore
from roofline.errors import RooflineError

LATENCY_BOUND_BATCH = 8  # decode at up to this many sequences streams the weights (memory-bound on every card here)
DECODE_METRICS = ("decode_tok_s", "agg_decode_tok_s", "itl_ms", "tpot_ms")
BOUNDS = (0.01, 1.0)  # fractions of the datasheet peak searched
ROUNDS = 2
GOLDEN_STEPS = 18
ERROR_CAP = 1.0  # |log error| beyond e (2.7x) counts as e


@dataclass
class FitRow:
    row: dict
    choice: RuntimeChoice
    scope: str  # vendor-kind of the row's hardware
    param: str  # "memory" or "format:<weight format>"
    source: str


@dataclass
class GroupFit:
    runtime: str
    scope: str
    values: dict[str, float] = field(default_factory=dict)  # "memory" / "format:<fmt>" -> fitted value
    rows: list[str] = field(default_factory=list)  # row ids fitted on
    sources: list[str] = field(default_factory=list)


def fit_rows(rows: list[dict], store: CardStore) -> list[FitRow]:
    """The rows a runtime profile can be fitted on: a mapped runtime, cards roofline knows, a metric it predicts."""
    out = []
    for row in rows:
        choice = _unfitted(runtime_of(row, store))
        pred = predict_row(row, store, runtime=choice) if choice else None
        if pred is None or pred.predicted is None:
            continue
        hw = store.hardware(pred.hw)
        out.append(FitRow(row, choice, f"{hw.vendor.lower()}-{hw.kind}", _param(row), pred.source))
    return out


def _unfitted(choice: RuntimeChoice | None) -> RuntimeChoice | None:
    """The choice with its profile's stored fitted values removed: a fit (and a held-out prediction) starts from the
    profile's documented priors, never from values fitted on the rows being judged."""
    if choice is None:
        return None
    return choice.model_copy(update={"profile": choice.profile.model_copy(update={"fitted": {}, "fitted_from": {}})})


def _param(row: dict) -> str:
    """Which free parameter a row informs: latency-bound decode -> memory; the rest -> its weight format's kernels."""
    batch = row.get("batch", "").strip()
    small = batch.isdigit() and int(batch) <= LATENCY_BOUND_BATCH
    if row["metric"] in DECODE_METRICS and (small or not batch):
        return "memory"
    try:
        return "format:" + weight_format(_quant_text(row["weight_quant"])).name
    except RooflineError:
        return "memory"


def _with(choice: RuntimeChoice, scope: str, values: dict[str, float]) -> RuntimeChoice:
    """The choice with `values` as the profile's fitted entry for `scope`."""
    prof = choice.profile
    by_format = {k.split(":", 1)[1]: v for k, v in values.items() if k.startswith("format:")}
    entry = EfficiencyOverrides(memory=values.get("memory"), compute_by_format=by_format)
    fitted = {**prof.fitted, scope: entry}
    return choice.model_copy(update={"profile": prof.model_copy(update={"fitted": fitted,
                                                                        "fitted_from": {**prof.fitted_from, scope: "fit"}})})


def _loss(rows: list[FitRow], store: CardStore, values: dict[str, float]) -> float:
    total = 0.0
    for r in rows:
        p = predict_row(r.row, store, runtime=_with(r.choice, r.scope, values))
        total += min(abs(math.log(p.predicted / p.measured)), ERROR_CAP) if p.predicted else ERROR_CAP
    return total / max(len(rows), 1)


def _golden(f, lo: float, hi: float) -> float:
    """argmin of f over [lo, hi] in log space."""
    a, b = math.log(lo), math.log(hi)
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(math.exp(c)), f(math.exp(d))
    for _ in range(GOLDEN_STEPS):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(math.exp(d))
    return math.exp((a + b) / 2)


def fit_group(rows: list[FitRow], store: CardStore) -> dict[str, float]:
    """Coordinate descent over the group's parameters (each informed by at least one row)."""
    params = sorted({r.param for r in rows})
    values: dict[str, float] = {}
    for _ in range(ROUNDS):
        for p in params:
            values[p] = _golden(lambda v: _loss(rows, store, {**values, p: v}), *BOUNDS)
    return values


def fit_all(rows: list[FitRow], store: CardStore, only: set[tuple[str, str]] | None = None) -> dict[tuple, GroupFit]:
    """Fit every (runtime, scope) group present in `rows` (or only those in `only`)."""
    groups: dict[tuple, list[FitRow]] = {}
    for r in rows:
        groups.setdefault((r.choice.profile.name, r.scope), []).append(r)
    fits = {}
    for key, members in sorted(groups.items()):
        if only is not None and key not in only:
            continue
        fits[key] = GroupFit(*key, fit_group(members, store), [m.row["id"] for m in members],
                             sorted({m.source for m in members}))
    return fits


def predict_fitted(r: FitRow, store: CardStore, fits: dict[tuple, GroupFit]) -> RowPrediction:
    key = (r.choice.profile.name, r.scope)
    choice = _with(r.choice, r.scope, fits[key].values) if key in fits else r.choice
    return predict_row(r.row, store, runtime=choice)


def leave_one_source_out(rows: list[FitRow], store: CardStore) -> list[tuple[FitRow, RowPrediction, RowPrediction]]:
    """(row, generic prediction, profile prediction fitted without the row's source) for every row."""
    out = []
    for source in sorted({r.source for r in rows}):
        held = [r for r in rows if r.source == source]
        keys = {(r.choice.profile.name, r.scope) for r in held}
        fits = fit_all([r for r in rows if r.source != source], store, keys)
        for r in held:
            out.append((r, predict_row(r.row, store), predict_fitted(r, store, fits)))
    return out


def loso_table(results: list[tuple[FitRow, RowPrediction, RowPrediction]], by_hardware: bool = False) -> list[dict]:
    """Per runtime (x hardware) and metric: n, sources, before (generic) and after (profiles), median / p90 |err|
    and signed bias."""
    groups: dict[tuple, list] = {}
    for r, before, after in results:
        key = (r.choice.profile.name, before.hw if by_hardware else "", r.row["metric"])
        groups.setdefault(key, []).append((r, before, after))
    table = []
    for (runtime, hw, metric), items in sorted(groups.items()):
        measured = [b.measured for _, b, _ in items]
        table.append({"runtime": runtime, "hardware": hw, "metric": metric, "n": len(items),
                      "sources": len({r.source for r, _, _ in items}),
                      "before": error_summary([b.predicted for _, b, _ in items], measured),
                      "after": error_summary([a.predicted for _, _, a in items], measured)})
    return table


def id_ranges(ids: list[str]) -> str:
    """'H001, H002, H003, H010' -> 'H001-H003, H010'."""
    def split(i):
        head = i.rstrip("0123456789")
        return head, int(i[len(head):]) if i[len(head):] else -1
    parts, run = [], []
    for i in sorted(ids, key=split):
        if run and split(i)[0] == split(run[-1])[0] and split(i)[1] == split(run[-1])[1] + 1:
            run.append(i)
            continue
        if run:
            parts.append(run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [i]
    if run:
        parts.append(run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ", ".join(parts)
