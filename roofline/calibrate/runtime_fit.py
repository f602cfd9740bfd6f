"""Fit runtime profiles' free efficiencies to published rows, and judge them leave-one-source-out.

A fit group is one runtime on one hardware scope (vendor-kind: nvidia-gpu, nvidia-soc, apple-soc, amd-gpu, ...).
Its free parameters: the bandwidth fraction `memory` (set by latency-bound rows: decode and ITL at batch <= 8),
one large-GEMM efficiency per weight format (`compute_by_format`, set by prefill, TTFT and large-batch rows) and the
fixed cost per MoE expert in matrix-matrix steps (`expert_gemm_overhead_s`, set by MoE rows too narrow for a tile per
expert); with enough decode rows also the bandwidth one compute unit draws in a matrix-vector kernel and the launch
cost per kernel (EXTRA_PARAMS). Each is
fitted by golden-section search on log(value) minimising the mean of min(|log(predicted / measured)|, 1) over the
group's rows (a row 2.7x off counts no more than one 2.7x off: rows beyond the ceiling cannot drag a fit), two
rounds of coordinate descent. Where a profile's version entry says kernels changed (`refits`), policy "versions"
fits those parameters again per version range (fitted.<scope>@<version>), a range with too few rows keeping the
runtime-wide value. Leave-one-source-out: for each source document, the groups its rows fall in are refitted on every
other document's rows and its rows predicted; a group with no other rows keeps the profile's priors.
"""

from __future__ import annotations

import math
import multiprocessing as mp
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

from roofline.calibrate.published import RowPrediction, predict_row
from roofline.calibrate.quantized_fallback import quantized_fallback
from roofline.calibrate.row_params import EXPERT_PARAM, FitRow, prefixed
from roofline.cards.runtime import EfficiencyOverrides, RuntimeChoice
from roofline.cards.versions import version_key
from roofline.cards.store import CardStore

BOUNDS = (0.01, 1.0)  # fractions of the datasheet peak searched
# Fitted beside `memory` on the same latency-bound decode rows, each kept only where it lowers the loss by
# MIN_EXTRA_GAIN over the profile's prior (a group whose loss is flat in it ships none):
# - the bytes/s one compute unit draws in a matrix-vector kernel (Efficiency.gemv_unit_bandwidth_bytes_per_s),
#   searched over 4-64 GB/s per unit, the range of datasheet bandwidth per SM/CU/core of the bundled cards (L40S 6.1
#   GB/s per SM ... B200 52);
# - the launch cost per kernel (kernel_overhead_s), searched over 0.5-30 us around the generic GPU default (13.2 us,
#   fitted on 2024 rows; CUDA-graph builds launch for less)
UNIT_PARAM = "gemv_unit_bandwidth_bytes_per_s"  # each extra parameter is named as its Efficiency field
EXTRA_PARAMS = {UNIT_PARAM: (4e9, 6.4e10), "kernel_overhead_s": (5e-7, 3e-5)}  # name -> search bounds
MIN_EXTRA_GAIN = 0.005  # mean |log error| (half a percent)
# ... and only in a group with at least ten such rows per extra parameter it fits: fitted on MLX's 10 Apple rows
# they took MLX's leave-one-source-out decode p90 from 99% to 149%; on llama.cpp's 56 NVIDIA rows they took
# llama.cpp's from 41% to 35%
ROWS_PER_EXTRA = 10
MIN_EXTRA_ROWS = ROWS_PER_EXTRA * len(EXTRA_PARAMS)
# Properties of the kernels' code rather than of the runtime around them: a runtime running another's kernels
# (`kernels_from`: Ollama vendors ggml) takes them from that runtime whatever its own policy for their kind, and a
# version range fitted on its own rows holds them at the runtime-wide value (a range has too few decode rows for both
# extra parameters, and few MoE prompt rows; what changes between ranges is how kernels are launched: llama.cpp's
# CUDA graphs)
KERNEL_PARAMS = (UNIT_PARAM, EXPERT_PARAM)
# search bounds of the fixed cost per touched MoE expert per layer: 0.1-100 us, from below one kernel launch (the
# generic GPU default 13.2 us) to several
EXPERT_BOUNDS = (1e-7, 1e-4)
# ... fitted only where MoE rows of this many documents inform it: the cost per expert depends on the experts' size
# and count, and one document's single model sets it anywhere (fitted on one gpt-oss-20b row on an M1 Pro it ran to
# the 100 us bound and read a Qwen3-30B-A3B prompt on an M2 Ultra 3x slow)
MIN_EXPERT_SOURCES = 2
FIELD_PARAMS = (*EXTRA_PARAMS, EXPERT_PARAM)  # fitted values stored under their Efficiency field's name
ROUNDS = 2
GOLDEN_STEPS = 18
ERROR_CAP = 1.0  # |log error| beyond e (2.7x) counts as e


