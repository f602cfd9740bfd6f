"""Fit the launch cost per kernel inside a CUDA-graph decode step (`graph_kernel_overhead_s`) of each serving runtime
on NVIDIA GPUs, and judge it leave-one-source-out against the same profile without it.

    PYTHONPATH=. python benchmarks/fit_graph_launch.py           # print the tables, write docs/graph_launch.md
    PYTHONPATH=. python benchmarks/fit_graph_launch.py --check   # print only

A runtime that replays its decode steps as CUDA graphs launches no kernel from the host: what each kernel costs is
the gap between kernels on the device, a few microseconds, where the generic GPU default (13.2 us, fitted on 2024
rows) is an eager launch. For each runtime below, the value is searched on a log grid over 0.5-30 us (the bounds
runtime_fit.py searches `kernel_overhead_s` in), minimising the mean capped |log error| of the runtime's decode rows
(decode tok/s, ITL, TPOT) at batches its graphs hold; every other field stays as the profile ships it. Held out: for
each source document, the value fitted on every other document's rows predicts that document's rows, every metric.
The value ships (by hand, in the profile, citing this script) only where no metric's held-out median |error| is
worse than without it and its decode rows come from at least runtime_fit.MIN_SHIPPED_SOURCES documents.
Reads the four published CSVs fit_runtimes.py reads; a row the runtime's profile cannot predict is skipped.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from fit_runtimes import DATA, REPO  # benchmarks/, beside this script
from roofline.calibrate.fit import error_summary
from roofline.calibrate.loso_report import error_cell
from roofline.calibrate.published import cards_of, predict_row, read_rows, runtime_of, source_document
from roofline.calibrate.row_conditions import row_flags
from roofline.calibrate.runtime_fit import ERROR_CAP, EXTRA_PARAMS, MIN_SHIPPED_SOURCES
from roofline.cards.versions import version_key
from roofline.errors import RooflineError
from roofline.importers import open_store
from roofline.perf.efficiency import expected_efficiency


@dataclass(frozen=True)
class Candidate:
    runtime: str
    graph_max_batch: int  # the largest decode batch its graphs hold, by default
    batch_source: str
    since: str | None = None  # the first version the value applies to (None: every version)


CANDIDATES = (
    Candidate("sglang", 160, "SGLang python/sglang/srt/server_args.py (v0.4): cuda_graph_max_bs 160 on GPUs of 25 GB "
              "or more", since="0.4.0"),
    Candidate("vllm", 256, "vLLM vllm/worker/model_runner.py _BATCH_SIZES_TO_CAPTURE (1, 2, 4, 8, ..., 256), capped "
              "at max_num_seqs (256 by default)"),
    Candidate("trtllm", 128, "TensorRT-LLM llmapi DecodeCudaGraphConfig: max_batch_size 128 when none is given"),
)
READING = ("Where a fitted value exceeds a few microseconds the runtime's decode rows carry host work per step that "
           "a graph does not remove (a scheduler that does not overlap the GPU): that cost reads as a cost per kernel, "
           "and a graph launch cost cannot model it, so none ships. SGLang 0.4 schedules the next batch while the GPU "
           "runs the current one, and its fitted value is the device-side gap between kernels.")
DECODE_METRICS = ("decode_tok_s", "agg_decode_tok_s", "itl_ms", "tpot_ms")
GRID = np.exp(np.linspace(*np.log(EXTRA_PARAMS["kernel_overhead_s"]), 48))  # 0.5-30 us, 9% apart


@dataclass
class Row:
    row: dict
    source: str
    errors: np.ndarray  # signed log(predicted / measured) of the metric's throughput sense, per GRID value
    before: float  # the same, with no graph replay (the profile as shipped without a graph launch cost)

    @property
    def fits(self) -> bool:
        return self.row["metric"] in DECODE_METRICS


def _log_error(row: dict, predicted: float) -> float:
    """log(predicted / measured) for a throughput, log(measured / predicted) for a time: > 0 is too fast."""
    ratio = predicted / float(row["value"])
    return math.log(ratio) if "tok_s" in row["metric"] else -math.log(ratio)


def rows_of(cand: Candidate, store) -> list[Row]:
    """The candidate's rows on NVIDIA GPUs from `since` on, each predicted at every GRID value and without."""
    out = []
    for path in DATA:
        for r in read_rows(path):
            choice = _choice(r, store, cand)
            if choice is None:
                continue
            try:
                hw = cards_of(r, store)[1]
            except RooflineError:  # predict_row skips it too
                continue
            if (hw.vendor.lower(), hw.scope_kind) != ("nvidia", "gpu"):
                continue
            eff = replace(row_flags(r, expected_efficiency(hw, choice)), graph_kernel_overhead_s=None)
            graph = replace(eff, graph_every_decode=True, graph_max_batch=float(cand.graph_max_batch))
            preds = [predict_row(r, store, eff=e, runtime=choice).predicted
                     for e in (eff, *(replace(graph, graph_kernel_overhead_s=float(g)) for g in GRID))]
            if all(preds):
                out.append(Row(r, source_document(r["source"]), np.array([_log_error(r, p) for p in preds[1:]]),
                               _log_error(r, preds[0])))
    return out


