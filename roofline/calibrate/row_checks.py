"""What a published row's columns must hold before it is predicted: a metric roofline reads, in its unit, and numbers
that are measurements (finite, positive, whole counts within the workload's bound)."""

from __future__ import annotations

import math
import re

from roofline.perf.workload import MAX_COUNT

# PUBLISHED.md: ttft_ms, itl_ms in milliseconds; COLLECTED.md: tpot_ms (time per output token after the first, ms),
# batch_latency_s (wall time of one batch of `batch` requests, seconds)
LATENCY_MS = {"ttft_ms": "ttft_s", "itl_ms": "itl_s", "tpot_ms": "itl_s"}
LATENCY_S = {"batch_latency_s": "e2e_s"}


def split_normalisation(metric: str) -> tuple[str, str]:
    """'agg_output_tok_s_per_gpu' -> ('agg_output_tok_s', 'per_gpu'); a plain metric -> (metric, '')."""
    for per in ("per_gpu", "per_node"):
        if metric.endswith("_" + per):
            return metric[: -len(per) - 1], per
    return metric, ""


MIN_MEASUREMENT = 1e-6  # below any real latency (ms, s) or rate (tok/s): a smaller value is a typo or an underflow
MAX_MEASUREMENT = 1e12  # above any real latency (1e12 ms is 30 years) or rate (tok/s): a typo or an overflow


def metric_units(metric: str) -> tuple[str, ...]:
    """The units a metric's value may be written in, by its name: 'ttft_ms' -> ms, 'batch_latency_s' -> s,
    'decode_tok_s' -> tok/s, 'agg_output_tok_s_per_gpu' -> tok/s/GPU or tok/s (the name carries the per-GPU); none
    for a name roofline does not read."""
    base, per = split_normalisation(metric)
    unit = "tok/s" if base.endswith("_tok_s") else "ms" if base in LATENCY_MS else "s" if base in LATENCY_S else None
    if unit is None:
        return ()
    return (f"{unit}/{per.removeprefix('per_').upper()}", unit) if per else (unit,)


def row_depth(row: dict) -> int:
    """Tokens already in the cache when a row's prompt ran: llama-bench's "pp512 @ d32768" in its notes, else 0."""
    m = re.search(r"@ ?d(\d{1,12})\b", row.get("notes", ""))
    return int(m.group(1)) if m else 0


def row_problem(row: dict) -> str | None:
    """Why a row's numbers cannot be predicted (a zero, negative, NaN or infinite measurement; zero GPUs; a count
    beyond the workload's bound), or None when they can."""
    if None in row:  # csv.DictReader keeps a long row's extra fields under the key None
        return "the row has more fields than the header (an unquoted comma?)"
    if None in row.values():
        return "the row has fewer fields than the header"
    try:
        value = float(row["value"])
    except (KeyError, TypeError, ValueError):
        return f"value {row.get('value')!r} is not a number"
    if not math.isfinite(value) or not MIN_MEASUREMENT <= value <= MAX_MEASUREMENT:
        return f"value {str(row['value'])[:40]!r} is not a positive finite measurement in [{MIN_MEASUREMENT:g}, " \
               f"{MAX_MEASUREMENT:g}]"
    unit, expected = str(row.get("unit") or "").strip(), metric_units(str(row.get("metric") or ""))
    if unit and expected and unit.replace(" ", "").lower() not in (u.lower() for u in expected):
        return f"unit {unit[:20]!r} is not {row['metric']}'s {expected[0]}; give the value in {expected[0]}"
    for column in ("gpus", "tp", "isl", "osl", "batch"):
        text = str(row.get(column) or "").strip()
        if column == "batch" and text.lower() == "max":  # the scheduler's max-load batch
            continue
        if text and not text.isdecimal():
            unstated = "" if column in ("gpus", "tp") else " (leave it empty where the source does not state it)"
            return f"{column} {text[:40]!r} is not a whole number{unstated}"
        if len(text) > len(str(MAX_COUNT)) or text and int(text) > MAX_COUNT:
            return f"{column} {text[:40]} is beyond the bound of {MAX_COUNT:,}"
        if column in ("gpus", "tp", "batch") and text and int(text) == 0:
            return f"{column} {text!r} is not a positive whole number"
    if row_depth(row) > MAX_COUNT or re.search(r"@ ?d\d{13}", str(row.get("notes") or "")):
        return f"the depth its notes give (@ d...) is beyond the bound of {MAX_COUNT:,} tokens"
    tp, gpus = str(row.get("tp") or "").strip(), str(row.get("gpus") or "").strip()
    if tp and gpus and int(tp) > int(gpus):
        return f"tp {tp} is more than the row's {gpus} GPU(s)"
    return None