MIN_RANGE_ROWS = 3  # a version range is fitted on its own only with this many rows ...
MIN_RANGE_SOURCES = 2  # ... from at least this many source documents; else it keeps the runtime-wide fit
# A fitted value ships only when the rows informing it (its parameter on its runtime, hardware scope and version range)
# come from this many documents: with one, leave-one-source-out never judged it (held out, nothing is left to fit it
# on), so its figures would be unjudged
MIN_SHIPPED_SOURCES = 2
POLICIES = ("versions", "runtime", "none")  # most specific first; benchmarks/fit_runtimes.py picks one per runtime


@dataclass
class GroupFit:
    runtime: str
    scope: str  # "nvidia-gpu", or "nvidia-gpu@b3216" for one version range
    values: dict[str, float] = field(default_factory=dict)  # "memory" / "format:<fmt>" -> fitted value
    rows: list[str] = field(default_factory=list)  # row ids fitted on
    sources: list[str] = field(default_factory=list)
    note: str = ""  # how the value was obtained when not fitted on `rows` alone


def _with(choice: RuntimeChoice, scope: str, values: dict[str, float]) -> RuntimeChoice:
    """The choice with `values` as the profile's (only) fitted entry for `scope`."""
    prof = choice.profile
    entry = EfficiencyOverrides(memory=values.get("memory"), compute=values.get("compute"),
                                compute_by_format=prefixed(values, "format"),
                                compute_quantized=prefixed(values, "quantized"),
                                **{p: values.get(p) for p in FIELD_PARAMS})
    fitted = {**prof.fitted, scope: entry}
    return choice.model_copy(update={"profile": prof.model_copy(update={"fitted": fitted,
                                                                        "fitted_from": {**prof.fitted_from, scope: "fit"}})})


def _row_error(r: FitRow, store: CardStore, values: dict[str, float]) -> float:
    """|log(predicted / measured)| of one row under `values`, capped at ERROR_CAP."""
    predicted = _predicted(r, store, values)
    return min(abs(math.log(predicted / float(r.row["value"]))), ERROR_CAP) if predicted else ERROR_CAP


def _loss(rows: list[FitRow], store: CardStore, values: dict[str, float]) -> float:
    return sum(_row_error(r, store, values) for r in rows) / max(len(rows), 1)


def _uninformed(rows: list[FitRow], store: CardStore, values: dict[str, float]) -> list[str]:
    """The fitted values whose every own row stays beyond ERROR_CAP: the capped loss is flat in such a value (rows
    10x off at any efficiency), so the search ends anywhere in its bounds, and shipping that end point would move
    other rows' predictions on no evidence."""
    own: dict[str, list[FitRow]] = {}
    for r in rows:
        own.setdefault(r.param, []).append(r)
    return [p for p, members in own.items()
            if p in values and all(_row_error(r, store, values) >= ERROR_CAP for r in members)]


def golden(f, lo: float, hi: float) -> float:
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


_CACHE: dict[tuple, dict[str, float]] = {}  # (row ids, fixed values) -> fit: LOSO passes refit the same row sets


def fit_group(rows: list[FitRow], store: CardStore, fixed: dict[str, float] | None = None,
              held: tuple[str, ...] = ()) -> dict[str, float]:
    """Coordinate descent over the parameters the rows inform (`free_params`, less the extra ones `held`), the
    others held at `fixed`; each of EXTRA_PARAMS is dropped again (back to the prior, the rest refitted without it)
    unless it lowers the loss by MIN_EXTRA_GAIN, and a value no row of its own comes within ERROR_CAP of is dropped
    (`_uninformed`)."""
    fixed = fixed or {}
    key = (tuple(sorted(r.row["id"] for r in rows)), tuple(sorted(fixed.items())), held)
    if key not in _CACHE:
        params = free_params(rows, held)
        values = _descend(rows, store, fixed, params)
        for p in [p for p in EXTRA_PARAMS if p in values]:
            rest = [q for q in params if q != p]
            without = _descend(rows, store, fixed, rest)
            if _loss(rows, store, {**fixed, **without}) - _loss(rows, store, {**fixed, **values}) < MIN_EXTRA_GAIN:
                values, params = without, rest
        for p in _uninformed(rows, store, {**fixed, **values}):
            values.pop(p, None)  # a value held at `fixed` is not this fit's to drop
        _CACHE[key] = values
    return dict(_CACHE[key])


