"""Fit every runtime profile's free efficiencies on the published rows and judge them leave-one-source-out.

    PYTHONPATH=. python benchmarks/fit_runtimes.py            # fit, write runtimes/*.yaml `fitted:`, docs/runtimes.md
    PYTHONPATH=. python benchmarks/fit_runtimes.py --check    # print the tables only
    PYTHONPATH=. python benchmarks/fit_runtimes.py --write-only  # refit under the profiles' stored `fit_policy` and
                                                                 # rewrite `fitted:` only (no judging, docs untouched)

Reads benchmarks/data/published_train.csv, published_collected.csv, published_more.csv and
published_extra.csv (rows whose metric, cards or formats roofline
cannot predict are skipped, as `roofline validate --published` does). The fitted values (all rows) go below the
FITTED marker of each profile, each scope with the row ids and source documents it was fitted on; the judged error is
leave-one-source-out (roofline/calibrate/runtime_fit.py), written to docs/runtimes.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

from roofline.calibrate.loso_report import id_ranges, loso_table
from roofline.calibrate.published import read_rows
from roofline.calibrate.row_params import fit_rows, prefixed
from roofline.calibrate.runtime_fit import (
    KINDS,
    scope_policy,
    MIN_SHIPPED_SOURCES,
    POLICIES,
    FIELD_PARAMS,
    fit_all,
    kind_of,
    lent_values,
    leave_one_source_out,
    values_for,
)
from roofline.importers import open_store
from runtime_causes import CAUSES, SELECTION  # benchmarks/, beside this script

REPO = Path(__file__).resolve().parent.parent
DATA = [REPO / "benchmarks/data" / name for name in ("published_train.csv", "published_collected.csv", "published_more.csv",
                                                  "published_extra.csv")]
MARKER = "# --- fitted by benchmarks/fit_runtimes.py (regenerated; edit above this line) ---"
MIN_ROWS = 5  # the targets apply to runtimes with at least this many rows


def _entry(values: dict) -> dict:
    entry = {}
    for name in ("memory", "compute"):
        if name in values:
            entry[name] = round(values[name], 4)
    entry.update({p: float(f"{values[p]:.3g}") for p in FIELD_PARAMS if p in values})
    for field, prefix in (("compute_by_format", "format"), ("compute_quantized", "quantized")):
        named = {name: round(v, 4) for name, v in prefixed(values, prefix).items()}
        if named:
            entry[field] = named
    return entry


def _origin(g, via: str = "") -> str:
    note = f"; {g.note}" if g.note else ""
    return (f"{via}fitted on rows {id_ranges(g.rows)} ({'; '.join(g.sources)}) by benchmarks/fit_runtimes.py{note}; "
            "leave-one-source-out error in docs/runtimes.md")


def fitted_block(fits: dict, runtime: str, policy: dict, kernels_from: str | None = None,
                 lent: dict | None = None) -> str:
    """YAML for one profile's `fit_policy`, `fitted` and `fitted_from` sections: each kind of value on each scope as
    its policy says (`policy`: kind -> policy, scope -> {kind -> policy}). A `kernels_from` runtime gets the other
    runtime's newest values per scope (under that runtime's policies `lent`), saying so."""
    fitted, origin = {}, {}
    for (name, scope), g in fits.items():
        base, _, rng = scope.partition("@")
        kinds = {k: scope_policy(policy, k, base) or "none" for k in KINDS}
        if kernels_from and name == kernels_from and not rng:
            values = values_for(fits, name, base, None, {k: scope_policy(lent, k, base) for k in KINDS})
            values = lent_values(values, kinds)
            via = f"{kernels_from}'s fit for {scope} (its kernels; newest version range): "
        elif not kernels_from and name == runtime:
            keep = "versions" if rng else ("versions", "runtime")
            values, via = {p: v for p, v in g.values.items() if kinds[kind_of(p)] in keep}, ""
        else:
            continue
        if values:
            fitted[scope], origin[scope] = _entry(values), _origin(g, via)
    data = {"fit_policy": dict(policy), **({"fitted": fitted, "fitted_from": origin} if fitted else {})}
    return yaml.safe_dump(data, sort_keys=True, width=200)


def write_profile(path: Path, block: str) -> None:
    text = path.read_text().split(MARKER)[0].rstrip() + "\n"
    path.write_text(text + (f"{MARKER}\n{block}" if block else ""))


def markdown(table: list[dict], by_hw: list[dict], by_source: list[dict], n_rows: int, n_fit: int, chosen: dict,
             tables: dict) -> str:
    def err(s):
        return f"{s['median_ape_pct']:.1f}% / {s['p90_ape_pct']:.1f}% / {s['bias_pct']:+.1f}%"

    def within(g):  # `after` over the rows within their datasheet ceiling, and how many were beyond it
        return f"{err(g['after_within_ceiling'])} ({g['beyond_ceiling']} beyond)" if g["beyond_ceiling"] else "same"

    lines = ["# Runtime profiles: leave-one-source-out error", "",
             "Generated by `PYTHONPATH=. python benchmarks/fit_runtimes.py` (the same table as `roofline validate "
             "--published benchmarks/data/published_train.csv --published benchmarks/data/published_collected.csv "
             "--published benchmarks/data/published_more.csv --published benchmarks/data/published_extra.csv "
             "--by-source`). For each source document, the runtime profiles are fitted on every other document's rows "
             "and its rows predicted. Before: `generic` (no `--runtime`); after: the row's runtime profile and "
             "version. Cells: median |error| / p90 |error| / median signed error (bias). The last column leaves out "
             "the rows measured beyond their datasheet ceiling (a throughput above what the card's peaks allow under "
             "the row's stated conditions, a latency below it: the run did something the row does not state, such as "
             "a cached prompt; no efficiency fits them), and says how many there were.", "",
             f"{n_fit} of {n_rows} rows map to a runtime profile and a metric roofline predicts.", "",
             "| runtime | metric | n | sources | before (generic) | after (profiles) | after, within the ceiling |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    lines += [f"| {g['runtime']} | {g['metric']} | {g['n']} | {g['sources']} | {err(g['before'])} | "
              f"{err(g['after'])} | {within(g)} |" for g in table]
    lines += ["", SELECTION.rstrip(), "", "| runtime | metric | n | generic | " + " | ".join(POLICIES) + " | kernels_from |",
              "| --- | --- | ---: | ---: | " + " | ".join("---:" for _ in POLICIES) + " | ---: |"]
    cells = {(g["runtime"], g["metric"]): g for g in table}
    for (rt, metric), g in sorted(cells.items()):
        per = {p: {(h["runtime"], h["metric"]): h for h in t}.get((rt, metric)) for p, t in tables.items()}
        lines.append(f"| {rt} | {metric} | {g['n']} | {g['before']['median_ape_pct']:.1f}% | " + " | ".join(
            f"{per[p]['after']['median_ape_pct']:.1f}%" if per.get(p) else "-" for p in (*POLICIES, "kernels_from"))
            + " |")
    lines += ["", "Shipped, per runtime and hardware scope (`fit_policy` in each profile; a `kernels_from` runtime also "
              "takes its lender's per-unit matrix-vector limit and cost per MoE expert, `KERNEL_PARAMS`, "
              "whatever its policy):", "",
              "| runtime | scope | memory | compute_by_format |", "| --- | --- | --- | --- |"]
    for rt, policy in sorted(chosen.items()):
        scopes = {k: v for k, v in policy.items() if isinstance(v, dict)} or {"every scope": policy}
        lines += [f"| {rt} | {sc} | {p.get('memory', 'none')} | {p.get('compute_by_format', 'none')} |"
                  for sc, p in sorted(scopes.items())]
    lines += ["", CAUSES.rstrip(), "", "## By runtime x hardware", "", "| runtime | hardware | metric | n | sources | before | after |",
              "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    lines += [f"| {g['runtime']} | {g['hardware']} | {g['metric']} | {g['n']} | {g['sources']} | {err(g['before'])} | "
              f"{err(g['after'])} |" for g in by_hw]
    lines += ["", "## By runtime x source document", "",
              "Each document's rows predicted from the fit on every other document: where a runtime's miss comes from.",
              "", "| runtime | source document | metric | n | before | after |",
              "| --- | --- | --- | ---: | ---: | ---: |"]
    lines += [f"| {g['runtime']} | {g['source'].replace('|', '/')} | {g['metric']} | {g['n']} | {err(g['before'])} | "
              f"{err(g['after'])} |" for g in by_source]
    return "\n".join(lines) + "\n"


def _worse_than_generic(table: list[dict], runtime: str, scope: str = "") -> list[str]:
    """The metrics of `runtime` (on `scope`, in a table by scope) whose leave-one-source-out median |error| a policy
    makes worse than generic."""
    return [g["metric"] for g in table if g["runtime"] == runtime and g.get("scope", "") == scope
            and g["after"]["median_ape_pct"] > g["before"]["median_ape_pct"]]


def _first_not_worse(tables: dict[str, list], runtime: str, scope: str) -> str:
    """The most specific policy whose table (by scope, one kind's rows) has no metric of `runtime` on `scope` worse
    than generic's held out; "none" if every one has."""
    return next((p for p in POLICIES if not _worse_than_generic(tables[p], runtime, scope)), "none")


MAX_LOAD = ("agg_output_tok_s", "agg_output_tok_s_per_gpu", "agg_decode_tok_s")  # a full batch's throughput


def _max_load(results: list) -> list:
    """The held-out predictions of max-load throughput rows: a bandwidth fit moves them (their large decode batches
    read every weight each step) though they inform the compute kind, so the bandwidth kind answers to them too."""
    return [x for x in results if x[0].row["metric"] in MAX_LOAD]


def _of_kind(results: list, kind: str) -> list:
    """The held-out predictions of the rows that inform `kind` (memory: latency-bound decode; compute_by_format:
    prompts, TTFT and large batches): a kind is judged on its own rows, not on every row sharing a metric name."""
    return [x for x in results if kind_of(x[0].param) == kind]


def _loso(fitted: list, store, policies: dict, what: str) -> list:
    """leave_one_source_out on every core, its progress on stderr (one line per held-out source)."""
    total, done = len({r.source for r in fitted}), []

    def advance():
        done.append(1)
        sys.stderr.write(f"\rleave-one-source-out, {what}: {len(done)}/{total} sources")
        sys.stderr.write("\n" if len(done) == total else "")

    return leave_one_source_out(fitted, store, policies, advance=advance, workers=os.cpu_count() or 1)


def select_policies(fitted: list, store) -> tuple[dict[str, dict], dict[str, list]]:
    """Model selection on leave-one-source-out error: per runtime, hardware scope and kind of fitted value (judged on
    the rows informing it: memory on latency-bound decode rows and the max-load throughput rows it moves,
    compute_by_format on prefill, TTFT and large-batch rows), the most specific policy ("versions" > "runtime" >
    "none") under which none of that kind's metrics on that scope has a held-out median |error| worse than
    generic's. The bandwidth kind is chosen first, every kind under one policy; the compute kind is then judged with
    each scope's bandwidth kind at its choice, as they ship together.
    Runtimes running another's kernels (`kernels_from`) are judged after it, its choice fixed, per kind. Returns the
    choice (runtime -> kind -> policy, scope -> {kind -> policy}) and, per policy tried, the LOSO table (docs)."""
    runtimes = sorted({r.choice.profile.name for r in fitted})
    borrowers = sorted({r.choice.profile.name for r in fitted if r.choice.profile.kernels_from})
    own = [rt for rt in runtimes if rt not in borrowers]
    scopes = {rt: sorted({r.scope for r in fitted if r.choice.profile.name == rt}) for rt in own}
    results = {p: _loso(fitted, store, {rt: p for rt in runtimes}, f"policy {p}") for p in POLICIES}
    tables = {p: loso_table(res) for p, res in results.items()}
    memory = {p: loso_table(_of_kind(res, "memory"), by="scope") + loso_table(_max_load(res), by="scope")
              for p, res in results.items()}
    chosen: dict[str, dict] = {}
    for rt in own:
        chosen[rt] = {k: "none" for k in KINDS}  # scopes without rows keep the priors
        for scope in scopes[rt]:
            chosen[rt][scope] = {"memory": _first_not_worse(memory, rt, scope)}
    compute = {}
    for p in POLICIES:
        given = {rt: {**chosen[rt], **{sc: {**chosen[rt][sc], "compute_by_format": p} for sc in scopes[rt]}}
                 for rt in own}
        res = _loso(fitted, store, given, f"compute policy {p}, bandwidth as chosen")
        compute[p] = loso_table(_of_kind(res, "compute_by_format"), by="scope")
    for rt in own:
        for scope in scopes[rt]:
            chosen[rt][scope]["compute_by_format"] = _first_not_worse(compute, rt, scope)
    lenders = {r.choice.profile.kernels_from for r in fitted if r.choice.profile.kernels_from}
    both = [r for r in fitted if r.choice.profile.name in set(borrowers) | lenders]
    lent = _loso(both, store, {**chosen, **{b: "kernels_from" for b in borrowers}}, "kernels_from")
    tables["kernels_from"] = loso_table(lent)
    for rt in borrowers:
        chosen[rt] = {k: "none" if _worse_than_generic(loso_table(_of_kind(lent, k)), rt) else "kernels_from"
                      for k in KINDS}
    return chosen, tables


def stored_policies(store, runtimes) -> dict[str, dict]:
    """Each profile's `fit_policy` as the last judged run chose it (kind -> policy, scope -> {kind -> policy})."""
    return {rt: dict(store.runtime(rt).profile.fit_policy) or {k: "none" for k in KINDS} for rt in runtimes}


def write_fits(fitted: list, store, chosen: dict) -> None:
    """The shipped fit (every row) into each profile below the FITTED marker, under the policies `chosen`."""
    fits = fit_all(fitted, store, chosen, min_sources=MIN_SHIPPED_SOURCES)
    for path in sorted((REPO / "runtimes").glob("*.yaml")):
        prof = store.runtime(path.stem).profile if path.stem in chosen else None
        lent = chosen.get(prof.kernels_from) if prof and prof.kernels_from else None
        block = fitted_block(fits, path.stem, chosen[path.stem], prof.kernels_from, lent) if prof else ""
        write_profile(path, block)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--check", action="store_true", help="print the tables only; write nothing (about 18 min)")
    what.add_argument("--write-only", action="store_true",
                      help="refit under the profiles' stored fit_policy and rewrite `fitted:` only (about 1 min)")
    args = parser.parse_args(argv)
    store = open_store([])
    rows = [r for path in DATA for r in read_rows(path)]
    fitted = fit_rows(rows, store)
    if args.write_only:
        write_fits(fitted, store, stored_policies(store, sorted({r.choice.profile.name for r in fitted})))
        return
    chosen, tables = select_policies(fitted, store)
    results = _loso(fitted, store, chosen, "the shipped mix")
    table, by_hw, by_src = loso_table(results), loso_table(results, by="hardware"), loso_table(results, by="source")
    text = markdown(table, by_hw, by_src, len(rows), len(fitted), chosen, tables)
    print(text)
    if args.check:
        return
    write_fits(fitted, store, chosen)
    (REPO / "docs").mkdir(exist_ok=True)
    (REPO / "docs/runtimes.md").write_text(text)


if __name__ == "__main__":
    main(sys.argv[1:])
