"""Tables of leave-one-source-out results (roofline/calibrate/runtime_fit.py judges the runtime profiles) and the row-id
ranges a fitted profile cites."""

from __future__ import annotations

from roofline.calibrate.fit import error_summary
from roofline.calibrate.published import RowPrediction
from roofline.calibrate.row_params import FitRow


def loso_table(results: list[tuple[FitRow, RowPrediction, RowPrediction]], by: str = "") -> list[dict]:
    """Per runtime (x hardware card, `by` "hardware"; x scope, "scope"; or x source document, "source": which document
    a runtime's held-out error comes from) and metric: n, sources, before (generic) and after (profiles), median /
    p90 |err| and signed bias; the group's name under key `by`. `beyond_ceiling` counts the rows measured past their
    datasheet ceiling (a throughput above it, a latency below it: they ran something else, e.g. a cached prompt), and
    `after_within_ceiling` is `after` without them (where the generic prediction carries its ceiling)."""
    groups: dict[tuple, list] = {}
    for r, before, after in results:
        key = (r.choice.profile.name, {"hardware": before.hw, "scope": r.scope, "source": r.source}.get(by, ""),
               r.row["metric"])
        groups.setdefault(key, []).append((r, before, after))
    table = []
    for (runtime, group, metric), items in sorted(groups.items()):
        measured = [b.measured for _, b, _ in items]
        table.append({"runtime": runtime, **({by: group} if by else {}), "metric": metric, "n": len(items),
                      "sources": len({r.source for r, _, _ in items}),
                      "before": error_summary([b.predicted for _, b, _ in items], measured),
                      "after": error_summary([a.predicted for _, _, a in items], measured),
                      "beyond_ceiling": sum(b.beyond_ceiling for _, b, _ in items),
                      "after_within_ceiling": error_summary([a.predicted for _, b, a in items if not b.beyond_ceiling],
                                                            [b.measured for _, b, _ in items if not b.beyond_ceiling])})
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


def error_cell(s: dict) -> str:
    """A table cell of `error_summary`: 'median / p90 / bias'."""
    return f"{s['median_ape_pct']:.1f}% / {s['p90_ape_pct']:.1f}% / {s['bias_pct']:+.1f}%"


def within_ceiling_cell(g: dict) -> str:
    """`after` over the rows measured within their datasheet ceiling, and how many were beyond it ('same' when
    none was; 'none within' when all were)."""
    if not g["beyond_ceiling"]:
        return "same"
    if not g["after_within_ceiling"]["n"]:
        return f"none within ({g['beyond_ceiling']} beyond)"
    return f"{error_cell(g['after_within_ceiling'])} ({g['beyond_ceiling']} beyond)"