def _descend(rows: list[FitRow], store: CardStore, fixed: dict[str, float], params: list[str]) -> dict[str, float]:
    """ROUNDS of coordinate descent over `params`, each a golden-section search within its bounds: the cost per
    expert on every row, the others on the rows not informing it (narrow MoE rows would drag a format's efficiency
    down to cover what the cost per expert stands for)."""
    values: dict[str, float] = {}
    dense = [r for r in rows if r.param != EXPERT_PARAM] or rows
    for _ in range(ROUNDS):
        for p in params:
            bounds = EXPERT_BOUNDS if p == EXPERT_PARAM else EXTRA_PARAMS.get(p, BOUNDS)
            base = {**fixed, **values}
            on = _moved_by(rows if p == EXPERT_PARAM else dense, store, base, p, bounds)
            values[p] = golden(lambda v: _loss(on, store, {**base, p: v}), *bounds)
    return values


def _moved_by(rows: list[FitRow], store: CardStore, values: dict[str, float], param: str,
              bounds: tuple[float, float]) -> list[FitRow]:
    """The rows whose prediction `param` moves (at either bound or the log-middle of `bounds`): the loss is a mean
    over rows, so the others add a constant and the search's choice is the same without predicting them 18 times
    (a format's efficiency moves only that format's prompt rows)."""
    lo, hi = bounds
    probes = [{**values, param: v} for v in (lo, math.sqrt(lo * hi), hi)]
    return [r for r in rows if len({_predicted(r, store, v) for v in probes}) > 1]


def _predicted(r: FitRow, store: CardStore, values: dict[str, float]) -> float | None:
    return predict_row(r.row, store, runtime=_with(r.choice, r.scope, values)).predicted


def free_params(rows: list[FitRow], held: tuple[str, ...] = ()) -> list[str]:
    """The parameters `rows` inform: each row's own not `held` (the cost per expert only with MoE rows of
    MIN_EXPERT_SOURCES documents), and with ROWS_PER_EXTRA `memory` rows per extra parameter the EXTRA_PARAMS not
    `held` (the same latency-bound decode rows set them: the per-unit limit binds only on cards with much bandwidth
    per unit, the launch cost weighs most on small models)."""
    params = sorted({r.param for r in rows} - set(held))
    if len({r.source for r in rows if r.param == EXPERT_PARAM}) < MIN_EXPERT_SOURCES:
        params = [p for p in params if p != EXPERT_PARAM]
    extra = [p for p in EXTRA_PARAMS if p not in held]
    memory_rows = sum(r.param == "memory" for r in rows)
    return params + extra if extra and memory_rows >= ROWS_PER_EXTRA * len(extra) else params


def informed(rows: list[FitRow], min_sources: int) -> list[FitRow]:
    """The rows whose parameter is informed by at least `min_sources` documents among `rows` (one group or range)."""
    docs: dict[str, set[str]] = {}
    for r in rows:
        docs.setdefault(r.param, set()).add(r.source)
    return [r for r in rows if len(docs[r.param]) >= min_sources]


def _group_fits(runtime: str, scope: str, members: list[FitRow], store: CardStore, policy: str,
                min_sources: int = 1) -> list[GroupFit]:
    """One runtime on one hardware scope: the runtime-wide fit, and under policy "versions" one entry per version
    range of the parameters whose kernels changed. A range fits on its own rows when it has MIN_RANGE_ROWS from
    MIN_RANGE_SOURCES documents (the others held at the runtime-wide values); otherwise it keeps the runtime-wide
    values, written out so that an older range's entry never leaks into it. A parameter whose rows (in the group, or
    in a range) come from fewer than `min_sources` documents is not fitted there (`informed`)."""
    members = informed(members, min_sources)
    if not members:
        return []
    parent = GroupFit(runtime, scope, quantized_fallback(fit_group(members, store), members, store),
                      [m.row["id"] for m in members], sorted({m.source for m in members}))
    fits = [parent]
    split = [m for m in members if m.range]
    if policy != "versions" or not split:
        return fits
    params = free_params(split)
    for rng in sorted({m.range for m in split}, key=version_key):
        in_range = [m for m in split if m.range == rng]
        sub = informed(in_range, min_sources)
        sources = sorted({m.source for m in sub})
        own = len(sub) >= MIN_RANGE_ROWS and len(sources) >= MIN_RANGE_SOURCES
        values = fit_group(sub, store, fixed=parent.values, held=KERNEL_PARAMS) if own else {}
        entry = {**{p: parent.values[p] for p in params if p in parent.values}, **values}
        entry = quantized_fallback(entry, in_range, store)
        left_out = len(in_range) - len(sub)
        dropped = f" ({left_out} on values fewer than {min_sources} documents inform)" if left_out else ""
        note = "" if own else (f"the runtime-wide fit: this range has {len(in_range)} rows{dropped} from "
                               f"{len({m.source for m in in_range})} documents, fewer than {MIN_RANGE_ROWS} from "
                               f"{MIN_RANGE_SOURCES}")
        fits.append(GroupFit(runtime, f"{scope}@{rng}", entry, [m.row["id"] for m in (sub if own else members)],
                             sources if own else parent.sources, note))
    return fits