def _choice(row: dict, store, cand: Candidate):
    try:
        choice = runtime_of(row, store)
    except Exception:  # a row whose engine text names no known version: not this runtime's to judge
        return None
    if choice is None or choice.profile.name != cand.runtime:
        return None
    version = choice.version or choice.range_start
    if cand.since and (not version or version_key(version) < version_key(cand.since)):
        return None
    return choice


def best(rows: list[Row]) -> int | None:
    """Index of the GRID value with the least mean capped |log error| over the decode rows among `rows`."""
    fit = [r for r in rows if r.fits and np.ptp(r.errors) > 0]
    if not fit:
        return None
    loss = np.mean([np.minimum(np.abs(r.errors), ERROR_CAP) for r in fit], axis=0)
    return int(np.argmin(loss))


def held_out(rows: list[Row]) -> list[tuple[Row, float]]:
    """Each row's signed log error with the value fitted on every other source's rows (none fitted: as before)."""
    out = []
    for source in sorted({r.source for r in rows}):
        k = best([r for r in rows if r.source != source])
        out += [(r, r.before if k is None else float(r.errors[k])) for r in rows if r.source == source]
    return out


def _cell(logs: list[float]) -> tuple[float, str]:
    """(median |error| %, 'median / p90 / bias' cell) of signed log errors, as validate's tables print them."""
    s = error_summary(np.exp(logs), np.ones(len(logs)))
    return s["median_ape_pct"], error_cell(s)


def judge(cand: Candidate, rows: list[Row]) -> tuple[list[str], bool, str]:
    """Table lines (metric, n, before, held out), whether the value ships, and the value fitted on every row."""
    moved = [r for r in rows if np.ptp(r.errors) > 0]
    k = best(moved)
    value = "none" if k is None else f"{GRID[k] * 1e6:.2f} us"
    pairs = held_out(moved)
    lines, ships = [], k is not None
    for metric in sorted({r.row["metric"] for r, _ in pairs}):
        these = [(r, e) for r, e in pairs if r.row["metric"] == metric]
        (b, before), (a, after) = _cell([r.before for r, _ in these]), _cell([e for _, e in these])
        ships &= a <= b
        lines.append(f"| {cand.runtime} | {metric} | {len(these)} | {len({r.source for r, _ in these})} | {before} | "
                     f"{after} |")
    sources = len({r.source for r in moved if r.fits})
    ships &= sources >= MIN_SHIPPED_SOURCES
    return lines, ships, f"{value} (fitted on {sum(r.fits for r in moved)} decode rows of {sources} documents)"


def report(store) -> str:
    head = ["| runtime | metric | n | sources | without (profile as shipped) | with, held out |",
            "| --- | --- | ---: | ---: | ---: | ---: |"]
    verdicts = []
    for cand in CANDIDATES:
        rows = rows_of(cand, store)
        lines, ships, value = judge(cand, rows)
        head += lines
        since = f", {cand.since}+" if cand.since else ""
        verdicts.append(f"- {cand.runtime}{since}: {value}; graphs up to {cand.graph_max_batch} sequences "
                        f"({cand.batch_source}); {'ships' if ships else 'does not ship'}")
    return "\n".join(["# CUDA-graph launch cost per runtime: leave-one-source-out", "",
                      f"Generated by `PYTHONPATH=. python benchmarks/fit_graph_launch.py` ({__doc__.split(chr(10))[0]}"
                      " ...). Cells: median |error| / p90 |error| / median signed error over the rows the value "
                      "moves (decode rows at batches the graphs hold, and any other metric whose steps replay).", "",
                      *head, "", "Value on every row, and the verdict (ships: no metric worse held out, and decode "
                      f"rows from {MIN_SHIPPED_SOURCES}+ documents):", "", *verdicts, "", READING, ""])


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="print the tables only; write nothing")
    args = parser.parse_args(argv)
    text = report(open_store([]))
    print(text)
    if not args.check:
        (REPO / "docs/graph_launch.md").write_text(text)


if __name__ == "__main__":
    main(sys.argv[1:])