KINDS = ("memory", "compute_by_format")  # the two kinds of fitted value; a policy is chosen per runtime, hardware
# scope and kind (a profile's `fit_policy`: kind -> policy for the runtime, and scope -> {kind -> policy} over it)


def kind_of(param: str) -> str:
    return "memory" if param == "memory" or param in EXTRA_PARAMS else "compute_by_format"


def policy_of(choice: RuntimeChoice, policies: dict | None, kind: str, scope: str | None = None) -> str:
    """The fit policy of one kind of value for a row's runtime on a hardware scope: `policies[runtime]` (a policy,
    or kind -> policy with scope -> {kind -> policy} over it), else the profile's stored `fit_policy`, else
    "versions" ("kernels_from" for a runtime running another's kernels)."""
    prof = choice.profile
    policy = scope_policy((policies or {}).get(prof.name, dict(prof.fit_policy) or None), kind, scope)
    if prof.kernels_from:
        return "none" if policy == "none" else "kernels_from"
    return policy or "versions"


def scope_policy(given, kind: str, scope: str | None) -> str | None:
    """One kind's policy on one scope from `given`: a policy, or kind -> policy with scope -> {kind -> policy} over
    it; None where it names none."""
    if not isinstance(given, dict):
        return given
    scoped = given.get(scope) if scope else None
    return scoped.get(kind, given.get(kind)) if isinstance(scoped, dict) else given.get(kind)


def fit_all(rows: list[FitRow], store: CardStore, policies: dict | None = None,
            only: set[tuple[str, str]] | None = None, min_sources: int = 1) -> dict[tuple, GroupFit]:
    """Fit every (runtime, scope) group present in `rows` (or only those in `only`) under the most specific policy
    any kind of its runtime has (`policy_of`): keys (runtime, scope) and, per version range, (runtime,
    scope@version). Runtimes that run another's kernels (`kernels_from`) are not fitted here, nor parameters whose rows
    come from fewer than `min_sources` documents; rows marked unfitted (`FitRow.fitted`) never enter a fit."""
    groups: dict[tuple, list[FitRow]] = {}
    for r in (r for r in rows if r.fitted):
        groups.setdefault((r.choice.profile.name, r.scope), []).append(r)
    fits = {}
    for (runtime, scope), members in sorted(groups.items()):
        kinds = {policy_of(members[0].choice, policies, k, scope) for k in KINDS}
        policy = next((p for p in POLICIES if p in kinds), "none")
        if (only is not None and (runtime, scope) not in only) or policy == "none" or "kernels_from" in kinds:
            continue
        for g in _group_fits(runtime, scope, members, store, policy, min_sources):
            fits[(runtime, g.scope)] = g
    return fits


def values_for(fits: dict[tuple, GroupFit], runtime: str, scope: str, version: str | None,
               kinds: dict[str, str] | None = None) -> dict[str, float]:
    """The fitted values `runtime` at `version` (None: the newest) gets on `scope`: the runtime-wide fit with the
    entry of the version range in effect over it, each kind of value as its policy says (`kinds`: kind -> policy;
    "none" drops it, "runtime" keeps the runtime-wide value; default "versions")."""
    if (runtime, scope) not in fits:
        return {}
    kinds = kinds or {}
    values = dict(fits[(runtime, scope)].values)
    ranges = sorted((k[1].split("@", 1)[1] for k in fits if k[0] == runtime and k[1].startswith(scope + "@")),
                    key=version_key)
    if version is not None:
        ranges = [r for r in ranges if version_key(r) <= version_key(version)]
    if ranges:
        values.update({p: v for p, v in fits[(runtime, f"{scope}@{ranges[-1]}")].values.items()
                       if kinds.get(kind_of(p), "versions") == "versions"})
    return {p: v for p, v in values.items() if kinds.get(kind_of(p), "versions") != "none"}


def lender_policies(choice: RuntimeChoice, policies: dict | None, scope: str) -> dict[str, str]:
    """The policies on `scope` of the runtime whose kernels a `kernels_from` runtime runs (its profile's, unless
    given)."""
    prof = choice.profile
    lender = choice.model_copy(update={"profile": prof.model_copy(update={"name": prof.kernels_from,
                                                                          "kernels_from": None, "fit_policy": {}})})
    return {k: policy_of(lender, policies, k, scope) for k in KINDS}


def lent_values(values: dict[str, float], kinds: dict[str, str]) -> dict[str, float]:
    """What a `kernels_from` runtime takes of its lender's fitted `values` under its own policies `kinds`: every
    kind its policy keeps, and the KERNEL_PARAMS always."""
    return {p: v for p, v in values.items() if kinds[kind_of(p)] != "none" or p in KERNEL_PARAMS}


def predict_fitted(r: FitRow, store: CardStore, fits: dict[tuple, GroupFit], policies: dict | None = None
                   ) -> RowPrediction:
    """The row predicted with its runtime's fits (a `kernels_from` runtime: the other runtime's newest fit for the
    same scope under that runtime's policies, over its own profile)."""
    prof = r.choice.profile
    kinds = {k: policy_of(r.choice, policies, k, r.scope) for k in KINDS}
    if prof.kernels_from:
        values = values_for(fits, prof.kernels_from, r.scope, None, lender_policies(r.choice, policies, r.scope))
        values = lent_values(values, kinds)
    else:
        values = values_for(fits, prof.name, r.scope, r.choice.version or r.choice.range_start, kinds)
    return predict_row(r.row, store, runtime=_with(r.choice, r.scope, values) if values else r.choice)


def leave_one_source_out(rows: list[FitRow], store: CardStore, policies: dict | None = None,
                         advance: Callable[[], None] | None = None, workers: int = 1
                         ) -> list[tuple[FitRow, RowPrediction, RowPrediction]]:
    """(row, generic prediction, profile prediction fitted without the row's source) for every row, under
    `policies` (runtime -> policy or kind -> policy; None: each profile's stored `fit_policy`). `advance()` is
    called as each source is done; with `workers` > 1 the sources are fitted in that many forked processes (where
    the platform forks; else one by one), the results in the same order. A caller forking here should have no
    thread running (a progress bar refreshed from `advance`, not by its own thread)."""
    if policies is None:
        policies = {r.choice.profile.name: dict(r.choice.profile.fit_policy) for r in rows
                    if r.choice.profile.fit_policy}
    sources, job, tick = sorted({r.source for r in rows}), (rows, store, policies), advance or (lambda: None)
    if workers > 1 and len(sources) > 1 and "fork" in mp.get_all_start_methods():
        global _JOB
        _JOB = job
        try:
            with ProcessPoolExecutor(min(workers, len(sources)), mp_context=mp.get_context("fork")) as pool:
                futures = [pool.submit(_held_out_in_worker, s) for s in sources]
                for _ in as_completed(futures):
                    tick()
                done = []
                for f in futures:
                    part, fitted = f.result()
                    done.append(part)
                    _CACHE.update(fitted)  # later passes fork with these fits (fit_runtimes.py judges 5 policies)
        finally:
            _JOB = None
    else:
        done = []
        for s in sources:
            done.append(_held_out(s, job))
            tick()
    return [(rows[i], before, after) for part in done for i, before, after in part]


_JOB: tuple | None = None  # (rows, store, policies) inherited by forked workers


def _held_out(source: str, job: tuple | None = None) -> list[tuple[int, RowPrediction, RowPrediction]]:
    """(index in rows, generic prediction, prediction fitted without `source`) for each row of `source`."""
    rows, store, policies = job or _JOB
    held = [i for i, r in enumerate(rows) if r.source == source]
    keys = {(rows[i].choice.profile.kernels_from or rows[i].choice.profile.name, rows[i].scope) for i in held}
    fits = fit_all([r for r in rows if r.source != source], store, policies, keys)
    return [(i, predict_row(rows[i].row, store, ceiling=True), predict_fitted(rows[i], store, fits, policies))
            for i in held]


def _held_out_in_worker(source: str) -> tuple[list, dict]:
    """`_held_out` in a forked worker, with the group fits it made (for the parent's `_CACHE`)."""
    known = len(_CACHE)
    part = _held_out(source)
    return part, dict(list(_CACHE.items())[known:])  # dicts keep insertion order: the entries this call added
